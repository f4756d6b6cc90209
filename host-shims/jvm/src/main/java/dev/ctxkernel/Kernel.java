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
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
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
 *
 * <p>The typed methods take the generated request records ({@link Envelopes})
 * and fill what a caller leaves out: {@code schemaVersion}, and {@code now}
 * from the kernel's clock (the host's, unless one is given), in the request
 * and in the plan a render request carries. {@code call} sends a request as
 * it is given. Each command is logged to the {@code dev.ctxkernel}
 * {@link System.Logger}: its name, outcome code and duration, never a body.
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
    /** The commands whose request carries {@code now} (the others refuse it). */
    static final Set<String> TAKES_NOW = Set.of(
            "append-events", "compact-context", "consolidate-memory", "continue-operation", "decide-memory", "delete-memory",
            "import-messages", "plan-context", "propose-memory", "purge-memory", "put-content", "read-memory", "recall-memory",
            "reconcile", "resident-snapshot");
    private static final System.Logger LOG = System.getLogger("dev.ctxkernel");
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
    private final Supplier<String> clock;
    private final Long maxMemoryBytes;
    private Engine engine;

    public Kernel(Store store) {
        this(store, HostClock::now, null);
    }

    /** A kernel whose {@code clock} gives {@code now} to requests that leave it out. */
    public Kernel(Store store, Supplier<String> clock) {
        this(store, clock, null);
    }

    /** A kernel whose linear memory may not grow past {@code maxMemoryBytes}: a call that needs more traps. */
    public Kernel(Store store, Supplier<String> clock, Long maxMemoryBytes) {
        this.store = store;
        this.clock = clock;
        this.maxMemoryBytes = maxMemoryBytes;
    }

    public Kernel() {
        this(new MemoryStore());
    }

    public Store store() {
        return store;
    }

    /** Gives {@code now} to requests that leave it out. */
    public Supplier<String> clock() {
        return clock;
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
        long started = System.nanoTime();
        String outcome = "internal";
        try {
            byte[] answer = run(command, args);
            outcome = "ok";
            return answer;
        } catch (KernelException e) {
            outcome = e.code().wireName();
            throw e;
        } finally {
            // The kernel's own answers, errors included, are the caller's to act on; a trap or a failing store is the host's.
            System.Logger.Level level = outcome.equals("internal") || outcome.equals("storage-failure") ? System.Logger.Level.WARNING
                    : System.Logger.Level.DEBUG;
            if (LOG.isLoggable(level)) {
                LOG.log(level, "{0}: {1} in {2} ms", command, outcome, String.format(java.util.Locale.ROOT, "%.2f", (System.nanoTime() - started) / 1e6));
            }
        }
    }

    private byte[] run(String command, byte[]... args) {
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

    /** Answers a provider-backed operation, whichever command began it. */
    JsonNode continued(ObjectNode request) {
        return typed("continue-operation", request, JsonNode.class);
    }

    /** Runs one command with a request object (a map, record or JSON tree), sent as given, and parses the answer. */
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

    /**
     * {@code request} as a JSON object with what the caller left out filled in: {@code schemaVersion},
     * and {@code now} from the kernel's clock where the command takes it (and in a plan a render request carries).
     */
    private ObjectNode filled(String command, Object request) {
        JsonNode tree = request instanceof JsonNode node ? node.deepCopy() : JSON.valueToTree(request);
        if (!(tree instanceof ObjectNode out)) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "a " + command + " request is an object, not " + (tree == null ? "null" : tree.getNodeType().toString().toLowerCase(java.util.Locale.ROOT)), "{}", null);
        }
        // Absent or null is left out: either way the shim fills it.
        if (!out.hasNonNull("schemaVersion")) {
            out.put("schemaVersion", 1);
        }
        if (TAKES_NOW.contains(command) && !out.hasNonNull("now")) {
            out.put("now", clock.get());
        }
        if (command.equals("render-context") && out.get("plan") instanceof ObjectNode plan) {
            out.set("plan", filled("plan-context", plan));
        }
        return out;
    }

    /** Runs one command with a typed request, filled, and parses the answer. */
    private <T> T typed(String command, Object request, Class<T> type) {
        return call(command, filled(command, request), type);
    }

    public Envelopes.InfoResponse info() {
        return typed("info", Map.of(), Envelopes.InfoResponse.class);
    }

    public Envelopes.ContextPlan planContext(Envelopes.PlanRequest request) {
        return typed("plan-context", request, Envelopes.ContextPlan.class);
    }

    public Envelopes.AppendEventsResponse appendEvents(Envelopes.AppendEventsRequest request) {
        return typed("append-events", request, Envelopes.AppendEventsResponse.class);
    }

    public Envelopes.ReadEventsResponse readEvents(Envelopes.ReadEventsRequest request) {
        return typed("read-events", request, Envelopes.ReadEventsResponse.class);
    }

    public Envelopes.CompactResponse compactContext(Envelopes.CompactRequest request) {
        return typed("compact-context", request, Envelopes.CompactResponse.class);
    }

    /** Answers a compaction that is {@code awaiting-provider}. */
    public Envelopes.CompactResponse continueOperation(Envelopes.ContinueRequest request) {
        return typed("continue-operation", request, Envelopes.CompactResponse.class);
    }

    /** Answers an extraction that is {@code awaiting-provider} ({@code continue-operation} with an {@code ext-…} operation id). */
    public Envelopes.ConsolidateResponse continueExtraction(Envelopes.ContinueRequest request) {
        return typed("continue-operation", request, Envelopes.ConsolidateResponse.class);
    }

    /** Settles a compaction whose provider call has an unknown outcome. */
    public Envelopes.CompactResponse reconcile(Envelopes.ReconcileRequest request) {
        return typed("reconcile", request, Envelopes.CompactResponse.class);
    }

    /** Settles a deletion's pending replicas ({@code reconcile} with a {@code del-…} operation id). */
    public Envelopes.DeletionReceipt reconcileDeletion(Envelopes.ReconcileRequest request) {
        return typed("reconcile", request, Envelopes.DeletionReceipt.class);
    }

    public Envelopes.ReadKernelEventsResponse readKernelEvents(Envelopes.ReadKernelEventsRequest request) {
        return typed("read-kernel-events", request, Envelopes.ReadKernelEventsResponse.class);
    }

    public Envelopes.ProposeResponse proposeMemory(Envelopes.ProposeRequest request) {
        return typed("propose-memory", request, Envelopes.ProposeResponse.class);
    }

    public Envelopes.ConsolidateResponse consolidateMemory(Envelopes.ConsolidateRequest request) {
        return typed("consolidate-memory", request, Envelopes.ConsolidateResponse.class);
    }

    public Envelopes.MemoryReceipt decideMemory(Envelopes.DecideRequest request) {
        return typed("decide-memory", request, Envelopes.MemoryReceipt.class);
    }

    public Envelopes.DeletionReceipt deleteMemory(Envelopes.DeleteRequest request) {
        return typed("delete-memory", request, Envelopes.DeletionReceipt.class);
    }

    public Envelopes.PurgeReceipt purgeMemory(Envelopes.PurgeRequest request) {
        return typed("purge-memory", request, Envelopes.PurgeReceipt.class);
    }

    public Envelopes.ReadMemoryResponse readMemory(Envelopes.ReadMemoryRequest request) {
        return typed("read-memory", request, Envelopes.ReadMemoryResponse.class);
    }

    public Envelopes.RecallResponse recallMemory(Envelopes.RecallRequest request) {
        return typed("recall-memory", request, Envelopes.RecallResponse.class);
    }

    public Envelopes.ResidentSnapshot residentSnapshot(Envelopes.ResidentRequest request) {
        return typed("resident-snapshot", request, Envelopes.ResidentSnapshot.class);
    }

    /** Appends what the session does not hold yet of a provider transcript; importing it again appends nothing. */
    public Envelopes.ImportResponse importMessages(Envelopes.ImportRequest request) {
        return typed("import-messages", request, Envelopes.ImportResponse.class);
    }

    /** Plans and renders; the response's {@code bodyJson} is the body's exact text, to send as it is. */
    public Envelopes.RenderResponse renderContext(Envelopes.RenderRequest request) {
        String text = call("render-context", text(filled("render-context", request)));
        try {
            ObjectNode response = (ObjectNode) JSON.readTree(text);
            response.put("bodyJson", member(text, "body"));
            return JSON.treeToValue(response, Envelopes.RenderResponse.class);
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

    public Envelopes.ValidateResponse validateRequest(Envelopes.ValidateRequest request) {
        return typed("validate-request", request, Envelopes.ValidateResponse.class);
    }

    /** Reads every memory entry against its record and names each problem by key; changes nothing. */
    public Envelopes.VerifyReport verifyStore() {
        return typed("verify-store", Map.of(), Envelopes.VerifyReport.class);
    }

    /** Stores {@code content} by its sha256. */
    public Envelopes.PutContentResponse putContent(Envelopes.PutContentRequest request, byte[] content) {
        try {
            return JSON.readValue(call("put-content", text(filled("put-content", request)), content), Envelopes.PutContentResponse.class);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The stored bytes, verified against their digest by the kernel. */
    public byte[] getContent(Envelopes.GetContentRequest request) {
        return transact("get-content", utf8(text(filled("get-content", request))));
    }

    /** {@code get-content} with request text sent as given. */
    public byte[] getContent(String request) {
        return transact("get-content", utf8(request));
    }

    /**
     * Compacts, asking {@code provider} whenever the kernel waits for a summary. An answer of no
     * shape (null, or without text) is a {@code KernelException} ({@code invalid-request}, its detail
     * naming the {@code field} and the {@code operationId} still awaiting).
     */
    public Envelopes.CompactResponse compact(Envelopes.CompactRequest request, Provider provider) {
        return ProviderLoop.drive(this, typed("compact-context", request, JsonNode.class), Envelopes.CompactResponse.class, provider);
    }

    /** Extracts candidate memories from a session, asking {@code provider} like {@link #compact}. */
    public Envelopes.ConsolidateResponse consolidate(Envelopes.ConsolidateRequest request, Provider provider) {
        return ProviderLoop.drive(this, typed("consolidate-memory", request, JsonNode.class), Envelopes.ConsolidateResponse.class, provider);
    }
}
