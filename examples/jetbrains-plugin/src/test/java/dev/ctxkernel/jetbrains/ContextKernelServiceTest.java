package dev.ctxkernel.jetbrains;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ctxkernel.Kernel;

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

    private static final ObjectMapper JSON = new ObjectMapper();

    /** A request written as maps, as its typed record (what the record does not declare is refused). */
    private static <T> T as(Map<String, ?> request, Class<T> type) {
        return JSON.convertValue(request, type);
    }
    private static final java.util.regex.Pattern LEFT_OUT = java.util.regex.Pattern.compile("content (sha256:[0-9a-f]{64})\\]");
    private static final Map<String, String> FILES = Map.of(
            "build.gradle", "plugins { id 'java' }\ndependencies { implementation project(':orders') }\n",
            "orders/OrderTotals.java", "public final class OrderTotals { long cents; }\n",
            "build.log", "> Task :compileJava\n".repeat(3_000) + "error: cannot find symbol OrderTotals\n");

    private static ContextKernelService.Tool readFile() {
        return new ContextKernelService.Tool(
                Map.of("type", "function", "name", "read_file", "description", "Reads a file of the project.",
                        "parameters", Map.of("type", "object", "properties", Map.of("path", Map.of("type", "string")))),
                args -> {
                    String text = FILES.get(args.path("path").asText());
                    if (text == null) {
                        throw new IllegalArgumentException("no such file");
                    }
                    return text;
                });
    }

    /**
     * Answers a Responses request as the model would: every file the latest
     * user message names, read in parallel after a reasoning item (arguments
     * spelled as a model may spell them); else a message. Checks every body
     * it is sent with the kernel's validator, and keeps the items it made.
     */
    private static final class ScriptedResponses implements ContextKernelService.ResponsesModel {
        final Kernel kernel;
        final List<String> bodies = new ArrayList<>();
        final List<Object> violations = new ArrayList<>();
        final Map<String, JsonNode> made = new java.util.HashMap<>();

        ScriptedResponses(Kernel kernel) {
            this.kernel = kernel;
        }

        @Override
        public String create(String body) throws java.io.IOException {
            bodies.add(body);
            JsonNode request = JSON.readTree(body);
            violations.addAll(kernel.validateRequest(as(Map.of("format", "openai-responses", "body", request), Envelopes.ValidateRequest.class)).violations());
            JsonNode input = request.path("input");
            JsonNode last = input.get(input.size() - 1);
            int n = bodies.size();
            ArrayNode output = JSON.createArrayNode();
            List<String> named = new ArrayList<>();
            if (last.path("role").asText().equals("user")) {
                String question = last.path("content").asText();
                FILES.keySet().stream().sorted().filter(question::contains).forEach(named::add);
            }
            // Asked to read back what was left out: the handle of the latest placeholder.
            List<String> handles = new ArrayList<>();
            input.forEach(item -> LEFT_OUT.matcher(item.path("output").asText()).results().forEach(m -> handles.add(m.group(1))));
            if (last.path("content").asText().contains("read back") && !handles.isEmpty()) {
                ObjectNode call = output.addObject().put("type", "function_call").put("id", "fc_" + n + "_back")
                        .put("call_id", "call_" + n + "_back").put("name", "read_result")
                        .put("arguments", "{\"sha256\": \"" + handles.get(handles.size() - 1) + "\"}");
                made.put("call_" + n + "_back", call);
            } else if (!named.isEmpty()) {
                ObjectNode reasoning = output.addObject().put("type", "reasoning").put("id", "rs_" + n).put("encrypted_content", "gAAAAB" + n + "==");
                reasoning.putArray("summary").addObject().put("type", "summary_text").put("text", "Read the named files first.");
                made.put("rs_" + n, reasoning);
                for (int k = 0; k < named.size(); k++) {
                    ObjectNode call = output.addObject().put("type", "function_call").put("id", "fc_" + n + "_" + k)
                            .put("call_id", "call_" + n + "_" + k).put("name", "read_file")
                            .put("arguments", "{\"path\":  \"" + named.get(k) + "\", \"why\": \"r\\u00e9sum\\u00e9 ☕\", \"n\": 1.50}")
                            .put("status", "completed");
                    made.put("call_" + n + "_" + k, call);
                }
            } else {
                String text = last.path("type").asText().equals("function_call_output")
                        ? "OrderTotals moved to the orders module; the build misses the project dependency."
                        : "Noted (" + n + ").";
                ObjectNode message = output.addObject().put("type", "message").put("id", "msg_" + n).put("role", "assistant").put("status", "completed");
                message.putArray("content").addObject().put("type", "output_text").put("text", text).putArray("annotations");
            }
            ObjectNode response = JSON.createObjectNode().put("id", "resp_" + n).put("object", "response").put("status", "completed");
            response.set("output", output);
            return JSON.writeValueAsString(response);
        }
    }

    @Test
    void askingRunsTheParallelCallsTheModelMakesAndSendsTheBodiesTheKernelRendersAsTheirBytes() throws Exception {
        try (ContextKernelService service = open("ide-ask")) {
            service.addTool("read_file", readFile());
            ScriptedResponses model = new ScriptedResponses(service.kernel());
            ContextKernelService.Answer answer = service.ask("Why does the build fail? Read build.gradle and orders/OrderTotals.java.", model, null);
            assertTrue(answer.finished());
            assertEquals("OrderTotals moved to the orders module; the build misses the project dependency.", answer.text());
            assertEquals(model.bodies, answer.bodies(), "the model got the kernel's bytes");
            assertEquals(List.of(), model.violations);
            JsonNode body = JSON.readTree(answer.bodies().get(1));
            assertEquals("gpt-5", body.path("model").asText());
            assertEquals("read_file", body.path("tools").get(0).path("name").asText());
            List<String> types = new ArrayList<>();
            body.path("input").forEach(item -> types.add(item.path("type").asText(item.path("role").asText())));
            assertEquals(List.of("user", "reasoning", "function_call", "function_call", "function_call_output", "function_call_output"), types);
            assertTrue(body.path("instructions").asText().startsWith("You are a coding agent"));
            // The model's own items come back as it made them: encrypted reasoning, ids, arguments byte for byte.
            for (int at : new int[] {1, 2, 3}) {
                JsonNode item = body.path("input").get(at);
                JsonNode made = model.made.get(item.has("call_id") ? item.path("call_id").asText() : item.path("id").asText());
                for (var field : (Iterable<Map.Entry<String, JsonNode>>) made::fields) {
                    assertEquals(field.getValue(), item.path(field.getKey()), field.getKey());
                }
            }
            assertEquals(FILES.get("build.gradle"), body.path("input").get(4).path("output").asText());
        }
    }

    @Test
    void aLongQuestionSeriesStaysValidAndAnOldLargeOutputIsShrunkNotDropped() throws Exception {
        try (ContextKernelService service = open("ide-long")) {
            service.addTool("read_file", readFile());
            ScriptedResponses model = new ScriptedResponses(service.kernel());
            for (int i = 0; i < 12; i++) {
                String question = i % 3 == 0 ? "Step " + i + ": read build.log again." : "Step " + i + ": what next?";
                ContextKernelService.Answer answer = service.ask(question, model, null);
                assertTrue(answer.finished(), "step " + i);
                assertTrue(answer.bodies().get(answer.bodies().size() - 1).contains(question), "the question is in the body that answers it");
            }
            assertEquals(List.of(), model.violations, "every body the model was sent is valid");
            String last = model.bodies.get(model.bodies.size() - 1);
            assertTrue(last.contains("tool result left out to fit the context window"), "an old log is a placeholder");
            assertTrue(last.contains("call_1_0"), "its call is still there");
            var plan = service.plan();
            assertTrue(plan.budget().used() <= plan.budget().input());
            assertTrue(plan.context().stream().anyMatch(p -> p.shrunk() != null));
            // The model asks for what a placeholder left out and reads it whole.
            ContextKernelService.Answer back = service.ask("Step 12: read back what was left out.", model, null);
            assertTrue(back.finished());
            JsonNode input = JSON.readTree(back.bodies().get(back.bodies().size() - 1)).path("input");
            JsonNode output = input.get(input.size() - 1);
            assertEquals("call_" + (model.bodies.size() - 1) + "_back", output.path("call_id").asText());
            assertEquals(FILES.get("build.log"), output.path("output").asText(), "the whole log, as the tool returned it");
            assertEquals(List.of(), model.violations);
            // Only a handle the model was shown is served; any other digest is an error it reads.
            String other = service.kernel().readEvents(Envelopes.ReadEventsRequest.builder().sessionId("ide-long").limit(1L).build())
                    .events().get(0).item().digest();
            for (String handle : List.of(other, "sha256:" + "0".repeat(64), "sha256:XYZ", "")) {
                JsonNode args = JSON.createObjectNode().put("sha256", handle);
                assertThrows(IllegalArgumentException.class, () -> service.readResult.run().apply(args), handle);
            }
        }
    }

    @Test
    void callsTheStepLimitStopsAreAnsweredAsNotRun() throws Exception {
        try (ContextKernelService service = open("ide-limit")) {
            service.addTool("read_file", readFile());
            ContextKernelService.ResponsesModel again = new ContextKernelService.ResponsesModel() {
                int n;

                @Override
                public String create(String body) {
                    n++;
                    return "{\"status\":\"completed\",\"output\":[{\"type\":\"function_call\",\"id\":\"fc_" + n
                            + "\",\"call_id\":\"call_" + n + "\",\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"build.gradle\\\"}\"}]}";
                }
            };
            ContextKernelService.Answer answer = service.ask("Read build.gradle until you are sure.", again, null);
            assertEquals(false, answer.finished());
            assertEquals(8, answer.bodies().size());
            assertTrue(service.plan().pendingToolCalls().isEmpty(), "no call is left unsettled");
            ScriptedResponses model = new ScriptedResponses(service.kernel());
            ContextKernelService.Answer next = service.ask("And now?", model, null);
            assertTrue(next.bodies().get(0).contains("not run: the step limit was reached"));
            assertEquals(List.of(), model.violations);
        }
    }

    @Test
    void aToolThatFailsAnswersWithAnErrorTheModelReads() throws Exception {
        try (ContextKernelService service = open("ide-tools")) {
            ScriptedResponses model = new ScriptedResponses(service.kernel());
            ContextKernelService.Answer answer = service.ask("Read build.gradle.", model, null);
            assertTrue(answer.finished());
            assertTrue(answer.bodies().get(1).contains("error: no tool named read_file"));
            service.addTool("read_file", new ContextKernelService.Tool(readFile().definition(), args -> {
                throw new IllegalStateException("disk on fire");
            }));
            ContextKernelService.Answer failed = service.ask("Now read build.gradle again.", model, null);
            assertTrue(failed.bodies().get(1).contains("error: disk on fire"));
            assertEquals(List.of(), model.violations);
        }
    }

    @Test
    void anAnswerCutShortIsNotKeptAndAnotherWindowWritingMeanwhileIsFollowed() throws Exception {
        try (ContextKernelService service = open("ide-cut")) {
            ContextKernelService.ResponsesModel cut = body -> "{\"status\":\"incomplete\",\"output\":[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}]}";
            ContextKernelService.Answer answer = service.ask("Think hard about the build.", cut, null);
            assertEquals(List.of(false, ""), List.of(answer.finished(), answer.text()));
            try (ContextKernelService other = open("ide-cut")) {
                other.record("user", "From the other window.");
            }
            ScriptedResponses model = new ScriptedResponses(service.kernel());
            ContextKernelService.Answer next = service.ask("Are you there?", model, null);
            assertTrue(next.finished());
            assertTrue(next.bodies().get(0).contains("From the other window.") && next.bodies().get(0).contains("Are you there?"));
            assertEquals(List.of(), model.violations);
        }
    }

    @Test
    void aLongBuildLogIsStoredOnceAndTheChatStillFits() throws Exception {
        try (ContextKernelService service = open("ide-1")) {
            service.record("user", "The Gradle build fails on CI. Find out why.");
            String log = "> Task :compileJava\n".repeat(20_000) + "error: cannot find symbol OrderTotals\n";
            service.recordToolRun("call-1", "gradle build", log, false);
            Envelopes.ContextPlan plan = service.plan();
            assertTrue(plan.budget().used() <= plan.budget().input());
            var result = plan.context().stream().filter(p -> p.item().kind() == Envelopes.ItemKind.TOOL_EVIDENCE).findFirst().orElseThrow();
            var ref = result.item().contentRef();
            assertTrue(ref.summary().contains("cannot find symbol OrderTotals"), "the log's tail is in context");
            assertEquals(log.length(), ref.byteLength());
            byte[] full = service.kernel().getContent(Envelopes.GetContentRequest.builder().objectId(ref.objectId()).sink("model:ide").build());
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
            assertEquals("committed", receipt.status().toString());
            assertEquals(List.of("ide-summarizer"), asked);
            Envelopes.ContextPlan after = service.plan();
            assertTrue(after.context().stream().anyMatch(p -> String.valueOf(p.item().content()).contains("OrderTotals was renamed")));
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
            assertEquals("complete", receipt.status().toString());
            assertTrue(second.recall("what do integration tests need").memories().isEmpty());
        }
    }

    @Test
    void aFactTheUserNeverStatedIsRefused() throws Exception {
        try (ContextKernelService service = open("ide-5")) {
            service.record("user", "What do the integration tests need?");
            var proposed = service.kernel().proposeMemory(as(Map.of("now", clock.get(), "candidates", List.of(Map.of(
                    "category", "fact", "content", "integration tests need a VPN", "scope", "project", "scopeId", "shop-backend",
                    "confidence", 0.9, "importance", 0.5, "provenance", Map.of("origin", "model"),
                    "evidenceRefs", List.of(Map.of("kind", "session", "id", "ide-5", "seq", 1))))), Envelopes.ProposeRequest.class));
            KernelException refused = assertThrows(KernelException.class, () -> service.kernel().decideMemory(as(Map.of(
                    "now", clock.get(), "action", "activate", "scope", "project", "scopeId", "shop-backend",
                    "memoryId", proposed.receipts().get(0).memory().memoryId(),
                    "authority", Map.of("kind", "user-explicit", "sessionId", "ide-5")), Envelopes.DecideRequest.class)));
            assertEquals(ErrorCode.SCOPE_DENIED, refused.code());
        }
    }
}
