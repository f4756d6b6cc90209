// The typed API: one method per kernel command. Every command runs inside one
// store transaction: committed when the kernel answers, rolled back when it
// answers an error, traps, or the store throws. A command that only reads
// takes no write lock.
//
// The typed methods fill what a caller leaves out of a request: its
// `schemaVersion`, and `now` from the kernel's clock (the host's, unless one
// is given), in the request and in the plan a render request carries.
// `call` sends a request as it is given. Each command is published on the
// `ctxkernel:command` diagnostics channel: its name, duration and outcome
// code, never a body.

import { channel } from 'node:diagnostics_channel';
import { utcNow } from './clock.js';
import { instantiateKernel } from './engine.js';
import { KernelError } from './errors.js';
import { memberText, parseJson, stringifyJson } from './json.js';
import { drive } from './provider.js';
import { MemoryStore } from './stores.js';

/** The kernel's JSON commands, as named in the WIT. */
export const COMMANDS = [
  'info',
  'plan-context',
  'append-events',
  'read-events',
  'compact-context',
  'continue-operation',
  'reconcile',
  'read-kernel-events',
  'propose-memory',
  'consolidate-memory',
  'decide-memory',
  'delete-memory',
  'purge-memory',
  'read-memory',
  'recall-memory',
  'resident-snapshot',
  'import-messages',
  'render-context',
  'validate-request',
  'verify-store',
];

/** Commands that only read: their transaction takes no write lock. */
const READ_ONLY = new Set(['info', 'read-events', 'plan-context', 'get-content', 'read-kernel-events', 'read-memory', 'recall-memory', 'resident-snapshot', 'render-context', 'validate-request', 'verify-store']);

/** The commands whose request carries `now` (the others refuse it). */
export const TAKES_NOW = new Set([
  'append-events', 'compact-context', 'consolidate-memory', 'continue-operation', 'decide-memory', 'delete-memory',
  'import-messages', 'plan-context', 'propose-memory', 'purge-memory', 'put-content', 'read-memory', 'recall-memory',
  'reconcile', 'resident-snapshot',
]);

/** The request a command's request carries, which is filled the same way. */
const CARRIED = { 'render-context': ['plan', 'plan-context'] };

/** Where each command's name, duration and outcome are published. */
const commands = channel('ctxkernel:command');

/** What every host answers when the kernel traps (the trap's own text differs per engine). */
const TRAPPED = 'the kernel trapped; the call was rolled back';

/** JSON.stringify writes NaN and Infinity as null; refuse them, as every host does. */
function finite(key, value) {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new KernelError('invalid-request', 'the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry');
  }
  return value;
}

/**
 * A request as the kernel gets it: text as given, an object as JSON. The
 * encoder would replace a lone surrogate with U+FFFD; refuse it instead.
 */
function requestText(request) {
  const text = typeof request === 'string' ? request : stringifyJson(request, finite);
  if (!text.isWellFormed()) throw new KernelError('invalid-request', 'the request is not valid Unicode: it holds a lone surrogate');
  return text;
}

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

/** One kernel instance over one store. */
export class Kernel {
  #store;
  #clock;
  #exports = null;

  /**
   * @param store a MemoryStore, a SqliteStore, or any object with the same methods.
   * @param options.clock gives `now` to requests that leave it out (the host clock unless given).
   */
  constructor(store = new MemoryStore(), { clock = utcNow } = {}) {
    this.#store = store;
    this.#clock = clock;
  }

  get store() {
    return this.#store;
  }

  get clock() {
    return this.#clock;
  }

