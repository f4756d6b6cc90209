package dev.ctxkernel.jetbrains;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ctxkernel.Envelopes;
import dev.ctxkernel.ErrorCode;
import dev.ctxkernel.KernelException;
import dev.ctxkernel.Provider;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ContextKernelServiceTest {
    @TempDir
    Path projectDir;

    private final Supplier<String> clock = new Supplier<>() {
        private int second;

        @Override
        public String get() {
            second++;
            return String.format("2026-06-01T09:%02d:%02dZ", second / 60, second % 60);
        }
    };

    private ContextKernelService open(String session) {
        return new ContextKernelService(projectDir.resolve("shop-backend"), session, clock);
    }

    @Test
    void aLongBuildLogIsStoredOnceAndTheChatStillFits() throws Exception {
        try (ContextKernelService service = open("ide-1")) {
            service.record("user", "The Gradle build fails on CI. Find out why.");
            String log = "> Task :compileJava\n".repeat(20_000) + "error: cannot find symbol OrderTotals\n";
            service.recordToolRun("call-1", "gradle build", log, false);
            Envelopes.ContextPlan plan = service.plan();
            assertTrue(plan.budget().used() <= plan.budget().input());
            var result = plan.context().stream().filter(p -> p.item().path("kind").asText().equals("tool-evidence")).findFirst().orElseThrow();
            var ref = result.item().path("contentRef");
            assertTrue(ref.path("summary").asText().contains("cannot find symbol OrderTotals"), "the log's tail is in context");
            assertEquals(log.length(), ref.path("byteLength").asLong());
            byte[] full = service.kernel().getContent(Map.of("schemaVersion", 1, "objectId", ref.path("objectId").asText(),
                    "sink", "model:ide"));
            assertEquals(log, new String(full, StandardCharsets.UTF_8));
        }
    }

    @Test
    void compactionAsksTheIdeModelAndKeepsThePlanInBudget() throws Exception {
        List<String> asked = new ArrayList<>();
        Provider model = request -> {
            asked.add(request.model());
            return new Provider.Answer("The user is fixing the failing CI build; OrderTotals was renamed.", 5_000, 14);
        };
        try (ContextKernelService service = open("ide-2")) {
            service.record("user", "The Gradle build fails on CI. Find out why.");
            for (int i = 0; i < 300; i++) {
                service.record("assistant", ("Checked module " + i + ": its imports of the order classes look fine, and its tests "
                        + "compile against the renamed totals class. ").repeat(3));
                service.record("user", "Keep going with module " + (i + 1) + ".");
            }
            assertTrue(service.plan().dropped().size() > 0, "600 long turns exceed a 32k window");
            Envelopes.CompactResponse receipt = service.compact(model);
            assertEquals("committed", receipt.status());
            assertEquals(List.of("ide-summarizer"), asked);
            Envelopes.ContextPlan after = service.plan();
            assertTrue(after.context().stream().anyMatch(p -> p.item().path("content").asText().contains("OrderTotals was renamed")));
        }
    }

    @Test
    void projectMemoryIsSharedAcrossSessionsAndForgettingIsReceipted() throws Exception {
        String memoryId;
        try (ContextKernelService first = open("ide-3")) {
            memoryId = first.rememberProjectFact("the backend's integration tests need Docker running").memory().memoryId();
        }
        try (ContextKernelService second = open("ide-4")) {
            Envelopes.RecallResponse recalled = second.recall("what do integration tests need");
            assertEquals(memoryId, recalled.memories().get(0).memoryId());
            assertTrue(second.projectSnapshot(200).text().contains("Docker"));

            Envelopes.DeletionReceipt receipt = second.forget(memoryId);
            assertEquals(1, receipt.matched());
            assertEquals("complete", receipt.status());
            assertTrue(second.recall("what do integration tests need").memories().isEmpty());
        }
    }

    @Test
    void aFactTheUserNeverStatedIsRefused() throws Exception {
        try (ContextKernelService service = open("ide-5")) {
            service.record("user", "What do the integration tests need?");
            var proposed = service.kernel().proposeMemory(Map.of("schemaVersion", 1, "now", clock.get(), "candidates", List.of(Map.of(
                    "category", "fact", "content", "integration tests need a VPN", "scope", "project", "scopeId", "shop-backend",
                    "confidence", 0.9, "importance", 0.5, "provenance", Map.of("origin", "model"),
                    "evidenceRefs", List.of(Map.of("kind", "session", "id", "ide-5", "seq", 1))))));
            KernelException refused = assertThrows(KernelException.class, () -> service.kernel().decideMemory(Map.of(
                    "schemaVersion", 1, "now", clock.get(), "action", "activate", "scope", "project", "scopeId", "shop-backend",
                    "memoryId", proposed.receipts().get(0).memory().memoryId(),
                    "authority", Map.of("kind", "user-explicit", "sessionId", "ide-5"))));
            assertEquals(ErrorCode.SCOPE_DENIED, refused.code());
        }
    }
}
