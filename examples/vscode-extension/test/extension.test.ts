// The extension's logic under plain Node: a fake editor, the real kernel
// component on a real SQLite file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from 'ctxkernel';
import type { CompactContextResponse, ContextPlan, DeletionReceipt, Kernel, Provider, RecallMemoryResponse } from 'ctxkernel' with { 'resolution-mode': 'import' };
import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';
import { describePlan, registerCommands, type EditorApi } from '../src/commands';
import { ContextService, type Answer, type ChatModel, type Tool } from '../src/contextService';

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

const FILES: Record<string, string> = {
  'src/cart.ts': 'export const total = (items: Item[]) => items.reduce((sum, i) => sum + i.price * i.qty, 0);\n',
  'src/coupon.ts': 'export const applyCoupon = (total: number, pct: number) => Math.round(total * (1 - pct / 100));\n',
  'src/catalog.ts': Array.from({ length: 85 }, (_, i) => `export const item${i} = { sku: 'SKU-${i}', price: ${i + 1}99, title: 'Item number ${i}' };`).join('\n'),
};
const LEFT_OUT = /content (sha256:[0-9a-f]{64})\]/g;

const readFile: Tool = {
  definition: {
    type: 'function',
    function: { name: 'read_file', description: 'Reads a file of the workspace.', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
  },
  run: (args) => {
    const text = FILES[(args as { path: string }).path];
    if (text === undefined) throw new Error('no such file');
    return text;
  },
};

/**
 * Answers a Chat Completions body as the model would: every file the latest
 * user message names and no tool has read yet, read in one parallel group
 * (arguments spelled as a model may spell them); else a text reply. Every
 * body it is sent is checked by the kernel's validator first.
 */
class ScriptedChat implements ChatModel {
  readonly bodies: ChatCompletionCreateParamsNonStreaming[] = [];
  readonly violations: unknown[] = [];
  readonly written = new Map<string, string>();
  constructor(private readonly kernel: Kernel) {}
  chat = {
    completions: {
      create: async (body: ChatCompletionCreateParamsNonStreaming): Promise<ChatCompletion> => {
        this.bodies.push(body);
        const verdict = this.kernel.validateRequest({ schemaVersion: 1, format: 'openai-chat', body: body as unknown as Record<string, unknown> });
        this.violations.push(...verdict.violations);
        const last = body.messages.at(-1)!;
        const userText = [...body.messages].reverse().find((m) => m.role === 'user')?.content;
        const named = typeof userText === 'string' && last.role === 'user' ? Object.keys(FILES).filter((f) => userText.includes(f)) : [];
        const n = this.bodies.length;
        const calls: ChatCompletionMessageToolCall[] = named.map((path, k) => {
          const id = `call_${n}_${k}`;
          const args = `{"path":  "${path}", "why": "coupon r\u00e9sum\u00e9 ☕", "n": 1.50}`;
          this.written.set(id, args);
          return { id, type: 'function', function: { name: 'read_file', arguments: args } };
        });
        // Asked to read back what was left out: the handle of the latest placeholder.
        const handles = body.messages.flatMap((m) => (m.role === 'tool' ? [...String(m.content).matchAll(LEFT_OUT)].map((h) => h[1]) : []));
        if (last.role === 'user' && String(userText).includes('read back') && handles.length) {
          calls.push({ id: `call_${n}_back`, type: 'function', function: { name: 'read_result', arguments: JSON.stringify({ sha256: handles.at(-1) }) } });
        }
        const text = last.role === 'tool' ? `I read ${String(last.content).length} characters; the rounding happens before the discount.` : `Noted (${n}).`;
        const message = calls.length ? { role: 'assistant' as const, content: null, refusal: null, tool_calls: calls } : { role: 'assistant' as const, content: text, refusal: null };
        return { id: `chatcmpl-${n}`, object: 'chat.completion', created: 0, model: body.model, choices: [{ index: 0, finish_reason: calls.length ? 'tool_calls' : 'stop', logprobs: null, message }] };
      },
    },
  };
}

const summarizer = (summaries: string[]): Provider => async (request) => {
  summaries.push(request.messages.map((m) => m.content).join('\n'));
  return { text: 'The user and the agent fixed the checkout totals; tests pass.', usage: { inputTokens: 3000, outputTokens: 14 } };
};

async function setup(sessionId = 'vscode-shop') {
  const { Kernel, SqliteStore } = await load();
  const store = await SqliteStore.open(join(mkdtempSync(join(tmpdir(), 'ctxk-vscode-')), 'ctxkernel.sqlite'));
  const kernel = new Kernel(store, { clock });
  const service = new ContextService(kernel, {
    sessionId,
    workspace: 'shop',
    model: { profile: 'test-4k', window: 4096, reservedOutput: 512, safetyMargin: 128 },
    instructions: 'You are a coding agent in the shop workspace.',
    tools: { read_file: readFile },
  });
  const editor = new FakeEditor();
  const summaries: string[] = [];
  const chat = new ScriptedChat(kernel);
  const disposables = registerCommands(editor, service, { chat, summarize: summarizer(summaries) });
  return { service, editor, store, summaries, disposables, chat };
}

test('asking runs the parallel calls the model makes and sends it the bodies the kernel renders, arguments as written', async () => {
  const { editor, store, chat, service } = await setup();
  const answer = await editor.run<Answer>('ctxkernel.ask', 'The total is wrong with a coupon: read src/cart.ts and src/coupon.ts.');
  assert.equal(answer.finished, true);
  assert.match(editor.shown.at(-1)!, /rounding happens before the discount/);
  assert.equal(answer.requests.length, 2, 'one call that asks for tools, one that answers');
  assert.deepEqual(chat.violations, []);
  const body = chat.bodies[1];
  assert.equal(body.model, 'gpt-4.1');
  assert.deepEqual(body.tools, [readFile.definition, service.readResult.definition]);
  assert.deepEqual(body.messages.map((m) => m.role), ['developer', 'user', 'assistant', 'tool', 'tool']);
  assert.equal(body.messages[0].content, 'You are a coding agent in the shop workspace.');
  const calls = (body.messages[2] as { tool_calls: ChatCompletionMessageToolCall[] }).tool_calls;
  assert.equal(calls.length, 2);
  for (const call of calls) assert.equal(call.type === 'function' && call.function.arguments, chat.written.get(call.id), 'arguments byte for byte');
  assert.deepEqual(body.messages.slice(3).map((m) => [m.role === 'tool' && m.tool_call_id, m.content]), [
    [calls[0].id, FILES['src/cart.ts']],
    [calls[1].id, FILES['src/coupon.ts']],
  ]);
  store.close();
});

test('a long conversation with tool rounds stays valid under the window, compacted by the summarizer', async () => {
  const { service, store, chat, summaries } = await setup();
  const summarize = summarizer(summaries);
  for (let turn = 0; turn < 40; turn++) {
    const question = turn % 4 === 0 ? `Turn ${turn}: read src/coupon.ts and src/cart.ts again.` : `Turn ${turn}: keep the rounding rule in mind. ${'The coupon applies before tax, and totals round half up. '.repeat(6)}`;
    const answer = await service.ask(question, chat, summarize);
    assert.equal(answer.finished, true);
    const last = answer.requests.at(-1)!;
    assert.ok(last.budget.used <= last.budget.input);
    const user = [...last.body.messages].reverse().find((m) => m.role === 'user');
    assert.equal(user?.content, question, 'the question is in every body that answers it');
  }
  assert.deepEqual(chat.violations, [], 'every body the model was sent is valid');
  assert.ok(summaries.length > 0, 'the conversation outgrew 4k and was compacted');
  store.close();
});

test('a window opened again continues the session from the store', async () => {
  const { service, store, chat } = await setup('vscode-restart');
  await service.ask('Remember that the coupon rounds down. What is 2 + 2?', chat);
  const { Kernel } = await load();
  const reopened = new ContextService(new Kernel(store, { clock }), { ...service.options });
  const answer = await reopened.ask('And what did I say about coupons?', chat);
  const texts = answer.requests[0].body.messages.map((m) => m.content);
  assert.ok(texts.includes('Remember that the coupon rounds down. What is 2 + 2?'));
  assert.ok(texts.includes('Noted (1).'), 'the earlier answer is in the session');
  assert.deepEqual(chat.violations, []);
  store.close();
});

test('a tool that fails or does not exist answers with an error the model reads, and the body stays valid', async () => {
  const { service, store, chat } = await setup('vscode-tools');
  const failing = new ContextService(service.kernel, { ...service.options, tools: { read_file: { ...readFile, run: () => { throw new Error('disk on fire'); } } } });
  await failing.ask('read src/cart.ts please', chat);
  const bare = new ContextService(service.kernel, { ...service.options, tools: {} });
  const answer = await bare.ask('now read src/coupon.ts', chat);
  const results = chat.bodies.flatMap((b) => b.messages.filter((m) => m.role === 'tool').map((m) => m.content));
  assert.ok(results.includes('error: disk on fire'));
  assert.ok(results.includes('error: no tool named read_file'));
  assert.equal(answer.finished, true);
  assert.deepEqual(chat.violations, []);
  store.close();
});

test('a result left out to fit the window is read back by the handle its placeholder names, and only such a result', async () => {
  const { service, store, chat } = await setup('vscode-read-back');
  await service.ask('Read src/catalog.ts, src/cart.ts and src/coupon.ts.', chat);
  await service.ask(`Now a long aside. ${'Totals round half up after the coupon applies. '.repeat(120)}`, chat);
  const shown = chat.bodies.at(-1)!.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
  const placeholder = shown.find((c) => c.startsWith('[tool result left out'));
  assert.ok(placeholder, `the catalog no longer fits whole: ${shown}`);
  const answer = await service.ask('Please read back what was left out.', chat);
  assert.equal(answer.finished, true);
  const sent = answer.requests.at(-1)!.body.messages;
  const back = sent.at(-1)!;
  assert.equal(back.role === 'tool' && back.tool_call_id, `call_${chat.bodies.length - 1}_back`);
  assert.equal(back.content, FILES['src/catalog.ts'], 'the whole result, as the tool returned it');
  assert.deepEqual(chat.violations, []);
  // Only a handle the model was shown is served; any other digest is an error it reads.
  const other = service.kernel.readEvents({ schemaVersion: 1, sessionId: 'vscode-read-back', limit: 1 }).events[0].item!;
  for (const handle of [other.digest!, `sha256:${'0'.repeat(64)}`, 'sha256:XYZ', '']) {
    assert.throws(() => service.readResult.run({ sha256: handle }), /no result was left out/);
  }
  store.close();
});

test('asking without a chat model is an error message, not an exception', async () => {
  const { service, store } = await setup();
  const editor = new FakeEditor();
  registerCommands(editor, service);
  assert.equal(await editor.run('ctxkernel.ask', 'hello?'), undefined);
  assert.match(editor.errors.at(-1)!, /no chat model/);
  store.close();
});

test('the five commands are registered and disposable', async () => {
  const { editor, disposables, store } = await setup();
  assert.deepEqual([...editor.handlers.keys()].sort(), ['ctxkernel.ask', 'ctxkernel.compact', 'ctxkernel.forget', 'ctxkernel.planContext', 'ctxkernel.recall']);
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
  const stranger = new ContextService(new Kernel(store, { clock }), { ...service.options, sessionId: 'vscode-other' });
  stranger.record('user', 'What does staging rotate?');
  assert.throws(() => stranger.kernel.deleteMemory({
    schemaVersion: 1, now: clock(), requestId: 'x', subject: 'vscode-other', scope: 'project', scopeId: 'shop',
    selector: { memoryIds: [memoryId] }, authority: { kind: 'user-explicit', sessionId: 'vscode-other' }, fence: 1,
  }), { code: 'scope-denied' });
  // Through a command, a kernel error becomes an error message, not an exception:
  // another workspace's window cannot forget this workspace's memory.
  const otherEditor = new FakeEditor();
  registerCommands(otherEditor, new ContextService(new Kernel(store, { clock }), { ...service.options, workspace: 'blog' }));
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

test('calls the step limit stops are answered as not run, and the next question starts clean', async () => {
  const { service, store, chat } = await setup('vscode-limit');
  const stubborn = new ContextService(service.kernel, { ...service.options, maxSteps: 1 });
  const answer = await stubborn.ask('read src/cart.ts and src/coupon.ts', chat);
  assert.equal(answer.finished, false);
  assert.deepEqual(stubborn.plan().pendingToolCalls, [], 'no call is left unsettled');
  const next = await stubborn.ask('What now?', chat);
  const results = next.requests[0].body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
  assert.deepEqual(results, ['not run: the step limit was reached', 'not run: the step limit was reached']);
  assert.deepEqual(chat.violations, []);
  store.close();
});

test('an answer cut short with nothing said is not kept, and another window writing meanwhile is followed', async () => {
  const { service, store, chat } = await setup('vscode-cut');
  const silent: ChatModel = { chat: { completions: { create: async () => ({ id: 'x', object: 'chat.completion', created: 0, model: 'm',
    choices: [{ index: 0, finish_reason: 'content_filter', logprobs: null, message: { role: 'assistant', content: null, refusal: null } }] }) } } };
  assert.deepEqual((await service.ask('Say something risky.', silent)).finished, false);
  // Another window appends to the same session; this one's head is behind.
  const other = new ContextService(service.kernel, { ...service.options });
  other.record('user', 'From the other window.');
  const answer = await service.ask('Are you there?', chat);
  assert.equal(answer.finished, true);
  const texts = answer.requests[0].body.messages.map((m) => m.content);
  assert.ok(texts.includes('From the other window.') && texts.includes('Are you there?'));
  assert.deepEqual(chat.violations, []);
  store.close();
});
