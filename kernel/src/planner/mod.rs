//! The context planner: what one model call sees.
//!
//! ```text
//! input budget = window − reserved output − safety margin
//!
//! items ──► partition (by kind, never raising trust)
//!       ──► units (a tool call travels with its results)
//!       ──► filters (expired, sink-denied, orphan results, superseded instructions)
//!       ──► must-keep set (never dropped for tokens, else context-over-budget)
//!       ──► minimums reserved, then greedy selection per partition in a
//!           fixed order (priority, kind, recency, id) under ceilings
//!       ──► plan: kept items in prompt order, dropped items with reasons,
//!           bound to session head + memory revision + policy + model
//! ```
//!
//! The planner is a pure function of its inputs: the command layer loads the
//! session and passes it in. A shuffled input gives a byte-identical plan.
//!
//! One file per step, in the order [`plan`] runs them:
//! - `admit` — the request, model and policy checked; the input budget
//! - `units` — items grouped with their tool results; expired, sink-denied
//!   and orphan items dropped with their reason; instructions a later set
//!   replaced, superseded
//! - `must_keep` — what is never dropped for tokens, and why
//! - `budget` — minimums held, greedy selection under ceilings; the
//!   budget's drop reasons (ceiling, exhausted, history cut-off)
//! - `shrink` — a tool exchange that does not fit whole, kept with its
//!   results as placeholders naming their size and digest
//! - `order` — kept items in prompt order, dropped items in transcript order
//! - `digest` — the recovery block (counted before the budget is spent),
//!   the plan bound, assembled and digested, and its canonical JSON
//!
//! and `output`, the plan as hosts receive it, with every keep and drop reason.
//!
//! An item's partition (and its demotion for low trust) is a fact of the item
//! itself: `contracts::partition_of`, read once when its candidate is made.

mod admit;
mod budget;
mod digest;
mod must_keep;
mod order;
mod output;
mod shrink;
mod units;

pub use admit::{
    admit, normalize_inline, ModelProfile, PartitionLimits, PartitionPolicy, PlanPolicy, PlanRequest, MAX_ITEM_BYTES_CEILING, MAX_WINDOW,
};
pub use shrink::ToolResults;
pub use output::{
    BudgetSummary, ContextPlan, DropReason, Dropped, DroppedItem, DroppedRef, ItemBody, KeepReason, PartitionUsage, PendingToolCall,
    PlanBinding, PlannedItem, Recovery, Shrunk,
};

use budget::{over_budget, Budget};
use crate::contracts::Head;
use crate::error::{KernelError, Result};
use crate::session::{chrono, Candidate, LogTables};
use digest::finish;
use must_keep::mark_must_keep;
use order::{dropped_items, hash_kept, prompt_order};
use units::{drop_offending_units, drop_superseded, group_units, Entry};

/// Basis points: 10 000 = the whole input budget.
const BP: u64 = 10_000;

/// Everything a plan depends on besides the request's own fields.
pub struct PlanInputs<'a> {
    /// Normalized items with unique ids.
    pub candidates: Vec<Candidate>,
    /// The tables of the session log the logged candidates come from.
    pub log: &'a LogTables,
    pub memory_revision: u64,
    pub session: Option<(String, Head)>,
}

/// Plans. `candidates` are normalized; `policy` and `input` come from [`admit`].
///
/// Each phase below is its own function, kept out of line: the JVM host runs
/// this code as bytecode, and HotSpot never compiles a method over 8 000
/// bytes, so one 20 KB `plan` would run interpreted there.
pub fn plan(request: &PlanRequest, policy: &PlanPolicy, input: u64, inputs: PlanInputs) -> Result<ContextPlan> {
    let PlanInputs { mut candidates, log, session, memory_revision } = inputs;
    if candidates.len() > policy.max_items as usize {
        return Err(KernelError::limit(format!(
            "{} candidate items; policy.maxItems is {}",
            candidates.len(),
            policy.max_items
        )));
    }
    // One canonical order, whatever order the items came in: from here on a
    // candidate's index is its transcript rank (ids are unique, so `chrono`
    // is a strict order). A stored session arrives in order already.
    let in_order = candidates.windows(2).all(|w| matches!((w[0].seq, w[1].seq), (Some(a), Some(b)) if a < b));
    if !in_order {
        candidates.sort_by(|a, b| chrono(a).cmp(&chrono(b)));
    }
    let overhead = u64::from(policy.item_overhead_tokens);
    let admitted = log.policies.admitted(&request.sink);
    let mut entries: Vec<Entry> = candidates
        .iter()
        .map(|c| Entry::of(c.facts, c.admitted(&admitted, &request.sink), &request.now, overhead))
        .collect();
    let mut units = group_units(&candidates, &mut entries);
    drop_offending_units(&units, &mut entries);
    drop_superseded(&candidates, &mut entries);
    let pending_tool_calls = mark_must_keep(&mut units, &candidates, &entries, &request.now);

    let mut recovery = Recovery::new(session.as_ref(), memory_revision, policy)?;
    let mut budget = Budget::new(input, policy);
    budget.keep_must_keep(&units, &mut entries, recovery.tokens);
    if budget.must_total() > input {
        return Err(over_budget(&budget, &candidates, &entries));
    }
    budget.hold_minimums();
    budget.select(&units, &mut entries, &candidates);

    hash_kept(&mut candidates, &entries);
    let context = prompt_order(&units, &candidates, &entries);
    let (dropped, dropped_digest) = dropped_items(&candidates, &entries, log);
    recovery.dropped_digest = dropped_digest;
    finish(request, &budget, session, recovery, context, dropped, pending_tool_calls)
}
