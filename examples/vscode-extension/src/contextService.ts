// What the extension does with the kernel, free of the editor API so it can
// be tested under plain Node. Every decision (what fits, what is kept, who
// may remember or forget, what a request to the model holds) is the
// kernel's; this class only shapes requests.
//
// The conversation is spoken in OpenAI Chat Completions messages. The
// session lives in the kernel's store, so the service holds only the
// messages not handed over yet and imports them as new turns
// (`history: 'new'`); each model call sends the body the kernel renders.
import type {
  CompactContextResponse,
  ContextPlan,
  DeletionReceipt,
  Kernel,
  MemoryReceipt,
  PlanRequest,
  Provider,
  RecallMemoryResponse,
  RenderContextResponse,
} from 'ctxkernel' with { 'resolution-mode': 'import' };
import type {
  ChatCompletion,
  ChatCompletionAssistantMessageParam,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions';

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
  /** The system prompt, sent as a `developer` message. */
  instructions?: string;
  /** The provider's model name in each request body. */
  chatModel?: string;
  /** The tools the model may call, by name. */
  tools?: Record<string, Tool>;
  /** Model calls one question may take before the agent stops asking (tool rounds included). */
  maxSteps?: number;
}

/** The part of the OpenAI client the agent calls; `new OpenAI()` is one. */
export interface ChatModel {
  chat: { completions: { create(body: ChatCompletionCreateParamsNonStreaming): PromiseLike<ChatCompletion> } };
}

/** A tool the model may call: its definition as OpenAI takes it, and what runs it. */
export interface Tool {
  definition: ChatCompletionFunctionTool;
  run(args: unknown): Promise<string> | string;
}

/** A rendered request whose body is typed as the OpenAI client takes it. */
export type ChatRequest = Omit<RenderContextResponse, 'body'> & { body: ChatCompletionCreateParamsNonStreaming };

export interface Answer {
  /** The model's final text (or its refusal). */
  text: string;
  /** Every request body sent for this question, in order. */
  requests: ChatRequest[];
  /** False when the model still wanted tools after `maxSteps` calls. */
  finished: boolean;
}

type Role = 'user' | 'assistant';

/** The answer as a message to send back: the fields a request takes, arguments as the model wrote them. */
function asParam(message: ChatCompletionMessage): ChatCompletionAssistantMessageParam {
  return {
    role: 'assistant',
    content: message.content,
    ...(message.refusal ? { refusal: message.refusal } : {}),
    ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
  };
}

/** The pattern a shrunk result's placeholder names its content by. */
const HANDLE = /^sha256:[0-9a-f]{64}$/;

export class ContextService {
  private head: number;
  private readonly sink: string;
  /** The results the model was shown left out, by the handle their placeholder names. */
  private readonly leftOut = new Set<string>();

  /**
   * Offered with the options' tools (one of theirs by the same name wins):
   * reads back a result the window left out, by the sha256 its placeholder
   * names.
   */
  readonly readResult: Tool = {
    definition: {
      type: 'function',
      function: {
        name: 'read_result',
        description: 'Reads back a tool result that was left out to fit the context window, by the sha256 its placeholder names.',
        parameters: { type: 'object', properties: { sha256: { type: 'string' } }, required: ['sha256'] },
      },
    },
    run: (args) => this.leftOutResult(String((args as { sha256?: unknown } | null)?.sha256 ?? '')),
  };

