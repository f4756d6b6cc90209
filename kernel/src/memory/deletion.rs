//! Deletion: a tombstone first, carrying the record's revision and the
//! caller's fence, then every part of the memory, each with a receipt;
//! replicas settle later through `reconcile`. A deleted memory's words are
//! fenced in its scope so a re-extraction cannot bring them back. Purge
//! removes what deletion keeps for audit, after a dry run.

use crate::authority::{self, Act, Grounding};
use crate::canonical::{self, Timestamp};
use crate::contracts::{
    check_id, check_scope_to_forget, check_version, AuthorityKind, MemoryRecord, MemoryState, Origin, ReplicaOutcome, Scope, SourceKind,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::index;
use crate::session::Event;
use crate::store::{keys, Db};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use super::authorize::authorize;
use super::records::{
    audit, fence_keys, fence_names, fence_terms, fences_prefix, buried_key, journal_receipts, load, receipt_memory, members, memory_revision_bump, record_key, scope_tombstones,
    tombstone_key, unlink, ContentFence, Deletion, Link, JOURNALS, LINK_PREFIXES, MAX_SELECTED,
};
use super::requests::{
    DeleteRequest, DeletionReceipt, DeletionStatus, MemoryCandidate, PartReceipt, PartStatus, PurgeReceipt, PurgeRequest, Selector,
    Tombstone,
};

/// How close an embedding must be to a deleted memory's to be that memory
/// in other words (cosine): high, as one changed value ("red" for "teal")
/// moves a sentence's embedding little.
const FENCE_SIMILARITY: f64 = 0.95;

/// Refuses a candidate that is a memory deleted from its scope — its words
/// in any spelling; or, learned again from what was there before the
/// deletion, the host's embedding of it or its names drawn from the message
/// it was drawn from — unless one of its session evidence events is the
/// user saying it after the deletion.
pub fn check_fence(db: &mut Db, candidate: &MemoryCandidate) -> Result<()> {
    let Some((fence, how)) = fence_of(db, candidate)? else {
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
    Err(KernelError::new(ErrorCode::Conflict, format!("{how} deleted as memory `{}`; only the user saying it again brings it back", fence.memory_id))
        .with_detail(json!({"deletedMemoryId": fence.memory_id, "deletedAt": fence.deleted_at})))
}

/// The fence a candidate runs into, and how it was recognised.
fn fence_of(db: &mut Db, candidate: &MemoryCandidate) -> Result<Option<(ContentFence, &'static str)>> {
    for key in fence_keys(candidate.scope, &candidate.scope_id, &candidate.content)? {
        if let Some((_, fence)) = db.get::<ContentFence>(&key)? {
            return Ok(Some((fence, "these words (in this or another spelling) were")));
        }
    }
    // In other words: every fence of the scope is read (a scope holds few).
    let terms = fence_terms(&candidate.content);
    let mut events = Vec::new();
    for reference in candidate.evidence_refs.iter().filter(|r| r.kind == SourceKind::Session) {
        let seq = reference.seq.unwrap_or(0);
        let at = db.get::<Event>(&keys::session_event(&reference.id, seq))?.map(|(_, e)| e.appended_at);
        events.push((reference.id.as_str(), seq, at));
    }
    let mut found = None;
    db.visit(&fences_prefix(candidate.scope, &candidate.scope_id), |key, value| {
        let Ok(fence) = crate::store::decode::<ContentFence>(key, value) else { return Ok(()) };
        // What the user said since is new: only the words fence it.
        if found.is_some() || events.iter().any(|(_, _, at)| at.as_ref().is_some_and(|at| *at > fence.deleted_at)) {
            return Ok(());
        }
        if let (Some(a), Some(b)) = (&candidate.embedding, &fence.embedding) {
            if a.len() == b.len() && index::cosine(a, b) >= FENCE_SIMILARITY {
                found = Some((fence, "its embedding is that of a memory"));
                return Ok(());
            }
        }
        let same_event = fence.evidence.iter().any(|r| events.iter().any(|(id, seq, _)| r.id == *id && r.seq.unwrap_or(0) == *seq));
        if same_event && terms.iter().any(|t| fence.names.contains(t)) {
            found = Some((fence, "drawn from the same message, with the same names, it was"));
        }
        Ok(())
    })?;
    Ok(found)
}
/// Tombstone first, then the body, versions, fingerprint, scope membership and
/// index entries. Returns the receipts of the parts inside this store.
#[allow(clippy::too_many_arguments)]
pub(super) fn bury(
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
    db.put(&buried_key(&tomb), &Link { memory_id: id.to_string() }, None)?;
    // What was deleted is not proposed again, in the same words or others,
    // unless the user says it again afterwards (see `check_fence`).
    let fence = ContentFence {
        deleted_at: now.clone(),
        embedding: db.get::<index::Embedding>(&index::embedding_key(id))?.map(|(_, e)| e.vector),
        evidence: record.evidence_refs.iter().filter(|r| r.kind == SourceKind::Session).cloned().collect(),
        memory_id: id.to_string(),
        names: fence_names(&record.content),
    };
    for key in fence_keys(record.scope, &record.scope_id, &record.content)? {
        db.put(&key, &fence, None)?;
    }
    db.remove(&record_key(id), Some(store_revision))?;
    unlink(db, record)?;
    let versions: Vec<(String, serde_json::Value)> = db.scan(&format!("mem/ver/{}/", keys::segment(id)), "", MAX_SELECTED)?;
    for (key, _) in &versions {
        db.remove(key, None)?;
    }
    let removed = index::remove(db, id)?;
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
        // Every member, not the key's slot: a deletion must not miss a
        // memory whose slot entry a partial restore lost.
        members(db, scope, scope_id, None)?
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
    check_scope_to_forget("scope", request.scope, request.scope_id.as_deref())?;
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
        memory_revision_bump(db, &request.now)?;
    }
    Ok(receipt)
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

/// Every trace of a deleted memory but its tombstone and fence, which refuse
/// a replay: its audit trail, and whatever a replayed copy of the store
/// brought back (the record, above its tombstone or below it, its versions
/// and index entries). Its lookup entries go with the scope's sweep in
/// [`purge`].
fn scrub(db: &mut Db, tomb: &Tombstone) -> Result<()> {
    let id = tomb.memory_id.as_str();
    for prefix in [format!("mem/audit/{}/", keys::segment(id)), format!("mem/ver/{}/", keys::segment(id))] {
        let mut entries = Vec::new();
        db.visit(&prefix, |key, _| {
            entries.push(key.to_string());
            Ok(())
        })?;
        for key in entries {
            db.remove(&key, None)?;
        }
    }
    if db.get_bytes(&record_key(id))?.is_some() {
        db.remove(&record_key(id), None)?;
    }
    index::remove_replayed(db, id)?;
    // The fence keeps the words' digests and the evidence references; its
    // embedding and names say too much of what was deleted to outlive the
    // purge (a dictionary reads a name's digest back).
    let mut fences = Vec::new();
    db.visit(&fences_prefix(tomb.scope, &tomb.scope_id), |key, value| {
        if let Ok(fence) = crate::store::decode::<ContentFence>(key, value) {
            if fence.memory_id == id && (fence.embedding.is_some() || !fence.names.is_empty()) {
                fences.push((key.to_string(), fence));
            }
        }
        Ok(())
    })?;
    for (key, mut fence) in fences {
        fence.embedding = None;
        fence.names.clear();
        db.put(&key, &fence, None)?;
    }
    Ok(())
}

/// Every lookup entry that points at a purged memory, in any scope: a
/// replay may have brought back entries of any of its versions (one from
/// before a promotion sits in another scope), with or without the record,
/// so they are found by what they point at. And the receipts that hold one
/// in consolidation journals (a retried extraction answers with them, and
/// they hold the memories' words); the journal's other receipts stay, so a
/// retry still answers and merges nothing twice. A purge reads all once;
/// their postings it found before choosing its targets.
fn sweep(db: &mut Db, purged: &[String], postings: &BTreeMap<String, Vec<String>>) -> Result<()> {
    let mut stale: Vec<String> = purged.iter().filter_map(|id| postings.get(id)).flatten().cloned().collect();
    for prefix in LINK_PREFIXES {
        db.visit(prefix, |key, value| {
            if crate::store::decode::<Link>(key, value).is_ok_and(|link| purged.binary_search(&link.memory_id).is_ok()) {
                stale.push(key.to_string());
            }
            Ok(())
        })?;
    }
    let mut journals = Vec::new();
    db.visit(JOURNALS, |key, value| {
        let Ok(mut journal) = serde_json::from_slice::<serde_json::Value>(value) else { return Ok(()) };
        if let Some(receipts) = journal_receipts(&mut journal) {
            let before = receipts.len();
            receipts.retain(|r| !receipt_memory(r).is_some_and(|id| purged.binary_search_by(|p| p.as_str().cmp(id)).is_ok()));
            if receipts.len() != before {
                journals.push((key.to_string(), journal));
            }
        }
        Ok(())
    })?;
    for key in stale {
        db.remove(&key, None)?;
    }
    for (key, journal) in journals {
        db.put(&key, &journal, None)?;
    }
    Ok(())
}

/// The posting keys, by memory, of the deleted memories among
/// `tombstones`: a deleted memory has none, so any there a replay brought
/// back (of any of its versions, in any scope, with or without its term
/// vector), and their keys hold its words. All postings are read once.
fn postings_of(db: &mut Db, tombstones: &[Tombstone]) -> Result<BTreeMap<String, Vec<String>>> {
    let ids: BTreeSet<&str> = tombstones.iter().map(|t| t.memory_id.as_str()).collect();
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    db.visit(index::TERMS, |key, value| {
        if let Ok(posting) = crate::store::decode::<index::Posting>(key, value) {
            if ids.contains(posting.memory_id.as_str()) {
                found.entry(posting.memory_id).or_default().push(key.to_string());
            }
        }
        Ok(())
    })?;
    Ok(found)
}

pub fn purge(db: &mut Db, request: PurgeRequest) -> Result<PurgeReceipt> {
    check_version("request", request.schema_version)?;
    check_scope_to_forget("scope", request.scope, request.scope_id.as_deref())?;
    authorize(db, Act::Purge, &request.authority, Origin::User, &[], Grounding::Never)?;
    let tombstones = scope_tombstones(db, request.scope, &request.scope_id)?;
    let postings = postings_of(db, &tombstones)?;
    let mut targets = Vec::new();
    for t in tombstones {
        let asked = request.selector.memory_ids.is_empty() || request.selector.memory_ids.contains(&t.memory_id);
        // A purged memory again when named, or when a replay brought its
        // record or index entries back.
        let mut again = || -> Result<bool> {
            Ok(request.selector.memory_ids.contains(&t.memory_id)
                || db.get_bytes(&record_key(&t.memory_id))?.is_some()
                || postings.contains_key(&t.memory_id)
                || db.get_bytes(&index::doc_key(&t.memory_id))?.is_some()
                || db.get_bytes(&index::embedding_key(&t.memory_id))?.is_some())
        };
        if asked && (!t.purged || again()?) {
            targets.push(t.memory_id);
        }
    }
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
        scrub(db, &tomb)?;
        tomb.purged = true;
        db.put(&tombstone_key(id), &tomb, Some(rev))?;
        events::emit(db, "memory.purged", &request.now, None, None, json!({"memoryId": id, "purgeId": purge_id}))?;
    }
    if !targets.is_empty() {
        sweep(db, &targets, &postings)?;
        // Index entries were removed: warm indexes catch up from the log.
        memory_revision_bump(db, &request.now)?;
    }
    db.put(&format!("mem/purge/{purge_id}"), &json!({"at": request.now, "targets": targets, "verified": targets.len()}), None)?;
    Ok(PurgeReceipt { confirmation, purge_id, schema_version: 1, status: "purged".into(), targets })
}
