import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Kernel, KernelError, MemoryStore, ProviderOutcomeUnknown, COMMANDS, parseJson, stringifyJson } from '../src/index.js';
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
  let asked;
  const done = await seeded().compact(compactRequest('provider'), async (request) => {
    asked = request;
    return { text: 'A long session about words.', usage: { inputTokens: 100, outputTokens: 7 } };
  });
  assert.equal(done.status, 'committed');
  assert.equal(asked.model, 'summarizer');
  assert.equal(asked.messages[0].role, 'system');

  const degraded = await seeded().compact(compactRequest('provider'), async () => { throw new Error('HTTP 503'); });
  assert.equal(degraded.status, 'degraded');

  const kernel = seeded();
  const unknown = await kernel.compact(compactRequest('provider'), async () => { throw new ProviderOutcomeUnknown('socket closed after send'); });
  assert.equal(unknown.status, 'reconciliation-required');
  const retry = kernel.reconcile({ schemaVersion: 1, operationId: unknown.operationId, now: NOW, resolution: 'retry' });
  assert.equal(retry.status, 'awaiting-provider');
  assert.notEqual(retry.operationId, unknown.operationId);

  const waiting = await seeded().compact(compactRequest('provider'));
  assert.equal(waiting.status, 'awaiting-provider', 'without a provider the operation waits');
});

test('requests and answers keep every integer: text verbatim, BigInts written as integers, unsafe integers parsed as BigInts', () => {
  assert.equal(stringifyJson({ seq: 18446744073709551615n, n: 1, s: 'x' }), '{"seq":18446744073709551615,"n":1,"s":"x"}');
  assert.deepEqual(parseJson('{"a":9007199254740993,"b":9007199254740991,"c":1.5,"d":"12345678901234567890"}'),
    { a: 9007199254740993n, b: 9007199254740991, c: 1.5, d: '12345678901234567890' });
  const error = new KernelError('stale', 'behind', '{"expectedHead":{"seq":9007199254740993}}');
  assert.equal(error.detail.expectedHead.seq, 9007199254740993n);
  assert.equal(error.detailJson, '{"expectedHead":{"seq":9007199254740993}}');
  const kernel = new Kernel(new MemoryStore());
  kernel.appendEvents(appendRequest(0, 3));
  assert.equal(kernel.readEvents({ schemaVersion: 1, sessionId: 's1', afterSeq: 2n }).events[0].seq, 3, 'a BigInt in a request reaches the kernel');
  // The kernel's error detail comes through byte for byte.
  assert.throws(() => kernel.appendEvents(appendRequest(1, 1)),
    (e) => e instanceof KernelError && e.detailJson.startsWith('{"currentHead":{"digest":"sha256:') && e.detail.currentHead.seq === 3);
});

test('a lone surrogate is an invalid request, not replaced by U+FFFD', () => {
  const kernel = new Kernel(new MemoryStore());
  const refused = (e) => e instanceof KernelError && e.code === 'invalid-request' && e.message === 'the request is not valid Unicode: it holds a lone surrogate';
  assert.throws(() => kernel.call('info', '{"schemaVersion":1,"x":"\ud800"}'), refused);
  // In an object, JSON.stringify escapes it; the kernel gives the same answer.
  for (const lone of ['\ud800', '\udc00', 'a\ud800b']) {
    assert.throws(() => kernel.call('read-events', { schemaVersion: 1, sessionId: lone }), refused);
  }
});

test('a number that is not finite is refused, not written as null', () => {
  const kernel = new Kernel(new MemoryStore());
  for (const value of [NaN, Infinity, -Infinity]) {
    assert.throws(() => kernel.call('read-events', { schemaVersion: 1, sessionId: 's', afterSeq: value }),
      (e) => e instanceof KernelError && e.code === 'invalid-request' && e.message === 'the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry');
  }
});

test('put-content and get-content take request text as given', () => {
  const kernel = new Kernel(new MemoryStore());
  const bytes = new TextEncoder().encode('output');
  const put = kernel.call('put-content', `{"allowedSinks":["*"],"now":"${NOW}","schemaVersion":1,"sensitivity":"internal"}`, bytes);
  assert.match(put, /^\{"allowedSinks":\["\*"\],"contentRef":\{/);
  const objectId = parseJson(put).contentRef.objectId;
  assert.deepEqual(kernel.getContent(`{"objectId":"${objectId}","schemaVersion":1,"sink":"x"}`), bytes);
});

test('a trap is one fixed internal error, rolled back, and the instance is replaced', () => {
  // 8 MiB of linear memory at most: forty half-MiB items do not fit.
  const child = spawnSync(process.execPath, ['--wasm-max-mem-pages=128', new URL('./trap-child.js', import.meta.url).pathname], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout), {
    code: 'internal', message: 'the kernel trapped; the call was rolled back', detailJson: '{}', unchanged: true, next: 3,
  });
});
