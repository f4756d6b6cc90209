// Compiled by `npm run typecheck`: the declarations describe the real API.
import { Kernel, KernelError, MemoryStore, type ContextPlan, type PlanContextRequest } from '../src/index.js';

const kernel = new Kernel(new MemoryStore());
const request: PlanContextRequest = {
  schemaVersion: 1,
  now: '2026-06-01T12:00:00Z',
  sink: 'model:anthropic',
  model: { profile: 'claude', window: 200000, reservedOutput: 8000, safetyMargin: 2000 },
  items: [],
};
const plan: ContextPlan = kernel.planContext(request);
const kept: number = plan.context.length;
try {
  kernel.getContent({ schemaVersion: 1, objectId: 'x', sink: 'model:anthropic' });
} catch (e) {
  if (e instanceof KernelError && e.code === 'content-unavailable') console.log(kept);
}
const recalled = kernel.recallMemory({
  schemaVersion: 1,
  now: '2026-06-01T12:00:00Z',
  query: 'package manager',
  scopes: [{ scope: 'project', scopeId: 'web' }],
  sink: 'model:anthropic',
});
const firstMemory: string | undefined = recalled.memories[0]?.memoryId;
const revision: number = recalled.memoryRevision;
console.log(firstMemory, revision);
