//! `propose-memory`: candidates checked, secrets refused, their sensitivity
//! and sinks inherited from their evidence, duplicates reinforced rather than
//! stored twice, and activated at once when the proposer's authority may.

use crate::authority::{Act, Grounding};
use crate::canonical::{self, Timestamp};
use crate::contracts::{
    check_scope, check_version, MemoryRecord, MemoryState, RetentionMode, RetentionPolicy, Scope, Sensitivity, SinkPolicy, SourceKind,
    SCHEMA_VERSION,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::index;
use crate::secrets;
use crate::session::Event;
use crate::store::{keys, Db};
use serde_json::json;
use std::collections::BTreeSet;
use super::authorize::authorize;
use super::deletion::check_fence;
use super::lifecycle::reinforce_confidence;
use super::records::{audit, event_data, fingerprint, fingerprint_key, load, memory_revision_bump, record_key, save, tombstone_key, Link};
use super::requests::{Authority, MemoryCandidate, MemoryReceipt, ProposeRequest, ProposeResponse, Tombstone, MAX_CANDIDATES};
use super::supersession::resolve_slot;

/// Largest memory body, in bytes: memories are facts, not documents.
pub const MAX_CONTENT_BYTES: usize = 16 << 10;
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
        memory_revision_bump(db, now)?;
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
                    index::embed(db, &existing.memory_id, embedding)?;
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
        index::embed(db, &id, embedding)?;
    }
    audit(db, &record, "proposed", None, authority, &now, None)?;
    let kind = if grounded { "memory.activated" } else { "memory.candidate.created" };
    events::emit(db, kind, &now, None, None, event_data(&record))?;
    Ok(MemoryReceipt { conflicts, memory: record, merged: false, schema_version: 1, superseded })
}
