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
//! Reads cost what they answer, not the scope: a keyed read walks the
//! key's slot, a resident snapshot walks the scope's ranking (kept on every
//! save) until no line can fit, and each scope lists its tombstones.
//! These lookups are marked with the memory revision they were kept at; a
//! store whose mark is behind (written before they existed, or by a kernel
//! that does not keep them) is read from the records, and rebuilt at its
//! next memory write.
//!
//! Deletion writes a tombstone carrying the record's revision and the
//! caller's fence first, so a replica replaying an old write cannot bring the
//! memory back: every read checks the tombstone.
//!
//! - `requests` — the commands' requests and receipts
//! - `records` — records in the store: keys, lookups (and their rebuild),
//!   load and save, the audit trail, a record's state at `now`
//! - `authorize` — each transition checked against the authority table
//!   (`crate::authority`)
//! - `propose` — candidates: their inherited sensitivity and sinks, secrets
//!   refused, duplicates reinforced
//! - `lifecycle` — `decide-memory`: the transitions a caller names
//! - `supersession` — a newly active record against its slot's active records
//! - `deletion` — fenced deletion, tombstones, replica receipts, purge
//! - `read` — a scope's memories as they stand, or as they were
//! - `consolidation` — a session's evidence made into candidates
//! - `verify` — every memory entry read against its record (`verify-store`)

pub mod consolidation;
mod authorize;
mod deletion;
mod lifecycle;
mod propose;
mod read;
mod records;
mod requests;
mod supersession;
mod verify;

pub use deletion::{check_fence, delete, purge, settle_deletion};
pub use lifecycle::decide;
pub use propose::{propose, propose_all, MAX_CONTENT_BYTES};
pub use read::{read, sink_permits};
pub use verify::{verify, Problem, ProblemKind, VerifyReport, VerifyRequest};
pub use records::{effective_state, load, lookups_current, ranked, scope_members, tombstones, MAX_SELECTED};
pub use requests::{
    Action, AuditEntry, Authority, DecideRequest, DeleteRequest, DeletionReceipt, DeletionStatus, MemoryCandidate, MemoryReceipt, MemoryView,
    PartReceipt, PartStatus, ProposeRequest, ProposeResponse, PurgeReceipt, PurgeRequest, ReadMemoryRequest, ReadMemoryResponse, Selector,
    Tombstone, MAX_CANDIDATES,
};
