package dev.ctxkernel;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.UncheckedIOException;

/**
 * The provider loop: while the kernel is awaiting a provider, ask the host's
 * model ({@link Provider}) and hand its outcome back with {@code continue-operation}.
 */
final class ProviderLoop {
    private ProviderLoop() {}

    /** Answers {@code awaiting-provider} operations until the kernel settles one (or there is no provider). */
    static <T> T drive(Kernel kernel, JsonNode receipt, Class<T> type, Provider provider) {
        try {
            while ("awaiting-provider".equals(receipt.path("status").asText()) && provider != null) {
                String operationId = receipt.path("operationId").asText();
                // Read before the callback runs: only the callback's own failure is the call's outcome.
                Envelopes.ProviderRequest asked = Kernel.JSON.treeToValue(receipt.get("providerRequest"), Envelopes.ProviderRequest.class);
                ObjectNode response = Kernel.JSON.createObjectNode();
                Provider.Answer answer = null;
                try {
                    answer = provider.complete(asked);
                } catch (Provider.OutcomeUnknown e) {
                    response.put("outcome", "unknown").put("reason", String.valueOf(e.getMessage()));
                } catch (Provider.Cancelled e) {
                    response.put("outcome", "cancelled").put("reason", String.valueOf(e.getMessage()));
                } catch (Exception e) {
                    response.put("outcome", "failed").put("error", String.valueOf(e.getMessage()));
                }
                if (response.isEmpty()) {
                    success(answer, operationId, response);
                }
                ObjectNode next = Kernel.JSON.createObjectNode().put("operationId", operationId);
                next.set("response", response);
                receipt = kernel.continued(next);
            }
            return Kernel.JSON.treeToValue(receipt, type);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The callback's answer as a success. An answer of no shape is the caller's error, and the
     * operation stays awaiting (continue or reconcile it).
     */
    private static void success(Provider.Answer answer, String operationId, ObjectNode response) {
        String field = answer == null ? "answer" : answer.text() == null ? "text" : null;
        if (field != null) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "the provider answered " + (answer == null ? "null" : "no text")
                    + ": it must return an Answer(text, inputTokens, outputTokens)",
                    Kernel.JSON.createObjectNode().put("field", field).put("operationId", operationId).toString(), null);
        }
        response.put("outcome", "success").put("text", answer.text());
        response.putObject("usage").put("inputTokens", answer.inputTokens()).put("outputTokens", answer.outputTokens());
    }
}
