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

    /** {@code shrunk}: a tool result shown as a placeholder ({@code item} carries it), or null. */
    record PlannedItem(boolean demoted, JsonNode item, String itemId, String keep, String partition, Long seq,
            Shrunk shrunk, long tokens) {}

    /** The tool result a placeholder stands for: its content's sha256 and its own tokens. */
    record Shrunk(String digest, long tokens) {}

    record DroppedItem(String itemId, String partition, String reason, Long seq, long tokens) {}

    record PendingToolCall(String callId, String itemId, String name, String outcome) {}

    record Recovery(String droppedDigest, long memoryRevision, String policyDigest, Head sessionHead, String sessionId,
            long tokens) {}

    /** A response that may be waiting for the host's model. */
    interface ProviderOperation {
        String operationId();

        ProviderRequest providerRequest();

        String status();
    }

    record CompactResponse(JsonNode compaction, Head head, String operationId, String previousOperationId,
            ProviderRequest providerRequest, String reason, int schemaVersion, List<String> states, String status)
            implements ProviderOperation {}

    record ProviderRequest(int maxTokens, List<ProviderMessage> messages, String model) {}

    record ProviderMessage(String content, String role) {}

    record PutContentResponse(JsonNode contentRef, boolean created, int schemaVersion) {}

    record KernelEvents(List<JsonNode> events, long lastSeq, boolean more, int schemaVersion) {}

    record MemoryRecord(long accessCount, List<String> allowedSinks, String authority, String category, double confidence,
            List<String> conflictsWith, String content, String createdAt, String digest, List<JsonNode> evidenceRefs,
            double importance, String key, String lastAccessedAt, String memoryId, JsonNode provenance,
            JsonNode retentionPolicy, long revision, int schemaVersion, String scope, String scopeId, String sensitivity,
            String state, String summary, String supersededBy, List<String> supersedes, List<String> tags,
            String updatedAt, String validFrom, String validTo) {}

    record MemoryReceipt(List<String> conflicts, MemoryRecord memory, boolean merged, int schemaVersion,
            List<String> superseded) {}

    record ProposeResponse(List<MemoryReceipt> receipts, int schemaVersion) {}

    record Skipped(String reason, long seq) {}

    record ConsolidateResponse(String operationId, ProviderRequest providerRequest, String reason,
            List<MemoryReceipt> receipts, long scannedToSeq, int schemaVersion, List<Skipped> skipped, String status)
            implements ProviderOperation {}

    record PartReceipt(String memoryId, String status, String target) {}

    record Tombstone(String authority, String deletedAt, long fence, String memoryId, boolean purged, String requestId,
            long revision, String scope, String scopeId) {}

    record DeletionReceipt(String deletionId, int matched, List<PartReceipt> receipts, int schemaVersion, String status,
            List<Tombstone> tombstones) {}

    record PurgeReceipt(String confirmation, String purgeId, int schemaVersion, String status, List<String> targets) {}

    record MemoryView(List<JsonNode> audit, String effectiveState, MemoryRecord record) {}

    record ReadMemoryResponse(List<MemoryView> memories, int schemaVersion, List<Tombstone> tombstones) {}

    record HistoryEntry(String content, String memoryId, String validTo) {}

    record Recalled(String authority, double confidence, List<String> conflicts, String content, List<JsonNode> evidenceRefs,
            List<HistoryEntry> history, List<String> matchedBy, String memoryId, int rank, double relevance, String scope,
            String scopeId, long tokens, boolean truncated) {}

    record RecallResponse(List<String> degraded, java.util.Map<String, Long> filtered, List<Recalled> memories,
            long memoryRevision, int schemaVersion) {}

    record ResidentSnapshot(List<String> included, long memoryRevision, int schemaVersion, String text, long tokens,
            String version) {}

    record ImportResponse(List<Appended> appended, List<ImportedPart> blobs, ForkPoint forkedFrom, Head head,
            List<ImportedPart> opaque, int schemaVersion, String sessionId, long skipped) {}

    /** The session a fork branched from, and the last of its events the fork holds. */
    record ForkPoint(long seq, String sessionId) {}

    /** A stored binary part ({@code digest}) or an opaque one ({@code type}) of an appended item. */
    record ImportedPart(String digest, String itemId, long part, String type) {}

    record RenderNote(String action, String detail, String itemId, String reason, Shrunk shrunk) {}

    /** {@code bodyJson}: the body's exact text, to send as it is; {@code body} is it parsed. */
    record RenderResponse(PlanBinding binding, JsonNode body, String bodyJson, BudgetSummary budget, String format,
            List<RenderNote> notes, String planDigest, String planId, int schemaVersion) {}

    record Violation(String message, String path, String rule) {}

    record ValidateResponse(String format, int schemaVersion, boolean valid, List<Violation> violations) {}

    record Problem(String key, String kind, String memoryId, String message) {}

    record VerifyReport(java.util.Map<String, Long> checked, boolean ok, long problemCount, List<Problem> problems, int schemaVersion) {}
}
