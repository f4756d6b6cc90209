package dev.ctxkernel.jetbrains;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ctxkernel.Envelopes;
import dev.ctxkernel.Envelopes.AppendEventsRequest;
import dev.ctxkernel.Envelopes.Authority;
import dev.ctxkernel.Envelopes.AuthorityKind;
import dev.ctxkernel.Envelopes.CompactRequest;
import dev.ctxkernel.Envelopes.ContextItem;
import dev.ctxkernel.Envelopes.DecideRequest;
import dev.ctxkernel.Envelopes.DeleteRequest;
import dev.ctxkernel.Envelopes.ExpectedHead;
import dev.ctxkernel.Envelopes.Format;
import dev.ctxkernel.Envelopes.GetContentRequest;
import dev.ctxkernel.Envelopes.History;
import dev.ctxkernel.Envelopes.ImportRequest;
import dev.ctxkernel.Envelopes.MemoryCandidate;
import dev.ctxkernel.Envelopes.ModelProfile;
import dev.ctxkernel.Envelopes.Origin;
import dev.ctxkernel.Envelopes.PlanRequest;
import dev.ctxkernel.Envelopes.ProposeRequest;
import dev.ctxkernel.Envelopes.Provenance;
import dev.ctxkernel.Envelopes.ProviderConfig;
import dev.ctxkernel.Envelopes.PutContentRequest;
import dev.ctxkernel.Envelopes.ReadEventsRequest;
import dev.ctxkernel.Envelopes.RecallRequest;
import dev.ctxkernel.Envelopes.RenderPolicy;
import dev.ctxkernel.Envelopes.RenderRequest;
import dev.ctxkernel.Envelopes.ResidentRequest;
import dev.ctxkernel.Envelopes.Scope;
import dev.ctxkernel.Envelopes.ScopeRef;
import dev.ctxkernel.Envelopes.Selector;
import dev.ctxkernel.Envelopes.Sensitivity;
import dev.ctxkernel.Envelopes.SourceKind;
import dev.ctxkernel.Envelopes.SourceRef;
import dev.ctxkernel.Envelopes.Strategy;
import dev.ctxkernel.Envelopes.ToolCall;
import dev.ctxkernel.Envelopes.ToolOutcome;
import dev.ctxkernel.HostClock;
import dev.ctxkernel.Items;
import dev.ctxkernel.ErrorCode;
import dev.ctxkernel.Kernel;
import dev.ctxkernel.KernelException;
import dev.ctxkernel.Provider;
import dev.ctxkernel.SqliteStore;
import dev.ctxkernel.Store;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The kernel of one open project, as a JetBrains project-level service holds
 * it: one store file under the project's {@code .idea} folder, one kernel,
 * and the IDE's own operations in the kernel's terms. Register it in
 * {@code plugin.xml} as a {@code projectService} whose constructor takes the
 * {@code Project} and passes its base path here; {@link #close()} is its
 * {@code dispose()}.
 *
 * <p>The IDE chat's user actions ("remember this", "forget that") are written
 * into the session first: the kernel accepts user-explicit authority only for
 * what the user's latest message says.
 *
 * <p>The agent ({@link #ask}) speaks the OpenAI Responses API: each question's
 * new input items and the model's output items are handed to the kernel as
 * new turns, and every model call is sent the request body the kernel
 * renders, as its exact bytes.
 */
public final class ContextKernelService implements AutoCloseable {
    private static final ModelProfile MODEL =
            ModelProfile.builder().profile("ide-chat-32k").window(32_768L).reservedOutput(4_096L).safetyMargin(1_024L).build();
    /** Where planned context goes, and what every item the IDE writes may reach. */
    private static final String SINK = "model:ide";
    private static final List<String> SINKS = List.of("model:*", "log");
    /** Longest tool output kept inline in the session. */
    private static final int INLINE_CHARS = 4_000;

    private static final ObjectMapper JSON = new ObjectMapper();
    /** Model calls one question may take, tool rounds included. */
    private static final int MAX_STEPS = 8;
    private static final String INSTRUCTIONS = "You are a coding agent inside the IDE. Read files before you change them.";

    /** The handle a shrunk result's placeholder names its content by. */
    private static final Pattern HANDLE = Pattern.compile("sha256:[0-9a-f]{64}");

    /** A Responses API call: the request body's exact text in, the response's JSON text out. */
    @FunctionalInterface
    public interface ResponsesModel {
        String create(String body) throws IOException, InterruptedException;
    }

    /** A function tool: its definition as the Responses API takes it, and what runs it on the call's arguments. */
    public record Tool(Map<String, Object> definition, Function<JsonNode, String> run) {}

    /**
     * What one question came to: the model's final text, every request body
     * sent for it (exact text), and whether the model stopped asking for tools.
     */
    public record Answer(String text, List<String> bodies, boolean finished) {}

    /** OpenAI's Responses API over the JDK's HTTP client; the kernel's bytes go out as they are. */
    public static ResponsesModel openAi(String apiKey) {
        HttpClient http = HttpClient.newHttpClient();
        return body -> {
            HttpRequest request = HttpRequest.newBuilder(URI.create("https://api.openai.com/v1/responses"))
                    .header("Authorization", "Bearer " + apiKey)
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
                    .build();
            HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
            if (response.statusCode() / 100 != 2) {
                throw new IOException("the Responses API answered " + response.statusCode() + ": " + response.body());
            }
            return response.body();
        };
    }

    private final SqliteStore store;
    private final Kernel kernel;
    private final String project;
    private final String sessionId;
    private final Supplier<String> clock;
    private final Map<String, Tool> tools = new LinkedHashMap<>();
    /** The results the model was shown left out, by the handle their placeholder names. */
    private final Set<String> leftOut = new HashSet<>();
    private long head;

    /**
     * Offered with the added tools (one added by the same name wins): reads
     * back a result the window left out, by the sha256 its placeholder names.
     */
    public final Tool readResult = new Tool(
            Map.of("type", "function", "name", "read_result",
                    "description", "Reads back a tool result that was left out to fit the context window, by the sha256 its placeholder names.",
                    "parameters", Map.of("type", "object", "properties", Map.of("sha256", Map.of("type", "string")), "required", List.of("sha256"))),
            args -> leftOutResult(args.path("sha256").asText()));

    public ContextKernelService(Path projectDir, String sessionId, Supplier<String> clock) {
        try {
            Files.createDirectories(projectDir.resolve(".idea"));
            this.store = new SqliteStore(projectDir.resolve(".idea").resolve("ctxkernel.sqlite").toString());
        } catch (Exception e) {
            throw new IllegalStateException("cannot open the project's ctxkernel store", e);
        }
        this.kernel = new Kernel(store, clock);
        this.project = projectDir.getFileName().toString().replaceAll("[^A-Za-z0-9._-]", "-");
        this.sessionId = sessionId;
        this.clock = clock;
        this.head = headOf(kernel, sessionId);
    }

    /** Where a session's log ends; 0 for a session not started yet. */
    private static long headOf(Kernel kernel, String sessionId) {
        try {
            return kernel.readEvents(ReadEventsRequest.builder().sessionId(sessionId).limit(1L).build()).head().seq();
        } catch (KernelException e) {
            if (e.code() == ErrorCode.NOT_FOUND) {
                return 0;
            }
            throw e;
        }
    }

    public ContextKernelService(Path projectDir, String sessionId) {
        this(projectDir, sessionId, HostClock::now);
    }

    public Kernel kernel() {
        return kernel;
    }

    /** Offers the model a tool from now on. */
    public void addTool(String name, Tool tool) {
        tools.put(name, tool);
    }

    /**
     * One question to the model: model calls until it stops asking for tools
     * (or {@value #MAX_STEPS} calls), each sent the body the kernel renders.
     * With a summarizer, the session is compacted first whenever its
     * conversation no longer fits the window.
     *
     * <p>Each answer is the session's before any tool it asks for runs, so a
     * crash leaves its calls pending rather than forgotten; calls the step
     * limit stops are answered as not run, so none stays unsettled.
     */
    public Answer ask(String question, ResponsesModel model, Provider summarizer) throws IOException, InterruptedException {
        List<Object> turn = new ArrayList<>(List.of(Map.of("role", "user", "content", question)));
        List<String> bodies = new ArrayList<>();
        while (true) {
            hand(turn);
            turn.clear();
            if (summarizer != null && plan().dropped().stream().anyMatch(d -> d.reason() == Envelopes.DropReason.BUDGET_EXHAUSTED)) {
                compact(summarizer);
            }
            Envelopes.RenderResponse rendered = kernel.renderContext(RenderRequest.builder().format(Format.OPENAI_RESPONSES)
                    .plan(planRequest()).policy(RenderPolicy.builder().model("gpt-5").instructions(Envelopes.InstructionRole.DEVELOPER).build())
                    .build());
            rendered.notes().stream().filter(n -> n.shrunk() != null).forEach(n -> leftOut.add(n.shrunk().digest()));
            String body = rendered.bodyJson();
            bodies.add(body);
            JsonNode response = JSON.readTree(model.create(body));
            List<JsonNode> output = new ArrayList<>();
            response.path("output").forEach(output::add);
            // An answer cut short may end in reasoning with nothing after it, which belongs to no item.
            while (!output.isEmpty() && output.get(output.size() - 1).path("type").asText().equals("reasoning")) {
                output.remove(output.size() - 1);
            }
            if (output.isEmpty()) {
                return new Answer("", bodies, false);
            }
            hand(new ArrayList<>(output));
            List<JsonNode> calls = output.stream().filter(item -> item.path("type").asText().equals("function_call")).toList();
            StringBuilder text = new StringBuilder();
            output.stream().filter(item -> item.path("type").asText().equals("message"))
                    .forEach(item -> item.path("content").forEach(part -> text.append(part.path("text").asText())));
            if (calls.isEmpty()) {
                return new Answer(text.toString(), bodies, response.path("status").asText("completed").equals("completed"));
            }
            boolean stopped = bodies.size() >= MAX_STEPS;
            for (JsonNode call : calls) {
                String result = stopped ? "not run: the step limit was reached" : run(call);
                turn.add(Map.of("type", "function_call_output", "call_id", call.path("call_id").asText(), "output", result));
            }
            if (stopped) {
                hand(turn);
                return new Answer(text.toString(), bodies, false);
            }
        }
    }

    /** A call's output as the model reads it; a failing or unknown tool is an error it can read too. */
    private String run(JsonNode call) {
        Tool tool = offered().get(call.path("name").asText());
        if (tool == null) {
            return "error: no tool named " + call.path("name").asText();
        }
        try {
            return tool.run().apply(JSON.readTree(call.path("arguments").asText()));
        } catch (IOException | RuntimeException e) {
            return "error: " + e.getMessage();
        }
    }

    private Map<String, Tool> offered() {
        Map<String, Tool> offered = new LinkedHashMap<>(tools);
        offered.putIfAbsent("read_result", readResult);
        return offered;
    }

    /**
     * A result the window left out, served back by the kernel. Only a
     * placeholder the model was shown is answered: the plan admitted that
     * result for this sink, and nothing else of the session.
     */
    private String leftOutResult(String sha256) {
        String handle = sha256.startsWith("sha256:") ? sha256 : "sha256:" + sha256;
        if (!HANDLE.matcher(handle).matches() || !leftOut.contains(handle)) {
            throw new IllegalArgumentException("no result was left out with content " + handle);
        }
        List<Envelopes.Event> events = kernel.readEvents(
                ReadEventsRequest.builder().sessionId(sessionId).contentDigest(handle).limit(1L).build()).events();
        ContextItem item = events.isEmpty() ? null : events.get(0).item();
        if (item != null && item.content() != null) {
            return item.content();
        }
        if (item == null || item.contentRef() == null) {
            throw new IllegalStateException("the session no longer holds content " + handle);
        }
        // An externalized result: its bytes, for this sink.
        byte[] bytes = kernel.getContent(GetContentRequest.builder().objectId(item.contentRef().objectId()).sink(SINK).build());
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /**
     * Hands new input items to the kernel as new turns; the instructions and
     * tool definitions go with them and are stored again only when changed.
     */
    private void hand(List<Object> items) {
        try {
            importTurns(items);
        } catch (KernelException e) {
            if (e.code() != ErrorCode.STALE) {
                throw e;
            }
            // Another IDE window wrote to this session: these items follow what it wrote.
            head = e.detail().path("currentHead").path("seq").asLong();
            importTurns(items);
        }
    }

    private void importTurns(List<Object> items) {
        Map<String, Object> transcript = new LinkedHashMap<>(Map.of("instructions", INSTRUCTIONS, "input", items));
        transcript.put("tools", offered().values().stream().map(Tool::definition).toList());
        head = kernel.importMessages(ImportRequest.builder().sessionId(sessionId).expectedHead(at(head))
                .format(Format.OPENAI_RESPONSES).history(History.NEW).sensitivity(Sensitivity.INTERNAL).allowedSinks(SINKS)
                .transcript(JSON.valueToTree(transcript)).build()).head().seq();
    }

    private PlanRequest planRequest() {
        return PlanRequest.builder().sessionId(sessionId).model(MODEL).sink(SINK).build();
    }

    private static ExpectedHead at(long seq) {
        return ExpectedHead.builder().seq(seq).build();
    }

    /** Appends a chat message; returns the session's new head. */
    public long record(String role, String text) {
        return append(inSession(switch (role) {
            case "user" -> Items.user(text);
            case "assistant" -> Items.assistant(text);
            default -> throw new IllegalArgumentException("a chat message is the user's or the assistant's, not " + role);
        }));
    }

    /**
     * A tool the assistant ran (a build, the tests): the call, then its output.
     * A long output is stored once by its sha256 and referenced; the model sees
     * the reference's summary (its head and tail, saying what is left out) and
     * the full text stays one {@code get-content} away.
     */
    public long recordToolRun(String callId, String tool, String output, boolean succeeded) {
        append(inSession(Items.assistant("Running " + tool + ".", List.of(ToolCall.builder().callId(callId).name(tool).build()))));
        ContextItem result = Items.toolResult(callId, output, succeeded ? ToolOutcome.SUCCESS : ToolOutcome.ERROR);
        if (output.length() > INLINE_CHARS) {
            result = result.toBuilder().content(null).contentRef(kernel.putContent(
                    PutContentRequest.builder().mimeType("text/plain").allowedSinks(SINKS).sensitivity(Sensitivity.INTERNAL).build(),
                    output.getBytes(StandardCharsets.UTF_8)).contentRef()).build();
        }
        return append(inSession(result));
    }

    /** The context of the next model call. */
    public Envelopes.ContextPlan plan() {
        return kernel.planContext(planRequest());
    }

    /** Compacts the chat, with the IDE's model when given (else the kernel's local summary). */
    public Envelopes.CompactResponse compact(Provider provider) {
        CompactRequest.Builder request = CompactRequest.builder().sessionId(sessionId).model(MODEL).sink(SINK)
                .strategy(provider == null ? Strategy.LOCAL : Strategy.PROVIDER);
        if (provider != null) {
            request.provider(ProviderConfig.builder().model("ide-summarizer").maxTokens(800L).build());
        }
        Envelopes.CompactResponse receipt = kernel.compact(request.build(), provider);
        head = receipt.head().seq();
        return receipt;
    }

    /** Remembers a project fact the user stated in the chat. */
    public Envelopes.MemoryReceipt rememberProjectFact(String fact) {
        record("user", "Remember for this project: " + fact);
        MemoryCandidate candidate = MemoryCandidate.builder().category("fact").content(fact).scope(Scope.PROJECT).scopeId(project)
                .confidence(0.9).importance(0.6).provenance(Provenance.builder().origin(Origin.USER).build())
                .evidenceRefs(List.of(SourceRef.builder().kind(SourceKind.SESSION).id(sessionId).seq(head).build())).build();
        String now = clock.get();
        Envelopes.ProposeResponse proposed = kernel.proposeMemory(ProposeRequest.builder().now(now).candidates(List.of(candidate)).build());
        return kernel.decideMemory(DecideRequest.builder().now(now).action(Envelopes.Action.ACTIVATE)
                .memoryId(proposed.receipts().get(0).memory().memoryId()).scope(Scope.PROJECT).scopeId(project)
                .authority(userExplicit()).build());
    }

    public Envelopes.RecallResponse recall(String query) {
        return kernel.recallMemory(RecallRequest.builder().query(query).k(5L)
                .scopes(List.of(ScopeRef.builder().scope(Scope.PROJECT).scopeId(project).build())).sink(SINK).build());
    }

    /** The project's standing memories as one block for every prompt, under a token cap. */
    public Envelopes.ResidentSnapshot projectSnapshot(int maxTokens) {
        return kernel.residentSnapshot(ResidentRequest.builder().scope(Scope.PROJECT).scopeId(project).sink(SINK)
                .maxTokens((long) maxTokens).build());
    }

    /** Forgets a memory at the user's request; the receipt lists every removed part. */
    public Envelopes.DeletionReceipt forget(String memoryId) {
        record("user", "Forget memory " + memoryId);
        // The memory revision only grows: a replica replaying older writes cannot revive the memory.
        long fence = kernel.info().store().memoryRevision();
        return kernel.deleteMemory(DeleteRequest.builder().requestId("forget-" + memoryId).subject(sessionId)
                .scope(Scope.PROJECT).scopeId(project).selector(Selector.builder().memoryIds(List.of(memoryId)).build())
                .authority(userExplicit()).fence(fence).build());
    }

    public Store store() {
        return store;
    }

    @Override
    public void close() throws Store.StoreException {
        store.close();
    }

    private Authority userExplicit() {
        return Authority.builder().kind(AuthorityKind.USER_EXPLICIT).sessionId(sessionId).build();
    }

    /** An item as this session writes it: named and sourced by the event it becomes, for the IDE's sinks, created by its clock. */
    private ContextItem inSession(ContextItem item) {
        long seq = head + 1;
        return item.toBuilder().itemId(String.format("%s-%06d", sessionId, seq)).allowedSinks(SINKS).createdAt(clock.get())
                .sourceRef(SourceRef.builder().kind(SourceKind.SESSION).id(sessionId).seq(seq).build()).build();
    }

    private long append(ContextItem item) {
        try {
            head = kernel.appendEvents(AppendEventsRequest.builder().sessionId(sessionId).expectedHead(at(head))
                    .items(List.of(item)).build()).head().seq();
            return head;
        } catch (KernelException e) {
            // Another IDE window wrote to this session: take its head and let the caller retry.
            if (e.code() == ErrorCode.STALE) {
                head = e.detail().path("currentHead").path("seq").asLong();
            }
            throw e;
        }
    }
}
