package dev.ctxkernel;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Fixtures {
    static final String NOW = "2026-06-01T12:00:00Z";

    private Fixtures() {}

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
