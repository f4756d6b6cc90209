//! Session event logs: append-only, hash-chained, guarded by a CAS on the head.
//!
//! Each appended item gets the next sequence number and extends the chain
//! digest `chain(n) = sha256(canonical([chain(n-1), digest(item n)]))`, so a
//! head (seq + chain digest) names exactly one log content. A writer states
//! the head it built on; if another writer got there first it gets `stale`
//! with the current head and recomputes.
//!
//! What a model sees of a session is its projection: the latest compaction's
//! summary, then every item not summarized away, externalized bodies replaced
//! by their ContentRef. Each projected item is a [`Candidate`] carrying the
//! facts the planner reads of it, computed once when the event is loaded.
//!
//! - `log` — append, read, verify the chain, the head
//! - `projection` — the session as the kernel holds it, and what a model sees of it
//! - `candidate` — an item, its place in the transcript, and its planning facts

mod candidate;
mod log;
mod projection;

pub use candidate::{Candidate, LogTables};
pub(crate) use candidate::{chrono, sink_permits, ItemFacts};
pub use log::{
    append, append_compaction, check_expected, genesis, grounds_user_authority, head, load, read, verify_chain, AppendEventsRequest, AppendEventsResponse,
    Appended, Event, ReadEventsRequest, ReadEventsResponse, MAX_APPEND_ITEMS, MAX_EVENT_BYTES, MAX_READ_EVENTS,
};
pub use projection::{project, SessionLog};
