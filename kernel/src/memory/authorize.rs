//! Each memory transition checked against the authority table (`crate::authority`):
//! who asks, whether their words ground it, and whether the record is in the
//! scope the caller named.

use crate::authority::{self, Act, Grounding, Subject, UserMessage};
use crate::contracts::{check_id, AuthorityKind, MemoryRecord, Origin, Scope, SourceKind, SourceRef};
use crate::error::{ErrorCode, KernelError, Result};
use crate::session::Event;
use crate::store::{keys, Db};
use serde_json::json;
use super::requests::{Action, Authority};

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
pub(super) fn authorize(
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

pub(super) fn admit_scope(record: &MemoryRecord, scope: Scope, scope_id: &Option<String>) -> Result<()> {
    if record.scope != scope || record.scope_id != *scope_id {
        return Err(KernelError::new(ErrorCode::ScopeDenied, format!("memory `{}` is not in the requested scope", record.memory_id))
            .with_detail(json!({"memoryId": record.memory_id, "scope": scope, "scopeId": scope_id})));
    }
    Ok(())
}

pub(super) fn illegal(record: &MemoryRecord, action: Action) -> KernelError {
    KernelError::new(
        ErrorCode::IllegalTransition,
        format!("memory `{}` is {:?}; `{:?}` is not allowed from there", record.memory_id, record.state, action).to_lowercase(),
    )
    .with_detail(json!({"memoryId": record.memory_id, "state": record.state, "action": action}))
}
