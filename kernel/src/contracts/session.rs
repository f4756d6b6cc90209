//! The session log's own records: its head, and the compaction records appended to it.

use crate::canonical::Timestamp;
use std::rc::Rc;
use super::{decode_fields, put, required, ContentRef, ContextItem, Fields, Usage};

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

/// A committed compaction, as it is appended to the session log.
// Its decoder is written out below rather than derived.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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

/// `CompactionRecord`'s decoder. Derived, it was one function of about 15 KB
/// on the JVM host, past what HotSpot compiles (no method over 8 000 bytes),
/// and every plan of a compacted session decodes its records. Written out
/// field by field (`Fields`), as `ContextItem`'s is.
impl<'de> serde::Deserialize<'de> for CompactionRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        decode_fields::<RecordFields, D>(deserializer)
    }
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum RecordKey {
    ArtifactRefs,
    CommittedAt,
    CompactionId,
    CutSeq,
    Degraded,
    Externalized,
    InputDigest,
    InputHead,
    Metrics,
    ModelProfile,
    OperationId,
    OutputDigest,
    PolicyVersion,
    Preserved,
    SessionId,
    StartedAt,
    Strategy,
    Summary,
    Usage,
}

/// The fields of a `CompactionRecord` read so far.
#[derive(Default)]
struct RecordFields {
    artifact_refs: Option<Vec<ContentRef>>,
    committed_at: Option<Timestamp>,
    compaction_id: Option<String>,
    cut_seq: Option<u64>,
    degraded: Option<bool>,
    externalized: Option<Vec<Externalized>>,
    input_digest: Option<String>,
    input_head: Option<Head>,
    metrics: Option<CompactionMetrics>,
    model_profile: Option<String>,
    operation_id: Option<String>,
    output_digest: Option<String>,
    policy_version: Option<String>,
    preserved: Option<Vec<u64>>,
    session_id: Option<String>,
    started_at: Option<Timestamp>,
    strategy: Option<Strategy>,
    summary: Option<Option<Rc<ContextItem>>>,
    usage: Option<Option<Usage>>,
}

impl<'de> Fields<'de> for RecordFields {
    type Key = RecordKey;
    type Record = CompactionRecord;
    const EXPECTING: &'static str = "struct CompactionRecord";

    // Out of line, as the decoder's loop would otherwise take in every arm.
    #[inline(never)]
    fn read<A: serde::de::MapAccess<'de>>(&mut self, key: RecordKey, map: &mut A) -> std::result::Result<(), A::Error> {
        match key {
            RecordKey::ArtifactRefs => put(&mut self.artifact_refs, "artifactRefs", map),
            RecordKey::CommittedAt => put(&mut self.committed_at, "committedAt", map),
            RecordKey::CompactionId => put(&mut self.compaction_id, "compactionId", map),
            RecordKey::CutSeq => put(&mut self.cut_seq, "cutSeq", map),
            RecordKey::Degraded => put(&mut self.degraded, "degraded", map),
            RecordKey::Externalized => put(&mut self.externalized, "externalized", map),
            RecordKey::InputDigest => put(&mut self.input_digest, "inputDigest", map),
            RecordKey::InputHead => put(&mut self.input_head, "inputHead", map),
            RecordKey::Metrics => put(&mut self.metrics, "metrics", map),
            RecordKey::ModelProfile => put(&mut self.model_profile, "modelProfile", map),
            RecordKey::OperationId => put(&mut self.operation_id, "operationId", map),
            RecordKey::OutputDigest => put(&mut self.output_digest, "outputDigest", map),
            RecordKey::PolicyVersion => put(&mut self.policy_version, "policyVersion", map),
            RecordKey::Preserved => put(&mut self.preserved, "preserved", map),
            RecordKey::SessionId => put(&mut self.session_id, "sessionId", map),
            RecordKey::StartedAt => put(&mut self.started_at, "startedAt", map),
            RecordKey::Strategy => put(&mut self.strategy, "strategy", map),
            RecordKey::Summary => put(&mut self.summary, "summary", map),
            RecordKey::Usage => put(&mut self.usage, "usage", map),
        }
    }

    /// The record, or the first missing required field in declaration order.
    #[inline(never)]
    fn finish<E: serde::de::Error>(self) -> std::result::Result<CompactionRecord, E> {
        Ok(CompactionRecord {
            artifact_refs: required(self.artifact_refs, "artifactRefs")?,
            committed_at: required(self.committed_at, "committedAt")?,
            compaction_id: required(self.compaction_id, "compactionId")?,
            cut_seq: required(self.cut_seq, "cutSeq")?,
            degraded: required(self.degraded, "degraded")?,
            externalized: required(self.externalized, "externalized")?,
            input_digest: required(self.input_digest, "inputDigest")?,
            input_head: required(self.input_head, "inputHead")?,
            metrics: required(self.metrics, "metrics")?,
            model_profile: required(self.model_profile, "modelProfile")?,
            operation_id: required(self.operation_id, "operationId")?,
            output_digest: required(self.output_digest, "outputDigest")?,
            policy_version: required(self.policy_version, "policyVersion")?,
            preserved: required(self.preserved, "preserved")?,
            session_id: required(self.session_id, "sessionId")?,
            started_at: required(self.started_at, "startedAt")?,
            strategy: required(self.strategy, "strategy")?,
            summary: self.summary.flatten(),
            usage: self.usage.flatten(),
        })
    }
}
