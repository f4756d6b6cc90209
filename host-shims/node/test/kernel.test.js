import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kernel, KernelError, MemoryStore, ProviderOutcomeUnknown, COMMANDS } from '../src/index.js';
import { NOW, appendRequest, planRequest, compactRequest } from './helpers.js';

const dump = (store) => JSON.stringify(store.entries(), (_, v) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v));

test('every command answers through the component', () => {
  const kernel = new Kernel(new MemoryStore());
  const info = kernel.info();
  assert.deepEqual(info.commands.filter((c) => COMMANDS.includes(c)), COMMANDS);
  const appended = kernel.appendEvents(appendRequest(0, 120));
  assert.equal(appended.head.seq, 120);
  assert.equal(kernel.readEvents({ schemaVersion: 1, sessionId: 's1', afterSeq: 100, limit: 5 }).events[0].seq, 101);
  const plan = kernel.planContext(planRequest);
  assert.equal(plan.binding.sessionHead.seq, 120);
  assert.ok(plan.dropped.length > 0 && plan.context.length > 0);
  const compacted = kernel.compactContext(compactRequest('local'));
  assert.equal(compacted.status, 'committed');
  assert.deepEqual(compacted.states, ['evaluating', 'preparing', 'verifying', 'committing', 'committed']);
  const events = kernel.readKernelEvents();
  assert.equal(events.events[0].type, 'context.compaction.committed');
  const bytes = new TextEncoder().encode('externalized output');
  const put = kernel.putContent({ schemaVersion: 1, allowedSinks: ['model:*'], sensitivity: 'internal', now: NOW }, bytes);
  assert.deepEqual(kernel.getContent({ schemaVersion: 1, objectId: put.contentRef.objectId, sink: 'model:x' }), bytes);
  assert.equal(JSON.parse(kernel.call('info', '{"schemaVersion":1}')).kernel.name, 'ctxkernel');
});

test('bad input is a typed error and leaves the store unchanged', () => {
  const store = new MemoryStore();
  const kernel = new Kernel(store);
  kernel.appendEvents(appendRequest(0, 3));
  const before = dump(store);
  const cases = [
    ['plan-context', '{"schemaVersion": 1,', 'invalid-request'],
    ['plan-context', { ...planRequest, model: { ...planRequest.model, window: -1 } }, 'invalid-request'],
    ['plan-context', { ...planRequest, schemaVersion: 2 }, 'unsupported-schema'],
    ['append-events', appendRequest(0, 1), 'stale'],
    ['continue-operation', { schemaVersion: 1, operationId: 'op-nope', now: NOW, response: { outcome: 'cancelled' } }, 'not-found'],
    ['no-such-command', '{}', 'invalid-request'],
  ];
  for (const [command, request, code] of cases) {
    assert.throws(() => kernel.call(command, request), (e) => e instanceof KernelError && e.code === code, `${command} → ${code}`);
  }
  assert.throws(() => kernel.getContent({ schemaVersion: 1, objectId: '0'.repeat(64), sink: 'x' }), { code: 'content-unavailable' });
  try {
    kernel.appendEvents(appendRequest(0, 1));
  } catch (e) {
    assert.equal(e.detail.currentHead.seq, 3);
  }
  assert.equal(dump(store), before);
});

test('a host exception mid-call rolls back and the next call works', () => {
  const store = new MemoryStore();
  const kernel = new Kernel(store);
  kernel.appendEvents(appendRequest(0, 1));
  const before = dump(store);
  let puts = 0;
  const put = store.put.bind(store);
  store.put = (...args) => {
    if (++puts === 3) throw new TypeError('the host blew up');
    return put(...args);
  };
  assert.throws(() => kernel.appendEvents(appendRequest(1, 4)), TypeError);
  assert.equal(dump(store), before, 'the two puts before the exception were rolled back');
  store.put = put;
  assert.equal(kernel.appendEvents(appendRequest(1, 4)).head.seq, 5, 'a fresh instance continues');
});

test('provider callbacks drive compaction: success, failure, unknown', async () => {
  const seeded = () => {
    const kernel = new Kernel(new MemoryStore());
    kernel.appendEvents(appendRequest(0, 120));
    return kernel;
  };
  const clock = () => NOW;
  let asked;
  const done = await seeded().compact(compactRequest('provider'), async (request) => {
    asked = request;
    return { text: 'A long session about words.', usage: { inputTokens: 100, outputTokens: 7 } };
  }, { clock });
  assert.equal(done.status, 'committed');
  assert.equal(asked.model, 'summarizer');
  assert.equal(asked.messages[0].role, 'system');

  const degraded = await seeded().compact(compactRequest('provider'), async () => { throw new Error('HTTP 503'); }, { clock });
  assert.equal(degraded.status, 'degraded');

  const kernel = seeded();
  const unknown = await kernel.compact(compactRequest('provider'), async () => { throw new ProviderOutcomeUnknown('socket closed after send'); }, { clock });
  assert.equal(unknown.status, 'reconciliation-required');
  const retry = kernel.reconcile({ schemaVersion: 1, operationId: unknown.operationId, now: NOW, resolution: 'retry' });
  assert.equal(retry.status, 'awaiting-provider');
  assert.notEqual(retry.operationId, unknown.operationId);

  const waiting = await seeded().compact(compactRequest('provider'));
  assert.equal(waiting.status, 'awaiting-provider', 'without a provider the operation waits');
});
