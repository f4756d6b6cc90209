package dev.ctxkernel;

/**
 * The host's model, asked when a provider-backed compaction or memory
 * extraction is {@code awaiting-provider}. Throwing is a failed call; {@link OutcomeUnknown}
 * leaves the outcome unknown (reconcile it); {@link Cancelled} gives up.
 */
@FunctionalInterface
public interface Provider {
    Answer complete(Envelopes.ProviderRequest request) throws Exception;

    record Answer(String text, long inputTokens, long outputTokens) {}

    final class OutcomeUnknown extends Exception {
        public OutcomeUnknown(String message) {
            super(message);
        }
    }

    final class Cancelled extends Exception {
        public Cancelled(String message) {
            super(message);
        }
    }
}
