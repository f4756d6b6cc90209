package dev.ctxkernel;

import static dev.ctxkernel.Fixtures.NOW;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MemoryTest {
    private static final Map<String, Object> ADMIN = Map.of("kind", "management", "actor", "lead");

    private static void said(Kernel kernel, long seq, String text) {
        kernel.appendEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", "s1", "expectedHead", Map.of("seq", seq - 1),
                "items", List.of(Fixtures.item(seq, "user", text)), "now", NOW), Envelopes.AppendEventsRequest.class));
    }

    private static Map<String, Object> candidate(String content, long seq) {
        Map<String, Object> c = new HashMap<>(Map.of("scope", "project", "scopeId", "web", "category", "preference",
                "key", "web.package-manager", "content", content, "confidence", 0.7, "importance", 0.6,
                "provenance", Map.of("origin", "model"), "evidenceRefs", List.of(Map.of("kind", "session", "id", "s1", "seq", seq))));
        return c;
    }

    private static Map<String, Object> inProject(Map<String, Object> request) {
        Map<String, Object> out = new HashMap<>(request);
        out.put("schemaVersion", 1);
        out.put("now", NOW);
        out.put("scope", "project");
        out.put("scopeId", "web");
        return out;
    }

    private static Envelopes.RecallResponse recall(Kernel kernel, String query) {
        return kernel.recallMemory(Fixtures.as(Map.of("schemaVersion", 1, "now", NOW, "query", query,
                "scopes", List.of(Map.of("scope", "project", "scopeId", "web")), "sink", "model:test"), Envelopes.RecallRequest.class));
    }

    @Test
    void theMemoryLifecycleThroughTheModule() {
        MemoryStore store = new MemoryStore();
        Kernel kernel = new Kernel(store);
        said(kernel, 1, "remember: we use yarn for the web app");
        var proposed = kernel.proposeMemory(Fixtures.as(Map.of("schemaVersion", 1, "now", NOW,
                "candidates", List.of(candidate("we use yarn for the web app", 1))), Envelopes.ProposeRequest.class)).receipts().get(0);
        assertEquals("candidate", proposed.memory().state().toString());
        assertTrue(recall(kernel, "which package manager").memories().isEmpty(), "candidates are never recalled");
        String first = proposed.memory().memoryId();
        kernel.decideMemory(Fixtures.as(inProject(Map.of("memoryId", first, "action", "activate", "authority", ADMIN)), Envelopes.DecideRequest.class));
        said(kernel, 2, "correction: we use pnpm for the web app now");
        var moved = kernel.proposeMemory(Fixtures.as(Map.of("schemaVersion", 1, "now", NOW, "authority", Map.of("kind", "user-explicit", "sessionId", "s1"),
                "candidates", List.of(candidate("we use pnpm for the web app", 2))), Envelopes.ProposeRequest.class)).receipts().get(0);
        assertEquals(List.of(first), moved.superseded());
        var found = recall(kernel, "which package manager does the web app use").memories();
        assertEquals("we use pnpm for the web app", found.get(0).content());
        assertEquals("we use yarn for the web app", found.get(0).history().get(0).content());
        String before = store.dump();
        var refused = assertThrows(KernelException.class,
                () -> kernel.decideMemory(Fixtures.as(inProject(Map.of("memoryId", first, "action", "activate", "authority", ADMIN)), Envelopes.DecideRequest.class)));
        assertEquals(ErrorCode.ILLEGAL_TRANSITION, refused.code());
        assertEquals(before, store.dump());
        var deletion = kernel.deleteMemory(Fixtures.as(inProject(Map.of("requestId", "forget-pm", "subject", "team-web",
                "selector", Map.of("key", "web.package-manager"), "authority", ADMIN, "fence", 1, "replicas", List.of("laptop"))), Envelopes.DeleteRequest.class));
        assertEquals(2, deletion.matched());
        assertEquals("partial", deletion.status().toString());
        assertTrue(recall(kernel, "package manager").memories().isEmpty());
        var settled = kernel.reconcileDeletion(Fixtures.as(Map.of("schemaVersion", 1, "now", NOW, "operationId", deletion.deletionId(),
                "replicas", List.of(Map.of("replica", "laptop", "deleted", true))), Envelopes.ReconcileRequest.class));
        assertEquals("complete", settled.status().toString());
    }

    @Test
    void theRecordsDescribeTheRealMemoryResponses() throws Exception {
        ObjectMapper strict = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        Kernel kernel = new Kernel(new MemoryStore());
        said(kernel, 1, "we use pnpm");
        String proposed = kernel.call("propose-memory", Kernel.JSON.writeValueAsString(Map.of("schemaVersion", 1, "now", NOW,
                "candidates", List.of(candidate("we use pnpm", 1)))));
        var receipt = strict.readValue(proposed, Envelopes.ProposeResponse.class).receipts().get(0);
        kernel.decideMemory(Fixtures.as(inProject(Map.of("memoryId", receipt.memory().memoryId(), "action", "activate", "authority", ADMIN)), Envelopes.DecideRequest.class));
        String recalled = kernel.call("recall-memory", Kernel.JSON.writeValueAsString(Map.of("schemaVersion", 1, "now", NOW,
                "query", "pnpm", "scopes", List.of(Map.of("scope", "project", "scopeId", "web")), "sink", "model:test")));
        assertEquals(1, strict.readValue(recalled, Envelopes.RecallResponse.class).memories().size());
        strict.readValue(kernel.call("read-memory", Kernel.JSON.writeValueAsString(inProject(Map.of("includeAudit", true)))),
                Envelopes.ReadMemoryResponse.class);
        strict.readValue(kernel.call("resident-snapshot", Kernel.JSON.writeValueAsString(inProject(Map.of("maxTokens", 100, "sink", "model:test")))),
                Envelopes.ResidentSnapshot.class);
    }

    @Test
    void consolidationDrivesTheProviderLoopAndDegradesToTheRules() {
        Kernel kernel = new Kernel(new MemoryStore());
        said(kernel, 1, "Please remember that staging runs in Frankfurt. Why is CI red?");
        Map<String, Object> request = new HashMap<>(Map.of("schemaVersion", 1, "sessionId", "s1", "now", NOW, "strategy", "provider",
                "provider", Map.of("model", "extractor", "maxTokens", 300)));
        var done = kernel.consolidate(Fixtures.as(request, Envelopes.ConsolidateRequest.class), ask -> {
            assertEquals("extractor", ask.model());
            return new Provider.Answer("{\"memories\": [{\"seq\": 1, \"category\": \"fact\", \"content\": \"staging runs in Frankfurt\"}]}", 40, 12);
        });
        assertEquals("proposed", done.status().toString());
        assertEquals("staging runs in Frankfurt", done.receipts().get(0).memory().content());
        assertEquals("candidate", done.receipts().get(0).memory().state().toString());
        request.put("provider", Map.of("model", "other", "maxTokens", 300));
        var degraded = kernel.consolidate(Fixtures.as(request, Envelopes.ConsolidateRequest.class), ask -> {
            throw new IllegalStateException("HTTP 503");
        });
        assertEquals("degraded", degraded.status().toString());
        assertTrue(degraded.receipts().get(0).merged());
    }

    @Test
    void verifyStoreNamesALinkLeftToNothing() throws Exception {
        MemoryStore store = new MemoryStore();
        Kernel kernel = new Kernel(store);
        assertTrue(kernel.verifyStore().ok());
        // What a partial restore leaves: a scope link whose record is not there.
        store.put("mem/scope/project/web/mem-ghost", "{\"memoryId\":\"mem-ghost\"}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null);
        var report = kernel.verifyStore();
        assertEquals(1, report.problemCount());
        assertEquals(List.of("dangling-link", "mem/scope/project/web/mem-ghost", "mem-ghost"),
                List.of(report.problems().get(0).kind().toString(), report.problems().get(0).key(), report.problems().get(0).memoryId()));
    }
}
