package dev.ctxkernel;

import com.dylibso.chicory.runtime.ByteArrayMemory;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import com.dylibso.chicory.wasm.WasmModule;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * The plans {@link HugeMethodTest} watches the kernel make: the parity
 * fixtures' plans and the benchmark's (host-shims/rust/benches/kernel.rs),
 * each run on a {@link Guest}, a kernel instance over a machine it is given.
 */
final class PlanWorkloads {
    private static final String NOW = "2026-06-01T12:00:00Z";
    private static final String INTERFACE = "ctxkernel:kernel/kernel@0.1.0#";

    private PlanWorkloads() {}

    /** Each workload by name: the replayable fixtures in order, then the benchmark's two plans. */
    static Map<String, Consumer<Guest>> all() throws IOException {
        Map<String, Consumer<Guest>> workloads = new LinkedHashMap<>();
        try (Stream<Path> fixtures = Files.list(Path.of("../../tests/parity/fixtures"))) {
            for (Path path : fixtures.sorted().toList()) {
                JsonNode fixture = Kernel.JSON.readTree(path.toFile());
                if (replayable(fixture)) {
                    workloads.put(path.getFileName().toString(), guest -> replay(guest, fixture));
                }
            }
        }
        List<ObjectNode> items = sessionItems(10_000);
        workloads.put("10 000 items inline", guest ->
                guest.planned(planRequest(32_768).set("items", Kernel.JSON.valueToTree(items))));
        // A stored session enters the same functions at 1 000 events as at 10 000,
        // in a fraction of the time.
        workloads.put("a stored 1 000-event session", guest -> {
            ObjectNode append = object("schemaVersion", 1, "sessionId", "bench", "expectedHead", object("seq", 0), "now", NOW);
            append.set("items", Kernel.JSON.valueToTree(items.subList(0, 1000)));
            if (guest.call("append-events", append).ok() == null) {
                throw new AssertionError("the benchmark's session was refused");
            }
            guest.planned(planRequest(32_768).put("sessionId", "bench"));
        });
        return workloads;
    }

    // ---- Parity fixtures ----

    /** A fixture with a plan, made of kernel calls only: no host actions, second instances or content bytes. */
    static boolean replayable(JsonNode fixture) {
        boolean plans = false;
        for (JsonNode step : fixture.get("steps")) {
            String command = step.path("command").asText();
            if (command.isEmpty() || command.endsWith("-content") || step.has("instance")) {
                return false;
            }
            plans |= command.equals("plan-context");
        }
        return plans;
    }

    /** Runs a fixture's calls in order, as the parity runner does. */
    static void replay(Guest guest, JsonNode fixture) {
        List<JsonNode> responses = new ArrayList<>();
        for (JsonNode step : fixture.get("steps")) {
            JsonNode request = resolve(step.get("request"), responses);
            String text = request.isTextual() ? request.asText() : request.toString();
            String command = step.get("command").asText();
            CanonicalAbi.Result result = command.equals("plan-context") ? guest.plan(text) : guest.call(command, text);
            responses.add(result.ok() == null ? null : readTree(result.ok()));
        }
    }

    /** Replaces each {@code {"$ref": "N#/pointer"}} with that value of step N's response (tests/parity/README.md). */
    static JsonNode resolve(JsonNode value, List<JsonNode> responses) {
        if (value.isObject() && value.has("$ref")) {
            String[] ref = value.get("$ref").asText().split("#", 2);
            JsonNode response = responses.get(Integer.parseInt(ref[0]));
            JsonNode found = response == null ? null : response.at(ref[1]);
            if (found == null || found.isMissingNode()) {
                return value;
            }
            if (value.has("format")) {
                return Kernel.JSON.getNodeFactory().textNode(value.get("format").asText().replace("{}", found.asText()));
            }
            return found;
        }
        if (value.isObject()) {
            ObjectNode copy = Kernel.JSON.createObjectNode();
            value.fields().forEachRemaining(e -> copy.set(e.getKey(), resolve(e.getValue(), responses)));
            return copy;
        }
        if (value.isArray()) {
            ArrayNode copy = Kernel.JSON.createArrayNode();
            value.forEach(v -> copy.add(resolve(v, responses)));
            return copy;
        }
        return value;
    }

    // ---- The benchmark's items ----

    private static final String[] EN = {"the", "planner", "keeps", "tool", "results", "with", "their", "calls", "under", "a",
        "token", "budget"};
    private static final String[] ZH = {"上下文", "预算", "工具", "结果", "保留", "会话", "记忆", "压缩"};

