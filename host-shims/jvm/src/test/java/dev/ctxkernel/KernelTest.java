package dev.ctxkernel;

import static dev.ctxkernel.Fixtures.NOW;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class KernelTest {
    @Test
    void theModuleItRunsIsTheOneInTheComponent() throws Exception {
        // jco extracted the same module independently when it transpiled the component.
        Path expected = Path.of("../../build/ctxkernel.core.sha256");
        assertTrue(Files.exists(expected), "run `make jvm`: it records the digest of jco's core module");
        assertEquals(Files.readString(expected).trim(), ComponentBinary.sha256(Kernel.coreModule()));
        byte[] component = Files.readAllBytes(Path.of("../../build/ctxkernel.wasm"));
        assertArrayEquals(ComponentBinary.coreModule(component), Kernel.coreModule());
    }

    @Test
    void everyCommandAnswersThroughTheModule() {
        Kernel kernel = new Kernel(new MemoryStore());
        assertTrue(kernel.info().commands().containsAll(Kernel.COMMANDS));
        assertEquals(120, kernel.appendEvents(Fixtures.as(Fixtures.append(0, 120), Envelopes.AppendEventsRequest.class)).head().seq());
        var events = kernel.readEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", "s1", "afterSeq", 100, "limit", 5), Envelopes.ReadEventsRequest.class));
        assertEquals(101, events.events().get(0).seq());
        var plan = kernel.planContext(Fixtures.as(Fixtures.PLAN, Envelopes.PlanRequest.class));
        assertEquals(120, plan.binding().sessionHead().seq());
        assertTrue(!plan.context().isEmpty() && !plan.dropped().isEmpty());
        var compacted = kernel.compactContext(Fixtures.as(Fixtures.compact("local"), Envelopes.CompactRequest.class));
        assertEquals("[evaluating, preparing, verifying, committing, committed]", compacted.states().toString());
        var kernelEvents = kernel.readKernelEvents(Fixtures.as(Map.of("schemaVersion", 1), Envelopes.ReadKernelEventsRequest.class));
        assertEquals("context.compaction.committed", kernelEvents.events().get(0).type());
        byte[] bytes = "externalized output".getBytes(StandardCharsets.UTF_8);
        var put = kernel.putContent(Fixtures.as(Map.of("schemaVersion", 1, "allowedSinks", List.of("model:*"), "sensitivity", "internal", "now", NOW), Envelopes.PutContentRequest.class), bytes);
        String object = put.contentRef().objectId();
        assertArrayEquals(bytes, kernel.getContent(Fixtures.as(Map.of("schemaVersion", 1, "objectId", object, "sink", "model:x"), Envelopes.GetContentRequest.class)));
        assertTrue(kernel.call("info", "{\"schemaVersion\":1}").contains("\"ctxkernel\""));
    }

    @Test
    void theRecordsDescribeTheRealResponses() throws Exception {
        ObjectMapper strict = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        Kernel kernel = new Kernel(new MemoryStore());
        strict.readValue(kernel.call("append-events", Kernel.JSON.writeValueAsString(Fixtures.append(0, 120))), Envelopes.AppendEventsResponse.class);
        strict.readValue(kernel.call("plan-context", Kernel.JSON.writeValueAsString(Fixtures.PLAN)), Envelopes.ContextPlan.class);
        strict.readValue(kernel.call("compact-context", Kernel.JSON.writeValueAsString(Fixtures.compact("provider"))), Envelopes.CompactResponse.class);
        strict.readValue(kernel.call("info", "{\"schemaVersion\":1}"), Envelopes.InfoResponse.class);
    }

    @Test
    void badInputIsATypedErrorAndLeavesTheStoreUnchanged() {
        MemoryStore store = new MemoryStore();
        Kernel kernel = new Kernel(store);
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 3), Envelopes.AppendEventsRequest.class));
        String before = store.dump();
        record Case(String command, String request, ErrorCode code) {}
        List<Case> cases = List.of(
                new Case("plan-context", "{\"schemaVersion\": 1,", ErrorCode.INVALID_REQUEST),
                new Case("plan-context", "{\"schemaVersion\":1,\"now\":\"" + NOW + "\",\"sink\":\"m\",\"model\":{\"profile\":\"m\",\"window\":-1,\"reservedOutput\":0,\"safetyMargin\":0}}", ErrorCode.INVALID_REQUEST),
                new Case("plan-context", "{\"schemaVersion\": 2}", ErrorCode.UNSUPPORTED_SCHEMA),
                new Case("continue-operation", "{\"schemaVersion\":1,\"operationId\":\"op-nope\",\"now\":\"" + NOW + "\",\"response\":{\"outcome\":\"cancelled\"}}", ErrorCode.NOT_FOUND),
                new Case("no-such-command", "{}", ErrorCode.INVALID_REQUEST));
        for (Case c : cases) {
            KernelException e = assertThrows(KernelException.class, () -> kernel.call(c.command(), c.request()));
            assertEquals(c.code(), e.code(), c.command());
        }
        KernelException stale = assertThrows(KernelException.class, () -> kernel.appendEvents(Fixtures.as(Fixtures.append(0, 1), Envelopes.AppendEventsRequest.class)));
        assertEquals(ErrorCode.STALE, stale.code());
        assertEquals(3, stale.detail().get("currentHead").get("seq").asLong());
        KernelException missing = assertThrows(KernelException.class,
                () -> kernel.getContent(Fixtures.as(Map.of("schemaVersion", 1, "objectId", "0".repeat(64), "sink", "x"), Envelopes.GetContentRequest.class)));
        assertEquals(ErrorCode.CONTENT_UNAVAILABLE, missing.code());
        assertEquals(before, store.dump());
    }

    /** A memory store that fails on command. */
    static final class Faulty implements Store {
        final MemoryStore inner = new MemoryStore();
        int puts;
        int failAt = -1;
        RuntimeException failure;
        boolean storeFailure;

        public Entry get(String key) throws StoreException {
            if (storeFailure) {
                throw new StoreException("database is locked");
            }
            return inner.get(key);
        }

        public List<Entry> scan(String prefix, String startAfter, int limit) {
            return inner.scan(prefix, startAfter, limit);
        }

        public long put(String key, byte[] value, Long expected) throws StoreConflict {
            if (++puts == failAt) {
                throw failure;
            }
            return inner.put(key, value, expected);
        }

        public void remove(String key, Long expected) throws StoreConflict {
            inner.remove(key, expected);
        }

        public void begin(boolean write) throws StoreException {
            inner.begin(write);
        }

        public void commit() {
            inner.commit();
        }

        public void rollback() {
            inner.rollback();
        }
    }

    @Test
    void aHostExceptionMidCallRollsBackAndTheNextCallWorks() {
        Faulty store = new Faulty();
        Kernel kernel = new Kernel(store);
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 1), Envelopes.AppendEventsRequest.class));
        String before = store.inner.dump();
        store.failAt = store.puts + 3;
        store.failure = new IllegalStateException("the host blew up");
        RuntimeException thrown = assertThrows(RuntimeException.class, () -> kernel.appendEvents(Fixtures.as(Fixtures.append(1, 4), Envelopes.AppendEventsRequest.class)));
        assertTrue(thrown.getMessage().contains("the host blew up") || (thrown.getCause() != null && thrown.getCause().getMessage().contains("the host blew up")), thrown.toString());
        assertEquals(before, store.inner.dump(), "the two puts before the exception were rolled back");
        assertEquals(5, kernel.appendEvents(Fixtures.as(Fixtures.append(1, 4), Envelopes.AppendEventsRequest.class)).head().seq(), "a fresh instance continues");
    }

    @Test
    void aTrapIsOneFixedInternalErrorAndTheInstanceIsReplaced() {
        MemoryStore store = new MemoryStore();
        Kernel kernel = new Kernel(store, HostClock::now, 8L << 20);
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 1), Envelopes.AppendEventsRequest.class));
        String before = store.dump();
        // Forty half-MiB items need more than the 8 MiB of memory this kernel may use.
        var big = new java.util.LinkedHashMap<String, Object>(Fixtures.append(1, 40));
        big.put("items", ((List<?>) big.get("items")).stream().map(item -> {
            var copy = new java.util.LinkedHashMap<Object, Object>((Map<?, ?>) item);
            copy.put("content", "y".repeat(512 << 10));
            return copy;
        }).toList());
        KernelException e = assertThrows(KernelException.class, () -> kernel.appendEvents(Fixtures.as(big, Envelopes.AppendEventsRequest.class)));
        assertEquals(ErrorCode.INTERNAL, e.code());
        assertEquals("the kernel trapped; the call was rolled back", e.getMessage());
        assertEquals("{}", e.detailJson());
        assertEquals(before, store.dump());
        assertEquals(3, kernel.appendEvents(Fixtures.as(Fixtures.append(1, 2), Envelopes.AppendEventsRequest.class)).head().seq(), "a fresh instance continues");
    }

    @Test
    void aLoneSurrogateIsAnInvalidRequestNotAQuestionMark() {
        KernelException e = assertThrows(KernelException.class, () -> new Kernel().call("info", "{\"schemaVersion\":1,\"x\":\"\ud800\"}"));
        assertEquals(ErrorCode.INVALID_REQUEST, e.code());
        assertEquals("the request is not valid Unicode: it holds a lone surrogate", e.getMessage());
        // In an object too.
        for (String lone : List.of("\ud800", "\udc00", "a\ud800b")) {
            KernelException o = assertThrows(KernelException.class, () -> new Kernel().readEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", lone), Envelopes.ReadEventsRequest.class)));
            assertEquals("the request is not valid Unicode: it holds a lone surrogate", o.getMessage());
        }
    }

    @Test
    void aRequestObjectIsWrittenAsItsValuesAre() throws Exception {
        // Through the tree that finds NaN: a BigDecimal keeps its spelling.
        var request = new java.util.LinkedHashMap<String, Object>();
        request.put("b", new java.math.BigDecimal("1.50"));
        request.put("a", new java.math.BigDecimal("100"));
        request.put("c", 0.1);
        var text = Kernel.JSON.writeValueAsString(Kernel.JSON.valueToTree(request));
        assertEquals(Kernel.JSON.writeValueAsString(request), text);
    }

    @Test
    void aNumberThatIsNotFiniteIsRefused() {
        for (double value : new double[] {Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY}) {
            KernelException e = assertThrows(KernelException.class,
                    () -> new Kernel().call("read-events", Map.of("schemaVersion", 1, "sessionId", "s", "afterSeq", value), Envelopes.ReadEventsResponse.class));
            assertEquals("the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry", e.getMessage());
        }
    }

    @Test
    void theKernelsJsonComesThroughVerbatim() throws Exception {
        Kernel kernel = new Kernel(new MemoryStore());
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 3), Envelopes.AppendEventsRequest.class));
        KernelException stale = assertThrows(KernelException.class, () -> kernel.appendEvents(Fixtures.as(Fixtures.append(1, 1), Envelopes.AppendEventsRequest.class)));
        assertTrue(stale.detailJson().startsWith("{\"currentHead\":{\"digest\":\"sha256:"), stale.detailJson());
        assertEquals(3, stale.detail().get("currentHead").get("seq").asLong());
        // Written as the kernel writes its escapes.
        assertEquals("\"\\u000b\"", Kernel.JSON.writeValueAsString("\u000b"));
        String put = kernel.call("put-content", "{\"allowedSinks\":[\"*\"],\"now\":\"" + NOW + "\",\"schemaVersion\":1,\"sensitivity\":\"internal\"}",
                "output".getBytes(StandardCharsets.UTF_8));
        assertTrue(put.startsWith("{\"allowedSinks\":[\"*\"],\"contentRef\":{"), put);
        String object = Kernel.JSON.readTree(put).get("contentRef").get("objectId").asText();
        assertArrayEquals("output".getBytes(StandardCharsets.UTF_8),
                kernel.getContent("{\"objectId\":\"" + object + "\",\"schemaVersion\":1,\"sink\":\"x\"}"));
    }

    @Test
    void aFailingStoreIsAStorageFailure() {
        Faulty store = new Faulty();
        Kernel kernel = new Kernel(store);
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 1), Envelopes.AppendEventsRequest.class));
        store.storeFailure = true;
        assertEquals(ErrorCode.STORAGE_FAILURE, assertThrows(KernelException.class, () -> kernel.planContext(Fixtures.as(Fixtures.PLAN, Envelopes.PlanRequest.class))).code());
        store.storeFailure = false;
        assertEquals(1, kernel.planContext(Fixtures.as(Fixtures.PLAN, Envelopes.PlanRequest.class)).binding().sessionHead().seq());
    }

    private static Kernel seeded() {
        Kernel kernel = new Kernel(new MemoryStore());
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 120), Envelopes.AppendEventsRequest.class));
        return kernel;
    }

    @Test
    void providerCallbacksDriveCompaction() {
        var asked = new Envelopes.ProviderRequest[1];
        var done = seeded().compact(Fixtures.as(Fixtures.compact("provider"), Envelopes.CompactRequest.class), request -> {
            asked[0] = request;
            return new Provider.Answer("A long session about words.", 100, 7);
        });
        assertEquals("committed", done.status().toString());
        assertEquals("summarizer", asked[0].model());
        assertEquals("system", asked[0].messages().get(0).role().toString());

        var degraded = seeded().compact(Fixtures.as(Fixtures.compact("provider"), Envelopes.CompactRequest.class), request -> {
            throw new java.io.IOException("HTTP 503");
        });
        assertEquals("degraded", degraded.status().toString());

        Kernel kernel = seeded();
        var unknown = kernel.compact(Fixtures.as(Fixtures.compact("provider"), Envelopes.CompactRequest.class), request -> {
            throw new Provider.OutcomeUnknown("socket closed after send");
        });
        assertEquals("reconciliation-required", unknown.status().toString());
        var retry = kernel.reconcile(Fixtures.as(Map.of("schemaVersion", 1, "operationId", unknown.operationId(), "now", NOW, "resolution", "retry"), Envelopes.ReconcileRequest.class));
        assertEquals("awaiting-provider", retry.status().toString());
        assertNotEquals(unknown.operationId(), retry.operationId());
    }
}
