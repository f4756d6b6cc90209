//! Units: a tool call travels with its results. The filters that drop a
//! whole unit are decided here: `expired`, `sink-denied` (and `pair-dropped`
//! for the rest of the unit), `orphan-tool-result`, and `superseded` for
//! instructions a later set replaced.

use crate::canonical::Timestamp;
use crate::contracts::{Anchor, ToolOutcome};
use crate::session::{Candidate, ItemFacts};
use super::output::{DropReason, KeepReason};

/// A candidate as this plan sees it: its facts and what the request makes of them.
pub(super) struct Entry {
    pub(super) facts: ItemFacts,
    pub(super) tokens: u64,
    /// For a result shown as its placeholder (`tokens` is then the
    /// placeholder's): the tokens of the result itself.
    pub(super) shrunk_from: Option<u64>,
    /// Why this item keeps its whole unit out of the plan, if it does.
    offence: Option<DropReason>,
    pub(super) decision: Option<Decision>,
}

impl Entry {
    pub(super) fn of(facts: ItemFacts, admitted: bool, now: &Timestamp, overhead: u64) -> Entry {
        let offence = if facts.expires.is_some_and(|t| t <= now.unix_nanos()) {
            Some(DropReason::Expired)
        } else if !admitted {
            Some(DropReason::SinkDenied)
        } else {
            None
        };
        Entry { facts, tokens: u64::from(facts.token_estimate) + overhead, shrunk_from: None, offence, decision: None }
    }

    pub(super) fn kept(&self) -> bool {
        matches!(self.decision, Some(Decision::Keep(_)))
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Decision {
    Keep(KeepReason),
    Drop(DropReason),
}

/// Items that are kept or dropped together: an item, and when it calls tools,
/// the results of those calls.
pub(super) struct Unit {
    /// Entry index of the item (the call, or the lone item).
    pub(super) anchor: usize,
    /// Entry indexes of the results answering the anchor's calls, in transcript order.
    pub(super) results: Vec<usize>,
    /// For each of the anchor's tool calls, the outcome its latest result gives.
    pub(super) outcomes: Vec<Option<ToolOutcome>>,
    pub(super) must_keep: Option<KeepReason>,
    /// The highest priority among its members.
    pub(super) priority: i32,
}

impl Unit {
    pub(super) fn members(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.anchor).chain(self.results.iter().copied())
    }
}

/// Groups candidates into units, each tool call with its results; a result
/// whose call is not among the candidates is dropped as an orphan.
#[inline(never)]
pub(super) fn group_units(candidates: &[Candidate], entries: &mut [Entry]) -> Vec<Unit> {
    // Only looked up, never iterated: hashing order cannot leak into the plan.
    let mut call_owner: rustc_hash::FxHashMap<&str, (usize, usize)> = Default::default();
    let mut units: Vec<Unit> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        // Only calls and results are read from their items: most items are neither.
        let result = if c.facts.answers_call { c.item.tool_result.as_ref() } else { None };
        if let Some(result) = result {
            // A result answers the latest call of its id before it (providers
            // reuse ids across turns); one with no such call is an orphan.
            match call_owner.get(result.call_id.as_str()) {
                Some(&(u, k)) => {
                    units[u].results.push(i);
                    units[u].outcomes[k] = Some(result.outcome);
                    units[u].priority = units[u].priority.max(entries[i].facts.priority);
                }
                None => entries[i].decision = Some(Decision::Drop(DropReason::OrphanToolResult)),
            }
            continue;
        }
        let mut outcomes = Vec::new();
        if c.facts.calls_tools {
            for (k, call) in c.item.tool_calls.iter().enumerate() {
                call_owner.insert(&call.call_id, (units.len(), k));
            }
            outcomes = vec![None; c.item.tool_calls.len()];
        }
        units.push(Unit { anchor: i, results: Vec::new(), outcomes, must_keep: None, priority: entries[i].facts.priority });
    }
    units
}

/// Expiry and sinks drop a whole unit: the offending item for its reason,
/// the rest of the unit as `pair-dropped`.
#[inline(never)]
pub(super) fn drop_offending_units(units: &[Unit], entries: &mut [Entry]) {
    for unit in units {
        let Some((culprit, reason)) = unit.members().find_map(|i| entries[i].offence.map(|r| (i, r))) else {
            continue;
        };
        for i in unit.members() {
            let reason = if i == culprit { reason } else { DropReason::PairDropped };
            entries[i].decision = Some(Decision::Drop(reason));
        }
    }
}

/// Instructions a later set replaced: the current instructions are the
/// items anchored `instructions` that share the latest one's `sourceRef`
/// id and seq (one import's system prompt); the others are superseded.
#[inline(never)]
pub(super) fn drop_superseded(candidates: &[Candidate], entries: &mut [Entry]) {
    let instructions = |e: &Entry| e.facts.anchor == Some(Anchor::Instructions);
    let Some(latest) = entries.iter().rposition(instructions) else {
        return;
    };
    let group = |c: &Candidate| (c.item.source_ref.id.clone(), c.item.source_ref.seq);
    let current = group(&candidates[latest]);
    for (c, e) in candidates.iter().zip(entries.iter_mut()) {
        if instructions(e) && e.decision.is_none() && group(c) != current {
            e.decision = Some(Decision::Drop(DropReason::Superseded));
        }
    }
}
