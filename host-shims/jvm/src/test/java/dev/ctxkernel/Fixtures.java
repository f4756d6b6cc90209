package dev.ctxkernel;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Fixtures {
    static final String NOW = "2026-06-01T12:00:00Z";

    /** Refuses what a request record does not declare, so a test's request reaches the kernel whole. */
    private static final ObjectMapper STRICT = Kernel.JSON.copy().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

    private Fixtures() {}

    /** A request written as maps or as JSON text, as its typed record. */
    static <T> T as(Object request, Class<T> type) {
        try {
            return request instanceof String text ? STRICT.readValue(text, type) : STRICT.convertValue(request, type);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalArgumentException(e);
        }
    }

    static Map<String, Object> item(long seq, String role, String text) {
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("schemaVersion", 1);
        item.put("itemId", "e" + seq);
        item.put("kind", "message");
        item.put("role", role);
        item.put("scope", "session");
        item.put("sourceRef", Map.of("kind", "session", "id", "s1", "seq", seq));
        item.put("provenance", Map.of("origin", "user"));
        item.put("trust", "user");
        item.put("sensitivity", "internal");
        item.put("allowedSinks", List.of("model:*"));
        item.put("priority", 0);
        item.put("pinned", false);
        item.put("createdAt", NOW);
        item.put("content", text);
        return item;
    }

    static Map<String, Object> append(long from, int count) {
        List<Object> items = new ArrayList<>();
        for (long seq = from + 1; seq <= from + count; seq++) {
            items.add(item(seq, seq % 2 == 1 ? "user" : "assistant", seq + ": " + "words of a long session ".repeat(20)));
        }
        return Map.of("schemaVersion", 1, "sessionId", "s1", "expectedHead", Map.of("seq", from), "items", items, "now", NOW);
    }

    static final Map<String, Object> MODEL = Map.of("profile", "test", "window", 16000, "reservedOutput", 1000, "safetyMargin", 500);

    static final Map<String, Object> PLAN = Map.of("schemaVersion", 1, "now", NOW, "sink", "model:test", "sessionId", "s1", "model", MODEL);

    static Map<String, Object> compact(String strategy) {
        return Map.of("schemaVersion", 1, "sessionId", "s1", "now", NOW, "strategy", strategy, "sink", "model:test",
                "model", MODEL, "provider", Map.of("model", "summarizer", "maxTokens", 400));
    }
}
