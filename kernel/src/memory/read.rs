//! `read-memory`: a scope's memories as they stand at `now` or were true at
//! a past time, with links only to records in that scope.

use crate::contracts::{check_scope, check_version, sink_admits, MemoryRecord, MemoryState, Scope};
use crate::error::Result;
use crate::store::{keys, Db};
use super::records::{effective_state, load, members, scope_tombstones, tombstone_key, MAX_SELECTED};
use super::requests::{AuditEntry, MemoryView, ReadMemoryRequest, ReadMemoryResponse, Tombstone};

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
    for id in members(db, request.scope, &request.scope_id, request.key.as_deref())? {
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
    let tombstones = scope_tombstones(db, request.scope, &request.scope_id)?;
    Ok(ReadMemoryResponse { memories, schema_version: 1, tombstones })
}

/// Whether a memory may go to `sink` (sensitivity and allowed sinks).
pub fn sink_permits(record: &MemoryRecord, sink: &str) -> bool {
    sink_admits(record.sensitivity, &record.allowed_sinks, sink)
}
