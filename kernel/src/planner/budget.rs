//! The budget: must-keep units charged first, each partition's minimum held,
//! then greedy selection under ceilings. The budget's drop reasons are
//! decided here: `partition-ceiling`, `budget-exhausted`, `history-cutoff`.

use crate::contracts::{ItemKind, Partition, PARTITIONS};
use crate::error::{ErrorCode, KernelError};
use crate::session::Candidate;
use serde_json::json;
use std::cmp::Reverse;
use super::BP;
use super::admit::PlanPolicy;
use super::shrink::{self, ToolResults};
use super::output::{DropReason, KeepReason};
use super::units::{Decision, Entry, Unit};

/// A unit's cost per partition, or why it does not fit and which partition is full.
type Verdict = Result<[u64; 7], (DropReason, Partition)>;

/// The token accounts of one plan, per partition (indexed by `Partition as usize`).
pub(super) struct Budget<'p> {
    pub(super) policy: &'p PlanPolicy,
    /// window − reserved output − safety margin.
    pub(super) input: u64,
    pub(super) used: [u64; 7],
    pub(super) must_keep: [u64; 7],
    /// Tokens of the live items that are not must-keep.
    demand: [u64; 7],
    /// Minimums still held for each partition.
    pub(super) held: [u64; 7],
    /// Tokens any partition may take, within its ceiling.
    pool: u64,
}

impl<'p> Budget<'p> {
    pub(super) fn new(input: u64, policy: &'p PlanPolicy) -> Self {
        Budget { policy, input, used: [0; 7], must_keep: [0; 7], demand: [0; 7], held: [0; 7], pool: 0 }
    }

    fn share(&self, bp: u32) -> u64 {
        self.input * u64::from(bp) / BP
    }

    pub(super) fn minimum(&self, p: Partition) -> u64 {
        self.share(self.policy.limits(p).minimum_bp)
    }

    pub(super) fn ceiling(&self, p: Partition) -> u64 {
        let limits = self.policy.limits(p);
        self.share(limits.ceiling_bp).min(limits.ceiling_tokens.unwrap_or(u64::MAX))
    }

    pub(super) fn must_total(&self) -> u64 {
        self.must_keep.iter().sum()
    }

    /// Keeps every must-keep unit, charges the recovery block to the reserve,
    /// and counts what the other live items would need.
    #[inline(never)]
    pub(super) fn keep_must_keep(&mut self, units: &[Unit], entries: &mut [Entry], recovery_tokens: u64) {
        for unit in units {
            if entries[unit.anchor].decision.is_some() {
                continue;
            }
            for i in unit.members() {
                let (p, tokens) = (entries[i].facts.partition as usize, entries[i].tokens);
                if let Some(reason) = unit.must_keep {
                    entries[i].decision = Some(Decision::Keep(reason));
                    self.used[p] += tokens;
                    self.must_keep[p] += tokens;
                } else {
                    self.demand[p] += tokens;
                }
            }
        }
        let reserve = Partition::Reserve as usize;
        self.used[reserve] += recovery_tokens;
        self.must_keep[reserve] += recovery_tokens;
    }

    /// Holds each partition's minimum while it has candidates (the reserve's
    /// is headroom); with too little left for all, later partitions give way.
    #[inline(never)]
    pub(super) fn hold_minimums(&mut self) {
        for p in PARTITIONS {
            let i = p as usize;
            let want = if p == Partition::Reserve { u64::MAX } else { self.used[i] + self.demand[i] };
            self.held[i] = self.minimum(p).min(want).saturating_sub(self.used[i]);
        }
        self.pool = self.input - self.must_total();
        for p in PARTITIONS.iter().rev() {
            let excess = self.held.iter().sum::<u64>().saturating_sub(self.pool);
            let i = *p as usize;
            self.held[i] -= excess.min(self.held[i]);
        }
        self.pool -= self.held.iter().sum::<u64>();
    }

    /// Greedy selection, partition by partition in allocation order: units by
    /// priority, kind, then newest first, each spending its partition's held
    /// minimum before the shared pool, never past a partition's ceiling. A
    /// tool exchange that does not fit whole is tried with its results shrunk
    /// (see `shrink`) before it is dropped.
    #[inline(never)]
    pub(super) fn select(&mut self, units: &[Unit], entries: &mut [Entry], candidates: &[Candidate]) {
        // Each partition's undecided units, highest priority first, then by
        // kind, then newest first. Anchors are unique, so the keys are too.
        let mut by_partition: [Vec<(Reverse<i32>, ItemKind, Reverse<usize>, usize)>; 7] = Default::default();
        for (u, unit) in units.iter().enumerate().filter(|(_, unit)| entries[unit.anchor].decision.is_none()) {
            let anchor = &entries[unit.anchor];
            by_partition[anchor.facts.partition as usize].push((Reverse(unit.priority), anchor.facts.kind, Reverse(unit.anchor), u));
        }
        by_partition.iter_mut().for_each(|order| order.sort_unstable());
        let ceilings = PARTITIONS.map(|p| self.ceiling(p));
        for p in PARTITIONS.into_iter().filter(|p| *p != Partition::Reserve) {
            let mut own = self.held[p as usize];
            let mut cut = false;
            for &(.., u) in &by_partition[p as usize] {
                let unit = &units[u];
                let verdict = if cut {
                    Err((DropReason::HistoryCutoff, p))
                } else {
                    let cost = cost_of(unit.members(), entries);
                    match self.fits(&cost, &ceilings, own, p) {
                        // Dropped even shrunk: for the reason it did not fit whole, so
                        // shrinking never cuts a history the whole exchange would not.
                        Err(whole) if self.policy.tool_results == ToolResults::Shrink && !unit.results.is_empty() => {
                            self.fits_shrunk(unit, cost, entries, candidates, &ceilings, own, p).map_err(|_| whole)
                        }
                        verdict => verdict.map(|()| cost),
                    }
                };
                let decision = match verdict {
                    Ok(cost) => {
                        let total: u64 = cost.iter().sum();
                        let from_own = total.min(own);
                        own -= from_own;
                        self.pool -= total - from_own;
                        for (used, cost) in self.used.iter_mut().zip(cost) {
                            *used += cost;
                        }
                        Decision::Keep(KeepReason::Selected)
                    }
                    Err((reason, full)) => {
                        // Conversation history stays contiguous: once the conversation
                        // (or the whole budget) is full, older turns follow. A tool
                        // exchange too big for the evidence share is dropped whole
                        // without cutting the history before it.
                        cut |= p == Partition::Conversation && full == p;
                        Decision::Drop(reason)
                    }
                };
                for i in unit.members() {
                    entries[i].decision = Some(decision);
                }
            }
            self.pool += own;
        }
    }

