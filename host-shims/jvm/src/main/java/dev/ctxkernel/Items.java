package dev.ctxkernel;

import dev.ctxkernel.Envelopes.ContextItem;
import dev.ctxkernel.Envelopes.ItemKind;
import dev.ctxkernel.Envelopes.Origin;
import dev.ctxkernel.Envelopes.Provenance;
import dev.ctxkernel.Envelopes.Role;
import dev.ctxkernel.Envelopes.Scope;
import dev.ctxkernel.Envelopes.Sensitivity;
import dev.ctxkernel.Envelopes.SourceKind;
import dev.ctxkernel.Envelopes.SourceRef;
import dev.ctxkernel.Envelopes.TaskState;
import dev.ctxkernel.Envelopes.TaskStatus;
import dev.ctxkernel.Envelopes.ToolCall;
import dev.ctxkernel.Envelopes.ToolOutcome;
import dev.ctxkernel.Envelopes.ToolResult;
import dev.ctxkernel.Envelopes.Trust;
import java.util.ArrayList;
import java.util.List;

/**
 * Context items for the common cases, with the defaults every host gives
 * (held to {@code tests/items/constructors.json}, as every host's are):
 *
 * <ul>
 *   <li>{@link #user}: the user's words (trust {@code user}, origin {@code user});
 *   <li>{@link #assistant}: the model's answer and the calls it makes (trust {@code verified}, origin {@code model});
 *   <li>{@link #system}: the host's own instructions, a {@code system-policy} item (trust {@code host});
 *   <li>{@link #toolResult}: a tool's answer to a call, as evidence (trust {@code verified}, origin {@code tool};
 *       {@code .toBuilder().trust(Trust.EXTERNAL)} for a tool that reads the web: its words then ground nothing);
 *   <li>{@link #taskState}: where a task stands (trust {@code host});
 *   <li>{@link #pinnedRule}: a project rule kept under any budget (trust {@code host}).
 * </ul>
 *
 * Each gives the same defaults: scope {@code session}, no scope id (the
 * session's, for {@code session}), sensitivity {@code internal}, allowed
 * sinks {@code model:*}, created now by the host clock, source
 * {@code {kind: host, id: host}}, no item id (the kernel derives it) and
 * priority 0. Any of them changes through {@code toBuilder()}. The kernel
 * checks everything it is given; these only spare writing it.
 */
public final class Items {
    private Items() {}

    private static ContextItem.Builder item(ItemKind kind, String text, Trust trust, Origin origin) {
        return ContextItem.builder()
                .schemaVersion(1L)
                .kind(kind)
                .content(text)
                .scope(Scope.SESSION)
                .sourceRef(SourceRef.builder().kind(SourceKind.HOST).id("host").build())
                .provenance(Provenance.builder().origin(origin).build())
                .trust(trust)
                .sensitivity(Sensitivity.INTERNAL)
                .allowedSinks(List.of("model:*"))
                .priority(0)
                .pinned(false)
                .createdAt(HostClock.now());
    }

    /** The user's words: a {@code message} with role {@code user}. */
    public static ContextItem user(String text) {
        return item(ItemKind.MESSAGE, text, Trust.USER, Origin.USER).role(Role.USER).build();
    }

    /** The model's answer: a {@code message} with role {@code assistant}. */
    public static ContextItem assistant(String text) {
        return assistant(text, List.of());
    }

    /**
     * The model's answer and the tool calls it makes (the arguments as the
     * model wrote them). It needs text, calls, or both; calls alone have the
     * empty text, as a provider's transcript gives them.
     */
    public static ContextItem assistant(String text, List<ToolCall> toolCalls) {
        List<ToolCall> calls = toolCalls == null ? List.of() : new ArrayList<>(toolCalls);
        if (text == null && calls.isEmpty()) {
            throw new KernelException(ErrorCode.INVALID_REQUEST, "an assistant item needs text or tool calls", "{\"field\":\"toolCalls\"}", null);
        }
        return item(ItemKind.MESSAGE, text == null ? "" : text, Trust.VERIFIED, Origin.MODEL).role(Role.ASSISTANT)
                .toolCalls(calls.isEmpty() ? null : calls).build();
    }

    /** The host's own instructions: a {@code system-policy} item. */
    public static ContextItem system(String text) {
        return item(ItemKind.SYSTEM_POLICY, text, Trust.HOST, Origin.HOST).build();
    }

    /** What a tool answered to the call {@code callId}: a {@code tool-evidence} item of outcome {@code success}. */
    public static ContextItem toolResult(String callId, String text) {
        return toolResult(callId, text, ToolOutcome.SUCCESS);
    }

    /** What a tool answered to the call {@code callId}: a {@code tool-evidence} item. */
    public static ContextItem toolResult(String callId, String text, ToolOutcome outcome) {
        return item(ItemKind.TOOL_EVIDENCE, text, Trust.VERIFIED, Origin.TOOL)
                .toolResult(ToolResult.builder().callId(callId).outcome(outcome).build()).build();
    }

    /** Where the task {@code taskId} stands: a {@code task-state} item. */
    public static ContextItem taskState(String taskId, TaskStatus status, String text) {
        return item(ItemKind.TASK_STATE, text, Trust.HOST, Origin.HOST)
                .task(TaskState.builder().taskId(taskId).status(status).build()).build();
    }

    /** A project rule the model always sees: a pinned {@code project-rule} item. */
    public static ContextItem pinnedRule(String text) {
        return item(ItemKind.PROJECT_RULE, text, Trust.HOST, Origin.HOST).pinned(true).build();
    }
}
