//! Governed long-term memory: the lifecycle of section 9, one state machine.
//!
//! ```text
//! propose ──► CANDIDATE ──reject──► DELETED (tombstoned, audited)
//!                 │ activate (authority)
//!                 ▼
//!              ACTIVE ──new evidence / reinforce──► REINFORCED
//!   ACTIVE|REINFORCED ──supersede──► SUPERSEDED   (lineage both ways)
//!   ACTIVE|REINFORCED ──expire─────► EXPIRED      (also by validTo / TTL at `now`)
//!   ACTIVE|REINFORCED|SUPERSEDED|EXPIRED ──archive──► ARCHIVED
//!   any live state ──delete-memory (fenced)──► DELETED ──purge-memory──► PURGED
//! ```
//!
//! Every transition names its authority (user-explicit, management, policy)
//! and is audited. A model never activates anything by itself: user-explicit
//! authority must be grounded in the latest raw user message of the session.
//! Facts that fill the same slot (`key`) never overwrite each other by write
//! order: the stronger authority, or a later validity, or a user correction
//! supersedes; otherwise both stay and the conflict is reported.
//!
//! Deletion writes a tombstone carrying the record's revision and the
//! caller's fence first, so a replica replaying an old write cannot bring the
//! memory back: every read checks the tombstone.

