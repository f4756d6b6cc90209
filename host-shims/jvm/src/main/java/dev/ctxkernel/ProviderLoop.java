package dev.ctxkernel;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.function.Supplier;

/**
 * The provider loop: while the kernel is awaiting a provider, ask the host's
 * model ({@link Provider}) and hand its outcome back with {@code continue-operation}.
 */
final class ProviderLoop {
    private ProviderLoop() {}

    /** Answers {@code awaiting-provider} operations until the kernel settles one. */
    static <T extends Envelopes.ProviderOperation> T drive(Kernel kernel, T receipt, Class<T> type, Provider provider, Supplier<String> clock) {
        while ("awaiting-provider".equals(receipt.status()) && provider != null) {
            ObjectNode response = Kernel.JSON.createObjectNode();
            try {
                Provider.Answer answer = provider.complete(receipt.providerRequest());
                response.put("outcome", "success").put("text", answer.text());
                response.putObject("usage").put("inputTokens", answer.inputTokens()).put("outputTokens", answer.outputTokens());
            } catch (Provider.OutcomeUnknown e) {
                response.put("outcome", "unknown").put("reason", String.valueOf(e.getMessage()));
            } catch (Provider.Cancelled e) {
                response.put("outcome", "cancelled").put("reason", String.valueOf(e.getMessage()));
            } catch (Exception e) {
                response.put("outcome", "failed").put("error", String.valueOf(e.getMessage()));
            }
            ObjectNode next = Kernel.JSON.createObjectNode().put("schemaVersion", 1).put("operationId", receipt.operationId())
                    .put("now", clock.get());
            next.set("response", response);
            receipt = kernel.call("continue-operation", next, type);
        }
        return receipt;
    }
}
