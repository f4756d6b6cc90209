// Context items for the common cases, with the defaults every host gives (see items.js).
import type { ContextItem, Scope, Sensitivity, SourceRef, TaskStatus, ToolCall, ToolOutcome, Trust } from '../types/envelopes.js';

/** What every constructor takes; each default is listed in items.js. */
export interface ItemOptions {
  /** Default: the constructor's own (`user` for user, `verified` for assistant and tool results, else `host`). */
  trust?: Trust;
  /** Default `session`. */
  scope?: Scope;
  /** Default none (the session's, for `session`). */
  scopeId?: string;
  /** Default `internal`. */
  sensitivity?: Sensitivity;
  /** Default `['model:*']`. */
  allowedSinks?: Iterable<string>;
  /** Default: the host clock. */
  createdAt?: string;
  /** Default `{ kind: 'host', id: 'host' }`. */
  source?: SourceRef;
  /** Default none: the kernel derives it from the content. */
  itemId?: string;
  /** Default 0. */
  priority?: number;
}

/** The user's words: a `message` with role `user`. */
export function user(text: string, options?: ItemOptions): ContextItem;
/** The model's answer and the tool calls it makes; it needs text, calls, or both. */
export function assistant(text: string | null, options?: ItemOptions & { toolCalls?: Iterable<ToolCall> }): ContextItem;
/** The host's own instructions: a `system-policy` item. */
export function system(text: string, options?: ItemOptions): ContextItem;
/** What a tool answered to the call `callId`: a `tool-evidence` item. */
export function toolResult(callId: string, text: string, options?: ItemOptions & { outcome?: ToolOutcome }): ContextItem;
/** Where the task `taskId` stands: a `task-state` item. */
export function taskState(taskId: string, status: TaskStatus, text: string, options?: ItemOptions): ContextItem;
/** A project rule the model always sees: a pinned `project-rule` item. */
export function pinnedRule(text: string, options?: ItemOptions): ContextItem;
