export const NOW = '2026-06-01T12:00:00Z';

export function item(seq, role, text, extra = {}) {
  return {
    schemaVersion: 1, itemId: `e${seq}`, kind: 'message', role, scope: 'session',
    sourceRef: { kind: 'session', id: 's1', seq }, provenance: { origin: 'user' },
    trust: 'user', sensitivity: 'internal', allowedSinks: ['model:*'], priority: 0, pinned: false,
    createdAt: NOW, content: text, ...extra,
  };
}

export function appendRequest(from, count, text = 'words of a long session ') {
  const items = [];
  for (let seq = from + 1; seq <= from + count; seq++) items.push(item(seq, seq % 2 ? 'user' : 'assistant', `${seq}: ${text.repeat(20)}`));
  return { schemaVersion: 1, sessionId: 's1', expectedHead: { seq: from }, items, now: NOW };
}

export const planRequest = {
  schemaVersion: 1, now: NOW, sink: 'model:test', sessionId: 's1',
  model: { profile: 'test', window: 16000, reservedOutput: 1000, safetyMargin: 500 },
};

export const compactRequest = (strategy) => ({
  schemaVersion: 1, sessionId: 's1', now: NOW, strategy, sink: 'model:test',
  model: { profile: 'test', window: 16000, reservedOutput: 1000, safetyMargin: 500 },
  provider: { model: 'summarizer', maxTokens: 400 },
});
