// The extension's commands, over the small part of the editor API they use,
// so the same code runs inside VS Code and under a test with a fake editor.
import type { ContextPlan, Provider } from 'ctxkernel' with { 'resolution-mode': 'import' };
import type { ChatModel, ContextService } from './contextService';

export interface Disposable {
  dispose(): unknown;
}

/** The slice of the `vscode` module the commands need; the real module satisfies it. */
export interface EditorApi {
  commands: { registerCommand(command: string, callback: (...args: any[]) => unknown): Disposable };
  window: {
    showInputBox(options: { prompt: string; placeHolder?: string }): PromiseLike<string | undefined>;
    showInformationMessage(message: string): PromiseLike<unknown>;
    showErrorMessage(message: string): PromiseLike<unknown>;
  };
}

/** One line an editor can show for a plan. */
export function describePlan(plan: ContextPlan): string {
  const dropped = new Map<string, number>();
  for (const d of plan.dropped) dropped.set(d.reason, (dropped.get(d.reason) ?? 0) + 1);
  const reasons = [...dropped].map(([reason, n]) => `${n} ${reason}`).join(', ');
  return (
    `${plan.context.length} items, ${plan.budget.used}/${plan.budget.input} tokens` +
    (plan.dropped.length ? `; dropped ${reasons}` : '') +
    (plan.pendingToolCalls.length ? `; ${plan.pendingToolCalls.length} tool calls pending` : '')
  );
}

/** The models the commands call: the agent's chat model, and the summarizer compaction asks. */
export interface Models {
  chat?: ChatModel;
  summarize?: Provider;
}

/** Registers the five commands; each returns its result (for other extensions and tests). */
export function registerCommands(editor: EditorApi, service: ContextService, models: Models = {}): Disposable[] {
  // A kernel error carries a code the user can act on; show it rather than a stack.
  const guarded =
    <T>(run: (...args: any[]) => Promise<T> | T) =>
    async (...args: any[]): Promise<T | undefined> => {
      try {
        return await run(...args);
      } catch (error) {
        const code = (error as { code?: string }).code;
        await editor.window.showErrorMessage(code ? `ctxkernel: ${code}: ${(error as Error).message}` : String(error));
        return undefined;
      }
    };

  return [
    editor.commands.registerCommand(
      'ctxkernel.ask',
      guarded(async (question?: string) => {
        if (!models.chat) throw new Error('no chat model is configured');
        question ??= await editor.window.showInputBox({ prompt: 'Ask the agent' });
        if (!question) return undefined;
        const answer = await service.ask(question, models.chat, models.summarize);
        await editor.window.showInformationMessage(answer.finished ? answer.text : `${answer.text}\n(stopped: the model still wanted tools)`);
        return answer;
      }),
    ),
    editor.commands.registerCommand(
      'ctxkernel.planContext',
      guarded(async () => {
        const plan = service.plan();
        await editor.window.showInformationMessage(`Context plan: ${describePlan(plan)}`);
        return plan;
      }),
    ),
    editor.commands.registerCommand(
      'ctxkernel.compact',
      guarded(async () => {
        const receipt = await service.compact(models.summarize);
        const record = receipt.compaction;
        const detail = record
          ? `${record.strategy}${record.degraded ? ' (degraded: the model failed)' : ''}, ` +
            `${record.metrics.inputTokens} → ${record.metrics.outputTokens} tokens`
          : receipt.reason ?? receipt.status;
        await editor.window.showInformationMessage(`Compaction ${receipt.status}: ${detail}`);
        return receipt;
      }),
    ),
    editor.commands.registerCommand(
      'ctxkernel.recall',
      guarded(async (query?: string) => {
        query ??= await editor.window.showInputBox({ prompt: 'Recall from this workspace’s memory' });
        if (!query) return undefined;
        const recalled = service.recall(query);
        const lines = recalled.memories.map((m) => `${m.rank}. ${m.content}  [${m.memoryId}, ${m.matchedBy.join('+')}]`);
        await editor.window.showInformationMessage(lines.length ? lines.join('\n') : 'Nothing remembered about that.');
        return recalled;
      }),
    ),
    editor.commands.registerCommand(
      'ctxkernel.forget',
      guarded(async (memoryId?: string) => {
        memoryId ??= await editor.window.showInputBox({ prompt: 'Memory id to forget', placeHolder: 'mem-…' });
        if (!memoryId) return undefined;
        const receipt = service.forget(memoryId);
        await editor.window.showInformationMessage(
          `Forgot ${receipt.matched} memory (${receipt.status}); ${receipt.receipts.length} parts removed`,
        );
        return receipt;
      }),
    ),
  ];
}
