//! The memory record: a durable fact under governance, and its states.

use crate::canonical::{self, Timestamp};
use crate::error::{KernelError, Result};
use super::{check_id, check_sinks, check_version, Provenance, RetentionMode, RetentionPolicy, Scope, Sensitivity, SourceRef};

label! {
/// Who may move a memory, strongest last: a rule of the deployment, an
/// administrator, the user in their own words.
pub enum AuthorityKind {
    Policy,
    Management,
    UserExplicit,
}
}

impl AuthorityKind {
    pub fn name(self) -> &'static str {
        match self {
            AuthorityKind::Policy => "policy",
            AuthorityKind::Management => "management",
            AuthorityKind::UserExplicit => "user-explicit",
        }
    }
}

label! {
pub enum MemoryState {
    Candidate,
    Active,
    Reinforced,
    Superseded,
    Archived,
    Expired,
    Deleted,
    Purged,
}
}

impl MemoryState {
    pub fn name(self) -> &'static str {
        match self {
            MemoryState::Candidate => "candidate",
            MemoryState::Active => "active",
            MemoryState::Reinforced => "reinforced",
            MemoryState::Superseded => "superseded",
            MemoryState::Archived => "archived",
            MemoryState::Expired => "expired",
            MemoryState::Deleted => "deleted",
            MemoryState::Purged => "purged",
        }
    }
}

contract! {
/// A durable fact under governance. `confidence` (how reliable),
/// `importance` (how useful later) and a query's relevance stay separate.
pub struct MemoryRecord {
    pub access_count: u64,
    pub allowed_sinks: Vec<String>,
    /// The authority that made it active (user-explicit outranks management,
    /// which outranks policy); absent while it is a candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<AuthorityKind>,
    pub category: String,
    pub confidence: f64,
    /// Active records it contradicts that no rule could rank: both stay, and recall reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts_with: Vec<String>,
    pub content: String,
    pub created_at: Timestamp,
    pub digest: String,
    pub evidence_refs: Vec<SourceRef>,
    pub importance: f64,
    /// The slot a fact fills (`user.city`): one true value per slot and scope at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accessed_at: Option<Timestamp>,
    pub memory_id: String,
    pub provenance: Provenance,
    pub retention_policy: RetentionPolicy,
    pub revision: u64,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sensitivity: Sensitivity,
    pub state: MemoryState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub updated_at: Timestamp,
    /// When the fact became true, and stopped being true (temporal validity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<Timestamp>,
}
}

impl MemoryRecord {
    /// When it stops being current, in nanoseconds since the epoch: its
    /// `validTo`, or the end of its TTL, whichever comes first.
    pub fn ends_at(&self) -> Option<i128> {
        let ttl_end = match (self.retention_policy.mode, self.retention_policy.ttl_seconds) {
            (RetentionMode::Ttl, Some(ttl)) => Some(self.created_at.nanos_after(ttl)),
            _ => None,
        };
        let valid_end = self.valid_to.as_ref().map(Timestamp::unix_nanos);
        match (ttl_end, valid_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn validate(&self) -> Result<()> {
        check_version("memory record", self.schema_version)?;
        check_id("memoryId", &self.memory_id)?;
        check_id("category", &self.category)?;
        if let Some(key) = &self.key {
            check_id("key", key)?;
        }
        if let Some(scope_id) = &self.scope_id {
            check_id("scopeId", scope_id)?;
        }
        if self.content.trim().is_empty() {
            return Err(KernelError::invalid("a memory needs non-empty content"));
        }
        for (what, value) in [("confidence", self.confidence), ("importance", self.importance)] {
            if !(0.0..=1.0).contains(&value) {
                return Err(KernelError::invalid(format!("{what} must be within 0..=1")));
            }
        }
        self.provenance.validate()?;
        self.evidence_refs.iter().try_for_each(SourceRef::validate)?;
        self.tags.iter().try_for_each(|t| check_id("tags[]", t))?;
        check_sinks("allowedSinks[]", &self.allowed_sinks)?;
        self.retention_policy.validate()?;
        if let (Some(from), Some(to)) = (&self.valid_from, &self.valid_to) {
            if to < from {
                return Err(KernelError::invalid("validTo is before validFrom"));
            }
        }
        if !canonical::is_digest(&self.digest) {
            return Err(KernelError::invalid("digest must be `sha256:` and 64 lowercase hex digits"));
        }
        Ok(())
    }
}

contract! {
/// One replica's report on a pending deletion.
pub struct ReplicaOutcome {
    pub deleted: bool,
    pub replica: String,
}
}
