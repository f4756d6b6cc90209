// The typed API: item constructors held to the shared file every host is
// held to, requests filled by the shim, provider answers of the wrong shape,
// the diagnostics channel, and tsc on a caller's code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kernel, KernelError, MemoryStore, items } from '../src/index.js';
import { TAKES_NOW } from '../src/kernel.js';
import { NOW, appendRequest, planRequest, compactRequest } from './helpers.js';

const root = new URL('../../../', import.meta.url);
const constructors = JSON.parse(readFileSync(new URL('tests/items/constructors.json', root), 'utf8'));
const make = (c) => items[c.make](...c.args, c.options);

test('each constructor gives the shared item', () => {
  assert.deepEqual(new Set(constructors.cases.map((c) => c.make)), new Set(Object.keys(items)));
  for (const c of constructors.cases) assert.deepEqual(make(c), c.item, `${c.make}(${JSON.stringify(c.args)})`);
  for (const c of constructors.refused) {
    assert.throws(() => make(c), (e) => e instanceof KernelError && e.code === c.code && e.detail.field === c.field);
  }
});

test('every constructed item is one the kernel plans and appends', () => {
  // Named by case, so the plan's answer can be read back per case.
  const made = constructors.cases.map((c, n) => ({ itemId: `case-${n}`, ...make(c) }));
  const kernel = new Kernel(new MemoryStore(), { clock: () => NOW });
  const plan = kernel.planContext({ sink: 'model:test', model: planRequest.model, items: made });
  const placed = new Map([...plan.context.map((e) => [e.itemId, { partition: e.partition }]), ...plan.dropped.map((d) => [d.itemId, { dropped: d.reason }])]);
  assert.deepEqual(made.map((i) => placed.get(i.itemId)), constructors.cases.map((c) => c.planned));
  assert.equal(kernel.appendEvents({ sessionId: 's1', expectedHead: { seq: 0 }, items: made }).head.seq, made.length);
});

test('createdAt defaults to the host clock, to the millisecond', () => {
  const before = Date.now();
  const made = items.user('hi').createdAt;
  assert.match(made, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.ok(before <= Date.parse(made) && Date.parse(made) <= Date.now());
});

test('the shim fills schemaVersion and now only where the schema has them, and keeps what is given', () => {
  const schemas = new URL('wit/schemas/', root);
  const takesNow = readdirSync(schemas).filter((f) => f.endsWith('.request.schema.json'))
    .filter((f) => 'now' in JSON.parse(readFileSync(new URL(f, schemas), 'utf8')).properties).map((f) => f.replace('.request.schema.json', ''));
  const ticks = [];
  const clock = () => { ticks.push(`2026-06-01T12:00:${String(ticks.length).padStart(2, '0')}.000Z`); return ticks.at(-1); };
  const kernel = new Kernel(new MemoryStore(), { clock });
  assert.equal(kernel.clock, clock);
  const request = { sessionId: 's1', expectedHead: { seq: 0 }, items: [items.user('hello', { createdAt: NOW })] };
  const copy = structuredClone(request);
  kernel.appendEvents(request);
  assert.deepEqual(request, copy, "the caller's object is not changed");
  assert.equal(kernel.readEvents({ sessionId: 's1' }).events[0].item.content, 'hello');
  assert.equal(ticks.length, 1, 'read-events takes no now: none was asked');
  assert.equal(kernel.planContext({ sessionId: 's1', sink: 'model:test', model: planRequest.model, now: NOW }).now, NOW);
  assert.equal(ticks.length, 1, 'a given now is kept');
  assert.equal(kernel.planContext({ sessionId: 's1', sink: 'model:test', model: planRequest.model }).now, '2026-06-01T12:00:01Z');
  const rendered = kernel.renderContext({ format: 'anthropic-messages', plan: { sessionId: 's1', sink: 'model:test', model: planRequest.model } });
  assert.deepEqual(JSON.parse(rendered.bodyJson), rendered.body);
  assert.equal(ticks.length, 3, 'the plan a render request carries is filled');
  assert.deepEqual([...TAKES_NOW].sort(), takesNow.sort());
  assert.throws(() => kernel.call('plan-context', { sessionId: 's1', sink: 'model:test', model: planRequest.model }), (e) => e.code === 'invalid-request' && /missing field/.test(e.message));
  assert.throws(() => kernel.planContext({ schemaVersion: 99, sessionId: 's1', sink: 'model:test', model: planRequest.model }), (e) => e.code === 'unsupported-schema');
  for (const bad of [['sessionId'], 'not json', 7, null]) {
    assert.throws(() => kernel.planContext(bad), (e) => e instanceof KernelError && e.code === 'invalid-request');
  }
});

test('null and undefined are filled as absent is; an option given as null takes its default', () => {
  const kernel = new Kernel(new MemoryStore(), { clock: () => '2026-06-01T12:00:07.000Z' });
  assert.equal(kernel.planContext({ schemaVersion: undefined, now: null, sink: 'model:test', model: planRequest.model }).now, '2026-06-01T12:00:07Z');
  assert.deepEqual(items.user('hi', { scope: null, trust: undefined, sensitivity: null, priority: null, createdAt: NOW }), items.user('hi', { createdAt: NOW }));
  const call = { callId: 'c1', name: 'f', arguments: '{}' };
  assert.deepEqual(items.assistant(null, { toolCalls: new Set([call]), createdAt: NOW }).toolCalls, [call]);
  assert.throws(() => items.assistant(null, { toolCalls: new Set() }), (e) => e instanceof KernelError && e.detail.field === 'toolCalls');
  assert.throws(() => items.user('hi', { allowedSinks: 'model:x' }), (e) => e instanceof KernelError && e.detail.field === 'allowedSinks');
});

test('the error message does not repeat the code', () => {
  assert.throws(() => new Kernel(new MemoryStore()).readEvents({ sessionId: 's1', limit: -1 }),
    (e) => e instanceof KernelError && e.code === 'invalid-request' && !e.message.startsWith('invalid-request') && e.message.length > 0);
});

const seeded = () => {
  const kernel = new Kernel(new MemoryStore(), { clock: () => NOW });
  kernel.appendEvents(appendRequest(0, 120));
  return kernel;
};

test('a provider answer of the wrong shape is a typed error and leaves the operation awaiting', async () => {
  const wrong = [
    [null, 'answer'], ['A long session about words.', 'answer'], [[1, 2], 'answer'],
    [{ summary: 'x', usage: { inputTokens: 1, outputTokens: 1 } }, 'text'], [{ text: 42, usage: { inputTokens: 1, outputTokens: 1 } }, 'text'],
    [{ text: 'x' }, 'usage'], [{ text: 'x', usage: [1, 1] }, 'usage'],
  ];
  for (const [answer, field] of wrong) {
    const kernel = seeded();
    const error = await kernel.compact(compactRequest('provider'), async () => answer).then(() => null, (e) => e);
    assert.ok(error instanceof KernelError && error.code === 'invalid-request', `${JSON.stringify(answer)}: ${error}`);
    assert.equal(error.detail.field, field);
    const done = kernel.continueOperation({ operationId: error.detail.operationId, response: { outcome: 'success', text: 'Words.', usage: { inputTokens: 1, outputTokens: 1 } } });
    assert.equal(done.status, 'committed');
  }
  await assert.rejects(seeded().compact(compactRequest('provider'), async () => ({ text: 'x', usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 1 } })),
    (e) => e instanceof KernelError && e.code === 'invalid-request' && /cachedTokens/.test(e.message));
});

