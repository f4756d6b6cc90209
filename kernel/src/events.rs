//! The kernel's canonical event stream: what happened, with metrics and ids
//! but never body text (`context.compaction.committed`, `memory.activated`,
//! …). Hosts read it with `read-kernel-events` for telemetry and audit.

use crate::canonical::Timestamp;
use crate::contracts::check_version;
use crate::error::{KernelError, Result};
use crate::store::{keys, Db};
use serde_json::Value;

/// Most events one read returns.
pub const MAX_READ: u32 = 10_000;

contract! {
pub struct KernelEvent {
    pub at: Timestamp,
    /// Counts, sizes, states, ids and digests; never content.
    pub data: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub r#type: String,
}
}

contract! {
pub struct ReadKernelEventsRequest {
    #[serde(default)]
    pub after_seq: u64,
    #[serde(default = "default_limit")]
    pub limit: u32,
    pub schema_version: u32,
    /// Only events whose type starts with this (e.g. `context.compaction.`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_prefix: Option<String>,
}
}

fn default_limit() -> u32 {
    1000
}

contract! {
pub struct ReadKernelEventsResponse {
    pub events: Vec<KernelEvent>,
    /// The last sequence number examined; pass it as `afterSeq` to go on.
    pub last_seq: u64,
    pub more: bool,
    pub schema_version: u32,
}
}

contract! {
struct Counter {
    seq: u64,
}
}

/// Appends one event.
pub fn emit(db: &mut Db, r#type: &str, at: &Timestamp, session_id: Option<&str>, operation_id: Option<&str>, data: Value) -> Result<u64> {
    let current = db.get::<Counter>(keys::EVENT_SEQ)?;
    let revision = current.as_ref().map_or(0, |(r, _)| *r);
    let seq = current.map_or(0, |(_, c)| c.seq) + 1;
    let event = KernelEvent {
        at: at.clone(),
        data,
        operation_id: operation_id.map(str::to_string),
        seq,
        session_id: session_id.map(str::to_string),
        r#type: r#type.to_string(),
    };
    db.put(&keys::kernel_event(seq), &event, Some(0))?;
    db.put(keys::EVENT_SEQ, &Counter { seq }, Some(revision))?;
    Ok(seq)
}

pub fn read(db: &mut Db, request: ReadKernelEventsRequest) -> Result<ReadKernelEventsResponse> {
    check_version("request", request.schema_version)?;
    if request.limit == 0 || request.limit > MAX_READ {
        return Err(KernelError::limit(format!("limit must be within 1..={MAX_READ}")));
    }
    let start = if request.after_seq == 0 { String::new() } else { keys::kernel_event(request.after_seq) };
    let page: Vec<(String, KernelEvent)> = db.scan(keys::KERNEL_EVENTS, &start, request.limit as usize + 1)?;
    let more = page.len() > request.limit as usize;
    let examined: Vec<KernelEvent> = page.into_iter().take(request.limit as usize).map(|(_, e)| e).collect();
    let last_seq = examined.last().map_or(request.after_seq, |e| e.seq);
    let prefix = request.type_prefix.unwrap_or_default();
    let events = examined.into_iter().filter(|e| e.r#type.starts_with(&prefix)).collect();
    Ok(ReadKernelEventsResponse { events, last_seq, more, schema_version: 1 })
}
