import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Kernel, KernelError, MemoryStore } from '../src/index.js';
import { memberText } from '../src/json.js';

// One session imported in OpenAI Chat form, rendered as Anthropic Messages and validated.
const importRequest = {
  schemaVersion: 1, sessionId: 't1', format: 'openai-chat', now: '2026-06-01T09:00:00Z', expectedHead: { seq: 0 },
  allowedSinks: ['model:*'], sensitivity: 'internal',
  transcript: {
    messages: [
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'Is main green? ☕' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'ci_status', arguments: '{"branch": "main"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'green' },
    ],
    tools: [{ type: 'function', function: { name: 'ci_status', parameters: { type: 'object' } } }],
  },
};
const renderRequest = {
  schemaVersion: 1, format: 'anthropic-messages',
  plan: { schemaVersion: 1, sessionId: 't1', now: '2026-06-01T09:05:00Z', sink: 'model:test', model: { profile: 'm-32k', window: 32768, reservedOutput: 4096, safetyMargin: 1024 } },
};

test('a transcript imports once, renders in another provider format, and the body validates', () => {
  const kernel = new Kernel(new MemoryStore());
  const first = kernel.importMessages(importRequest);
  assert.equal(first.appended.length, 5, 'the tool definition, the system message and three turns');
  const again = kernel.importMessages(importRequest);
  assert.deepEqual([again.appended.length, again.skipped, again.head], [0, 5, first.head]);
  const rendered = kernel.renderContext(renderRequest);
  assert.equal(rendered.planDigest, kernel.planContext(renderRequest.plan).digest);
  assert.equal(rendered.body.system, 'Be terse.');
  assert.deepEqual(rendered.body.messages.map((m) => m.role), ['user', 'assistant', 'user']);
  assert.deepEqual(rendered.body.messages[1].content, [{ type: 'tool_use', id: 'call_1', name: 'ci_status', input: { branch: 'main' } }]);
  assert.deepEqual(rendered.body.tools, [{ name: 'ci_status', input_schema: { type: 'object' } }]);
  const verdict = kernel.validateRequest({ schemaVersion: 1, format: 'anthropic-messages', body: rendered.body });
  assert.deepEqual([verdict.valid, verdict.violations], [true, []]);
  // renderContext hands the body's own text over, digits and escapes as the kernel wrote them.
  for (const format of ['anthropic-messages', 'openai-chat', 'openai-responses']) {
    const request = { ...renderRequest, format };
    const whole = kernel.call('render-context', request);
    const typed = kernel.renderContext(request);
    assert.ok(whole.includes(`,"body":${typed.bodyJson},"budget":`), format);
    assert.deepEqual(JSON.parse(typed.bodyJson), typed.body);
  }
});

test('a member is cut from the text whatever its strings hold', () => {
  const a = JSON.stringify('}"{\\');
  const body = JSON.stringify({ x: [1, { y: ']}\\"},' }, { z: true }], w: null });
  const text = `{"a":${a},"body":${body},"c":-1.5e3}`;
  assert.deepEqual(JSON.parse(text).body.x[1], { y: ']}\\"},' }, 'the fixture is JSON');
  assert.equal(memberText(text, 'body'), body);
  assert.equal(memberText(text, 'c'), '-1.5e3');
  assert.equal(memberText(text, 'a'), a);
  assert.throws(() => memberText(text, 'nope'));
  assert.throws(() => memberText('{"a":"unterminated', 'b'), 'a broken text ends the search, never loops');
});

test('a broken body is a list of violations; a broken transcript is refused and appends nothing', () => {
  const kernel = new Kernel(new MemoryStore());
  const body = { model: 'm', max_tokens: 10, messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'x', name: 'f', input: {} }] }] };
  const verdict = kernel.validateRequest({ schemaVersion: 1, format: 'anthropic-messages', body });
  assert.equal(verdict.valid, false);
  assert.ok(verdict.violations.some((v) => v.rule === 'call-without-result' && v.path.startsWith('messages[0]')), JSON.stringify(verdict.violations));
  const orphan = structuredClone(importRequest);
  orphan.transcript.messages[3].tool_call_id = 'call_nobody';
  assert.throws(() => kernel.importMessages(orphan), (e) => e instanceof KernelError && e.code === 'invalid-request' && /call_nobody/.test(e.message));
  assert.throws(() => kernel.readEvents({ schemaVersion: 1, sessionId: 't1' }), (e) => e instanceof KernelError && e.code === 'not-found');
});
