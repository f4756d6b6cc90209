package dev.ctxkernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StoresTest {
    /** Appends one event from another JVM; prints the answer; exits 3 on a kernel error. */
    public static void main(String[] args) throws Exception {
        long from = Long.parseLong(args[1]);
        var item = new java.util.LinkedHashMap<>(Fixtures.item(from + 1, "user", "from another process"));
        item.put("itemId", "child-" + ProcessHandle.current().pid());
        var request = Map.of("schemaVersion", 1, "sessionId", "s1", "expectedHead", Map.of("seq", from),
                "items", java.util.List.of(item), "now", Fixtures.NOW);
        try (SqliteStore store = new SqliteStore(args[0])) {
            System.out.print(new Kernel(store).call("append-events", Kernel.JSON.writeValueAsString(request)));
        } catch (KernelException e) {
            System.out.print(Kernel.JSON.createObjectNode().put("code", e.code().wireName()).set("detail", e.detail()));
            System.exit(3);
        }
    }

    private static Process child(Path store, long from) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), StoresTest.class.getName(), store.toString(), String.valueOf(from))
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
    }

    @Test
    void twoProcessesShareOneStoreFile(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("store.sqlite");
        try (SqliteStore store = new SqliteStore(path.toString())) {
            Kernel kernel = new Kernel(store);
            kernel.appendEvents(Fixtures.as(Fixtures.append(0, 2), Envelopes.AppendEventsRequest.class));
            Process first = child(path, 2);
            JsonNode won = Kernel.JSON.readTree(first.getInputStream().readAllBytes());
            assertEquals(0, first.waitFor());
            assertEquals(3, won.get("head").get("seq").asLong());
            assertEquals(3, kernel.planContext(Fixtures.as(Fixtures.PLAN, Envelopes.PlanRequest.class)).binding().sessionHead().seq(), "this process sees the other's write");
            Process second = child(path, 2);
            JsonNode lost = Kernel.JSON.readTree(second.getInputStream().readAllBytes());
            assertEquals(3, second.waitFor());
            assertEquals("stale", lost.get("code").asText());
            assertEquals(3, lost.get("detail").get("currentHead").get("seq").asLong());
            assertEquals(3, kernel.readEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", "s1"), Envelopes.ReadEventsRequest.class)).events().size());
            assertEquals(2, kernel.info().store().revision());
        }
    }

    @Test
    void foreignFilesAreRefused(@TempDir Path dir) throws Exception {
        Path other = dir.resolve("other.sqlite");
        try (var c = DriverManager.getConnection("jdbc:sqlite:" + other)) {
            c.createStatement().execute("CREATE TABLE invoices (id INTEGER)");
        }
        var e = assertThrows(Store.StoreException.class, () -> new SqliteStore(other.toString()));
        assertTrue(e.getMessage().contains("not a ctxkernel store"));
        Path garbage = dir.resolve("garbage.sqlite");
        Files.write(garbage, "x".repeat(8192).getBytes());
        assertThrows(Store.StoreException.class, () -> new SqliteStore(garbage.toString()));
    }

    @Test
    void readersNeverWaitOnAWriterAndABusyWriterGetsATypedError(@TempDir Path dir) throws Exception {
        Path path = dir.resolve("store.sqlite");
        try (SqliteStore store = new SqliteStore(path.toString(), Duration.ofMillis(300));
                var writer = DriverManager.getConnection("jdbc:sqlite:" + path)) {
            Kernel kernel = new Kernel(store);
            kernel.appendEvents(Fixtures.as(Fixtures.append(0, 2), Envelopes.AppendEventsRequest.class));
            // Another connection holds the write lock, as a long compaction would.
            writer.createStatement().execute("BEGIN IMMEDIATE");
            writer.createStatement().execute("UPDATE ctxk_entries SET revision = revision + 1");
            // The lock is held throughout: a read that waited for it would fail busy.
            assertEquals(2, kernel.planContext(Fixtures.as(Fixtures.PLAN, Envelopes.PlanRequest.class)).binding().sessionHead().seq());
            assertEquals(2, kernel.readEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", "s1"), Envelopes.ReadEventsRequest.class)).events().size());
            assertEquals(1, kernel.info().store().revision(), "readers see the last commit, not the open transaction");
            long started = System.nanoTime();
            KernelException busy = assertThrows(KernelException.class, () -> kernel.appendEvents(Fixtures.as(Fixtures.append(2, 1), Envelopes.AppendEventsRequest.class)));
            assertTrue(System.nanoTime() - started >= 290_000_000L);
            assertEquals(ErrorCode.STORAGE_FAILURE, busy.code());
            assertEquals("cannot begin a transaction: the store is busy: another connection held its write lock for more than 300 ms",
                    busy.getMessage());
            writer.createStatement().execute("ROLLBACK");
            assertEquals(3, kernel.appendEvents(Fixtures.as(Fixtures.append(2, 1), Envelopes.AppendEventsRequest.class)).head().seq());
        }
    }
}
