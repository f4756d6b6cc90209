import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kernel, KernelError, MemoryStore } from '../src/index.js';
import { NOW, item } from './helpers.js';

const project = { scope: 'project', scopeId: 'web' };
const admin = { kind: 'management', actor: 'lead' };

function said(kernel, seq, text) {
  kernel.appendEvents({ schemaVersion: 1, sessionId: 's1', expectedHead: { seq: seq - 1 }, items: [item(seq, 'user', text)], now: NOW });
}

const candidate = (content, extra = {}) => ({
  ...project, category: 'preference', key: 'web.package-manager', content, confidence: 0.7, importance: 0.6,
  provenance: { origin: 'model' }, evidenceRefs: [{ kind: 'session', id: 's1', seq: 1 }], ...extra,
});

test('the memory lifecycle through the component', () => {
  const store = new MemoryStore();
  const kernel = new Kernel(store);
  said(kernel, 1, 'remember: we use yarn for the web app');
  // A model's proposal waits as a candidate until someone with authority activates it.
  const [proposed] = kernel.proposeMemory({ schemaVersion: 1, now: NOW, candidates: [candidate('we use yarn for the web app')] }).receipts;
  assert.equal(proposed.memory.state, 'candidate');
  const recall = (query) => kernel.recallMemory({ schemaVersion: 1, now: NOW, query, scopes: [project], sink: 'model:test' });
  assert.deepEqual(recall('which package manager').memories, [], 'candidates are never recalled');
  const activated = kernel.decideMemory({ schemaVersion: 1, now: NOW, memoryId: proposed.memory.memoryId, action: 'activate', authority: admin, ...project });
  assert.equal(activated.memory.state, 'active');
  // The user's own correction supersedes it at once, grounded in what they said.
  said(kernel, 2, 'correction: we use pnpm for the web app now');
  const [moved] = kernel.proposeMemory({
    schemaVersion: 1, now: NOW, authority: { kind: 'user-explicit', sessionId: 's1' },
    candidates: [candidate('we use pnpm for the web app', { evidenceRefs: [{ kind: 'session', id: 's1', seq: 2 }] })],
  }).receipts;
  assert.deepEqual(moved.superseded, [proposed.memory.memoryId]);
  const found = recall('which package manager does the web app use');
  assert.equal(found.memories[0].content, 'we use pnpm for the web app');
  assert.equal(found.memories[0].history[0].content, 'we use yarn for the web app');
  const resident = kernel.residentSnapshot({ schemaVersion: 1, now: NOW, ...project, maxTokens: 200, sink: 'model:test' });
  assert.deepEqual(resident.included, [moved.memory.memoryId]);
  // An illegal transition is a typed error and changes nothing.
  const before = JSON.stringify(store.entries(), (_, v) => (typeof v === 'bigint' ? String(v) : v));
  assert.throws(
    () => kernel.decideMemory({ schemaVersion: 1, now: NOW, memoryId: proposed.memory.memoryId, action: 'activate', authority: admin, ...project }),
    (e) => e instanceof KernelError && e.code === 'illegal-transition',
  );
  assert.equal(JSON.stringify(store.entries(), (_, v) => (typeof v === 'bigint' ? String(v) : v)), before);
  // Forgetting the slot: partial until the laptop replica confirms, then complete.
  const deletion = kernel.deleteMemory({
    schemaVersion: 1, now: NOW, requestId: 'forget-pm', subject: 'team-web', ...project,
    selector: { key: 'web.package-manager' }, authority: admin, fence: 1, replicas: ['laptop'],
  });
  assert.equal(deletion.matched, 2);
  assert.equal(deletion.status, 'partial');
  assert.deepEqual(recall('package manager').memories, []);
  const settled = kernel.reconcile({ schemaVersion: 1, now: NOW, operationId: deletion.deletionId, replicas: [{ replica: 'laptop', deleted: true }] });
  assert.equal(settled.status, 'complete');
});

test('consolidation drives the provider loop and degrades to the rules', async () => {
  const kernel = new Kernel(new MemoryStore());
  said(kernel, 1, 'Please remember that staging runs in Frankfurt. Why is CI red?');
  const request = { schemaVersion: 1, sessionId: 's1', now: NOW, strategy: 'provider', provider: { model: 'extractor', maxTokens: 300 } };
  const asked = [];
  const done = await kernel.consolidate(request, async (providerRequest) => {
    asked.push(providerRequest);
    const memories = [{ seq: 1, category: 'fact', content: 'staging runs in Frankfurt' }];
    return { text: JSON.stringify({ memories }), usage: { inputTokens: 40, outputTokens: 12 } };
  });
  assert.equal(asked[0].model, 'extractor');
  assert.equal(done.status, 'proposed');
  assert.deepEqual(done.receipts.map((r) => [r.memory.content, r.memory.state]), [['staging runs in Frankfurt', 'candidate']]);
  const degraded = await kernel.consolidate({ ...request, afterSeq: 0, provider: { model: 'other', maxTokens: 300 } }, async () => {
    throw new Error('HTTP 503');
  });
  assert.equal(degraded.status, 'degraded');
  assert.equal(degraded.receipts[0].merged, true, 'the rules found the same memory again');
});

test('verifyStore names a link left to nothing, and changes nothing', () => {
  const store = new MemoryStore();
  const kernel = new Kernel(store);
  assert.equal(kernel.verifyStore().ok, true);
  // What a partial restore leaves: a scope link whose record is not there.
  store.put('mem/scope/project/web/mem-ghost', new TextEncoder().encode('{"memoryId":"mem-ghost"}'), undefined);
  const report = kernel.verifyStore();
  assert.deepEqual([report.ok, report.problemCount], [false, 1]);
  assert.deepEqual(report.problems.map((p) => [p.kind, p.key, p.memoryId]), [['dangling-link', 'mem/scope/project/web/mem-ghost', 'mem-ghost']]);
  assert.equal(kernel.call('verify-store', '{"schemaVersion":1}'), kernel.call('verify-store', { schemaVersion: 1 }));
});
