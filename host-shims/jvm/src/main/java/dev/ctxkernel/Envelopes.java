package dev.ctxkernel;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * The kernel's responses as Java records (field names as on the wire; see
 * {@code wit/schemas}). Item bodies and compaction records stay JSON trees.
 */
public interface Envelopes {
    record Head(String digest, long seq) {}

    record InfoResponse(List<String> commands, JsonNode defaultPolicy, Identity kernel, JsonNode limits,
            int schemaVersion, List<Integer> schemaVersions, StoreInfo store) {}

    record Identity(String name, String version) {}

    record StoreInfo(long memoryRevision, long revision) {}

    record AppendEventsResponse(List<Appended> appended, Head head, int schemaVersion, String sessionId) {}

    record Appended(String digest, String itemId, long seq, long tokenEstimate) {}

    record ReadEventsResponse(List<JsonNode> events, Head head, boolean more, int schemaVersion, String sessionId) {}

    record ContextPlan(PlanBinding binding, BudgetSummary budget, List<PlannedItem> context, String digest,
            List<DroppedItem> dropped, String now, List<PartitionUsage> partitions,
            List<PendingToolCall> pendingToolCalls, String planId, Recovery recovery, int schemaVersion) {}

    record PlanBinding(long memoryRevision, String modelProfile, String policyDigest, String policyVersion,
            Head sessionHead, String sessionId, String sink) {}

    record BudgetSummary(long free, long input, long reserved, long reservedOutput, long safetyMargin, long used,
            long window) {}

    record PartitionUsage(long ceiling, long dropped, long kept, long minimum, long mustKeep, String name, long used) {}

    record PlannedItem(boolean demoted, JsonNode item, String itemId, String keep, String partition, Long seq,
            long tokens) {}

    record DroppedItem(String itemId, String partition, String reason, Long seq, long tokens) {}

    record PendingToolCall(String callId, String itemId, String name, String outcome) {}

    record Recovery(String droppedDigest, long memoryRevision, String policyDigest, Head sessionHead, String sessionId,
            long tokens) {}

    record CompactResponse(JsonNode compaction, Head head, String operationId, String previousOperationId,
            ProviderRequest providerRequest, String reason, int schemaVersion, List<String> states, String status) {}

    record ProviderRequest(int maxTokens, List<ProviderMessage> messages, String model) {}

    record ProviderMessage(String content, String role) {}

    record PutContentResponse(JsonNode contentRef, boolean created, int schemaVersion) {}

    record KernelEvents(List<JsonNode> events, long lastSeq, boolean more, int schemaVersion) {}
}
