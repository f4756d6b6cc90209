// The provider loop: while the kernel is awaiting a provider, ask the host's
// model and hand its outcome back with `continue-operation`.

/** Throw this from a provider callback when nobody knows whether the call happened. */
export class ProviderOutcomeUnknown extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProviderOutcomeUnknown';
  }
}

const now = () => new Date().toISOString();

/** Answers `awaiting-provider` until the kernel settles the operation (or there is no provider). */
export async function drive(kernel, receipt, provider, clock = now) {
  while (receipt.status === 'awaiting-provider') {
    if (!provider) return receipt;
    let response;
    try {
      const answer = await provider(receipt.providerRequest);
      response = { outcome: 'success', text: answer.text, usage: answer.usage };
    } catch (e) {
      if (e instanceof ProviderOutcomeUnknown) response = { outcome: 'unknown', reason: e.message };
      else if (e?.name === 'AbortError') response = { outcome: 'cancelled', reason: e.message };
      else response = { outcome: 'failed', error: String(e?.message ?? e) };
    }
    receipt = kernel.continueOperation({ schemaVersion: 1, operationId: receipt.operationId, now: clock(), response });
  }
  return receipt;
}
