//! `decide-memory`: the transitions a caller asks for by name (activate,
//! reject, reinforce, correct, supersede, expire, archive, promote), each
//! authorized and audited. Deletion and purge are `deletion`'s; a slot's
//! supersession when a record becomes active is `supersession`'s.

use crate::authority::{Act, Grounding};
use crate::canonical::Timestamp;
use crate::contracts::{check_id, check_scope, check_version, AuthorityKind, MemoryRecord, MemoryState, Scope};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::secrets;
use crate::store::Db;
use serde_json::json;
use super::authorize::{admit_scope, authorize, illegal};
use super::deletion::bury;
use super::records::{audit, effective_state, event_data, load, memory_revision_bump, save, version_key};
use super::requests::{Action, Authority, DecideRequest, MemoryReceipt};
use super::supersession::resolve_slot;

/// Confidence never reaches certainty by repetition.
const CONFIDENCE_CEILING: f64 = 0.95;

/// Confidence after new evidence for the same fact: closer to the ceiling, never past it.
pub(super) fn reinforce_confidence(old: f64, new: f64) -> f64 {
    let base = old.max(new);
    (base + (1.0 - base) * 0.25).min(CONFIDENCE_CEILING.max(base))
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
    memory_revision_bump(db, &now)?;
    Ok(MemoryReceipt { conflicts, memory: record, merged: false, schema_version: 1, superseded })
}

fn reject(db: &mut Db, rev: u64, record: MemoryRecord, authority: &Authority, now: &Timestamp) -> Result<MemoryReceipt> {
    let request_id = format!("reject-{}", record.memory_id);
    bury(db, &record, rev, authority.kind, 0, &request_id, None, now)?;
    let mut view = record;
    view.state = MemoryState::Deleted;
    audit(db, &view, "rejected", Some(MemoryState::Candidate), Some(authority), now, None)?;
    events::emit(db, "memory.deleted", now, None, None, json!({"memoryId": view.memory_id, "reason": "rejected"}))?;
    memory_revision_bump(db, now)?;
    Ok(MemoryReceipt { conflicts: Vec::new(), memory: view, merged: false, schema_version: 1, superseded: Vec::new() })
}
