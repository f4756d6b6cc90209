// The Electron main process: one kernel per app, its store in the user's data folder.
import { app, BrowserWindow, ipcMain } from 'electron';
import { join } from 'node:path';
import { Kernel, SqliteStore } from 'ctxkernel';
import { registerKernelHandlers } from './kernel-ipc.js';

// The app's model client: summaries and memory extraction go through it.
async function provider(request) {
  const response = await fetch(process.env.CTXK_MODEL_URL ?? 'http://localhost:8080/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: request.model, messages: request.messages, max_tokens: request.maxTokens }),
  });
  if (!response.ok) throw new Error(`the model answered ${response.status}`);
  const body = await response.json();
  return {
    text: body.choices[0].message.content,
    usage: { inputTokens: body.usage.prompt_tokens, outputTokens: body.usage.completion_tokens },
  };
}

app.whenReady().then(async () => {
  const store = await SqliteStore.open(join(app.getPath('userData'), 'ctxkernel.sqlite'));
  registerKernelHandlers(ipcMain, new Kernel(store), { provider });
  app.on('will-quit', () => store.close());
  const window = new BrowserWindow({ webPreferences: { preload: join(import.meta.dirname, 'preload.cjs') } });
  await window.loadFile('index.html');
});