    static String words(int n, int i) {
        List<String> out = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            out.add(i % 3 == 0 ? ZH[(i + k) % ZH.length] : EN[(i * 7 + k) % EN.length]);
        }
        return String.join(" ", out);
    }

    /** The benchmark's {@code session_items}: messages in two languages, parallel tool calls with results, task state. */
    static List<ObjectNode> sessionItems(int n) {
        List<ObjectNode> items = new ArrayList<>();
        for (int i = 0; items.size() < n; i++) {
            int seq = items.size() + 1;
            ObjectNode item = switch (i % 10) {
                case 0, 2, 5, 8 -> item(seq, "message", words(15 + (i * 13) % 90, i)).put("role", "user");
                case 3 -> {
                    ObjectNode m = item(seq, "message", "calling two tools " + words(10, i)).put("role", "assistant");
                    m.putArray("toolCalls")
                            .add(object("callId", "c" + i + "a", "name", "grep"))
                            .add(object("callId", "c" + i + "b", "name", "read_file"));
                    yield m;
                }
                case 4, 6 -> {
                    String call = i % 10 == 4 ? "c" + (i - 1) + "a" : "c" + (i - 3) + "b";
                    ObjectNode r = item(seq, "tool-evidence", words(60 + (i * 31) % 300, i));
                    r.set("toolResult", object("callId", call, "outcome", "success"));
                    yield r;
                }
                case 7 -> {
                    ObjectNode t = item(seq, "task-state", "step " + i + ": " + words(12, i));
                    t.set("task", object("taskId", "t" + i % 7, "status", i % 20 == 7 ? "in-progress" : "done"));
                    yield t;
                }
                default -> item(seq, "message", words(20 + (i * 7) % 120, i)).put("role", "assistant");
            };
            if (i % 10 == 6 && items.size() + 1 > n) {
                item = item(seq, "message", words(5, i)).put("role", "user");
            }
            items.add(item);
        }
        return items;
    }

    static ObjectNode item(int seq, String kind, String content) {
        ObjectNode item = object("schemaVersion", 1, "itemId", "b" + seq, "kind", kind, "scope", "session",
                "sourceRef", object("kind", "session", "id", "bench", "seq", seq), "provenance", object("origin", "user"),
                "trust", "user", "sensitivity", "internal", "priority", 0, "pinned", false, "createdAt", NOW, "content", content);
        item.putArray("allowedSinks").add("model:*");
        return item;
    }

    static ObjectNode planRequest(int window) {
        return object("schemaVersion", 1, "now", NOW, "sink", "model:bench", "model", object("profile", "bench-" + (window >> 10) + "k",
                "window", window, "reservedOutput", 4096, "safetyMargin", 1024));
    }

    static ObjectNode object(Object... pairs) {
        ObjectNode node = Kernel.JSON.createObjectNode();
        for (int i = 0; i < pairs.length; i += 2) {
            node.set((String) pairs[i], Kernel.JSON.valueToTree(pairs[i + 1]));
        }
        return node;
    }

    private static JsonNode readTree(byte[] json) {
        try {
            return Kernel.JSON.readTree(json);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** One kernel instance on a given machine over a fresh in-memory store; calls as {@link Kernel} makes them. */
    static final class Guest {
        private final Store store = new MemoryStore();
        private final Instance instance;
        private final CanonicalAbi abi;

        Guest(WasmModule module, Function<Instance, Machine> machines) {
            CanonicalAbi[] abi = new CanonicalAbi[1];
            this.instance = Instance.builder(module)
                    .withImportValues(Imports.of(store, inst -> abi[0]))
                    .withMachineFactory(machines)
                    .withMemoryFactory(ByteArrayMemory::new)
                    .build();
            this.abi = abi[0] = new CanonicalAbi(instance);
        }

        /** A plan, recorded if the kernel answers it: a refused plan runs its error path once, not the plan path. */
        CanonicalAbi.Result plan(Object request) {
            HugeMethodTest.Trace.start();
            CanonicalAbi.Result result = null;
            try {
                result = call("plan-context", request);
            } finally {
                HugeMethodTest.Trace.stop(result != null && result.ok() != null);
            }
            return result;
        }

        /** A plan that must succeed: the benchmark's workload is not an error path. */
        void planned(Object request) {
            CanonicalAbi.Result result = plan(request);
            if (result.ok() == null) {
                throw new AssertionError("the benchmark's plan was refused: " + result.err().getMessage());
            }
        }

        CanonicalAbi.Result call(String command, Object request) {
            byte[] bytes = (request instanceof String s ? s : request.toString()).getBytes(StandardCharsets.UTF_8);
            try {
                store.begin(!command.equals("plan-context"));
                int[] lowered = abi.lower(bytes);
                int ret = (int) instance.export(INTERFACE + command).apply(lowered[0], lowered[1])[0];
                CanonicalAbi.Result result = abi.readResult(ret);
                instance.export("cabi_post_" + INTERFACE + command).apply(ret);
                if (result.ok() != null) {
                    store.commit();
                } else {
                    store.rollback();
                }
                return result;
            } catch (Store.StoreException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