  /** `request` with what the caller left out filled in; the caller's object is not changed. */
  #filled(command, request) {
    if (!isObject(request)) {
      throw new KernelError('invalid-request', `a ${command} request is an object, not ${request === null ? 'null' : Array.isArray(request) ? 'an array' : typeof request}`);
    }
    const out = { ...request };
    // Absent, undefined or null is left out: either way the shim fills it.
    out.schemaVersion ??= 1;
    if (TAKES_NOW.has(command)) out.now ??= this.#clock();
    const carried = CARRIED[command];
    if (carried && isObject(out[carried[0]])) out[carried[0]] = this.#filled(carried[1], out[carried[0]]);
    return out;
  }

  /**
   * Runs one JSON command, or `put-content` with its `bytes`; returns the
   * kernel's canonical JSON text verbatim. Text requests are sent as given.
   */
  call(command, request, bytes) {
    if (command === 'put-content' && bytes !== undefined) {
      const text = requestText(request);
      return this.#transact(command, (kernel) => kernel.putContent(text, bytes));
    }
    if (!COMMANDS.includes(command)) throw new KernelError('invalid-request', `no command \`${command}\``);
    const name = command.replace(/-(\w)/g, (_, c) => c.toUpperCase());
    const text = requestText(request);
    return this.#transact(command, (kernel) => kernel[name](text));
  }

  #json(command, request) {
    return parseJson(this.call(command, this.#filled(command, request)));
  }

  info() {
    return this.#json('info', {});
  }
  planContext(request) {
    return this.#json('plan-context', request);
  }
  appendEvents(request) {
    return this.#json('append-events', request);
  }
  readEvents(request) {
    return this.#json('read-events', request);
  }
  compactContext(request) {
    return this.#json('compact-context', request);
  }
  continueOperation(request) {
    return this.#json('continue-operation', request);
  }
  reconcile(request) {
    return this.#json('reconcile', request);
  }
  readKernelEvents(request = {}) {
    return this.#json('read-kernel-events', request);
  }
  proposeMemory(request) {
    return this.#json('propose-memory', request);
  }
  consolidateMemory(request) {
    return this.#json('consolidate-memory', request);
  }
  decideMemory(request) {
    return this.#json('decide-memory', request);
  }
  deleteMemory(request) {
    return this.#json('delete-memory', request);
  }
  purgeMemory(request) {
    return this.#json('purge-memory', request);
  }
  readMemory(request) {
    return this.#json('read-memory', request);
  }
  recallMemory(request) {
    return this.#json('recall-memory', request);
  }
  residentSnapshot(request) {
    return this.#json('resident-snapshot', request);
  }
  importMessages(request) {
    return this.#json('import-messages', request);
  }
  /** Plans and renders; `bodyJson` is the body's exact text, to send as it is (`body` is it parsed). */
  renderContext(request) {
    const text = this.call('render-context', this.#filled('render-context', request));
    return { ...parseJson(text), bodyJson: memberText(text, 'body') };
  }
  validateRequest(request) {
    return this.#json('validate-request', request);
  }
  verifyStore(request = {}) {
    return this.#json('verify-store', request);
  }

  /** Stores `bytes` by their sha256; returns `{ contentRef, created }`. Text requests are sent as given. */
  putContent(request, bytes) {
    return parseJson(this.call('put-content', typeof request === 'string' ? request : this.#filled('put-content', request), bytes));
  }

  /** The stored bytes, verified against their digest by the kernel. Text requests are sent as given. */
  getContent(request) {
    const text = requestText(typeof request === 'string' ? request : this.#filled('get-content', request));
    return this.#transact('get-content', (kernel) => kernel.getContent(text));
  }

  /**
   * Compacts, driving the provider loop: while the kernel is awaiting a
   * provider, `provider(providerRequest)` is awaited and its answer handed
   * back. A provider that throws is a failed call; one that throws
   * `ProviderOutcomeUnknown` leaves the outcome unknown (`reconcile` it);
   * an `AbortError` cancels the operation. An answer of another shape is a
   * `KernelError` (`invalid-request`), and the operation stays awaiting.
   */
  compact(request, provider) {
    return drive(this, this.compactContext(request), provider);
  }

  /** Extracts candidate memories from a session, driving the provider loop like `compact`. */
  consolidate(request, provider) {
    return drive(this, this.consolidateMemory(request), provider);
  }

  #instance() {
    this.#exports ??= instantiateKernel(this.#store);
    return this.#exports;
  }

  #transact(command, run) {
    if (!commands.hasSubscribers) return this.#run(command, run);
    const started = performance.now();
    let outcome = 'internal';
    try {
      const result = this.#run(command, run);
      outcome = 'ok';
      return result;
    } catch (e) {
      if (e instanceof KernelError) outcome = e.code;
      throw e;
    } finally {
      commands.publish({ command, outcome, durationMs: performance.now() - started });
    }
  }

  #run(command, run) {
    const kernel = this.#instance();
    try {
      this.#store.begin(!READ_ONLY.has(command));
    } catch (e) {
      throw new KernelError('storage-failure', `cannot begin a transaction: ${e.message}`, '{}', { cause: e });
    }
    let result;
    try {
      result = run(kernel);
    } catch (e) {
      this.#rollback();
      const payload = e?.payload;
      if (payload && typeof payload.code === 'string') throw new KernelError(payload.code, payload.message, payload.detail);
      // A trap or a host exception: this instance may be broken; the next call gets a fresh one.
      this.#exports = null;
      if (e instanceof WebAssembly.RuntimeError) throw new KernelError('internal', TRAPPED, '{}', { cause: e });
      throw e;
    }
    try {
      this.#store.commit();
    } catch (e) {
      this.#rollback();
      throw new KernelError('storage-failure', `commit failed: ${e.message}`, '{}', { cause: e });
    }
    return result;
  }

  #rollback() {
    try {
      this.#store.rollback();
    } catch {
      // The transaction is gone either way.
    }
  }
}