    /// Whether `unit`, costing `cost` whole, fits with its largest results
    /// shrunk to their placeholders, one at a time (largest first, then in
    /// transcript order) until it does; if so, those results are marked
    /// shrunk and the unit's cost is returned. Only results larger than
    /// their placeholder shrink.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn fits_shrunk(&self, unit: &Unit, mut cost: [u64; 7], entries: &mut [Entry], candidates: &[Candidate], ceilings: &[u64; 7], own: u64, p: Partition) -> Verdict {
        let overhead = u64::from(self.policy.item_overhead_tokens);
        let mut shrinkable: Vec<(usize, u64)> =
            unit.results.iter().filter_map(|&i| Some((i, shrink::shrunk_tokens(&candidates[i], entries[i].tokens, overhead)?))).collect();
        shrinkable.sort_by_key(|&(i, _)| (Reverse(entries[i].tokens), i));
        let mut verdict = Err((DropReason::BudgetExhausted, p));
        let mut taken = 0;
        for &(i, less) in &shrinkable {
            cost[entries[i].facts.partition as usize] -= entries[i].tokens - less;
            taken += 1;
            verdict = self.fits(&cost, ceilings, own, p);
            if verdict.is_ok() {
                break;
            }
        }
        verdict?;
        for &(i, less) in &shrinkable[..taken] {
            entries[i].shrunk_from = Some(entries[i].tokens);
            entries[i].tokens = less;
        }
        Ok(cost)
    }

    /// Whether a unit costing `cost` (tokens per partition) fits partition
    /// `p`'s own share and the pool, within every ceiling; else the drop
    /// reason and the partition that is full.
    fn fits(&self, cost: &[u64; 7], ceilings: &[u64; 7], own: u64, p: Partition) -> Result<(), (DropReason, Partition)> {
        let total: u64 = cost.iter().sum();
        let over = |q: usize| cost[q] > 0 && self.used[q] + cost[q] > ceilings[q];
        if let Some(q) = PARTITIONS.into_iter().find(|q| over(*q as usize)) {
            Err((DropReason::PartitionCeiling, q))
        } else if total > own + self.pool {
            Err((DropReason::BudgetExhausted, p))
        } else {
            Ok(())
        }
    }
}

/// Tokens per partition of a unit's members (entry indexes).
fn cost_of(members: impl Iterator<Item = usize>, entries: &[Entry]) -> [u64; 7] {
    let mut cost = [0u64; 7];
    for i in members {
        cost[entries[i].facts.partition as usize] += entries[i].tokens;
    }
    cost
}

/// The `context-over-budget` refusal: what the must-keep set needs, per
/// partition, and its largest items. Out of line: the plan keeps to
/// HotSpot's JIT limit on the JVM host (`HugeMethodTest`).
#[cold]
#[inline(never)]
pub(super) fn over_budget(budget: &Budget, candidates: &[Candidate], entries: &[Entry]) -> KernelError {
    let (input, must_total) = (budget.input, budget.must_total());
    let partitions: Vec<_> = PARTITIONS
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "mustKeep": budget.must_keep[*p as usize],
                "ceiling": budget.share(budget.policy.limits(*p).ceiling_bp),
            })
        })
        .collect();
    let mut largest: Vec<(u64, &str, Partition, KeepReason)> = entries
        .iter()
        .zip(candidates)
        .filter_map(|(e, c)| match e.decision {
            Some(Decision::Keep(reason)) => Some((e.tokens, c.item.id(), e.facts.partition, reason)),
            _ => None,
        })
        .collect();
    largest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let largest: Vec<_> = largest
        .iter()
        .take(10)
        .map(|(tokens, id, p, reason)| json!({"itemId": id, "partition": p, "tokens": tokens, "keep": reason}))
        .collect();
    KernelError::new(
        ErrorCode::ContextOverBudget,
        format!("the must-keep context needs {must_total} tokens but the input budget is {input}"),
    )
    .with_detail(json!({
        "inputBudget": input,
        "mustKeepTokens": must_total,
        "partitions": partitions,
        "largestMustKeep": largest,
    }))
}