use crate::authority::{self, Act, Grounding, Subject, UserMessage};
use crate::canonical::{self, Timestamp};
use crate::contracts::{
    check_id, check_scope, check_version, sink_admits, AuthorityKind, MemoryRecord, MemoryState, Origin, Provenance, RetentionMode,
    RetentionPolicy, Scope, Sensitivity, SinkPolicy, SourceKind, SourceRef, SCHEMA_VERSION,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::secrets;
use crate::session::Event;
use crate::store::{keys, Db};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// Largest memory body, in bytes: memories are facts, not documents.
pub const MAX_CONTENT_BYTES: usize = 16 << 10;
/// Confidence never reaches certainty by repetition.
const CONFIDENCE_CEILING: f64 = 0.95;
/// Most records one delete or purge may touch.
pub const MAX_SELECTED: usize = 100_000;

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
    /// A monotonic token: writes carrying an older fence cannot revive the memory.
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

contract! {
struct Counter {
    revision: u64,
}
}

contract! {
struct AuditCounter {
    next: u64,
}
}

contract! {
/// A scope's membership entry: the key is escaped, the value says the id.
/// A lookup entry pointing at a record (scope membership, slot, fingerprint).
struct Link {
    memory_id: String,
}
}


contract! {
struct Deletion {
    pending: Vec<String>,
    receipt: DeletionReceipt,
}
}

contract! {
/// A deleted memory's words, by fingerprint, in the scope it was in.
struct ContentFence {
    deleted_at: Timestamp,
    memory_id: String,
}
}

// ---- keys

/// A scope's key segment: its name, then its id escaped, or `-` for none.
/// `-` is the one id [`keys::segment`] writes as `-`, so that id is escaped
/// too: no id is written the way "no id" is.
fn scope_segment(scope: Scope, scope_id: &Option<String>) -> String {
    let id = match scope_id.as_deref() {
        None => "-".to_string(),
        Some("-") => "%2D".to_string(),
        Some(id) => keys::segment(id),
    };
    format!("{}/{id}", scope.name())
}

fn record_key(id: &str) -> String {
    format!("mem/rec/{}", keys::segment(id))
}

fn tombstone_key(id: &str) -> String {
    format!("mem/tomb/{}", keys::segment(id))
}

fn member_key(scope: Scope, scope_id: &Option<String>, id: &str) -> String {
    format!("mem/scope/{}/{}", scope_segment(scope, scope_id), keys::segment(id))
}

fn members_prefix(scope: Scope, scope_id: &Option<String>) -> String {
    format!("mem/scope/{}/", scope_segment(scope, scope_id))
}

fn slot_key(scope: Scope, scope_id: &Option<String>, key: &str, id: &str) -> String {
    format!("{}{}", slot_prefix(scope, scope_id, key), keys::segment(id))
}

fn slot_prefix(scope: Scope, scope_id: &Option<String>, key: &str) -> String {
    format!("mem/slot/{}/{}/", scope_segment(scope, scope_id), keys::segment(key))
}

fn fingerprint_key(scope: Scope, scope_id: &Option<String>, fingerprint: &str) -> String {
    format!("mem/fp/{}/{}", scope_segment(scope, scope_id), fingerprint.trim_start_matches("sha256:"))
}

fn audit_key(id: &str, n: u64) -> String {
    format!("mem/audit/{}/{n:08}", keys::segment(id))
}

/// Keyed by the scope and the normalized content alone: a re-extraction under
/// another category or key is still the same words.
fn content_fence_key(scope: Scope, scope_id: &Option<String>, content: &str) -> Result<String> {
    // Words as a reader sees them: `Frank\u{200b}furt` and `Ｆrankfurt` are `frankfurt`.
    let digest = canonical::digest_value(&json!([scope, scope_id, authority::words(content).join(" ")]))?;
    Ok(format!("mem/fence/{}/{}", scope_segment(scope, scope_id), digest.trim_start_matches("sha256:")))
}

/// Refuses a candidate whose words were deleted from its scope, unless one of
/// its session evidence events is the user saying them after the deletion.
pub fn check_fence(db: &mut Db, candidate: &MemoryCandidate) -> Result<()> {
    let Some((_, fence)) = db.get::<ContentFence>(&content_fence_key(candidate.scope, &candidate.scope_id, &candidate.content)?)? else {
        return Ok(());
    };
    for reference in candidate.evidence_refs.iter().filter(|r| r.kind == SourceKind::Session) {
        let event = db.get::<Event>(&keys::session_event(&reference.id, reference.seq.unwrap_or(0)))?;
        if let Some((_, event)) = event {
            let said_again = event.appended_at > fence.deleted_at
                && event.item.as_ref().is_some_and(|item| {
                    crate::session::grounds_user_authority(item)
                        && item.content.as_deref().is_some_and(|text| authority::says(text, &candidate.content))
                });
            if said_again {
                return Ok(());
            }
        }
    }
    Err(KernelError::new(ErrorCode::Conflict, format!("these words were deleted as memory `{}`; only the user saying them again brings them back", fence.memory_id))
        .with_detail(json!({"deletedMemoryId": fence.memory_id, "deletedAt": fence.deleted_at})))
}

fn version_key(id: &str, revision: u64) -> String {
    format!("mem/ver/{}/{revision:08}", keys::segment(id))
}

// ---- helpers

/// Text as the user-grounding and fingerprint checks compare it.
fn normalize(text: &str) -> String {
    let lowered: String = text
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    lowered.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn fingerprint(scope: Scope, scope_id: &Option<String>, category: &str, key: &Option<String>, content: &str) -> Result<String> {
    canonical::digest_value(&json!([scope, scope_id, category, key, normalize(content)]))
}

fn memory_revision_bump(db: &mut Db) -> Result<u64> {
    let current = db.get::<Counter>(keys::MEMORY_REVISION)?;
    let expected = current.as_ref().map_or(0, |(r, _)| *r);
    let next = current.map_or(0, |(_, c)| c.revision) + 1;
    db.put(keys::MEMORY_REVISION, &Counter { revision: next }, Some(expected))?;
    Ok(next)
}

/// The ids of a scope's memories (at most one more than the ceiling, so callers can tell).
fn members(db: &mut Db, scope: Scope, scope_id: &Option<String>) -> Result<Vec<String>> {
    let entries: Vec<(String, Link)> = db.scan(&members_prefix(scope, scope_id), "", MAX_SELECTED + 1)?;
    Ok(entries.into_iter().map(|(_, m)| m.memory_id).collect())
}

/// The record and its store revision, unless a tombstone fences it off.
pub fn load(db: &mut Db, id: &str) -> Result<Option<(u64, MemoryRecord)>> {
    let Some((store_revision, record)) = db.get::<MemoryRecord>(&record_key(id))? else {
        return Ok(None);
    };
    Ok(is_live(db, &record)?.then_some((store_revision, record)))
}

/// Every tombstone's memory id and the revision it buried.
pub fn tombstones(db: &mut Db) -> Result<BTreeMap<String, u64>> {
    Ok(db.scan::<Tombstone>("mem/tomb/", "", usize::MAX)?.into_iter().map(|(_, t)| (t.memory_id, t.revision)).collect())
}

/// False for a replayed copy of a deleted memory: dead, whatever the store holds.
fn is_live(db: &mut Db, record: &MemoryRecord) -> Result<bool> {
    Ok(db.get::<Tombstone>(&tombstone_key(&record.memory_id))?.is_none_or(|(_, tomb)| record.revision > tomb.revision))
}

/// The state a record is in at `now` (validity and retention applied).
pub fn effective_state(record: &MemoryRecord, now: &Timestamp) -> MemoryState {
    let live = matches!(record.state, MemoryState::Active | MemoryState::Reinforced | MemoryState::Candidate);
    if !live {
        return record.state;
    }
    if record.ends_at().is_some_and(|end| end <= now.unix_nanos()) && record.state != MemoryState::Candidate {
        MemoryState::Expired
    } else {
        record.state
    }
}

fn audit(db: &mut Db, record: &MemoryRecord, action: &str, from: Option<MemoryState>, authority: Option<&Authority>, at: &Timestamp, note: Option<String>) -> Result<()> {
    let counter_key = format!("mem/audit/{}/next", keys::segment(&record.memory_id));
    let current = db.get::<AuditCounter>(&counter_key)?;
    let revision = current.as_ref().map_or(0, |(r, _)| *r);
    let n = current.map_or(0, |(_, c)| c.next);
    let entry = AuditEntry {
        action: action.into(),
        at: at.clone(),
        authority: authority.cloned(),
        content_digest: record.digest.clone(),
        from,
        note,
        revision: record.revision,
        to: record.state,
    };
    db.put(&audit_key(&record.memory_id, n), &entry, Some(0))?;
    db.put(&counter_key, &AuditCounter { next: n + 1 }, Some(revision))?;
    Ok(())
}

fn event_data(record: &MemoryRecord) -> serde_json::Value {
    json!({
        "memoryId": record.memory_id, "scope": record.scope, "state": record.state, "revision": record.revision,
        "category": record.category, "digest": record.digest,
    })
}

fn save(db: &mut Db, store_revision: u64, record: &mut MemoryRecord, now: &Timestamp) -> Result<()> {
    record.updated_at = now.clone();
    record.digest = canonical::digest_bytes(record.content.as_bytes());
    record.validate()?;
    db.put(&record_key(&record.memory_id), record, Some(store_revision))?;
    link(db, record)?;
    crate::recall::index(db, record)?;
    Ok(())
}

/// A record's lookup entries: its scope membership, its slot, its fingerprint.
fn links(record: &MemoryRecord) -> Result<Vec<String>> {
    let mut out = vec![member_key(record.scope, &record.scope_id, &record.memory_id)];
    if let Some(key) = &record.key {
        out.push(slot_key(record.scope, &record.scope_id, key, &record.memory_id));
    }
    let fp = fingerprint(record.scope, &record.scope_id, &record.category, &record.key, &record.content)?;
    out.push(fingerprint_key(record.scope, &record.scope_id, &fp));
    Ok(out)
}

fn link(db: &mut Db, record: &MemoryRecord) -> Result<()> {
    for key in links(record)? {
        // A state change keeps the same entries; rewriting them would only churn revisions.
        if db.get::<Link>(&key)?.is_some_and(|(_, l)| l.memory_id == record.memory_id) {
            continue;
        }
        db.put(&key, &Link { memory_id: record.memory_id.clone() }, None)?;
    }
    Ok(())
}

/// Removes the lookup entries that point at this record (a fingerprint may
/// have moved on to a newer record with the same text).
fn unlink(db: &mut Db, record: &MemoryRecord) -> Result<()> {
    for key in links(record)? {
        if db.get::<Link>(&key)?.is_some_and(|(_, l)| l.memory_id == record.memory_id) {
            db.remove(&key, None)?;
        }
    }
    Ok(())
}

/// The latest raw user message of a session, if any.
/// The latest message the user wrote in a session: role user, origin user,
/// trust at most `user` (session keeps the pointer only for such messages).
fn latest_user_message(db: &mut Db, session: &str) -> Result<Option<UserMessage>> {
    let Some((_, pointer)) = db.get::<serde_json::Value>(&keys::session_last_user(session))? else {
        return Ok(None);
    };
    let seq = pointer["seq"].as_u64().unwrap_or(0);
    let item = db.get::<Event>(&keys::session_event(session, seq))?.and_then(|(_, e)| e.item);
    Ok(item.filter(|i| crate::session::grounds_user_authority(i)).and_then(|i| i.content).map(|text| UserMessage { text }))
}

/// Checks one transition against the authority table (see [`authority`]).
fn authorize(
    db: &mut Db,
    act: Act,
    authority: &Authority,
    origin: Origin,
    evidence: &[SourceRef],
    grounding: Grounding,
) -> Result<()> {
    let message = match (authority.kind, authority.session_id.as_deref()) {
        (AuthorityKind::UserExplicit, None) => {
            return Err(KernelError::invalid(
                "authority.sessionId is required: user-explicit authority is grounded by the user's latest message in that session",
            )
            .with_detail(json!({"field": "authority.sessionId"})))
        }
        (AuthorityKind::UserExplicit, Some(session)) => {
            check_id("authority.sessionId", session)?;
            latest_user_message(db, session)?
        }
        _ => None,
    };
    let mut evidence_trust = None;
    if act == Act::Activate && authority.kind == AuthorityKind::Policy {
        for reference in evidence.iter().filter(|r| r.kind == SourceKind::Session) {
            let seq = reference.seq.unwrap_or(0);
            let trust = db.get::<Event>(&keys::session_event(&reference.id, seq))?.and_then(|(_, e)| e.item).map(|i| i.trust);
            evidence_trust = evidence_trust.max(trust);
        }
    }
    authority::check(act, authority.kind, authority.actor.as_deref(), &Subject { origin, evidence_trust }, grounding, message.as_ref())
}

fn admit_scope(record: &MemoryRecord, scope: Scope, scope_id: &Option<String>) -> Result<()> {
    if record.scope != scope || record.scope_id != *scope_id {
        return Err(KernelError::new(ErrorCode::ScopeDenied, format!("memory `{}` is not in the requested scope", record.memory_id))
            .with_detail(json!({"memoryId": record.memory_id, "scope": scope, "scopeId": scope_id})));
    }
    Ok(())
}

fn illegal(record: &MemoryRecord, action: Action) -> KernelError {
    KernelError::new(
        ErrorCode::IllegalTransition,
        format!("memory `{}` is {:?}; `{:?}` is not allowed from there", record.memory_id, record.state, action).to_lowercase(),
    )
    .with_detail(json!({"memoryId": record.memory_id, "state": record.state, "action": action}))
}

fn reinforce_confidence(old: f64, new: f64) -> f64 {
    let base = old.max(new);
    (base + (1.0 - base) * 0.25).min(CONFIDENCE_CEILING.max(base))
}

/// Active records of the same scope filling the same slot.
fn same_slot(db: &mut Db, record: &MemoryRecord) -> Result<Vec<(u64, MemoryRecord)>> {
    let Some(key) = &record.key else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let slot: Vec<(String, Link)> = db.scan(&slot_prefix(record.scope, &record.scope_id, key), "", MAX_SELECTED)?;
    for (_, Link { memory_id: id }) in slot {
        if id == record.memory_id {
            continue;
        }
        if let Some((rev, other)) = load(db, &id)? {
            if other.key.as_ref() == Some(key) && matches!(other.state, MemoryState::Active | MemoryState::Reinforced) {
                out.push((rev, other));
            }
        }
    }
    Ok(out)
}

/// Resolves a newly active record against the slot's other active records:
/// returns (superseded ids, unresolved conflict ids).
fn resolve_slot(db: &mut Db, record: &mut MemoryRecord, authority: &Authority, now: &Timestamp) -> Result<(Vec<String>, Vec<String>)> {
    let (mut superseded, mut conflicts) = (Vec::new(), Vec::new());
    for (rev, mut other) in same_slot(db, record)? {
        let theirs = other.authority.unwrap_or(AuthorityKind::Policy);
        let newer = match (&record.valid_from, &other.valid_from) {
            (Some(ours), Some(old)) => ours > old,
            (Some(_), None) => true,
            _ => false,
        };
        let wins = authority.kind == AuthorityKind::UserExplicit || authority.kind > theirs || (authority.kind == theirs && newer);
        if wins {
            let from = other.state;
            other.state = MemoryState::Superseded;
            other.superseded_by = Some(record.memory_id.clone());
            if other.valid_to.is_none() {
                other.valid_to = record.valid_from.clone().or_else(|| Some(now.clone()));
            }
            other.conflicts_with.retain(|c| *c != record.memory_id);
            other.revision += 1;
            save(db, rev, &mut other, now)?;
            audit(db, &other, "superseded", Some(from), Some(authority), now, Some(format!("by {}", record.memory_id)))?;
            events::emit(db, "memory.superseded", now, None, None, event_data(&other))?;
            record.supersedes.push(other.memory_id.clone());
            superseded.push(other.memory_id);
        } else {
            if !other.conflicts_with.contains(&record.memory_id) {
                other.conflicts_with.push(record.memory_id.clone());
                other.revision += 1;
                save(db, rev, &mut other, now)?;
            }
            record.conflicts_with.push(other.memory_id.clone());
            events::emit(db, "memory.conflict", now, None, None, json!({"memoryId": record.memory_id, "with": other.memory_id}))?;
            conflicts.push(other.memory_id);
        }
    }
    Ok((superseded, conflicts))
}

// ---- commands

/// The strictest sensitivity and narrowest sinks of a candidate's sources.
fn inherited_policy(db: &mut Db, candidate: &MemoryCandidate) -> Result<(Sensitivity, Vec<String>)> {
    let declared = candidate.sensitivity.unwrap_or(Sensitivity::Internal);
    let mut policy: Option<SinkPolicy> = candidate.allowed_sinks.as_ref().map(|sinks| SinkPolicy::new(declared, sinks));
    for reference in &candidate.evidence_refs {
        reference.validate()?;
        // What the kernel holds of the evidence passes its policy on: a
        // session event, another memory, stored content.
        let theirs = match reference.kind {
            SourceKind::Session => {
                let seq = reference.seq.ok_or_else(|| KernelError::invalid("session evidence needs its event `seq`"))?;
                let event = db.get::<Event>(&keys::session_event(&reference.id, seq))?.and_then(|(_, e)| e.item).ok_or_else(|| {
                    KernelError::new(ErrorCode::NotFound, format!("evidence: session `{}` has no event {seq}", reference.id))
                })?;
                SinkPolicy::new(event.sensitivity.max(declared), &event.allowed_sinks)
            }
            SourceKind::Memory => match load(db, &reference.id)? {
                Some((_, source)) => SinkPolicy::new(source.sensitivity.max(declared), &source.allowed_sinks),
                None => continue,
            },
            SourceKind::Content => match crate::content::meta(db, &reference.id)? {
                Some(meta) => {
                    let stored = meta.policy();
                    SinkPolicy::new(stored.sensitivity.max(declared), &stored.sinks)
                }
                None => continue,
            },
            _ => continue,
        };
        policy = Some(match policy {
            Some(current) => current.narrow(&theirs),
            None => theirs,
        });
    }
    let policy = policy.ok_or_else(|| KernelError::invalid("allowedSinks is required when no evidence is held by the kernel"))?;
    Ok((policy.sensitivity, policy.sinks))
}

pub fn propose(db: &mut Db, request: ProposeRequest) -> Result<ProposeResponse> {
    check_version("request", request.schema_version)?;
    if request.candidates.is_empty() || request.candidates.len() > MAX_CANDIDATES {
        return Err(KernelError::limit(format!("a proposal carries 1..={MAX_CANDIDATES} candidates")));
    }
    let receipts = propose_all(db, request.candidates, request.authority.as_ref(), &request.now)?;
    Ok(ProposeResponse { receipts, schema_version: 1 })
}

/// Proposes candidates in order, then advances the memory revision once.
pub fn propose_all(db: &mut Db, candidates: Vec<MemoryCandidate>, authority: Option<&Authority>, now: &Timestamp) -> Result<Vec<MemoryReceipt>> {
    let receipts = candidates
        .into_iter()
        .enumerate()
        .map(|(i, c)| propose_one(db, c, authority, now).map_err(|e| e.at(&format!("candidates[{i}]"))))
        .collect::<Result<Vec<_>>>()?;
    if !receipts.is_empty() {
        memory_revision_bump(db)?;
    }
    Ok(receipts)
}

fn propose_one(db: &mut Db, candidate: MemoryCandidate, authority: Option<&Authority>, now: &Timestamp) -> Result<MemoryReceipt> {
    let now = now.clone();
    if candidate.evidence_refs.is_empty() {
        return Err(KernelError::invalid("a memory candidate must carry evidence refs"));
    }
    if candidate.content.len() > MAX_CONTENT_BYTES {
        return Err(KernelError::limit(format!("memory content is over {MAX_CONTENT_BYTES} bytes")));
    }
    // Every text of the record is stored and shown somewhere: none may hold a secret.
    let texts = [("content", Some(&candidate.content)), ("summary", candidate.summary.as_ref()), ("key", candidate.key.as_ref())]
        .into_iter()
        .chain([("category", Some(&candidate.category))])
        .chain(candidate.tags.iter().map(|t| ("tags[]", Some(t))))
        .chain(candidate.evidence_refs.iter().map(|r| ("evidenceRefs[].id", Some(&r.id))))
        .chain([("provenance.actor", candidate.provenance.actor.as_ref()), ("provenance.method", candidate.provenance.method.as_ref())])
        .chain(candidate.provenance.derived_from.iter().map(|d| ("provenance.derivedFrom[]", Some(d))))
        .chain([("authority.actor", authority.and_then(|a| a.actor.as_ref()))]);
    for (field, text) in texts {
        if let Some(kind) = text.and_then(|t| secrets::kind(t)) {
            return Err(KernelError::invalid(format!("{field} contains a secret ({kind}); secrets never enter memory"))
                .with_detail(json!({"detector": kind, "field": field})));
        }
    }
    if candidate.scope == Scope::Global {
        return Err(KernelError::new(ErrorCode::ScopeDenied, "memories are never proposed into `global`; promote one explicitly"));
    }
    check_scope("scope", candidate.scope, candidate.scope_id.as_deref())?;
    check_fence(db, &candidate)?;
    let (sensitivity, allowed_sinks) = inherited_policy(db, &candidate)?;
    let grounded = match authority {
        Some(authority) => {
            authorize(db, Act::Activate, authority, candidate.provenance.origin, &candidate.evidence_refs, Grounding::Said(&candidate.content))?;
            true
        }
        None => false,
    };
    let fp = fingerprint(candidate.scope, &candidate.scope_id, &candidate.category, &candidate.key, &candidate.content)?;
    let fp_key = fingerprint_key(candidate.scope, &candidate.scope_id, &fp);

    // A duplicate merges into the live record it duplicates.
    if let Some((_, index)) = db.get::<Link>(&fp_key)? {
        if let Some((rev, mut existing)) = load(db, &index.memory_id)? {
            if matches!(existing.state, MemoryState::Candidate | MemoryState::Active | MemoryState::Reinforced) {
                let from = existing.state;
                let mut evidence: BTreeSet<String> = existing.evidence_refs.iter().map(|r| canonical::to_string(r).unwrap_or_default()).collect();
                for reference in &candidate.evidence_refs {
                    if evidence.insert(canonical::to_string(reference)?) {
                        existing.evidence_refs.push(reference.clone());
                    }
                }
                let narrowed = SinkPolicy::new(existing.sensitivity, &existing.allowed_sinks).narrow(&SinkPolicy::new(sensitivity, &allowed_sinks));
                existing.sensitivity = narrowed.sensitivity;
                existing.allowed_sinks = narrowed.sinks;
                let action = if existing.state == MemoryState::Candidate {
                    existing.confidence = existing.confidence.max(candidate.confidence);
                    "merged"
                } else {
                    existing.confidence = reinforce_confidence(existing.confidence, candidate.confidence);
                    existing.state = MemoryState::Reinforced;
                    "reinforced"
                };
                existing.revision += 1;
                save(db, rev, &mut existing, &now)?;
                audit(db, &existing, action, Some(from), authority, &now, Some("duplicate evidence".into()))?;
                if action == "reinforced" {
                    events::emit(db, "memory.reinforced", &now, None, None, event_data(&existing))?;
                }
                if let Some(embedding) = &candidate.embedding {
                    crate::recall::embed(db, &existing.memory_id, embedding)?;
                }
                return Ok(MemoryReceipt { conflicts: existing.conflicts_with.clone(), memory: existing, merged: true, schema_version: 1, superseded: Vec::new() });
            }
        }
    }

    // A new record; a deleted one's id is never reused (its tombstone fences it).
    let mut generation = 0u64;
    let id = loop {
        let digest = canonical::digest_value(&json!([fp, generation]))?;
        let id = canonical::derived_id("mem", &digest);
        let taken = db.get::<Tombstone>(&tombstone_key(&id))?.is_some() || db.get::<MemoryRecord>(&record_key(&id))?.is_some();
        if !taken {
            break id;
        }
        generation += 1;
    };
    let state = if grounded { MemoryState::Active } else { MemoryState::Candidate };
    let mut record = MemoryRecord {
        access_count: 0,
        allowed_sinks,
        authority: authority.filter(|_| grounded).map(|a| a.kind),
        category: candidate.category.clone(),
        confidence: candidate.confidence,
        conflicts_with: Vec::new(),
        content: candidate.content.clone(),
        created_at: now.clone(),
        digest: String::new(),
        evidence_refs: candidate.evidence_refs.clone(),
        importance: candidate.importance,
        key: candidate.key.clone(),
        last_accessed_at: None,
        memory_id: id.clone(),
        provenance: candidate.provenance.clone(),
        retention_policy: candidate.retention_policy.clone().unwrap_or(RetentionPolicy { mode: RetentionMode::Durable, purge_after_seconds: None, ttl_seconds: None }),
        revision: 1,
        schema_version: SCHEMA_VERSION,
        scope: candidate.scope,
        scope_id: candidate.scope_id.clone(),
        sensitivity,
        state,
        summary: candidate.summary.clone(),
        superseded_by: None,
        supersedes: Vec::new(),
        tags: candidate.tags.clone(),
        updated_at: now.clone(),
        valid_from: candidate.valid_from.clone(),
        valid_to: candidate.valid_to.clone(),
    };
    record.digest = canonical::digest_bytes(record.content.as_bytes());
    record.validate()?;
    let (superseded, conflicts) = match authority {
        Some(authority) if grounded => resolve_slot(db, &mut record, authority, &now)?,
        _ => (Vec::new(), Vec::new()),
    };
    save(db, 0, &mut record, &now)?;
    if let Some(embedding) = &candidate.embedding {
        crate::recall::embed(db, &id, embedding)?;
    }
    audit(db, &record, "proposed", None, authority, &now, None)?;
    let kind = if grounded { "memory.activated" } else { "memory.candidate.created" };
    events::emit(db, kind, &now, None, None, event_data(&record))?;
    Ok(MemoryReceipt { conflicts, memory: record, merged: false, schema_version: 1, superseded })
}

pub fn decide(db: &mut Db, request: DecideRequest) -> Result<MemoryReceipt> {
    check_version("request", request.schema_version)?;
    check_scope("scope", request.scope, request.scope_id.as_deref())?;
    check_id("memoryId", &request.memory_id)?;
    let now = request.now.clone();
    let Some((rev, mut record)) = load(db, &request.memory_id)? else {
        return Err(KernelError::new(ErrorCode::NotFound, format!("no live memory `{}`", request.memory_id)));
    };
    admit_scope(&record, request.scope, &request.scope_id)?;
    if request.expected_revision.is_some_and(|r| r != record.revision) {
        return Err(KernelError::new(ErrorCode::Conflict, format!("memory `{}` is at revision {}", record.memory_id, record.revision))
            .with_detail(json!({"memoryId": record.memory_id, "revision": record.revision})));
    }
    // Expiry is evaluated against `now` before anything else; `expire` itself
    // records a lapse that so far was only effective.
    let action = request.action;
    if effective_state(&record, &now) == MemoryState::Expired && record.state != MemoryState::Expired && action != Action::Expire {
        record.state = MemoryState::Expired;
    }
    let name = format!("{action:?}").to_lowercase();
    let act = match action {
        Action::Activate => Act::Activate,
        Action::Reject => Act::Reject,
        Action::Reinforce => Act::Reinforce,
        Action::Supersede => Act::Supersede,
        Action::Archive => Act::Archive,
        Action::Expire => Act::Expire,
        Action::Correct => Act::Correct,
        Action::Promote => Act::Promote,
    };
    let grounding = match (action, request.content.as_deref()) {
        (Action::Activate, _) => Grounding::Said(&record.content),
        (Action::Correct, Some(content)) => Grounding::Said(content),
        (Action::Correct, None) => return Err(KernelError::invalid("correct needs `content`").with_detail(json!({"field": "content"}))),
        _ => Grounding::Refers(&record),
    };
    authorize(db, act, &request.authority, record.provenance.origin, &record.evidence_refs, grounding)?;
    let from = record.state;
    let live = matches!(from, MemoryState::Active | MemoryState::Reinforced);
    let (mut superseded, mut conflicts) = (Vec::new(), Vec::new());
    let event = match action {
        Action::Activate if from == MemoryState::Candidate => {
            record.state = MemoryState::Active;
            record.authority = Some(request.authority.kind);
            (superseded, conflicts) = resolve_slot(db, &mut record, &request.authority, &now)?;
            "memory.activated"
        }
        Action::Reject if from == MemoryState::Candidate => {
            return reject(db, rev, record, &request.authority, &now);
        }
        Action::Reinforce if live => {
            // Never past the ceiling, and never above an unresolved rival's confidence.
            let mut confidence = reinforce_confidence(record.confidence, record.confidence);
            for other in record.conflicts_with.clone() {
                if let Some((_, rival)) = load(db, &other)? {
                    confidence = confidence.min(rival.confidence.max(record.confidence));
                }
            }
            record.confidence = confidence;
            record.state = MemoryState::Reinforced;
            "memory.reinforced"
        }
        Action::Supersede if live => {
            let by = request.by.as_deref().ok_or_else(|| KernelError::invalid("supersede needs `by`"))?;
            let (by_rev, mut replacement) =
                load(db, by)?.ok_or_else(|| KernelError::new(ErrorCode::NotFound, format!("no live memory `{by}`")))?;
            admit_scope(&replacement, request.scope, &request.scope_id)?;
            if !matches!(replacement.state, MemoryState::Active | MemoryState::Reinforced) || replacement.memory_id == record.memory_id {
                return Err(KernelError::new(ErrorCode::IllegalTransition, "a memory is superseded by another active memory"));
            }
            record.state = MemoryState::Superseded;
            record.superseded_by = Some(by.to_string());
            if record.valid_to.is_none() {
                record.valid_to = replacement.valid_from.clone().or_else(|| Some(now.clone()));
            }
            if !replacement.supersedes.contains(&record.memory_id) {
                replacement.supersedes.push(record.memory_id.clone());
                replacement.conflicts_with.retain(|c| *c != record.memory_id);
                replacement.revision += 1;
                save(db, by_rev, &mut replacement, &now)?;
            }
            record.conflicts_with.retain(|c| c != by);
            superseded.push(record.memory_id.clone());
            "memory.superseded"
        }
        Action::Archive if live || matches!(from, MemoryState::Superseded | MemoryState::Expired) => {
            record.state = MemoryState::Archived;
            "memory.archived"
        }
        Action::Expire if live => {
            record.state = MemoryState::Expired;
            if record.valid_to.is_none() {
                record.valid_to = Some(now.clone());
            }
            "memory.expired"
        }
        Action::Correct if live => {
            let content = request.content.clone().ok_or_else(|| KernelError::invalid("correct needs `content`"))?;
            if let Some(kind) = secrets::kind(&content) {
                return Err(KernelError::invalid(format!("the correction contains a secret ({kind})")).with_detail(json!({"detector": kind})));
            }
            // The previous version stays readable for the audit trail until deletion.
            db.put(&version_key(&record.memory_id, record.revision), &record, Some(0))?;
            unlink(db, &record)?;
            record.content = content;
            "memory.corrected"
        }
        Action::Promote if live => {
            let target = request.target_scope.ok_or_else(|| KernelError::invalid("promote needs `targetScope`"))?;
            if target <= record.scope {
                return Err(KernelError::new(ErrorCode::IllegalTransition, "promotion only widens a scope"));
            }
            check_scope("targetScope", target, request.target_scope_id.as_deref())?;
            if target == Scope::Global && !(request.allow_global && request.authority.kind == AuthorityKind::Management) {
                return Err(KernelError::new(ErrorCode::ScopeDenied, "promotion to `global` needs management authority and allowGlobal"));
            }
            if target == Scope::User
                && request.authority.kind == AuthorityKind::UserExplicit
                && request.authority.actor != request.target_scope_id
            {
                return Err(KernelError::new(ErrorCode::ScopeDenied, "a user promotes a memory only into their own user scope (authority.actor)")
                    .with_detail(json!({"targetScopeId": request.target_scope_id, "actor": request.authority.actor})));
            }
            unlink(db, &record)?;
            record.scope = target;
            record.scope_id = request.target_scope_id.clone();
            "memory.promoted"
        }
        _ => return Err(illegal(&record, action)),
    };
    record.revision += 1;
    save(db, rev, &mut record, &now)?;
    audit(db, &record, &name, Some(from), Some(&request.authority), &now, request.by.clone().map(|b| format!("by {b}")))?;
    events::emit(db, event, &now, None, None, event_data(&record))?;
    memory_revision_bump(db)?;
    Ok(MemoryReceipt { conflicts, memory: record, merged: false, schema_version: 1, superseded })
}

fn reject(db: &mut Db, rev: u64, record: MemoryRecord, authority: &Authority, now: &Timestamp) -> Result<MemoryReceipt> {
    let request_id = format!("reject-{}", record.memory_id);
    bury(db, &record, rev, authority.kind, 0, &request_id, None, now)?;
    let mut view = record;
    view.state = MemoryState::Deleted;
    audit(db, &view, "rejected", Some(MemoryState::Candidate), Some(authority), now, None)?;
    events::emit(db, "memory.deleted", now, None, None, json!({"memoryId": view.memory_id, "reason": "rejected"}))?;
    memory_revision_bump(db)?;
    Ok(MemoryReceipt { conflicts: Vec::new(), memory: view, merged: false, schema_version: 1, superseded: Vec::new() })
}

/// Tombstone first, then the body, versions, fingerprint, scope membership and
/// index entries. Returns the receipts of the parts inside this store.
#[allow(clippy::too_many_arguments)]
fn bury(
    db: &mut Db,
    record: &MemoryRecord,
    store_revision: u64,
    authority: AuthorityKind,
    fence: u64,
    request_id: &str,
    deletion_id: Option<&str>,
    now: &Timestamp,
) -> Result<(Tombstone, Vec<PartReceipt>)> {
    let id = record.memory_id.as_str();
    let tomb = Tombstone {
        authority,
        deleted_at: now.clone(),
        deletion_id: deletion_id.map(str::to_string),
        fence,
        memory_id: id.to_string(),
        purged: false,
        request_id: request_id.to_string(),
        revision: record.revision,
        scope: record.scope,
        scope_id: record.scope_id.clone(),
    };
    db.put(&tombstone_key(id), &tomb, None)?;
    // What was deleted is not proposed again from the same words, unless the
    // user says them again afterwards (see `check_fence`).
    let fence_key = content_fence_key(record.scope, &record.scope_id, &record.content)?;
    db.put(&fence_key, &ContentFence { deleted_at: now.clone(), memory_id: id.to_string() }, None)?;
    db.remove(&record_key(id), Some(store_revision))?;
    unlink(db, record)?;
    let versions: Vec<(String, serde_json::Value)> = db.scan(&format!("mem/ver/{}/", keys::segment(id)), "", MAX_SELECTED)?;
    for (key, _) in &versions {
        db.remove(key, None)?;
    }
    let removed = crate::recall::unindex(db, record)?;
    let part = |target: &str| PartReceipt { memory_id: Some(id.to_string()), status: PartStatus::Done, target: target.into() };
    let mut receipts = vec![part("store:record"), part("store:versions")];
    receipts.extend(removed.into_iter().map(|t| part(&t)));
    Ok((tomb, receipts))
}

fn matches(record: &MemoryRecord, selector: &Selector) -> bool {
    (selector.memory_ids.is_empty() || selector.memory_ids.contains(&record.memory_id))
        && selector.key.as_ref().is_none_or(|k| record.key.as_ref() == Some(k))
        && selector.category.as_ref().is_none_or(|c| record.category == *c)
        && selector.tag.as_ref().is_none_or(|t| record.tags.contains(t))
}

/// The live records of a scope a selector picks, in id order.
fn select(db: &mut Db, scope: Scope, scope_id: &Option<String>, selector: &Selector) -> Result<Vec<(u64, MemoryRecord)>> {
    let mut out = Vec::new();
    let ids: Vec<String> = if selector.memory_ids.is_empty() {
        members(db, scope, scope_id)?
    } else {
        selector.memory_ids.clone()
    };
    if ids.len() > MAX_SELECTED {
        return Err(KernelError::limit(format!("the selector matches more than {MAX_SELECTED} memories")));
    }
    for id in ids {
        check_id("memoryIds[]", &id)?;
        if let Some((rev, record)) = load(db, &id)? {
            if record.scope == scope && record.scope_id == *scope_id && matches(&record, selector) {
                out.push((rev, record));
            } else if !selector.memory_ids.is_empty() && (record.scope != scope || record.scope_id != *scope_id) {
                return Err(KernelError::new(ErrorCode::ScopeDenied, format!("memory `{id}` is not in the requested scope")));
            }
        }
    }
    Ok(out)
}

pub fn delete(db: &mut Db, request: DeleteRequest) -> Result<DeletionReceipt> {
    check_version("request", request.schema_version)?;
    check_scope("scope", request.scope, request.scope_id.as_deref())?;
    check_id("requestId", &request.request_id)?;
    check_id("subject", &request.subject)?;
    request.replicas.iter().try_for_each(|r| check_id("replicas[]", r))?;
    let deletion_id = canonical::derived_id("del", &canonical::digest_value(&json!([request.request_id, request.subject]))?);
    let journal = format!("mem/del/{deletion_id}");
    if let Some((_, done)) = db.get::<Deletion>(&journal)? {
        // The same request again: the same answer, nothing deleted twice.
        return Ok(done.receipt);
    }
    authorize(db, Act::Delete, &request.authority, Origin::User, &[], Grounding::Forget)?;
    let selector = &request.selector;
    if request.authority.kind == AuthorityKind::UserExplicit
        && selector.memory_ids.is_empty()
        && selector.key.is_none()
        && selector.category.is_none()
        && selector.tag.is_none()
    {
        return Err(KernelError::invalid("selector: a user's deletion names what to forget (memoryIds, key, category or tag)")
            .with_detail(json!({"field": "selector"})));
    }
    // Selected memories, and tombstones already written for the ids asked for.
    let selected = select(db, request.scope, &request.scope_id, &request.selector)?;
    for id in &request.selector.memory_ids {
        if let Some((_, tomb)) = db.get::<Tombstone>(&tombstone_key(id))? {
            if request.fence < tomb.fence {
                return Err(KernelError::new(ErrorCode::Conflict, format!("memory `{id}` was deleted behind a newer fence ({})", tomb.fence))
                    .with_detail(json!({"memoryId": id, "tombstoneFence": tomb.fence, "fence": request.fence})));
            }
        }
    }
    let mut receipts = Vec::new();
    let mut tombstones = Vec::new();
    for (rev, record) in &selected {
        let (tomb, parts) = bury(db, record, *rev, request.authority.kind, request.fence, &request.request_id, Some(&deletion_id), &request.now)?;
        let mut dead = record.clone();
        dead.state = MemoryState::Deleted;
        audit(db, &dead, "deleted", Some(record.state), Some(&request.authority), &request.now, Some(request.request_id.clone()))?;
        events::emit(db, "memory.deleted", &request.now, None, None, json!({"memoryId": record.memory_id, "requestId": request.request_id}))?;
        receipts.extend(parts);
        receipts.push(PartReceipt { memory_id: Some(record.memory_id.clone()), status: PartStatus::Done, target: "cache:resident".into() });
        tombstones.push(tomb);
    }
    let pending: Vec<String> = if selected.is_empty() { Vec::new() } else { request.replicas.clone() };
    receipts.extend(pending.iter().map(|r| PartReceipt { memory_id: None, status: PartStatus::Pending, target: format!("replica:{r}") }));
    let receipt = DeletionReceipt {
        deletion_id,
        matched: selected.len() as u32,
        receipts,
        schema_version: 1,
        status: if pending.is_empty() { DeletionStatus::Complete } else { DeletionStatus::Partial },
        tombstones,
    };
    db.put(&journal, &Deletion { pending, receipt: receipt.clone() }, Some(0))?;
    if !selected.is_empty() {
        memory_revision_bump(db)?;
    }
    Ok(receipt)
}

contract! {
/// One replica's report on a pending deletion.
pub struct ReplicaOutcome {
    pub deleted: bool,
    pub replica: String,
}
}

/// Settles pending replica receipts of a deletion (through `reconcile`).
pub fn settle_deletion(db: &mut Db, deletion_id: &str, outcomes: &[ReplicaOutcome]) -> Result<DeletionReceipt> {
    let journal = format!("mem/del/{}", keys::segment(deletion_id));
    let (rev, mut deletion) =
        db.get::<Deletion>(&journal)?.ok_or_else(|| KernelError::new(ErrorCode::NotFound, format!("no deletion `{deletion_id}`")))?;
    for outcome in outcomes {
        let target = format!("replica:{}", outcome.replica);
        let part = deletion
            .receipt
            .receipts
            .iter_mut()
            .find(|p| p.target == target)
            .ok_or_else(|| KernelError::invalid(format!("deletion `{deletion_id}` has no replica `{}`", outcome.replica)))?;
        part.status = if outcome.deleted { PartStatus::Done } else { PartStatus::Failed };
        deletion.pending.retain(|r| *r != outcome.replica);
    }
    let settled = deletion.receipt.receipts.iter().all(|p| p.status == PartStatus::Done);
    deletion.receipt.status = if settled { DeletionStatus::Complete } else { DeletionStatus::Partial };
    db.put(&journal, &deletion, Some(rev))?;
    Ok(deletion.receipt)
}

pub fn purge(db: &mut Db, request: PurgeRequest) -> Result<PurgeReceipt> {
    check_version("request", request.schema_version)?;
    check_scope("scope", request.scope, request.scope_id.as_deref())?;
    authorize(db, Act::Purge, &request.authority, Origin::User, &[], Grounding::Never)?;
    let tombs: Vec<(String, Tombstone)> = db.scan("mem/tomb/", "", MAX_SELECTED)?;
    let mut targets: Vec<String> = tombs
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| !t.purged && t.scope == request.scope && t.scope_id == request.scope_id)
        .filter(|t| request.selector.memory_ids.is_empty() || request.selector.memory_ids.contains(&t.memory_id))
        .map(|t| t.memory_id)
        .collect();
    targets.sort();
    // A memory is purged only once every part of its deletion is done: a
    // replica that has not confirmed may still hold it.
    let mut blocked = Vec::new();
    for id in &targets {
        let tomb = db.get::<Tombstone>(&tombstone_key(id))?.map(|(_, t)| t);
        let Some(deletion_id) = tomb.and_then(|t| t.deletion_id) else { continue };
        if let Some((_, deletion)) = db.get::<Deletion>(&format!("mem/del/{deletion_id}"))? {
            let open: Vec<&PartReceipt> = deletion.receipt.receipts.iter().filter(|p| p.status != PartStatus::Done).collect();
            if !open.is_empty() {
                blocked.push(json!({"memoryId": id, "deletionId": deletion_id, "parts": open}));
            }
        }
    }
    if !blocked.is_empty() {
        return Err(KernelError::new(
            ErrorCode::Conflict,
            format!("{} of the memories to purge wait for their deletion to complete (a replica has not confirmed)", blocked.len()),
        )
        .with_detail(json!({"blocked": blocked})));
    }
    let plan = canonical::digest_value(&json!([request.scope, request.scope_id, targets]))?;
    let purge_id = canonical::derived_id("purge", &plan);
    let noun = if targets.len() == 1 { "memory" } else { "memories" };
    let confirmation = format!("purge {} {noun} {}", targets.len(), &purge_id[6..14]);
    if request.dry_run {
        return Ok(PurgeReceipt { confirmation, purge_id, schema_version: 1, status: "planned".into(), targets });
    }
    if request.confirmation.as_deref() != Some(confirmation.as_str()) {
        return Err(KernelError::invalid("purge needs the exact confirmation its dry run returned")
            .with_detail(json!({"expected": confirmation})));
    }
    for id in &targets {
        let (rev, mut tomb) = db.get::<Tombstone>(&tombstone_key(id))?.expect("selected from the tombstones");
        // What stays: the id, revision and fence that refuse a replay; no more.
        let audit_entries: Vec<(String, serde_json::Value)> = db.scan(&format!("mem/audit/{}/", keys::segment(id)), "", MAX_SELECTED)?;
        for (key, _) in audit_entries {
            db.remove(&key, None)?;
        }
        if let Some((rec_rev, _)) = db.get::<serde_json::Value>(&record_key(id))? {
            // A replayed copy that never came back to life.
            db.remove(&record_key(id), Some(rec_rev))?;
        }
        tomb.purged = true;
        db.put(&tombstone_key(id), &tomb, Some(rev))?;
        events::emit(db, "memory.purged", &request.now, None, None, json!({"memoryId": id, "purgeId": purge_id}))?;
    }
    db.put(&format!("mem/purge/{purge_id}"), &json!({"at": request.now, "targets": targets, "verified": targets.len()}), None)?;
    Ok(PurgeReceipt { confirmation, purge_id, schema_version: 1, status: "purged".into(), targets })
}

/// Whether memory `id` (live or deleted) is in the scope.
fn in_scope(db: &mut Db, id: &str, scope: Scope, scope_id: &Option<String>) -> Result<bool> {
    if let Some((_, record)) = load(db, id)? {
        return Ok(record.scope == scope && record.scope_id == *scope_id);
    }
    Ok(db.get::<Tombstone>(&tombstone_key(id))?.is_some_and(|(_, t)| t.scope == scope && t.scope_id == *scope_id))
}

pub fn read(db: &mut Db, request: ReadMemoryRequest) -> Result<ReadMemoryResponse> {
    check_version("request", request.schema_version)?;
    check_scope("scope", request.scope, request.scope_id.as_deref())?;
    let states = if request.states.is_empty() { vec![MemoryState::Active, MemoryState::Reinforced] } else { request.states.clone() };
    let mut memories = Vec::new();
    for id in members(db, request.scope, &request.scope_id)? {
        let Some((_, record)) = load(db, &id)? else { continue };
        if request.key.as_ref().is_some_and(|k| record.key.as_ref() != Some(k)) {
            continue;
        }
        let effective = effective_state(&record, &request.now);
        let include = match &request.at_time {
            // What was true at T: valid then, whatever became of it since.
            Some(t) => {
                record.valid_from.as_ref().unwrap_or(&record.created_at) <= t
                    && record.valid_to.as_ref().is_none_or(|to| t < to)
                    && record.state != MemoryState::Candidate
            }
            // Not yet valid is not current: it shows only when asked for by state.
            None => {
                states.contains(&effective)
                    && (!request.states.is_empty() || record.valid_from.as_ref().is_none_or(|from| *from <= request.now))
            }
        };
        if !include {
            continue;
        }
        let audit = if request.include_audit {
            db.scan::<AuditEntry>(&format!("mem/audit/{}/0", keys::segment(&id)), "", MAX_SELECTED)?.into_iter().map(|(_, a)| a).collect()
        } else {
            Vec::new()
        };
        let mut record = record;
        // Links name only memories of this scope: a promoted record's old
        // rivals and predecessors live in a scope this request did not admit.
        for ids in [&mut record.conflicts_with, &mut record.supersedes] {
            let mut kept = Vec::with_capacity(ids.len());
            for id in ids.drain(..) {
                if in_scope(db, &id, request.scope, &request.scope_id)? {
                    kept.push(id);
                }
            }
            *ids = kept;
        }
        if let Some(by) = record.superseded_by.clone() {
            if !in_scope(db, &by, request.scope, &request.scope_id)? {
                record.superseded_by = None;
            }
        }
        memories.push(MemoryView { audit, effective_state: effective, record });
    }
    let tombstones: Vec<Tombstone> = db
        .scan::<Tombstone>("mem/tomb/", "", MAX_SELECTED)?
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| t.scope == request.scope && t.scope_id == request.scope_id)
        .collect();
    Ok(ReadMemoryResponse { memories, schema_version: 1, tombstones })
}

