// The VS Code entry point: open the workspace's store, build the service,
// register the commands. The summarizer is whatever chat model VS Code offers.
import * as vscode from 'vscode';
import { load } from 'ctxkernel';
import type { Provider } from 'ctxkernel' with { 'resolution-mode': 'import' };
import { registerCommands } from './commands';
import { ContextService } from './contextService';

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const { Kernel, SqliteStore, ProviderOutcomeUnknown } = await load();
  await vscode.workspace.fs.createDirectory(context.globalStorageUri);
  const store = await SqliteStore.open(vscode.Uri.joinPath(context.globalStorageUri, 'ctxkernel.sqlite').fsPath);
  const workspace = (vscode.workspace.workspaceFolders?.[0]?.name ?? 'default').replace(/[^A-Za-z0-9._-]/g, '-');
  const service = new ContextService(new Kernel(store), {
    sessionId: `vscode-${workspace}`,
    workspace,
    model: { profile: 'vscode-chat-128k', window: 131_072, reservedOutput: 8_192, safetyMargin: 2_048 },
  });

  // A failed request is a failed call; a cancelled or broken stream may have
  // been billed, so it is an unknown outcome the kernel will ask to reconcile.
  const summarize: Provider = async (request) => {
    const [model] = await vscode.lm.selectChatModels({});
    if (!model) throw new Error('no chat model is available');
    const messages = request.messages.map((m) =>
      m.role === 'assistant' ? vscode.LanguageModelChatMessage.Assistant(m.content) : vscode.LanguageModelChatMessage.User(m.content),
    );
    const response = await model.sendRequest(messages, {});
    let text = '';
    try {
      for await (const part of response.text) text += part;
    } catch (error) {
      throw new ProviderOutcomeUnknown(String(error));
    }
    const inputTokens = (await Promise.all(request.messages.map((m) => model.countTokens(m.content)))).reduce((a, b) => a + b, 0);
    return { text, usage: { inputTokens, outputTokens: await model.countTokens(text) } };
  };

  context.subscriptions.push(...registerCommands(vscode, service, summarize), { dispose: () => store.close() });
}

export function deactivate(): void {}
