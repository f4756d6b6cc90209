// ctxkernel for Node: the one component (transpiled by jco, loaded once per
// process) over a store this process supplies. The parts are laid out as in
// every host (see host-shims/README.md); this file is the package's API.

export { COMMANDS, Kernel } from './kernel.js';
export * as items from './items.js';
export { COMPONENT_SHA256 } from './engine.js';
export { KernelError } from './errors.js';
export { ProviderOutcomeUnknown } from './provider.js';
export { parseJson, stringifyJson } from './json.js';
export { MemoryStore, SqliteStore, StoreConflict, StoreError } from './stores.js';
