// The renderer's view of the kernel: one async function per command.
const { contextBridge, ipcRenderer } = require('electron');

const invoke = (name) => async (request) => {
  const reply = await ipcRenderer.invoke(`ctxkernel:${name}`, request);
  if (reply.error) throw Object.assign(new Error(reply.error.message), reply.error);
  return reply.ok;
};

contextBridge.exposeInMainWorld('ctxkernel', {
  planContext: invoke('plan-context'),
  appendEvents: invoke('append-events'),
  readEvents: invoke('read-events'),
  recallMemory: invoke('recall-memory'),
  proposeMemory: invoke('propose-memory'),
  decideMemory: invoke('decide-memory'),
  deleteMemory: invoke('delete-memory'),
  readMemory: invoke('read-memory'),
  compact: invoke('compact'),
  consolidate: invoke('consolidate'),
});
