package dev.ctxkernel;

/** The kernel's error codes, in the WIT's order (the canonical ABI lowers an enum to its index). */
public enum ErrorCode {
    INVALID_REQUEST,
    UNSUPPORTED_SCHEMA,
    CONTEXT_OVER_BUDGET,
    DEGRADED,
    STALE,
    RECONCILIATION_REQUIRED,
    CONTENT_UNAVAILABLE,
    DIGEST_MISMATCH,
    SCOPE_DENIED,
    PARTIAL,
    NOT_FOUND,
    CONFLICT,
    ILLEGAL_TRANSITION,
    LIMIT_EXCEEDED,
    STORAGE_FAILURE,
    INTERNAL;

    /** The kebab-case name the WIT and the JSON envelopes use. */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    }

    /** The wire name: {@code invalid-request}, as every host prints it. */
    @Override
    public String toString() {
        return wireName();
    }

    public static ErrorCode fromWireName(String name) {
        return valueOf(name.toUpperCase(java.util.Locale.ROOT).replace('-', '_'));
    }
}
