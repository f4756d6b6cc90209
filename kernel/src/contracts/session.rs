//! The session log's own records: its head, and the compaction records appended to it.

use crate::canonical::Timestamp;
use std::rc::Rc;
use super::{ContentRef, ContextItem, Usage};

contract! {
/// A session log's head: how many events it has and the chain digest over them.
pub struct Head {
    pub digest: String,
    pub seq: u64,
}
}

contract! {
/// The head a writer built on. Without `digest`, only the sequence is compared.
pub struct ExpectedHead {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub seq: u64,
}
}

label! {
pub enum Strategy {
    /// Structural trimming and an extractive summary, in the kernel.
    Local,
    /// A summary written by the host's model through `continue-operation`.
    Provider,
}
}

contract! {
/// Metrics of a compaction; no body text.
pub struct CompactionMetrics {
    pub degraded: bool,
    /// committedAt − startedAt, from the requests' `now`.
    pub duration_ms: i64,
    pub externalized_bytes: u64,
    pub externalized_items: u32,
    /// Model-visible tokens of the session before.
    pub input_tokens: u64,
    /// … and after.
    pub output_tokens: u64,
    /// output / input, in thousandths.
    pub ratio_permille: u64,
    pub span_events: u32,
    pub strategy: Strategy,
    /// Span items not summarized because the sink may not see them.
    pub withheld: u32,
}
}

contract! {
/// An item whose body moved to the content store.
pub struct Externalized {
    pub content_ref: ContentRef,
    pub item_id: String,
    pub seq: u64,
}
}

contract! {
/// A committed compaction, as it is appended to the session log.
pub struct CompactionRecord {
    /// The archive of the compacted span and every externalized object.
    pub artifact_refs: Vec<ContentRef>,
    pub committed_at: Timestamp,
    pub compaction_id: String,
    /// History up to and including this sequence number is summarized
    /// (except `preserved`); 0 when only externalizing.
    pub cut_seq: u64,
    pub degraded: bool,
    pub externalized: Vec<Externalized>,
    /// Digest over the span's items (ids and digests).
    pub input_digest: String,
    pub input_head: Head,
    pub metrics: CompactionMetrics,
    pub model_profile: String,
    pub operation_id: String,
    /// Digest over the summary, the preserved items and the externalized refs.
    pub output_digest: String,
    pub policy_version: String,
    /// Sequence numbers at or before the cut that stay verbatim.
    pub preserved: Vec<u64>,
    pub session_id: String,
    pub started_at: Timestamp,
    pub strategy: Strategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Rc<ContextItem>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}
}
