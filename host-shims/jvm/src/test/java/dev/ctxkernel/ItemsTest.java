package dev.ctxkernel;

import static dev.ctxkernel.Fixtures.NOW;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ctxkernel.Envelopes.AppendEventsRequest;
import dev.ctxkernel.Envelopes.ContextItem;
import dev.ctxkernel.Envelopes.ExpectedHead;
import dev.ctxkernel.Envelopes.PlanRequest;
import dev.ctxkernel.Envelopes.ReadEventsRequest;
import dev.ctxkernel.Envelopes.TaskStatus;
import dev.ctxkernel.Envelopes.ToolCall;
import dev.ctxkernel.Envelopes.ToolOutcome;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The typed API: item constructors held to the shared file every host is held to, requests
 * filled by the shim, provider answers of no shape, logging, and the error's code.
 */
class ItemsTest {
    private static final JsonNode CONSTRUCTORS = read("../../tests/items/constructors.json");
    private static final Envelopes.ModelProfile MODEL =
            Envelopes.ModelProfile.builder().profile("test").window(16000L).reservedOutput(1000L).safetyMargin(500L).build();

    private static JsonNode read(String path) {
        try {
            return Kernel.JSON.readTree(Files.readString(Path.of(path)));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** One case's constructor, with its options set through the item's builder (as a caller would). */
    private static ContextItem make(JsonNode c) throws Exception {
        JsonNode args = c.get("args");
        JsonNode options = c.get("options");
        String text = args.get(0).isNull() ? null : args.get(0).asText();
        ContextItem made = switch (c.get("make").asText()) {
            case "user" -> Items.user(text);
            case "assistant" -> options.has("toolCalls")
                    ? Items.assistant(text, List.of(Kernel.JSON.treeToValue(options.get("toolCalls"), ToolCall[].class)))
                    : Items.assistant(text);
            case "system" -> Items.system(text);
            case "toolResult" -> options.has("outcome")
                    ? Items.toolResult(text, args.get(1).asText(), Kernel.JSON.treeToValue(options.get("outcome"), ToolOutcome.class))
                    : Items.toolResult(text, args.get(1).asText());
            case "taskState" -> Items.taskState(text, Kernel.JSON.treeToValue(args.get(1), TaskStatus.class), args.get(2).asText());
            case "pinnedRule" -> Items.pinnedRule(text);
            default -> throw new AssertionError("no constructor " + c.get("make"));
        };
        ContextItem.Builder builder = made.toBuilder();
        for (var option : (Iterable<Map.Entry<String, JsonNode>>) options::fields) {
            String name = option.getKey();
            if (name.equals("toolCalls") || name.equals("outcome")) {
                continue; // arguments of their constructors, above
            }
            Method set = builderMethod(name.equals("source") ? "sourceRef" : name);
            Object value = Kernel.JSON.convertValue(option.getValue(), Kernel.JSON.constructType(set.getGenericParameterTypes()[0]));
            set.invoke(builder, value);
        }
        return builder.build();
    }

    private static Method builderMethod(String name) {
        for (Method m : ContextItem.Builder.class.getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == 1) {
                return m;
            }
        }
        throw new AssertionError("ContextItem.Builder has no " + name);
    }

    @Test
    void eachConstructorGivesTheSharedItem() throws Exception {
        Set<String> makers = new HashSet<>();
        for (JsonNode c : CONSTRUCTORS.get("cases")) {
            makers.add(c.get("make").asText());
            // As JSON text, read back: the numbers then compare by value, as on the wire.
            assertEquals(c.get("item"), Kernel.JSON.readTree(Kernel.JSON.writeValueAsString(make(c))), c.get("make") + " " + c.get("args"));
        }
        Set<String> declared = new HashSet<>();
        for (Method m : Items.class.getDeclaredMethods()) {
            if (java.lang.reflect.Modifier.isPublic(m.getModifiers())) {
                declared.add(m.getName());
            }
        }
        assertEquals(declared, makers);
        for (JsonNode c : CONSTRUCTORS.get("refused")) {
            KernelException e = assertThrows(KernelException.class, () -> make(c));
            assertEquals(c.get("code").asText(), e.code().toString());
            assertEquals(c.get("field").asText(), e.detail().get("field").asText());
        }
    }

    @Test
    void everyConstructedItemIsOneTheKernelPlansAndAppends() throws Exception {
        List<ContextItem> made = new ArrayList<>();
        List<JsonNode> planned = new ArrayList<>();
        int n = 0;
        for (JsonNode c : CONSTRUCTORS.get("cases")) {
            ContextItem item = make(c);
            // Named by case, so the plan's answer can be read back per case.
            made.add(item.itemId() == null ? item.toBuilder().itemId("case-" + n).build() : item);
            planned.add(c.get("planned"));
            n++;
        }
        Kernel kernel = new Kernel(new MemoryStore(), () -> NOW);
        var plan = kernel.planContext(PlanRequest.builder().sink("model:test").model(MODEL).items(made).build());
        Map<String, JsonNode> placed = new HashMap<>();
        plan.context().forEach(e -> placed.put(e.itemId(), Kernel.JSON.createObjectNode().put("partition", e.partition().toString())));
        plan.dropped().forEach(d -> placed.put(d.itemId(), Kernel.JSON.createObjectNode().put("dropped", d.reason().toString())));
        assertEquals(planned, made.stream().map(i -> placed.get(i.itemId())).toList());
        var appended = kernel.appendEvents(AppendEventsRequest.builder().sessionId("s1")
                .expectedHead(ExpectedHead.builder().seq(0L).build()).items(made).build());
        assertEquals(made.size(), appended.head().seq());
    }

    @Test
    void createdAtDefaultsToTheHostClockToTheMillisecond() {
        Instant before = Instant.now().minusMillis(1);
        String made = Items.user("hi").createdAt();
        assertTrue(made.matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z"), made);
        Instant at = Instant.parse(made);
        assertTrue(!at.isBefore(before) && !at.isAfter(Instant.now().plusMillis(1)), made);
    }

    @Test
    void theShimFillsVersionAndNowOnlyWhereTheSchemaHasThem() throws Exception {
        Set<String> takesNow = new HashSet<>();
        try (var schemas = Files.list(Path.of("../../wit/schemas"))) {
            for (Path p : schemas.filter(p -> p.getFileName().toString().endsWith(".request.schema.json")).toList()) {
                if (read(p.toString()).get("properties").has("now")) {
                    takesNow.add(p.getFileName().toString().replace(".request.schema.json", ""));
                }
            }
        }
        assertEquals(takesNow, Kernel.TAKES_NOW);
        List<String> ticks = new ArrayList<>();
        Kernel kernel = new Kernel(new MemoryStore(), () -> {
            ticks.add(String.format("2026-06-01T12:00:%02d.000Z", ticks.size()));
            return ticks.get(ticks.size() - 1);
        });
        kernel.appendEvents(AppendEventsRequest.builder().sessionId("s1").expectedHead(ExpectedHead.builder().seq(0L).build())
                .items(List.of(Items.user("hello"))).build());
        assertEquals("hello", kernel.readEvents(ReadEventsRequest.builder().sessionId("s1").build()).events().get(0).item().content());
        assertEquals(1, ticks.size(), "read-events takes no now: none was asked");
        PlanRequest plan = PlanRequest.builder().sessionId("s1").sink("model:test").model(MODEL).build();
        assertEquals(NOW, kernel.planContext(plan.toBuilder().now(NOW).build()).now());
        assertEquals(1, ticks.size(), "a given now is kept");
        assertEquals("2026-06-01T12:00:01Z", kernel.planContext(plan).now());
        var rendered = kernel.renderContext(Envelopes.RenderRequest.builder().format(Envelopes.Format.ANTHROPIC_MESSAGES).plan(plan).build());
        assertEquals(rendered.body(), Kernel.JSON.readTree(rendered.bodyJson()));
        assertEquals(3, ticks.size(), "the plan a render request carries is filled");
        KernelException missing = assertThrows(KernelException.class,
                () -> kernel.call("plan-context", Map.of("sessionId", "s1", "sink", "model:test", "model", MODEL), JsonNode.class));
        assertEquals(ErrorCode.INVALID_REQUEST, missing.code());
        KernelException future = assertThrows(KernelException.class, () -> kernel.planContext(plan.toBuilder().schemaVersion(99L).build()));
        assertEquals(ErrorCode.UNSUPPORTED_SCHEMA, future.code());
    }

    @Test
    void anExtractionIsContinuedAsAnExtraction() {
        Kernel kernel = new Kernel(new MemoryStore(), () -> NOW);
        kernel.appendEvents(AppendEventsRequest.builder().sessionId("s1").expectedHead(ExpectedHead.builder().seq(0).build())
                .items(List.of(Items.user("Please remember that staging runs in Frankfurt."))).build());
        var waiting = kernel.consolidateMemory(Envelopes.ConsolidateRequest.builder().sessionId("s1").strategy(Envelopes.Strategy.PROVIDER)
                .provider(Envelopes.ProviderConfig.builder().model("extractor").maxTokens(300).build()).build());
        assertEquals("awaiting-provider", waiting.status().toString());
        var done = kernel.continueExtraction(Envelopes.ContinueRequest.builder().operationId(waiting.operationId())
                .response(new Envelopes.ProviderResponse.Success("{\"memories\": [{\"seq\": 1, \"category\": \"fact\", \"content\": \"staging runs in Frankfurt\"}]}",
                        Envelopes.Usage.builder().inputTokens(40).outputTokens(12).build()))
                .build());
        assertEquals("proposed", done.status().toString());
        assertEquals("staging runs in Frankfurt", done.receipts().get(0).memory().content());
    }

    @Test
    void nullIsFilledAsAbsentIs() throws Exception {
        Kernel kernel = new Kernel(new MemoryStore(), () -> "2026-06-01T12:00:07.000Z");
        ObjectNode request = (ObjectNode) Kernel.JSON.readTree("{\"schemaVersion\":null,\"now\":null,\"sink\":\"model:test\"}");
        request.set("model", Kernel.JSON.valueToTree(MODEL));
        assertEquals("2026-06-01T12:00:07Z", kernel.planContext(Fixtures.as(request, PlanRequest.class)).now());
        assertEquals(ErrorCode.INVALID_REQUEST, assertThrows(KernelException.class,
                () -> Items.assistant(null, null)).code());
    }

    @Test
    void theErrorCodePrintsKebabCaseAndTheMessageDoesNotRepeatIt() {
        KernelException e = assertThrows(KernelException.class,
                () -> new Kernel().readEvents(ReadEventsRequest.builder().sessionId("s1").limit(-1L).build()));
        assertEquals("invalid-request", e.code().toString());
        assertFalse(e.getMessage().startsWith("invalid-request") || e.getMessage().startsWith("INVALID_REQUEST"), e.getMessage());
        assertTrue(e.toString().startsWith("KernelException[invalid-request]: "), e.toString());
    }

    private static Kernel seeded() {
        Kernel kernel = new Kernel(new MemoryStore(), () -> NOW);
        kernel.appendEvents(Fixtures.as(Fixtures.append(0, 120), AppendEventsRequest.class));
        return kernel;
    }

    @Test
    void aProviderAnswerOfNoShapeIsATypedErrorAndLeavesTheOperationAwaiting() {
        Envelopes.CompactRequest request = Fixtures.as(Fixtures.compact("provider"), Envelopes.CompactRequest.class);
        Map<String, Provider> wrong = Map.of("answer", ask -> null, "text", ask -> new Provider.Answer(null, 1, 1));
        for (var entry : wrong.entrySet()) {
            Kernel kernel = seeded();
            KernelException e = assertThrows(KernelException.class, () -> kernel.compact(request, entry.getValue()));
            assertEquals(ErrorCode.INVALID_REQUEST, e.code());
            assertEquals(entry.getKey(), e.detail().get("field").asText());
            ObjectNode answer = Kernel.JSON.createObjectNode().put("operationId", e.detail().get("operationId").asText());
            answer.putObject("response").put("outcome", "success").put("text", "Words.")
                    .putObject("usage").put("inputTokens", 1).put("outputTokens", 1);
            assertEquals("committed", kernel.continueOperation(Fixtures.as(answer, Envelopes.ContinueRequest.class)).status().toString());
        }
        KernelException negative = assertThrows(KernelException.class, () -> seeded().compact(request, ask -> new Provider.Answer("x", -1, 1)));
        assertEquals(ErrorCode.INVALID_REQUEST, negative.code());
    }

    @Test
    void eachCommandIsLoggedWithItsOutcomeAndNeverItsBody() {
        String secret = "sk-live-4f9a-do-not-log";
        List<LogRecord> records = new ArrayList<>();
        Handler handler = new Handler() {
            @Override
            public void publish(LogRecord record) {
                records.add(record);
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        Logger logger = Logger.getLogger("dev.ctxkernel");
        Level level = logger.getLevel();
        logger.setLevel(Level.ALL);
        logger.addHandler(handler);
        try {
            Kernel kernel = new Kernel(new MemoryStore(), () -> NOW);
            AppendEventsRequest append = AppendEventsRequest.builder().sessionId("s1").expectedHead(ExpectedHead.builder().seq(0L).build())
                    .items(List.of(Items.user("my key is " + secret))).build();
            kernel.appendEvents(append);
            assertThrows(KernelException.class, () -> kernel.appendEvents(append));
            kernel.planContext(PlanRequest.builder().sessionId("s1").sink("model:test").model(MODEL).build());
        } finally {
            logger.removeHandler(handler);
            logger.setLevel(level);
        }
        assertEquals(List.of("append-events ok FINE", "append-events stale FINE", "plan-context ok FINE"),
                records.stream().map(r -> r.getParameters()[0] + " " + r.getParameters()[1] + " " + r.getLevel()).toList());
        String all = records.stream().map(r -> r.getMessage() + List.of(r.getParameters())).collect(Collectors.joining("\n"));
        assertFalse(all.contains(secret), all);
    }
}
