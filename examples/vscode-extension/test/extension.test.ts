// The extension's logic under plain Node: a fake editor, the real kernel
// component on a real SQLite file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from 'ctxkernel';
import type { CompactContextResponse, ContextPlan, DeletionReceipt, RecallMemoryResponse } from 'ctxkernel' with { 'resolution-mode': 'import' };
import { describePlan, registerCommands, type EditorApi } from '../src/commands';
import { ContextService } from '../src/contextService';

class FakeEditor implements EditorApi {
  readonly handlers = new Map<string, (...args: any[]) => unknown>();
  readonly shown: string[] = [];
  readonly errors: string[] = [];
  answers: string[] = [];
  commands = {
    registerCommand: (id: string, fn: (...args: any[]) => unknown) => {
      this.handlers.set(id, fn);
      return { dispose: () => this.handlers.delete(id) };
    },
  };
  window = {
    showInputBox: async () => this.answers.shift(),
    showInformationMessage: async (m: string) => this.shown.push(m),
    showErrorMessage: async (m: string) => this.errors.push(m),
  };
  run<T>(id: string, ...args: unknown[]): Promise<T> {
    return this.handlers.get(id)!(...args) as Promise<T>;
  }
}

let minute = 0;
const clock = () => new Date(Date.UTC(2026, 5, 1, 9, minute++)).toISOString().replace('.000', '');

async function setup() {
  const { Kernel, SqliteStore } = await load();
  const store = await SqliteStore.open(join(mkdtempSync(join(tmpdir(), 'ctxk-vscode-')), 'ctxkernel.sqlite'));
  const service = new ContextService(new Kernel(store), {
    sessionId: 'vscode-shop',
    workspace: 'shop',
    model: { profile: 'test-4k', window: 4096, reservedOutput: 512, safetyMargin: 128 },
    clock,
  });
  const editor = new FakeEditor();
  const summaries: string[] = [];
  const disposables = registerCommands(editor, service, async (request) => {
    summaries.push(request.messages.map((m) => m.content).join('\n'));
    return { text: 'The user and the agent fixed the checkout totals; tests pass.', usage: { inputTokens: 3000, outputTokens: 14 } };
  });
  return { service, editor, store, summaries, disposables };
}

test('the four commands are registered and disposable', async () => {
  const { editor, disposables, store } = await setup();
  assert.deepEqual([...editor.handlers.keys()].sort(), ['ctxkernel.compact', 'ctxkernel.forget', 'ctxkernel.planContext', 'ctxkernel.recall']);
  disposables.forEach((d) => d.dispose());
  assert.equal(editor.handlers.size, 0);
  store.close();
});

test('plan, compact through the model, and plan again under the window', async () => {
  const { service, editor, summaries, store } = await setup();
  service.record('user', 'The checkout page shows the wrong total when a coupon is applied. Please fix it.');
  for (let turn = 0; turn < 60; turn++) {
    service.record('assistant', `Step ${turn}: I read cart.ts and coupon.ts, traced the discount through applyCoupon(), and ran the tests again.`);
    service.record('user', `Turn ${turn}: keep going, and keep the rounding rule in mind.`);
  }
  const before = await editor.run<ContextPlan>('ctxkernel.planContext');
  assert.ok(before.budget.used <= before.budget.input);
  assert.ok(before.dropped.length > 0, 'a 4k window cannot hold 120 turns');
  assert.match(editor.shown.at(-1)!, /^Context plan: \d+ items, \d+\/\d+ tokens; dropped/);

  const receipt = await editor.run<CompactContextResponse>('ctxkernel.compact');
  assert.equal(receipt.status, 'committed');
  assert.equal(summaries.length, 1, 'the model was asked once');
  assert.ok(receipt.compaction!.metrics.outputTokens < receipt.compaction!.metrics.inputTokens);
  assert.match(editor.shown.at(-1)!, /^Compaction committed: provider, \d+ → \d+ tokens/);

  const after = service.plan();
  assert.ok(after.context.some((p) => p.item.content?.includes('fixed the checkout totals')), 'the summary is in context');
  assert.ok(after.dropped.length < before.dropped.length);
  store.close();
});

test('remember, recall with attribution, forget with receipts', async () => {
  const { service, editor, store } = await setup();
  const receipt = service.remember('the shop builds with pnpm and deploys from the release branch', 'build.tool');
  assert.equal(receipt.memory.state, 'active');

  editor.answers.push('how do we build the shop');
  const recalled = await editor.run<RecallMemoryResponse>('ctxkernel.recall');
  assert.equal(recalled.memories[0].memoryId, receipt.memory.memoryId);
  assert.match(editor.shown.at(-1)!, /pnpm/);

  const forgotten = await editor.run<DeletionReceipt>('ctxkernel.forget', receipt.memory.memoryId);
  assert.equal(forgotten.matched, 1);
  assert.equal(forgotten.status, 'complete');
  assert.equal(service.recall('how do we build the shop').memories.length, 0);
  store.close();
});

test('a memory the user never said is refused with the kernel’s code', async () => {
  const { service, store } = await setup();
  const memoryId = service.remember('staging rotates keys weekly').memory.memoryId;
  // Forgetting from another session: that session's user never asked.
  const { Kernel } = await load();
  const stranger = new ContextService(new Kernel(store), { ...service.options, sessionId: 'vscode-other' });
  stranger.record('user', 'What does staging rotate?');
  assert.throws(() => stranger.kernel.deleteMemory({
    schemaVersion: 1, now: clock(), requestId: 'x', subject: 'vscode-other', scope: 'project', scopeId: 'shop',
    selector: { memoryIds: [memoryId] }, authority: { kind: 'user-explicit', sessionId: 'vscode-other' }, fence: 1,
  }), { code: 'scope-denied' });
  // Through a command, a kernel error becomes an error message, not an exception:
  // another workspace's window cannot forget this workspace's memory.
  const otherEditor = new FakeEditor();
  registerCommands(otherEditor, new ContextService(new Kernel(store), { ...service.options, workspace: 'blog' }));
  assert.equal(await otherEditor.run('ctxkernel.forget', memoryId), undefined);
  assert.match(otherEditor.errors.at(-1)!, /^ctxkernel: scope-denied: /);
  assert.equal(service.recall('staging keys').memories[0].memoryId, memoryId);
  store.close();
});

test('plans are described by their drops and pending tool calls', () => {
  const plan = {
    context: [{}, {}],
    budget: { used: 120, input: 3000 },
    dropped: [{ reason: 'budget-exhausted' }, { reason: 'budget-exhausted' }, { reason: 'sink-denied' }],
    pendingToolCalls: [{}],
  } as unknown as ContextPlan;
  assert.equal(describePlan(plan), '2 items, 120/3000 tokens; dropped 2 budget-exhausted, 1 sink-denied; 1 tool calls pending');
});
