// The kernel behind IPC: the main process owns the component and the store;
// renderers ask for what they need over `ipcRenderer.invoke`. Electron drops
// custom error properties at the IPC boundary, so every handler answers
// `{ ok: value }` or `{ error: { code, message, detail } }` instead of throwing.
import { COMMANDS, KernelError } from 'ctxkernel';

/** The channel of a kernel command: `ctxkernel:plan-context`, … */
export const channel = (command) => `ctxkernel:${command}`;

const answer = async (run) => {
  try {
    return { ok: await run() };
  } catch (error) {
    if (error instanceof KernelError) return { error: { code: error.code, message: error.message, detail: error.detail } };
    return { error: { code: 'host', message: String(error?.message ?? error) } };
  }
};

/**
 * Registers one handler per kernel command, plus `ctxkernel:compact` and
 * `ctxkernel:consolidate`, which run the provider loop here in the main
 * process (where the API keys live). Returns a function that removes them.
 *
 * @param {{ handle(channel: string, fn: (event: unknown, request: unknown) => unknown): void, removeHandler(channel: string): void }} ipcMain
 * @param {import('ctxkernel').Kernel} kernel
 * @param {{ provider?: import('ctxkernel').Provider, clock?: () => string }} [options]
 */
export function registerKernelHandlers(ipcMain, kernel, { provider, clock } = {}) {
  const channels = [];
  const handle = (name, fn) => {
    ipcMain.handle(name, (_event, request) => answer(() => fn(request)));
    channels.push(name);
  };
  for (const command of COMMANDS) {
    handle(channel(command), (request) => JSON.parse(kernel.call(command, request)));
  }
  handle(channel('compact'), (request) => kernel.compact(request, provider, { clock }));
  handle(channel('consolidate'), (request) => kernel.consolidate(request, provider, { clock }));
  return () => channels.forEach((name) => ipcMain.removeHandler(name));
}
