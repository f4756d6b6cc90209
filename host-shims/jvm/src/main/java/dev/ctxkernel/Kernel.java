package dev.ctxkernel;

import com.dylibso.chicory.wasm.ChicoryException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * One kernel instance over one store: the component's core module, compiled
 * to JVM bytecode by Chicory. Every command runs inside one store
 * transaction: committed when the kernel answers, rolled back when it answers
 * an error, traps, or the store throws.
 */
public final class Kernel {
    /** The kernel's JSON commands, as named in the WIT. */
    public static final List<String> COMMANDS = List.of(
            "info", "plan-context", "append-events", "read-events", "compact-context", "continue-operation",
            "reconcile", "read-kernel-events", "propose-memory", "consolidate-memory", "decide-memory", "delete-memory", "purge-memory",
            "read-memory", "recall-memory", "resident-snapshot", "import-messages", "render-context", "validate-request",
            "verify-store");
    /** Commands that only read: their transaction takes no write lock. */
    private static final Set<String> READ_ONLY = Set.of(
            "info", "read-events", "plan-context", "get-content", "read-kernel-events", "read-memory", "recall-memory", "resident-snapshot",
            "render-context", "validate-request", "verify-store");
    /** What every host answers when the kernel traps (the trap's own text differs per engine). */
    static final String TRAPPED = "the kernel trapped; the call was rolled back";
    /**
     * Writes escapes as the kernel does ({@code \u000b}, not {@code \u000B}); reads any name, string
     * and number the kernel takes (Jackson's default limits refuse a 65 536-character field name and
     * a 1 001-digit number, which the kernel answers with its own typed error).
     */
    static final ObjectMapper JSON = JsonMapper.builder(JsonFactory.builder()
                    .streamReadConstraints(StreamReadConstraints.builder()
                            .maxNameLength(Integer.MAX_VALUE)
                            .maxStringLength(Integer.MAX_VALUE)
                            .maxNumberLength(Integer.MAX_VALUE)
                            .build())
                    .build())
            // A tree keeps a BigDecimal as written (`1.50`, not `1.5`).
            .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false)
            .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .disable(JsonWriteFeature.WRITE_HEX_UPPER_CASE)
            .build();

    private final Store store;
    private final Long maxMemoryBytes;
    private Engine engine;

    public Kernel(Store store) {
        this(store, null);
    }

    /** A kernel whose linear memory may not grow past {@code maxMemoryBytes}: a call that needs more traps. */
    public Kernel(Store store, Long maxMemoryBytes) {
        this.store = store;
        this.maxMemoryBytes = maxMemoryBytes;
    }

    public Kernel() {
        this(new MemoryStore());
    }

    public Store store() {
        return store;
    }

    /** The sha256 of the one component this host runs (as {@code sha256sum build/ctxkernel.wasm} prints it). */
    public static String componentSha256() {
        return Engine.componentSha256();
    }

    /** The core module the kernel runs (for checking it against the component). */
    public static byte[] coreModule() {
        return Engine.coreModule();
    }

    private Engine engine() {
        if (engine == null) {
            engine = new Engine(store, maxMemoryBytes);
        }
        return engine;
    }

    private byte[] transact(String command, byte[]... args) {
        Engine inst = engine();
        try {
            store.begin(!READ_ONLY.contains(command));
        } catch (Store.StoreException e) {
            throw new KernelException(ErrorCode.STORAGE_FAILURE, "cannot begin a transaction: " + e.getMessage(), "{}", e);
        }
        CanonicalAbi.Result result;
        try {
            result = inst.call(command, args);
        } catch (RuntimeException | StackOverflowError e) {
            // A trap (the kernel's stack overflowing included) or a host exception:
            // roll back, and give the next call a fresh instance.
            rollback();
            engine = null;
            if (e instanceof RuntimeException host && !(e instanceof ChicoryException)) {
                throw host;
            }
            throw new KernelException(ErrorCode.INTERNAL, TRAPPED, "{}", e);
        }
        if (result.err() != null) {
            rollback();
            throw result.err();
        }
        try {
            store.commit();
        } catch (Store.StoreException e) {
            rollback();
            throw new KernelException(ErrorCode.STORAGE_FAILURE, "commit failed: " + e.getMessage(), "{}", e);
        }
        return result.ok();
    }

    private void rollback() {
        try {
            store.rollback();
        } catch (Store.StoreException ignored) {
            // The transaction is gone either way.
        }
    }

    /** Runs one JSON command; returns the kernel's canonical JSON text verbatim. The request is sent as given. */
    public String call(String command, String request) {
        if (!COMMANDS.contains(command)) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "no command `" + command + "`", "{}", null);
        }
        return new String(transact(command, utf8(request)), StandardCharsets.UTF_8);
    }

    /** {@code put-content} with request text sent as given; returns the kernel's JSON text verbatim. */
    public String call(String command, String request, byte[] content) {
        if (!command.equals("put-content")) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "only put-content carries bytes", "{}", null);
        }
        return new String(transact(command, utf8(request), content), StandardCharsets.UTF_8);
    }

    /** Runs one command with a request object (a map, record or JSON tree) and parses the answer. */
    public <T> T call(String command, Object request, Class<T> type) {
        try {
            return JSON.readValue(call(command, text(request)), type);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A request as the kernel gets it: text as given, an object as JSON (NaN and Infinity refused, as every host does). */
    private static String text(Object request) {
        if (request instanceof String s) {
            return s;
        }
        try {
            JsonNode tree = JSON.valueToTree(request);
            if (!finite(tree)) {
                throw new KernelException(ErrorCode.INVALID_REQUEST, "the request holds a number that is not finite (NaN or Infinity), which JSON cannot carry", "{}", null);
            }
            return JSON.writeValueAsString(tree);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** False when a number in the tree is NaN or infinite. */
    private static boolean finite(JsonNode node) {
        if (node.isFloatingPointNumber()) {
            return Double.isFinite(node.doubleValue());
        }
        for (JsonNode child : node) {
            if (!finite(child)) {
                return false;
            }
        }
        return true;
    }

    /** UTF-8 would turn a lone surrogate into {@code ?}; refuse it instead. */
    private static byte[] utf8(String text) {
        try {
            ByteBuffer bytes = StandardCharsets.UTF_8.newEncoder().encode(CharBuffer.wrap(text));
            return Arrays.copyOf(bytes.array(), bytes.limit());
        } catch (CharacterCodingException e) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "the request is not valid Unicode: it holds a lone surrogate", "{}", e);
        }
    }

    public Envelopes.InfoResponse info() {
        return call("info", Map.of("schemaVersion", 1), Envelopes.InfoResponse.class);
    }

    public Envelopes.ContextPlan planContext(Object request) {
        return call("plan-context", request, Envelopes.ContextPlan.class);
    }

    public Envelopes.AppendEventsResponse appendEvents(Object request) {
        return call("append-events", request, Envelopes.AppendEventsResponse.class);
    }

    public Envelopes.ReadEventsResponse readEvents(Object request) {
        return call("read-events", request, Envelopes.ReadEventsResponse.class);
    }

    public Envelopes.CompactResponse compactContext(Object request) {
        return call("compact-context", request, Envelopes.CompactResponse.class);
    }

    public Envelopes.CompactResponse continueOperation(Object request) {
        return call("continue-operation", request, Envelopes.CompactResponse.class);
    }

    public Envelopes.CompactResponse reconcile(Object request) {
        return call("reconcile", request, Envelopes.CompactResponse.class);
    }

    /** Settles a deletion's pending replicas ({@code reconcile} with a {@code del-…} operation id). */
    public Envelopes.DeletionReceipt reconcileDeletion(Object request) {
        return call("reconcile", request, Envelopes.DeletionReceipt.class);
    }

    public Envelopes.KernelEvents readKernelEvents(Object request) {
        return call("read-kernel-events", request, Envelopes.KernelEvents.class);
    }

    public Envelopes.ProposeResponse proposeMemory(Object request) {
        return call("propose-memory", request, Envelopes.ProposeResponse.class);
    }

    public Envelopes.ConsolidateResponse consolidateMemory(Object request) {
        return call("consolidate-memory", request, Envelopes.ConsolidateResponse.class);
    }

    public Envelopes.MemoryReceipt decideMemory(Object request) {
        return call("decide-memory", request, Envelopes.MemoryReceipt.class);
    }

    public Envelopes.DeletionReceipt deleteMemory(Object request) {
        return call("delete-memory", request, Envelopes.DeletionReceipt.class);
    }

    public Envelopes.PurgeReceipt purgeMemory(Object request) {
        return call("purge-memory", request, Envelopes.PurgeReceipt.class);
    }

    public Envelopes.ReadMemoryResponse readMemory(Object request) {
        return call("read-memory", request, Envelopes.ReadMemoryResponse.class);
    }

    public Envelopes.RecallResponse recallMemory(Object request) {
        return call("recall-memory", request, Envelopes.RecallResponse.class);
    }

    public Envelopes.ResidentSnapshot residentSnapshot(Object request) {
        return call("resident-snapshot", request, Envelopes.ResidentSnapshot.class);
    }

    public Envelopes.ImportResponse importMessages(Object request) {
        return call("import-messages", request, Envelopes.ImportResponse.class);
    }

    /** Plans and renders; the response's {@code bodyJson} is the body's exact text, to send as it is. */
    public Envelopes.RenderResponse renderContext(Object request) {
        String text = call("render-context", text(request));
        try {
            Envelopes.RenderResponse r = JSON.readValue(text, Envelopes.RenderResponse.class);
            return new Envelopes.RenderResponse(r.binding(), r.body(), member(text, "body"), r.budget(), r.format(), r.notes(),
                    r.planDigest(), r.planId(), r.schemaVersion());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The exact text of one member of a JSON object's text. */
    static String member(String json, String name) throws IOException {
        try (JsonParser parser = JSON.createParser(json)) {
            parser.nextToken();
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                boolean wanted = parser.currentName().equals(name);
                parser.nextToken();
                int start = (int) parser.currentTokenLocation().getCharOffset();
                parser.skipChildren();
                // A string is read lazily: its end is known once its text is.
                parser.finishToken();
                if (wanted) {
                    return json.substring(start, (int) parser.currentLocation().getCharOffset());
                }
            }
        }
        throw new IOException("the response has no `" + name + "`");
    }

    public Envelopes.ValidateResponse validateRequest(Object request) {
        return call("validate-request", request, Envelopes.ValidateResponse.class);
    }

    /** Reads every memory entry against its record and names each problem by key; changes nothing. */
    public Envelopes.VerifyReport verifyStore() {
        return call("verify-store", Map.of("schemaVersion", 1), Envelopes.VerifyReport.class);
    }

    /** Stores {@code content} by its sha256. */
    public Envelopes.PutContentResponse putContent(Object request, byte[] content) {
        try {
            return JSON.readValue(call("put-content", text(request), content), Envelopes.PutContentResponse.class);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The stored bytes, verified against their digest by the kernel. */
    public byte[] getContent(Object request) {
        return transact("get-content", utf8(text(request)));
    }

    /** Compacts, asking {@code provider} whenever the kernel waits for a summary. */
    public Envelopes.CompactResponse compact(Object request, Provider provider, Supplier<String> clock) {
        return ProviderLoop.drive(this, compactContext(request), Envelopes.CompactResponse.class, provider, clock);
    }

    /** {@link #compact(Object, Provider, Supplier)} on the wall clock. */
    public Envelopes.CompactResponse compact(Object request, Provider provider) {
        return compact(request, provider, () -> Instant.now().toString());
    }

    /** Extracts candidate memories from a session, asking {@code provider} when the kernel waits for one. */
    public Envelopes.ConsolidateResponse consolidate(Object request, Provider provider, Supplier<String> clock) {
        return ProviderLoop.drive(this, consolidateMemory(request), Envelopes.ConsolidateResponse.class, provider, clock);
    }
}
