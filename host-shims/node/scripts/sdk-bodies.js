// Renders sessions through the Node host, in every provider format, into
// build/sdk-check/bodies.ts: each body a `const` typed by the official SDK's
// request params (`@anthropic-ai/sdk`, `openai`), which `npm run typecheck`
// then checks with tsc (run here, after writing) — excess properties,
// literal types and all. Every body is also checked by the kernel's own
// `validateRequest`. Generated files stay under build/ (gitignored).
import { spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Kernel, KernelError, MemoryStore } from '../src/index.js';

const NOW = '2026-06-01T12:00:00Z';
const OUT = new URL('../build/sdk-check/', import.meta.url);
// A 1×1 PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const SDK_TYPES = {
  'anthropic-messages': 'Anthropic.MessageCreateParamsNonStreaming',
  'openai-chat': 'OpenAI.Chat.ChatCompletionCreateParamsNonStreaming',
  'openai-responses': 'OpenAI.Responses.ResponseCreateParamsNonStreaming',
};
const FORMATS = Object.keys(SDK_TYPES);
const WINDOWS = [300, 700, 1500, 1_000_000];
const POLICIES = [{}, { unsettledCalls: 'hold', leadingAssistant: 'drop' }];
const schema = { type: 'object', properties: { q: { type: 'string' } } };

