// The provider loop: while the kernel is awaiting a provider, ask the host's
// model and hand its outcome back with `continue-operation`.

import { KernelError } from './errors.js';

/** Throw this from a provider callback when nobody knows whether the call happened. */
export class ProviderOutcomeUnknown extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProviderOutcomeUnknown';
  }
}

/** Answers `awaiting-provider` until the kernel settles the operation (or there is no provider). */
export async function drive(kernel, receipt, provider) {
  while (receipt.status === 'awaiting-provider') {
    if (!provider) return receipt;
    let response;
    let answer;
    try {
      answer = await provider(receipt.providerRequest);
    } catch (e) {
      if (e instanceof ProviderOutcomeUnknown) response = { outcome: 'unknown', reason: e.message };
      else if (e?.name === 'AbortError') response = { outcome: 'cancelled', reason: e.message };
      else response = { outcome: 'failed', error: String(e?.message ?? e) };
    }
    response ??= { outcome: 'success', ...answerOf(answer, receipt.operationId) };
    receipt = kernel.continueOperation({ operationId: receipt.operationId, response });
  }
  return receipt;
}

/**
 * The callback's text and usage. An answer of another shape is the caller's
 * error, and the operation stays awaiting (continue or reconcile it).
 */
function answerOf(answer, operationId) {
  const wrong = (field, what) =>
    new KernelError(
      'invalid-request',
      `the provider callback's answer ${what}: it must be { text: string, usage: { inputTokens: number, outputTokens: number } }`,
      JSON.stringify({ field, operationId }),
    );
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) throw wrong('answer', `is ${answer === null ? 'null' : Array.isArray(answer) ? 'an array' : typeof answer}, not an object`);
  if (typeof answer.text !== 'string') throw wrong('text', 'has no `text` string');
  if (answer.usage === null || typeof answer.usage !== 'object' || Array.isArray(answer.usage)) throw wrong('usage', 'has no `usage` object');
  return { text: answer.text, usage: { ...answer.usage } };
}
