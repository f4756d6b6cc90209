// The VS Code entry point: open the workspace's store, build the service,
// register the commands. The agent talks to OpenAI Chat Completions (the
// key from OPENAI_API_KEY); the summarizer is whatever chat model VS Code offers.
import { createHash } from 'node:crypto';
import * as vscode from 'vscode';
import OpenAI from 'openai';
import { load } from 'ctxkernel';
import type { Provider } from 'ctxkernel' with { 'resolution-mode': 'import' };
import { registerCommands } from './commands';
import { ContextService, type Tool } from './contextService';

/** Reads a file of the workspace for the model, by a path relative to its root. */
function readFileTool(root: vscode.Uri): Tool {
  return {
    definition: {
      type: 'function',
      function: {
        name: 'read_file',
        description: 'Reads a file of the workspace.',
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      },
    },
    async run(args) {
      const path = (args as { path?: unknown }).path;
      if (typeof path !== 'string' || path.split(/[\\/]/).includes('..')) throw new Error('path must be a relative path inside the workspace');
      return new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.joinPath(root, path)));
    },
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const { Kernel, SqliteStore, ProviderOutcomeUnknown } = await load();
  await vscode.workspace.fs.createDirectory(context.globalStorageUri);
  const store = await SqliteStore.open(vscode.Uri.joinPath(context.globalStorageUri, 'ctxkernel.sqlite').fsPath);
  const folder = vscode.workspace.workspaceFolders?.[0];
  // Two folders of one name are two projects: the path tells them apart.
  const where = createHash('sha256').update(folder?.uri.toString() ?? '').digest('hex').slice(0, 12);
  const workspace = `${(folder?.name ?? 'default').replace(/[^A-Za-z0-9._-]/g, '-')}-${where}`;
  const service = new ContextService(new Kernel(store), {
    sessionId: `vscode-${workspace}`,
    workspace,
    model: { profile: 'gpt-4.1-128k', window: 131_072, reservedOutput: 8_192, safetyMargin: 2_048 },
    chatModel: 'gpt-4.1',
    instructions: `You are a coding agent working in the ${workspace} workspace. Read files before you change them.`,
    tools: folder ? { read_file: readFileTool(folder.uri) } : {},
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

  const chat = process.env.OPENAI_API_KEY ? new OpenAI() : undefined;
  context.subscriptions.push(...registerCommands(vscode, service, { chat, summarize }), { dispose: () => store.close() });
}

export function deactivate(): void {}
