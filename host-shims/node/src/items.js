// Context items for the common cases, with the defaults every host gives
// (held to tests/items/constructors.json, as every host's are):
//
//   user(text)                       the user's words (trust `user`, origin `user`)
//   assistant(text, { toolCalls })   the model's answer and the calls it makes (trust `verified`, origin `model`)
//   system(text)                     the host's own instructions, a `system-policy` item (trust `host`)
//   toolResult(callId, text)         a tool's answer to a call, as evidence (trust `verified`, origin `tool`;
//                                    `trust: 'external'` for a tool that reads the web: its words then ground nothing)
//   taskState(taskId, status, text)  where a task stands (trust `host`)
//   pinnedRule(text)                 a project rule kept under any budget (trust `host`)
//
// Every one takes the same options, each with its default: `scope`
// (`session`), `scopeId` (none), `sensitivity` (`internal`), `allowedSinks`
// (`['model:*']`), `createdAt` (the host clock), `source` (`{ kind: 'host',
// id: 'host' }`), `itemId` (none: the kernel derives it), `priority` (0) and
// `trust`. The kernel checks everything it is given; these only spare writing it.

import { utcNow } from './clock.js';
import { KernelError } from './errors.js';

function sinks(allowedSinks) {
  if (allowedSinks === undefined || allowedSinks === null) return ['model:*'];
  // A string is iterable too, a character at a time.
  if (typeof allowedSinks === 'string') {
    throw new KernelError('invalid-request', '`allowedSinks` is a list of sinks, not one string', '{"field":"allowedSinks"}');
  }
  return [...allowedSinks];
}

// An option given as null or undefined is one not given: it takes its default, as on every host.
function item(kind, text, trust, origin, options, extra = {}) {
  const made = {
    schemaVersion: 1,
    kind,
    scope: options.scope ?? 'session',
    sourceRef: options.source ?? { kind: 'host', id: 'host' },
    provenance: { origin },
    trust: options.trust ?? trust,
    sensitivity: options.sensitivity ?? 'internal',
    allowedSinks: sinks(options.allowedSinks),
    priority: options.priority ?? 0,
    pinned: extra.pinned ?? false,
    createdAt: options.createdAt ?? utcNow(),
  };
  if (text !== null && text !== undefined) made.content = text;
  if (extra.role) made.role = extra.role;
  if (options.scopeId !== undefined && options.scopeId !== null) made.scopeId = options.scopeId;
  if (options.itemId !== undefined && options.itemId !== null) made.itemId = options.itemId;
  return made;
}

/** The user's words: a `message` with role `user`. */
export function user(text, options = {}) {
  return item('message', text, 'user', 'user', options, { role: 'user' });
}

/**
 * The model's answer: a `message` with role `assistant`, and the tool calls
 * it makes (`{ callId, name, arguments }`, the arguments as the model wrote
 * them). It needs text, calls, or both; calls alone have the empty text.
 */
export function assistant(text, options = {}) {
  const calls = [...(options.toolCalls ?? [])];
  if ((text === null || text === undefined) && calls.length === 0) {
    throw new KernelError('invalid-request', 'an assistant item needs text or tool calls', '{"field":"toolCalls"}');
  }
  const made = item('message', text ?? '', 'verified', 'model', options, { role: 'assistant' });
  if (calls.length > 0) made.toolCalls = calls;
  return made;
}

/** The host's own instructions: a `system-policy` item. */
export function system(text, options = {}) {
  return item('system-policy', text, 'host', 'host', options);
}

/** What a tool answered to the call `callId`: a `tool-evidence` item (`outcome`: `success` unless said). */
export function toolResult(callId, text, options = {}) {
  const made = item('tool-evidence', text, 'verified', 'tool', options);
  made.toolResult = { callId, outcome: options.outcome ?? 'success' };
  return made;
}

/** Where the task `taskId` stands: a `task-state` item. */
export function taskState(taskId, status, text, options = {}) {
  const made = item('task-state', text, 'host', 'host', options);
  made.task = { taskId, status };
  return made;
}

/** A project rule the model always sees: a pinned `project-rule` item. */
export function pinnedRule(text, options = {}) {
  return item('project-rule', text, 'host', 'host', options, { pinned: true });
}