test('each command is published with its outcome and never its body', () => {
  const secret = 'sk-live-4f9a-do-not-log';
  const seen = [];
  const listener = (message) => seen.push(message);
  subscribe('ctxkernel:command', listener);
  try {
    const kernel = new Kernel(new MemoryStore(), { clock: () => NOW });
    kernel.appendEvents({ sessionId: 's1', expectedHead: { seq: 0 }, items: [items.user(`my key is ${secret}`)] });
    assert.throws(() => kernel.appendEvents({ sessionId: 's1', expectedHead: { seq: 0 }, items: [items.user(secret)] }));
    kernel.planContext(planRequest);
  } finally {
    unsubscribe('ctxkernel:command', listener);
  }
  assert.deepEqual(seen.map(({ command, outcome }) => [command, outcome]), [['append-events', 'ok'], ['append-events', 'stale'], ['plan-context', 'ok']]);
  assert.ok(seen.every((m) => m.durationMs >= 0 && Object.keys(m).sort().join() === 'command,durationMs,outcome'));
  assert.ok(!JSON.stringify(seen).includes(secret));
});

const QUICK = `import { Kernel, MemoryStore, items, type ContextPlan } from '../src/index.js';

const kernel = new Kernel(new MemoryStore());
kernel.appendEvents({ sessionId: 's1', expectedHead: { seq: 0 }, items: [items.user('Hi')] });
const plan: ContextPlan = kernel.planContext({ sessionId: 's1', sink: 'model:x',
  model: { profile: 'x', window: 8000, reservedOutput: 500, safetyMargin: 100 } });
const kept: number = plan.context.length;
console.log(kept);
`;

const MISTAKES = [
  ["sessionId: 's1', expectedHead", "sesionId: 's1', expectedHead", 'TS2561'],
  ['reservedOutput: 500', "reservedOutput: '500'", 'TS2322'],
  ["items.user('Hi')", "items.user('Hi', { trust: 'owner' })", 'TS2322'],
  ["items.user('Hi')", "items.user('Hi', { sensitivty: 'secret' })", 'TS2561'],
  ['plan.context.length', 'plan.contexts.length', 'TS2551'],
];

test('tsc passes a caller’s code and catches each mistake', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctxkernel-tsc-'));
  const files = [['quick.mts', QUICK], ...MISTAKES.map(([right, wrong], n) => {
    assert.ok(QUICK.includes(right), right);
    return [`mistake${n}.mts`, QUICK.replace(right, wrong)];
  })];
  const entry = new URL('../src/index.js', import.meta.url).pathname;
  for (const [name, text] of files) writeFileSync(join(dir, name), text.replace("'../src/index.js'", JSON.stringify(entry)));
  const tsc = spawnSync(process.execPath, [new URL('../node_modules/typescript/bin/tsc', import.meta.url).pathname, '--strict', '--noEmit',
    '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', ...files.map(([name]) => join(dir, name))], { encoding: 'utf8' });
  const errors = tsc.stdout.split('\n').filter((line) => line.includes('error TS'));
  assert.ok(!errors.some((line) => line.includes('quick.mts')), errors.join('\n'));
  MISTAKES.forEach(([, wrong, code], n) => {
    assert.ok(errors.some((line) => line.includes(`mistake${n}.mts`) && line.includes(code)), `${wrong}: ${errors.join('\n')}`);
  });
});