/// Whether a memory may go to `sink` (sensitivity and allowed sinks).
pub fn sink_permits(record: &MemoryRecord, sink: &str) -> bool {
    sink_admits(record.sensitivity, &record.allowed_sinks, sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scope() -> impl Strategy<Value = Scope> {
        prop_oneof![Just(Scope::Session), Just(Scope::Agent), Just(Scope::Project), Just(Scope::User), Just(Scope::Global)]
    }

    fn scope_id() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("-".to_string())),
            Just(Some("%2D".to_string())),
            Just(Some("a/b".to_string())),
            "[-a-z%/.é名\u{200b}]{1,6}".prop_map(Some),
        ]
    }

    proptest! {
        /// Different scopes never share a key, and no scope's prefix covers
        /// another scope's keys.
        #[test]
        fn scope_keys_are_injective_and_prefix_free(a in (scope(), scope_id()), b in (scope(), scope_id()), id in "[a-z0-9-]{1,8}") {
            prop_assume!(a != b);
            prop_assert_ne!(scope_segment(a.0, &a.1), scope_segment(b.0, &b.1));
            prop_assert!(!member_key(b.0, &b.1, &id).starts_with(&members_prefix(a.0, &a.1)));
            prop_assert!(!slot_key(b.0, &b.1, "k", &id).starts_with(&slot_prefix(a.0, &a.1, "k")));
            prop_assert_ne!(fingerprint_key(a.0, &a.1, "sha256:00"), fingerprint_key(b.0, &b.1, "sha256:00"));
        }
    }
}
