// The main-process module under plain Node: a fake ipcMain, the real kernel
// component on a real SQLite file, requests shaped as a renderer sends them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COMMANDS, Kernel, ProviderOutcomeUnknown, SqliteStore } from 'ctxkernel';
import { channel, registerKernelHandlers } from '../kernel-ipc.js';

class FakeIpcMain {
  handlers = new Map();
  handle(name, fn) {
    assert.ok(!this.handlers.has(name), `${name} registered twice`);
    this.handlers.set(name, fn);
  }
  removeHandler(name) {
    this.handlers.delete(name);
  }
  // What `ipcRenderer.invoke` delivers: a structured clone of the request and of the reply.
  async invoke(name, request) {
    return structuredClone(await this.handlers.get(name)({ sender: 'renderer' }, structuredClone(request)));
  }
}

let second = 0;
const clock = () => new Date(Date.UTC(2026, 5, 1, 9, 0, second++)).toISOString().replace('.000', '');

function message(seq, role, content) {
  return {
    schemaVersion: 1, itemId: `desk-${seq}`, kind: 'message', role, content, createdAt: clock(),
    trust: role === 'user' ? 'user' : 'verified', provenance: { origin: role === 'user' ? 'user' : 'model' },
    sensitivity: 'internal', allowedSinks: ['model:*'], scope: 'session', priority: 0, pinned: false,
    sourceRef: { kind: 'session', id: 'desk', seq },
  };
}

async function setup(provider) {
  const store = await SqliteStore.open(join(mkdtempSync(join(tmpdir(), 'ctxk-electron-')), 'ctxkernel.sqlite'));
  const ipc = new FakeIpcMain();
  const unregister = registerKernelHandlers(ipc, new Kernel(store), { provider, clock });
  const items = [message(1, 'user', 'Plan the migration of the orders table to the new schema.')];
  for (let seq = 2; seq <= 80; seq++) {
    items.push(message(seq, seq % 2 ? 'user' : 'assistant', `Turn ${seq}: ${'we compared the old and new orders columns and wrote the backfill. '.repeat(3)}`));
  }
  const appended = await ipc.invoke(channel('append-events'), { schemaVersion: 1, sessionId: 'desk', expectedHead: { seq: 0 }, items, now: clock() });
  assert.equal(appended.ok.head.seq, 80);
  return { ipc, store, unregister };
}

const model = { profile: 'desk-4k', window: 4096, reservedOutput: 512, safetyMargin: 128 };

test('every kernel command has a channel, and unregistering removes them all', async () => {
  const { ipc, store, unregister } = await setup();
  for (const command of COMMANDS) assert.ok(ipc.handlers.has(channel(command)), command);
  assert.ok(ipc.handlers.has('ctxkernel:compact') && ipc.handlers.has('ctxkernel:consolidate'));
  unregister();
  assert.equal(ipc.handlers.size, 0);
  store.close();
});

test('a renderer plans, and compacts through the main process provider', async () => {
  const asked = [];
  const { ipc, store } = await setup(async (request) => {
    asked.push(request.model);
    return { text: 'The orders table migration: columns compared, backfill written.', usage: { inputTokens: 2500, outputTokens: 12 } };
  });
  const plan = await ipc.invoke(channel('plan-context'), { schemaVersion: 1, sessionId: 'desk', model, sink: 'model:chat', now: clock() });
  assert.ok(plan.ok.dropped.length > 0);

  const compacted = await ipc.invoke('ctxkernel:compact', {
    schemaVersion: 1, sessionId: 'desk', model, sink: 'model:chat', strategy: 'provider',
    provider: { model: 'summarizer-1', maxTokens: 400 }, now: clock(),
  });
  assert.equal(compacted.ok.status, 'committed');
  assert.deepEqual(asked, ['summarizer-1']);
  const after = await ipc.invoke(channel('plan-context'), { schemaVersion: 1, sessionId: 'desk', model, sink: 'model:chat', now: clock() });
  assert.ok(after.ok.context.some((p) => p.item.content?.includes('backfill written')));
  store.close();
});

test('a lost model response comes back as reconciliation-required, not a retry', async () => {
  const { ipc, store } = await setup(async () => {
    throw new ProviderOutcomeUnknown('the connection dropped after the request was sent');
  });
  const reply = await ipc.invoke('ctxkernel:compact', {
    schemaVersion: 1, sessionId: 'desk', model, sink: 'model:chat', strategy: 'provider',
    provider: { model: 'summarizer-1', maxTokens: 400 }, now: clock(),
  });
  assert.equal(reply.ok.status, 'reconciliation-required');
  store.close();
});

test('kernel errors cross IPC with their code; the store is unchanged', async () => {
  const { ipc, store } = await setup();
  const stale = await ipc.invoke(channel('append-events'), {
    schemaVersion: 1, sessionId: 'desk', expectedHead: { seq: 3 }, items: [message(81, 'user', 'late')], now: clock(),
  });
  assert.equal(stale.error.code, 'stale');
  assert.equal(stale.error.detail.currentHead.seq, 80);
  const newer = await ipc.invoke(channel('info'), { schemaVersion: 99 });
  assert.equal(newer.error.code, 'unsupported-schema');
  const events = await ipc.invoke(channel('read-events'), { schemaVersion: 1, sessionId: 'desk', afterSeq: 79 });
  assert.equal(events.ok.head.seq, 80);
  store.close();
});
