package dev.ctxkernel;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The one error every command throws: the kernel's code, message and detail.
 * {@link #code()} prints as the kernel's kebab-case code ({@code invalid-request}); the message does not repeat it.
 * {@link #detailJson()} is the kernel's detail text, byte for byte; {@link #detail()} is it parsed.
 */
public final class KernelException extends RuntimeException {
    private final ErrorCode code;
    private final String detailJson;
    private final JsonNode detail;

    public KernelException(String code, String message, String detailJson) {
        this(ErrorCode.fromWireName(code), message, detailJson, null);
    }

    KernelException(ErrorCode code, String message, String detailJson, Throwable cause) {
        super(message, cause);
        this.code = code;
        this.detailJson = detailJson == null || detailJson.isEmpty() ? "{}" : detailJson;
        this.detail = parse(this.detailJson);
    }

    private static JsonNode parse(String json) {
        try {
            return Kernel.JSON.readTree(json);
        } catch (Exception e) {
            return Kernel.JSON.createObjectNode();
        }
    }

    /** The code, then the message: {@code KernelException[invalid-request]: …}. */
    @Override
    public String toString() {
        return "KernelException[" + code + "]: " + getMessage();
    }

    public ErrorCode code() {
        return code;
    }

    /** A JSON object with machine-readable context (e.g. {@code currentHead} on {@code stale}). */
    public JsonNode detail() {
        return detail;
    }

    /** The detail as the kernel wrote it. */
    public String detailJson() {
        return detailJson;
    }
}
