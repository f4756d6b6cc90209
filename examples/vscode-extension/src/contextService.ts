// What the extension does with the kernel, free of the editor API so it can
// be tested under plain Node. Every decision (what fits, what is kept, who
// may remember or forget) is the kernel's; this class only shapes requests.
import type {
  CompactContextResponse,
  ContextItem,
  ContextPlan,
  DeletionReceipt,
  Kernel,
  MemoryReceipt,
  Provider,
  RecallMemoryResponse,
} from 'ctxkernel' with { 'resolution-mode': 'import' };

export interface ModelProfile {
  profile: string;
  window: number;
  reservedOutput: number;
  safetyMargin: number;
}

export interface ServiceOptions {
  /** The agent session this editor window drives. */
  sessionId: string;
  /** The workspace folder's name: the project scope of its memories. */
  workspace: string;
  model: ModelProfile;
  /** Where planned context goes; the kernel admits only items allowed to reach it. */
  sink?: string;
  clock?: () => string;
}

type Role = 'user' | 'assistant';

export class ContextService {
  private head: number;
  private readonly sink: string;
  private readonly clock: () => string;

  constructor(
    readonly kernel: Kernel,
    readonly options: ServiceOptions,
  ) {
    this.sink = options.sink ?? 'model:chat';
    this.clock = options.clock ?? (() => new Date().toISOString());
    this.head = ContextService.headOf(kernel, options.sessionId);
  }

  /** Where a session's log ends; 0 for a session not started yet. */
  static headOf(kernel: Kernel, sessionId: string): number {
    try {
      return kernel.readEvents({ schemaVersion: 1, sessionId, limit: 1 }).head.seq;
    } catch (error) {
      if ((error as { code?: string }).code === 'not-found') return 0;
      throw error;
    }
  }

  /** Appends one chat message to the session log. */
  record(role: Role, content: string): number {
    const seq = this.head + 1;
    const item: ContextItem = {
      schemaVersion: 1,
      itemId: `${this.options.sessionId}-${String(seq).padStart(6, '0')}`,
      kind: 'message',
      role,
      content,
      createdAt: this.clock(),
      trust: role === 'assistant' ? 'verified' : 'user',
      provenance: { origin: role === 'assistant' ? 'model' : 'user' },
      sensitivity: 'internal',
      allowedSinks: ['model:*', 'log'],
      scope: 'session',
      priority: 0,
      pinned: false,
      sourceRef: { kind: 'session', id: this.options.sessionId, seq },
    };
    const response = this.kernel.appendEvents({
      schemaVersion: 1,
      sessionId: this.options.sessionId,
      expectedHead: { seq: this.head },
      items: [item],
      now: this.clock(),
    });
    this.head = response.head.seq;
    return this.head;
  }

  /** The context of the next model call under the model's window. */
  plan(): ContextPlan {
    return this.kernel.planContext({
      schemaVersion: 1,
      sessionId: this.options.sessionId,
      model: this.options.model,
      sink: this.sink,
      now: this.clock(),
    });
  }

  /** Compacts the session; with a provider the summary is the model's, else the kernel's own. */
  async compact(provider?: Provider): Promise<CompactContextResponse> {
    const response = await this.kernel.compact(
      {
        schemaVersion: 1,
        sessionId: this.options.sessionId,
        model: this.options.model,
        sink: this.sink,
        strategy: provider ? 'provider' : 'local',
        ...(provider ? { provider: { model: 'summarizer', maxTokens: 800 } } : {}),
        now: this.clock(),
      },
      provider,
      { clock: this.clock },
    );
    this.head = response.head.seq;
    return response;
  }

  /**
   * Remembers a fact the user typed for this workspace. The user's words go
   * into the session first: user-explicit authority holds only for a claim
   * that appears in the user's latest message.
   */
  remember(fact: string, key?: string): MemoryReceipt {
    this.record('user', `Remember for this project: ${fact}`);
    const now = this.clock();
    const proposed = this.kernel.proposeMemory({
      schemaVersion: 1,
      now,
      candidates: [
        {
          category: 'fact',
          content: fact,
          ...(key ? { key } : {}),
          scope: 'project',
          scopeId: this.options.workspace,
          confidence: 0.9,
          importance: 0.6,
          provenance: { origin: 'user' },
          evidenceRefs: [{ kind: 'session', id: this.options.sessionId, seq: this.head }],
        },
      ],
    });
    return this.kernel.decideMemory({
      schemaVersion: 1,
      now,
      memoryId: proposed.receipts[0].memory.memoryId,
      action: 'activate',
      scope: 'project',
      scopeId: this.options.workspace,
      authority: { kind: 'user-explicit', sessionId: this.options.sessionId },
    });
  }

  /** What this workspace's memory knows about `query`. */
  recall(query: string, k = 5): RecallMemoryResponse {
    return this.kernel.recallMemory({
      schemaVersion: 1,
      now: this.clock(),
      query,
      k,
      scopes: [{ scope: 'project', scopeId: this.options.workspace }],
      sink: this.sink,
    });
  }

  /** Forgets one memory at the user's request; the receipt lists every part removed. */
  forget(memoryId: string): DeletionReceipt {
    this.record('user', `Forget memory ${memoryId}`);
    return this.kernel.deleteMemory({
      schemaVersion: 1,
      now: this.clock(),
      requestId: `forget-${memoryId}`,
      subject: this.options.sessionId,
      scope: 'project',
      scopeId: this.options.workspace,
      selector: { memoryIds: [memoryId] },
      authority: { kind: 'user-explicit', sessionId: this.options.sessionId },
      // The memory revision only grows: a replica replaying older writes cannot revive the memory.
      fence: this.kernel.info().store.memoryRevision,
    });
  }
}
