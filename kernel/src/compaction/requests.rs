//! The compaction commands' requests and answers, the states and statuses
//! they report, and the operation journal entry.

use crate::canonical::Timestamp;
use crate::contracts::{
    check_id, CompactionRecord, ExpectedHead, Head, ProviderConfig, ProviderRequest, ProviderResponse, ReplicaOutcome, Strategy,
};
use crate::error::{KernelError, Result};
use crate::planner::ModelProfile;
use super::BP;

label! {
/// The states of the compaction state machine, in the order they are visited.
pub enum CompactionState {
    Evaluating,
    Preparing,
    Summarizing,
    Verifying,
    Committing,
    Committed,
    Aborted,
    ReconciliationRequired,
    Stale,
}
}

label! {
/// How a compaction call ended.
pub enum Status {
    Committed,
    /// Committed with the local strategy because the provider failed.
    Degraded,
    AwaitingProvider,
    /// Under the trigger and nothing to externalize: nothing written.
    NotNeeded,
    ReconciliationRequired,
    Stale,
    Aborted,
}
}

contract! {
/// How compaction is shaped; budgets are basis points of the model's input budget.
pub struct CompactionPolicy {
    /// Tool evidence bigger than this moves to the content store.
    pub externalize_over_bytes: u64,
    /// Characters of an externalized text's start and end kept in its summary.
    pub head_chars: u32,
    /// The most recent history left verbatim.
    pub keep_recent_bp: u32,
    /// The longest summary, in tokens.
    pub summary_max_tokens: u32,
    pub tail_chars: u32,
    /// Compact when the session's model-visible tokens exceed this.
    pub trigger_bp: u32,
    pub version: String,
}
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            externalize_over_bytes: 16 << 10,
            head_chars: 1_500,
            keep_recent_bp: 3_000,
            summary_max_tokens: 1_500,
            tail_chars: 500,
            trigger_bp: 8_000,
            version: "ctxk-compaction-1".into(),
        }
    }
}

impl CompactionPolicy {
    pub(super) fn validate(&self) -> Result<()> {
        check_id("policy.version", &self.version)?;
        if u64::from(self.trigger_bp) > BP || u64::from(self.keep_recent_bp) > BP {
            return Err(KernelError::invalid(format!("policy basis points must be within 0..={BP}")));
        }
        if self.summary_max_tokens == 0 || self.summary_max_tokens > 100_000 {
            return Err(KernelError::invalid("policy.summaryMaxTokens must be within 1..=100000"));
        }
        if self.externalize_over_bytes < 1024 {
            return Err(KernelError::invalid("policy.externalizeOverBytes must be at least 1024"));
        }
        Ok(())
    }
}

contract! {
/// `compact-context`.
pub struct CompactRequest {
    /// May a failed provider fall back to the local strategy? (default true)
    #[serde(default = "yes")]
    pub allow_degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_head: Option<ExpectedHead>,
    /// Compact even under the trigger.
    #[serde(default)]
    pub force: bool,
    /// Keep events from this sequence number on verbatim; compact what is
    /// before (the cut moves earlier when it would split a tool pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_from_seq: Option<u64>,
    pub model: ModelProfile,
    pub now: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<CompactionPolicy>,
    /// Required with the provider strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderConfig>,
    pub schema_version: u32,
    pub session_id: String,
    /// Where the summary goes; items not allowed there are not summarized.
    pub sink: String,
    pub strategy: Strategy,
}
}

fn yes() -> bool {
    true
}

contract! {
/// Every compaction command answers with this.
pub struct CompactResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionRecord>,
    pub head: Head,
    pub operation_id: String,
    /// The operation this one settles (after `reconcile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_operation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_request: Option<ProviderRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub schema_version: u32,
    /// The states this call passed through.
    pub states: Vec<CompactionState>,
    pub status: Status,
}
}

contract! {
/// `continue-operation`: the host's answer to `awaiting-provider`.
pub struct ContinueRequest {
    pub now: Timestamp,
    pub operation_id: String,
    pub response: ProviderResponse,
    pub schema_version: u32,
}
}
label! {
pub enum Resolution {
    /// Ask the provider again, under a new operation.
    Retry,
    /// Commit the local summary, marked degraded.
    FallbackLocal,
    /// Give up; nothing is committed.
    Abandon,
}
}

contract! {
/// `reconcile`: settle an operation whose outcome is unknown (or whose
/// provider answer was lost in a crash) under a new operation identity.
pub struct ReconcileRequest {
    pub now: Timestamp,
    /// A compaction operation, or a deletion (`del-…`) with pending replicas.
    pub operation_id: String,
    /// Deletions: what each pending replica reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaOutcome>,
    /// Compactions: how to settle the unknown outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    pub schema_version: u32,
}
}

label! {
pub enum OperationState {
    AwaitingProvider,
    Committed,
    Degraded,
    ReconciliationRequired,
    Stale,
    Aborted,
    /// Settled by `reconcile` under another operation.
    Reconciled,
}
}

contract! {
/// The operation journal entry: enough to resume after a crash.
pub struct Operation {
    pub attempt: u32,
    pub created_at: Timestamp,
    pub operation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The last answer given for it, replayed to a retried call.
    pub receipt: CompactResponse,
    pub request: CompactRequest,
    /// Digest of the provider response that settled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_digest: Option<String>,
    pub schema_version: u32,
    pub state: OperationState,
    pub updated_at: Timestamp,
}
}
