// ctxkernel for Node: the one component (transpiled by jco, loaded once per
// process) over a store this process supplies. Every command runs inside one
// store transaction: committed when the kernel answers, rolled back when it
// answers an error, traps, or the store throws. A command that only reads
// takes no write lock.

import { readFile } from 'node:fs/promises';
import { isInteger, parse as parseLossless, stringify as stringifyLossless } from 'lossless-json';
import * as io from '@bytecodealliance/preview2-shim/io';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import { instantiate } from '../gen/ctxkernel.js';
import { MemoryStore, SqliteStore, StoreConflict, StoreError } from './stores.js';

export { MemoryStore, SqliteStore, StoreConflict, StoreError };

const gen = new URL('../gen/', import.meta.url);
const coreNames = ['ctxkernel.core.wasm', 'ctxkernel.core2.wasm', 'ctxkernel.core3.wasm'];
const coreModules = new Map(
  await Promise.all(coreNames.map(async (name) => [name, await WebAssembly.compile(await readFile(new URL(name, gen)))])),
);

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
];

/** Commands that only read: their transaction takes no write lock. */
const READ_ONLY = new Set(['info', 'read-events', 'plan-context', 'get-content', 'read-kernel-events', 'read-memory', 'recall-memory', 'resident-snapshot']);

/** What every host answers when the kernel traps (the trap's own text differs per engine). */
const TRAPPED = 'the kernel trapped; the call was rolled back';

/** Integers beyond 2^53 − 1 become BigInts, so none is silently rounded. */
const parseNumber = (text) => {
  const number = Number(text);
  return isInteger(text) && !Number.isSafeInteger(number) ? BigInt(text) : number;
};
// Only a run of 16 or more digits can hold an unsafe integer; JSON.parse is exact for the rest.
const LONG_DIGITS = /\d{16}/;

/** JSON text to values without loss: integers beyond 2^53 − 1 come back as BigInts. */
export const parseJson = (text) => (LONG_DIGITS.test(text) ? parseLossless(text, null, parseNumber) : JSON.parse(text));

/** Values to JSON text without loss: BigInts are written as integers. */
export function stringifyJson(value) {
  try {
    return JSON.stringify(value);
  } catch (e) {
    // JSON.stringify refuses a BigInt with a TypeError; only then pay for the slower writer.
    if (e instanceof TypeError) return stringifyLossless(value);
    throw e;
  }
}

/**
 * A request as the kernel gets it: text as given, an object as JSON. The
 * encoder would replace a lone surrogate with U+FFFD; refuse it instead.
 */
function requestText(request) {
  const text = typeof request === 'string' ? request : stringifyJson(request);
  if (!text.isWellFormed()) throw new KernelError('invalid-request', 'the request is not valid Unicode: it holds a lone surrogate');
  return text;
}

/**
 * The one error every command raises: the kernel's code, message and detail.
 * `detailJson` is the kernel's detail text, byte for byte; `detail` is it parsed.
 */
export class KernelError extends Error {
  constructor(code, message, detailJson = '{}', options) {
    super(`${code}: ${message}`, options);
    this.name = 'KernelError';
    this.code = code;
    this.detailJson = detailJson || '{}';
    this.detail = parseJson(this.detailJson);
  }
}

/** Throw this from a provider callback when nobody knows whether the call happened. */
export class ProviderOutcomeUnknown extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProviderOutcomeUnknown';
  }
}

function storeImports(store) {
  // Expected store failures travel to the kernel as `failure`; anything else
  // thrown is a host exception and aborts the call.
  const failure = (e) => {
    if (e instanceof StoreError) return { payload: e.message };
    throw e;
  };
  const putFailure = (e) => {
    if (e instanceof StoreConflict) return { payload: { tag: 'conflict', val: e.current } };
    if (e instanceof StoreError) return { payload: { tag: 'failure', val: e.message } };
    throw e;
  };
  return {
    get(key) {
      try {
        return store.get(key) ?? undefined;
      } catch (e) {
        throw failure(e);
      }
    },
    scan(prefix, startAfter, limit) {
      try {
        return store.scan(prefix, startAfter, limit);
      } catch (e) {
        throw failure(e);
      }
    },
    put(key, value, expected) {
      try {
        return BigInt(store.put(key, value, expected));
      } catch (e) {
        throw putFailure(e);
      }
    },
    remove(key, expected) {
      try {
        store.remove(key, expected);
      } catch (e) {
        throw putFailure(e);
      }
    },
  };
}

