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
use super::authorize::authorize;
use super::records::{
    audit, content_fence_key, load, members, memory_revision_bump, record_key, tombstone_key, unlink, ContentFence, Deletion, MAX_SELECTED,
};
use super::requests::{
    DeleteRequest, DeletionReceipt, DeletionStatus, MemoryCandidate, PartReceipt, PartStatus, PurgeReceipt, PurgeRequest, Selector,
    Tombstone,
};

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
    let removed = index::remove(db, record)?;
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
        memory_revision_bump(db)?;
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

pub fn purge(db: &mut Db, request: PurgeRequest) -> Result<PurgeReceipt> {
    check_version("request", request.schema_version)?;
    check_scope_to_forget("scope", request.scope, request.scope_id.as_deref())?;
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