  constructor(
    readonly kernel: Kernel,
    readonly options: ServiceOptions,
  ) {
    this.sink = options.sink ?? 'model:chat';
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

  /** Appends one chat message to the session; returns the session's head. */
  record(role: Role, content: string): number {
    this.hand([{ role, content }]);
    return this.head;
  }

  /**
   * Hands new messages to the kernel: the instructions and tool definitions
   * go with them and are stored again only when they changed. Tool results
   * may answer calls handed over earlier. When another window wrote to the
   * session meanwhile, the messages follow what it wrote.
   */
  hand(messages: ChatCompletionMessageParam[]): void {
    try {
      this.importTurns(messages);
    } catch (error) {
      if ((error as { code?: string }).code !== 'stale') throw error;
      this.head = ContextService.headOf(this.kernel, this.options.sessionId);
      this.importTurns(messages);
    }
  }

  private importTurns(messages: ChatCompletionMessageParam[]): void {
    const instructions: ChatCompletionMessageParam[] = this.options.instructions ? [{ role: 'developer', content: this.options.instructions }] : [];
    const tools = Object.values(this.tools()).map((t) => t.definition);
    const response = this.kernel.importMessages({
      schemaVersion: 1,
      sessionId: this.options.sessionId,
      expectedHead: { seq: this.head },
      now: this.kernel.clock(),
      format: 'openai-chat',
      history: 'new',
      sensitivity: 'internal',
      allowedSinks: ['model:*', 'log'],
      transcript: { messages: [...instructions, ...messages], ...(tools.length ? { tools } : {}) },
    });
    this.head = response.head.seq;
  }

  private tools(): Record<string, Tool> {
    return { ...this.options.tools, read_result: this.options.tools?.read_result ?? this.readResult };
  }

  /**
   * A result the window left out, served back by the kernel. Only a
   * placeholder the model was shown is answered: the plan admitted that
   * result for this sink, and nothing else of the session.
   */
  private leftOutResult(sha256: string): string {
    const handle = sha256.startsWith('sha256:') ? sha256 : `sha256:${sha256}`;
    if (!HANDLE.test(handle) || !this.leftOut.has(handle)) throw new Error(`no result was left out with content ${handle}`);
    const [event] = this.kernel.readEvents({ schemaVersion: 1, sessionId: this.options.sessionId, contentDigest: handle, limit: 1 }).events;
    const item = event?.item;
    if (typeof item?.content === 'string') return item.content;
    if (!item?.contentRef) throw new Error(`the session no longer holds content ${handle}`);
    // An externalized result: its bytes, for this sink.
    return new TextDecoder().decode(this.kernel.getContent({ schemaVersion: 1, objectId: item.contentRef.objectId, sink: this.sink }));
  }

  private planRequest(): PlanRequest {
    return { schemaVersion: 1, sessionId: this.options.sessionId, model: this.options.model, sink: this.sink, now: this.kernel.clock() };
  }

  /** The context of the next model call under the model's window. */
  plan(): ContextPlan {
    return this.kernel.planContext(this.planRequest());
  }

  /** The next model call's request body, rendered by the kernel from the same plan. */
  request(): ChatRequest {
    const rendered = this.kernel.renderContext({
      schemaVersion: 1,
      format: 'openai-chat',
      plan: this.planRequest(),
      policy: { model: this.options.chatModel ?? 'gpt-4.1', instructions: 'developer' },
    });
    for (const note of rendered.notes) if (note.shrunk) this.leftOut.add(note.shrunk.digest);
    return rendered as unknown as ChatRequest;
  }

  /**
   * One question to the model: model calls until it stops asking for tools,
   * each sent the body the kernel renders. With a summarizer, the session is
   * compacted first whenever its conversation no longer fits the window.
   *
   * Each answer is the session's before any tool it asks for runs, so a
   * crash leaves its calls pending rather than forgotten; calls the step
   * limit stops are answered as not run, so none stays unsettled.
   */
  async ask(question: string, model: ChatModel, summarize?: Provider): Promise<Answer> {
    let turn: ChatCompletionMessageParam[] = [{ role: 'user', content: question }];
    const requests: ChatRequest[] = [];
    const maxSteps = this.options.maxSteps ?? 8;
    for (;;) {
      this.hand(turn);
      turn = [];
      if (summarize && this.plan().dropped.some((d) => d.reason === 'budget-exhausted' || d.reason === 'partition-ceiling')) {
        await this.compact(summarize);
      }
      const request = this.request();
      requests.push(request);
      const message = (await model.chat.completions.create(request.body)).choices[0]?.message;
      const calls = message?.tool_calls ?? [];
      // Cut short (content filter, length) with nothing said: nothing to keep.
      if (!message || (message.content === null && !message.refusal && !calls.length)) {
        return { text: '', requests, finished: false };
      }
      this.hand([asParam(message)]);
      if (!calls.length) return { text: message.content ?? message.refusal ?? '', requests, finished: true };
      if (requests.length >= maxSteps) {
        this.hand(calls.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: 'not run: the step limit was reached' })));
        return { text: message.content ?? '', requests, finished: false };
      }
      for (const call of calls) turn.push({ role: 'tool', tool_call_id: call.id, content: await this.run(call) });
    }
  }

  /** A call's result as the model reads it; a failing or unknown tool is an error it can read too. */
  private async run(call: ChatCompletionMessageToolCall): Promise<string> {
    const tool = call.type === 'function' ? this.tools()[call.function.name] : undefined;
    if (!tool || call.type !== 'function') return `error: no tool named ${call.type === 'function' ? call.function.name : call.custom.name}`;
    try {
      return await tool.run(JSON.parse(call.function.arguments));
    } catch (error) {
      return `error: ${error instanceof Error ? error.message : String(error)}`;
    }
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
        now: this.kernel.clock(),
      },
      provider,
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
    const now = this.kernel.clock();
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
      now: this.kernel.clock(),
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
      now: this.kernel.clock(),
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
