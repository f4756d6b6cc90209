//! Compaction: shorten what a model sees of a session without deleting or
//! rewriting anything.
//!
//! ```text
//! IDLE → EVALUATING → PREPARING → SUMMARIZING? → VERIFYING → COMMITTING (CAS) → COMMITTED
//!                                      │
//!   provider failed ── allowDegraded ──┴─► local summary, committed as `degraded`
//!   provider outcome unknown ──────────► RECONCILIATION_REQUIRED ── reconcile ──► new operation
//!   another compaction committed first ► STALE (recompute from the current head)
//!   cancelled, or nothing to gain ─────► ABORTED / not needed
//! ```
//!
//! A compaction is appended to the session log like any event, with a CAS on
//! the head. It names a cut: the model-visible history up to the cut is
//! replaced by one summary item, except what must stay verbatim (pinned items,
//! pending approvals and questions, unsettled tool calls and any tool pair the
//! cut would split, the last user request, unfinished task state, anchors,
//! the latest definition of each tool, and system policy). Raw events stay in the log; the compacted span is also
//! archived losslessly in the content store, and large tool outputs anywhere
//! in the session are externalized there, leaving a ContentRef that says what
//! was left out.
//!
//! The provider-backed strategy is sans-IO: the kernel journals the operation
//! and returns `awaiting-provider` with the exact request; the host runs its
//! model and answers with `continue-operation`.
//!
//! - `requests` — the commands' requests and answers, the operation journal entry
//! - `prepare` — EVALUATING and PREPARING: the cut, what stays verbatim, the archives
//! - `summary` — SUMMARIZING: the local summary, the provider request, and the
//!   checks on what a provider wrote
//! - `verify` — VERIFYING: the invariants checked before a commit
//! - `operation` — the journaled operation that walks the states:
//!   `compact`, `resume` (continue-operation) and `reconcile`
//!
//! The committed record itself (`CompactionRecord`) is a contract, held by the
//! session log below this layer.

mod operation;
mod prepare;
mod requests;
mod summary;
mod verify;

pub use operation::{compact, reconcile, resume};
pub use requests::{
    CompactRequest, CompactResponse, CompactionPolicy, CompactionState, ContinueRequest, Operation, OperationState, ReconcileRequest,
    Resolution, Status,
};
pub use verify::check_pairing;

/// Basis points: 10 000 = the whole input budget.
const BP: u64 = 10_000;