const transcripts = {
  'openai-chat': {
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: [{ type: 'text', text: 'Find both files, café ☕.' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}`, detail: 'low' } }] },
      { role: 'assistant', content: null, tool_calls: [
        { id: 'call_ü1', type: 'function', function: { name: 'search', arguments: '{"q": "a",  "n":1}' } },
        { id: 'call_2', type: 'function', function: { name: 'search', arguments: '{}' } },
        { id: 'call_p', type: 'custom', custom: { name: 'apply_patch', input: '*** Begin Patch\n+ print("☕")\n*** End Patch' } },
      ] },
      { role: 'tool', tool_call_id: 'call_p', content: 'patched' },
      { role: 'tool', tool_call_id: 'call_2', content: '' },
      { role: 'tool', tool_call_id: 'call_ü1', content: 'found a' },
      { role: 'developer', content: 'Answer in one line.' },
      { role: 'assistant', content: 'Both found.' },
      { role: 'user', content: 'and now?' },
    ],
    tools: [
      { type: 'function', function: { name: 'search', description: 'Search files', parameters: schema } },
      { type: 'custom', custom: { name: 'apply_patch', description: 'Applies a patch', format: { type: 'grammar', grammar: { definition: 'start: /(.|\\n)+/', syntax: 'lark' } } } },
    ],
  },
  'anthropic-messages': {
    system: [{ type: 'text', text: 'You are terse.' }, { type: 'text', text: 'Cite files.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'What is in this image?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }] },
      { role: 'assistant', content: [
        { type: 'thinking', thinking: 'Two searches.', signature: 'EqQBCkYIBxgCKkBzaWduYXR1cmU=' },
        { type: 'text', text: 'Searching.' },
        { type: 'tool_use', id: 'toolu_01', name: 'search', input: { q: 'a' } },
        { type: 'tool_use', id: 'toolu_02', name: 'search', input: { q: 'b' } },
      ] },
      { role: 'user', content: [
        { type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: 'found a' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }] },
        { type: 'tool_result', tool_use_id: 'toolu_02', content: 'disk error', is_error: true },
      ] },
      { role: 'assistant', content: 'One failed.' },
      { role: 'user', content: 'retry it' },
    ],
    tools: [
      { name: 'search', description: 'Search files', input_schema: schema },
      { type: 'bash_20250124', name: 'bash' },
      { type: 'web_search_20250305', name: 'web_search', max_uses: 3, cache_control: { type: 'ephemeral' } },
    ],
  },
  'openai-responses': {
    instructions: 'You are terse.',
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'Find both files.' }, { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' }] },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Two searches.' }], encrypted_content: 'gAAAAABencrypted==' },
      { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'search', arguments: '{"q":"a"}' },
      { type: 'function_call', id: 'fc_2', call_id: 'call_ü2', name: 'search', arguments: '{"q":"b"}' },
      { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch\n+ print("☕")\n*** End Patch' },
      { type: 'custom_tool_call_output', call_id: 'call_p', output: 'patched' },
      { type: 'function_call_output', call_id: 'call_ü2', output: '' },
      { type: 'function_call_output', call_id: 'call_1', output: 'found a' },
      { role: 'developer', content: 'Answer in one line.' },
      { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Both found.', annotations: [] }] },
      { role: 'user', content: 'thanks' },
    ],
    tools: [
      { type: 'function', name: 'search', description: 'Search files', parameters: schema, strict: false },
      { type: 'custom', name: 'apply_patch', format: { type: 'text' } },
      { type: 'web_search' },
      { type: 'mcp', server_label: 'deepwiki', server_url: 'https://mcp.deepwiki.com/mcp', require_approval: 'never' },
    ],
  },
};

/** Raw items for what no transcript says: pending and unknown outcomes, an orphan, reasoning and thinking parts. */
function rawItems(sid) {
  let seq = 0;
  const item = (kind, content, extra = {}) => ({
    schemaVersion: 1, itemId: `${sid}-${++seq}`, kind, scope: 'session', sourceRef: { kind: 'session', id: sid, seq },
    provenance: { origin: 'user' }, trust: 'user', sensitivity: 'internal', allowedSinks: ['model:*'], priority: 0, pinned: false,
    createdAt: NOW, content, ...extra,
  });
  const model = { role: 'assistant', trust: 'verified', provenance: { origin: 'model' } };
  return [
    item('tool-schema', null, { trust: 'host', provenance: { origin: 'host' }, pinned: true, tool: { name: 'search', inputSchema: schema } }),
    item('message', 'old question ' + 'long words '.repeat(120), { role: 'user' }),
    item('message', null, { ...model, parts: [{ kind: 'thinking', text: 'hmm', signature: 'c2ln' }, { kind: 'text', text: 'thinking aloud' }] }),
    item('message', 'policy from an untrusted page', { role: 'system', trust: 'untrusted', provenance: { origin: 'host' } }),
    item('tool-evidence', 'orphan result', { trust: 'verified', provenance: { origin: 'tool' }, toolResult: { callId: 'ghost', outcome: 'success' } }),
    item('message', 'three calls', { ...model, toolCalls: ['p1', 'p2', 'p3'].map((callId) => ({ callId, name: 'search', arguments: '{}' })) }),
    item('tool-evidence', 'ok', { trust: 'verified', provenance: { origin: 'tool' }, toolResult: { callId: 'p1', outcome: 'error' } }),
    item('tool-evidence', 'running', { trust: 'verified', provenance: { origin: 'tool' }, toolResult: { callId: 'p2', outcome: 'pending' } }),
    item('tool-evidence', '?', { trust: 'verified', provenance: { origin: 'tool' }, toolResult: { callId: 'p3', outcome: 'unknown' } }),
    item('message', null, { ...model, parts: [{ kind: 'reasoning', id: 'rs_x', summary: ['plan'], encryptedContent: 'gAAAAx' }, { kind: 'text', text: 'answer' }] }),
    item('message', 'status?', { role: 'user' }),
  ];
}

function sessions() {
  const out = [];
  for (const [format, transcript] of Object.entries(transcripts)) {
    for (const compact of [false, true]) {
      const kernel = new Kernel(new MemoryStore());
      const sessionId = `import-${format}${compact ? '-compacted' : ''}`;
      kernel.importMessages({ schemaVersion: 1, sessionId, expectedHead: { seq: 0 }, format, now: NOW, sensitivity: 'internal', allowedSinks: ['model:*'], transcript });
      if (compact) compactLocal(kernel, sessionId);
      out.push({ kernel, sessionId });
    }
  }
  for (const compact of [false, true]) {
    const kernel = new Kernel(new MemoryStore());
    const sessionId = `raw${compact ? '-compacted' : ''}`;
    kernel.appendEvents({ schemaVersion: 1, sessionId, expectedHead: { seq: 0 }, now: NOW, items: rawItems(sessionId) });
    if (compact) compactLocal(kernel, sessionId);
    out.push({ kernel, sessionId });
  }
  return out;
}

function compactLocal(kernel, sessionId) {
  kernel.compactContext({ schemaVersion: 1, sessionId, now: NOW, strategy: 'local', sink: 'model:test', force: true,
    model: { profile: 'test-model', window: 600, reservedOutput: 0, safetyMargin: 0 } });
}

const bodies = [];
const seen = new Set();
const failures = [];
for (const { kernel, sessionId } of sessions()) {
  for (const format of FORMATS) {
    for (const window of WINDOWS) {
      for (const policy of POLICIES) {
        const where = `${sessionId} → ${format} window=${window} policy=${JSON.stringify(policy)}`;
        let rendered;
        try {
          rendered = kernel.renderContext({ schemaVersion: 1, format, policy, plan: {
            schemaVersion: 1, now: NOW, sessionId, sink: 'model:test',
            model: { profile: 'test-model', window, reservedOutput: 256, safetyMargin: 0 },
          } });
        } catch (e) {
          // A small window may hold too little; the huge one must render.
          if (e instanceof KernelError && ['context-over-budget', 'invalid-request'].includes(e.code) && window < 1_000_000) continue;
          failures.push(`${where}: ${e.code ?? ''} ${e.message}`);
          continue;
        }
        const verdict = kernel.validateRequest({ schemaVersion: 1, format, body: rendered.body });
        if (!verdict.valid) failures.push(`${where}: validate-request: ${JSON.stringify(verdict.violations)}`);
        const text = JSON.stringify(rendered.body, null, 2);
        if (seen.has(format + text)) continue;
        seen.add(format + text);
        bodies.push({ where, format, text });
      }
    }
  }
}

let ts = '// Generated by scripts/sdk-bodies.js: kernel-rendered request bodies, typed by the official SDKs.\n';
ts += "import type Anthropic from '@anthropic-ai/sdk';\nimport type OpenAI from 'openai';\n\n";
bodies.forEach(({ where, format, text }, i) => {
  ts += `// ${where}\nexport const body${i}: ${SDK_TYPES[format]} = ${text};\n\n`;
});
// The check is not vacuous: a body the SDK refuses must fail to compile.
ts += "// @ts-expect-error an unknown content block type\nexport const refused: Anthropic.MessageCreateParamsNonStreaming = { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'nope', text: 'x' }] }] };\n";
await mkdir(OUT, { recursive: true });
await writeFile(new URL('bodies.ts', OUT), ts);
await writeFile(new URL('tsconfig.json', OUT), JSON.stringify({
  compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022', 'dom'], skipLibCheck: false, types: [] },
  files: ['bodies.ts'],
}, null, 2) + '\n');
const counts = FORMATS.map((f) => `${f} ${bodies.filter((b) => b.format === f).length}`).join(', ');
console.log(`wrote build/sdk-check/bodies.ts: ${bodies.length} distinct bodies (${counts})`);
const tsc = spawnSync(process.execPath, [fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url)), '-p', fileURLToPath(new URL('tsconfig.json', OUT))], { stdio: 'inherit' });
if (tsc.status !== 0) failures.push(`tsc refused the bodies typed by the SDKs (exit ${tsc.status}): see above`);
if (failures.length) {
  console.error(`${failures.length} failures:\n` + failures.join('\n'));
  process.exit(1);
}
console.log('tsc: every body type-checks against the SDK request params');