function imports(store) {
  return {
    'ctxkernel:kernel/store': storeImports(store),
    'ctxkernel:kernel/types': {},
    // The kernel reads no environment; give it none.
    'wasi:cli/environment': { getEnvironment: () => [], getArguments: () => [], initialCwd: () => undefined },
    'wasi:cli/exit': cli.exit,
    'wasi:cli/stdin': cli.stdin,
    'wasi:cli/stdout': cli.stdout,
    'wasi:cli/stderr': cli.stderr,
    'wasi:cli/terminal-input': cli.terminalInput,
    'wasi:cli/terminal-output': cli.terminalOutput,
    'wasi:cli/terminal-stdin': cli.terminalStdin,
    'wasi:cli/terminal-stdout': cli.terminalStdout,
    'wasi:cli/terminal-stderr': cli.terminalStderr,
    'wasi:io/error': io.error,
    'wasi:io/poll': io.poll,
    'wasi:io/streams': io.streams,
  };
}

const now = () => new Date().toISOString();

/** One kernel instance over one store. */
export class Kernel {
  #store;
  #exports = null;

  /** @param store a MemoryStore, a SqliteStore, or any object with the same methods. */
  constructor(store = new MemoryStore()) {
    this.#store = store;
  }

  get store() {
    return this.#store;
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
    return parseJson(this.call(command, request));
  }

  info() {
    return this.#json('info', { schemaVersion: 1 });
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
  readKernelEvents(request = { schemaVersion: 1 }) {
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

  /** Stores `bytes` by their sha256; returns `{ contentRef, created }`. */
  putContent(request, bytes) {
    return parseJson(this.call('put-content', request, bytes));
  }

  /** The stored bytes, verified against their digest by the kernel. */
  getContent(request) {
    const text = requestText(request);
    return this.#transact('get-content', (kernel) => kernel.getContent(text));
  }

  /**
   * Compacts, driving the provider loop: while the kernel is awaiting a
   * provider, `provider(providerRequest)` is awaited and its answer handed
   * back. A provider that throws is a failed call; one that throws
   * `ProviderOutcomeUnknown` leaves the outcome unknown (`reconcile` it);
   * an `AbortError` cancels the operation.
   */
  compact(request, provider, { clock = now } = {}) {
    return this.#drive(this.compactContext(request), provider, clock);
  }

  /** Extracts candidate memories from a session, driving the provider loop like `compact`. */
  consolidate(request, provider, { clock = now } = {}) {
    return this.#drive(this.consolidateMemory(request), provider, clock);
  }

  async #drive(receipt, provider, clock) {
    while (receipt.status === 'awaiting-provider') {
      if (!provider) return receipt;
      let response;
      try {
        const answer = await provider(receipt.providerRequest);
        response = { outcome: 'success', text: answer.text, usage: answer.usage };
      } catch (e) {
        if (e instanceof ProviderOutcomeUnknown) response = { outcome: 'unknown', reason: e.message };
        else if (e?.name === 'AbortError') response = { outcome: 'cancelled', reason: e.message };
        else response = { outcome: 'failed', error: String(e?.message ?? e) };
      }
      receipt = this.continueOperation({ schemaVersion: 1, operationId: receipt.operationId, now: clock(), response });
    }
    return receipt;
  }

  #instance() {
    this.#exports ??= instantiate((name) => coreModules.get(name), imports(this.#store)).kernel;
    return this.#exports;
  }

  #transact(command, run) {
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
