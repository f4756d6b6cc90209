package dev.ctxkernel;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** The one error every command throws: the kernel's code, message and detail. */
public final class KernelException extends RuntimeException {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final ErrorCode code;
    private final JsonNode detail;

    public KernelException(String code, String message, String detailJson) {
        this(ErrorCode.fromWireName(code), message, parse(detailJson), null);
    }

    KernelException(ErrorCode code, String message, JsonNode detail, Throwable cause) {
        super(code.wireName() + ": " + message, cause);
        this.code = code;
        this.detail = detail;
    }

    private static JsonNode parse(String json) {
        try {
            return JSON.readTree(json == null || json.isEmpty() ? "{}" : json);
        } catch (Exception e) {
            return JSON.createObjectNode();
        }
    }

    public ErrorCode code() {
        return code;
    }

    /** A JSON object with machine-readable context (e.g. {@code currentHead} on {@code stale}). */
    public JsonNode detail() {
        return detail;
    }
}
