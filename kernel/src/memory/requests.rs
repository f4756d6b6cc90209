//! The memory commands' requests, receipts and views.

use crate::canonical::Timestamp;
use crate::contracts::{AuthorityKind, MemoryRecord, MemoryState, Provenance, RetentionPolicy, Scope, Sensitivity, SourceRef};

contract! {
/// Who asks for a transition. `sessionId` grounds user-explicit authority:
/// the claim must appear in that session's latest raw user message.
pub struct Authority {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    pub kind: AuthorityKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}
}

contract! {
/// What `propose-memory` is asked to remember.
pub struct MemoryCandidate {
    /// Required when no evidence is a session event (whose policy is inherited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_sinks: Option<Vec<String>>,
    pub category: String,
    pub confidence: f64,
    pub content: String,
    /// The content's embedding, computed by the host (for the vector channel of recall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
    pub evidence_refs: Vec<SourceRef>,
    pub importance: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub provenance: Provenance,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_policy: Option<RetentionPolicy>,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Sensitivity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<Timestamp>,
}
}

contract! {
/// `propose-memory`: one or more candidates. With an authority they are
/// activated at once if that authority may activate them (the table in
/// `authority`: a named manager, a policy for words no model or tool wrote,
/// or the user's own sentences); without one they stay candidates.
pub struct ProposeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<Authority>,
    pub candidates: Vec<MemoryCandidate>,
    pub now: Timestamp,
    pub schema_version: u32,
}
}

contract! {
pub struct ProposeResponse {
    pub receipts: Vec<MemoryReceipt>,
    pub schema_version: u32,
}
}

/// Most candidates one proposal may carry.
pub const MAX_CANDIDATES: usize = 1000;

label! {
pub enum Action {
    Activate,
    Reject,
    Reinforce,
    Supersede,
    Archive,
    Expire,
    Correct,
    Promote,
}
}

contract! {
/// `decide-memory`: one transition of one memory.
pub struct DecideRequest {
    pub action: Action,
    /// Promotion to `global` must say so.
    #[serde(default)]
    pub allow_global: bool,
    pub authority: Authority,
    /// supersede: the memory that replaces this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// correct: the corrected text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Refuse with `conflict` unless the record is at this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<u64>,
    pub memory_id: String,
    pub now: Timestamp,
    pub schema_version: u32,
    /// The scope the caller is admitted to; the record must be in it.
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    /// promote: the wider scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_scope: Option<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_scope_id: Option<String>,
}
}

contract! {
/// One audited transition.
pub struct AuditEntry {
    pub action: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<Authority>,
    /// Digest of the content after the transition (never the text itself).
    pub content_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<MemoryState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub revision: u64,
    pub to: MemoryState,
}
}

contract! {
/// What a memory command did to one record.
pub struct MemoryReceipt {
    /// Active records it contradicts (kept, reported).
    pub conflicts: Vec<String>,
    pub memory: MemoryRecord,
    /// A duplicate merged into an existing record by fingerprint.
    pub merged: bool,
    pub schema_version: u32,
    /// Records this one superseded.
    pub superseded: Vec<String>,
}
}

contract! {
/// Which memories a delete or purge means, within its scope.
#[derive(Default)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}
}

contract! {
/// `delete-memory`: bound to who asks, where, what, by which authority,
/// under which request id, and behind which fence.
pub struct DeleteRequest {
    pub authority: Authority,
    /// The deletion's place in the host's order of deletions: a number it
    /// raises with each deletion it orders (a counter, a log position,
    /// milliseconds; any that never goes back). The tombstone keeps it. A
    /// later request to delete the same memory behind an older fence is a
    /// `conflict`, so deletions that arrive out of order (from a replica, a
    /// retried queue) never overwrite a newer tombstone; the same `requestId`
    /// again returns its first receipt whatever the fence. 0 is a valid first
    /// fence.
    pub fence: u64,
    pub now: Timestamp,
    /// Replicas and caches outside this store that must also forget; their
    /// receipts stay pending until `reconcile` reports them.
    #[serde(default)]
    pub replicas: Vec<String>,
    pub request_id: String,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub selector: Selector,
    /// Whose memory (the person or agent the request is for).
    pub subject: String,
}
}

label! {
pub enum PartStatus {
    Done,
    Pending,
    Failed,
}
}

contract! {
/// One store, index, cache or replica's part of a deletion.
pub struct PartReceipt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
    pub status: PartStatus,
    pub target: String,
}
}

label! {
pub enum DeletionStatus {
    /// Every part settled.
    Complete,
    /// Some parts are pending or failed; never reported as done.
    Partial,
}
}

contract! {
/// What stays of a deleted memory: enough to refuse its return.
pub struct Tombstone {
    pub authority: AuthorityKind,
    pub deleted_at: Timestamp,
    /// The deletion it belongs to; purge waits until that one is complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_id: Option<String>,
    /// The `fence` of the deletion that wrote it; a deletion behind it is refused.
    pub fence: u64,
    pub memory_id: String,
    pub purged: bool,
    pub request_id: String,
    /// The record's revision when it was deleted: stored copies at or below it are dead.
    pub revision: u64,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
}
}

contract! {
pub struct DeletionReceipt {
    pub deletion_id: String,
    pub matched: u32,
    pub receipts: Vec<PartReceipt>,
    pub schema_version: u32,
    pub status: DeletionStatus,
    pub tombstones: Vec<Tombstone>,
}
}

contract! {
/// `purge-memory`: a dry run returns the plan and the exact confirmation a
/// real run must repeat.
pub struct PurgeRequest {
    /// Only a named manager purges (see [`authority`]).
    pub authority: Authority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<String>,
    pub dry_run: bool,
    pub now: Timestamp,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    #[serde(default)]
    pub selector: Selector,
}
}

contract! {
pub struct PurgeReceipt {
    pub confirmation: String,
    pub purge_id: String,
    pub schema_version: u32,
    /// `planned` (dry run) or `purged`.
    pub status: String,
    pub targets: Vec<String>,
}
}

contract! {
/// `read-memory`: the memories of one scope, as they stand at `now` or
/// were true at `atTime`.
pub struct ReadMemoryRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_time: Option<Timestamp>,
    #[serde(default)]
    pub include_audit: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub now: Timestamp,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    /// Default: active and reinforced.
    #[serde(default)]
    pub states: Vec<MemoryState>,
}
}

contract! {
pub struct MemoryView {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit: Vec<AuditEntry>,
    /// The state at `now`: stored state, or `expired` once validTo or the TTL passed.
    pub effective_state: MemoryState,
    pub record: MemoryRecord,
}
}

contract! {
pub struct ReadMemoryResponse {
    pub memories: Vec<MemoryView>,
    pub schema_version: u32,
    pub tombstones: Vec<Tombstone>,
}
}
