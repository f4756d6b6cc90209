// Loading the component and crossing into it: jco's transpiled bindings over
// the core modules, compiled once per process, with this process's store as
// the kernel's store import and the few WASI interfaces it links.

import { readFile } from 'node:fs/promises';
import * as io from '@bytecodealliance/preview2-shim/io';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import { instantiate } from '../gen/ctxkernel.js';
import { StoreConflict, StoreError } from './stores.js';

const gen = new URL('../gen/', import.meta.url);
/** The sha256 of the component `gen/` was transpiled from, written beside it by the build. */
export const COMPONENT_SHA256 = (await readFile(new URL('ctxkernel.wasm.sha256', gen), 'utf8')).split(/\s/)[0];
const coreNames = ['ctxkernel.core.wasm', 'ctxkernel.core2.wasm', 'ctxkernel.core3.wasm'];
const coreModules = new Map(
  await Promise.all(coreNames.map(async (name) => [name, await WebAssembly.compile(await readFile(new URL(name, gen)))])),
);

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

/** A fresh kernel instance over `store`: the exports of its `kernel` interface. */
export const instantiateKernel = (store) => instantiate((name) => coreModules.get(name), imports(store)).kernel;
