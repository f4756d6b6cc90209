//! Supersession: a newly active record settles the slot (`key`) it fills
//! against the slot's other active records. Never by write order: the
//! stronger authority, a later validity or a user correction supersedes,
//! with lineage both ways; otherwise both stay and the conflict is recorded.

use crate::canonical::Timestamp;
use crate::contracts::{AuthorityKind, MemoryRecord, MemoryState};
use crate::error::Result;
use crate::events;
use crate::store::Db;
use serde_json::json;
use super::records::{audit, event_data, load, save, slot_prefix, Link, MAX_SELECTED};
use super::requests::Authority;

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
pub(super) fn resolve_slot(db: &mut Db, record: &mut MemoryRecord, authority: &Authority, now: &Timestamp) -> Result<(Vec<String>, Vec<String>)> {
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
