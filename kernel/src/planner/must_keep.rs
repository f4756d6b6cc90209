//! The must-keep set: what is never dropped for tokens (pinned, recovery,
//! the last user request, pending interactions, unfinished tasks, anchors,
//! unsettled tool calls), and the tool calls still pending.

use crate::canonical::Timestamp;
use crate::contracts::ToolOutcome;
use crate::session::Candidate;
use std::collections::BTreeMap;
use super::output::{KeepReason, PendingToolCall};
use super::units::{Entry, Unit};

/// Marks each live unit's must-keep reason (the strongest of its members')
/// and returns the tool calls without a settled outcome.
#[inline(never)]
pub(super) fn mark_must_keep(units: &mut [Unit], candidates: &[Candidate], entries: &[Entry], now: &Timestamp) -> Vec<PendingToolCall> {
    let mut must: Vec<Option<KeepReason>> = vec![None; candidates.len()];
    let mark = |i: usize, reason: KeepReason, must: &mut Vec<Option<KeepReason>>| {
        if must[i].is_none_or(|r| reason < r) {
            must[i] = Some(reason);
        }
    };
    let mut latest_user = None;
    let mut latest_anchor = BTreeMap::new();
    let mut latest_task = BTreeMap::new();
    let mut interactions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate().filter(|(_, e)| e.decision.is_none()) {
        if e.facts.pinned {
            mark(i, KeepReason::Pinned, &mut must);
        }
        if e.facts.summary {
            mark(i, KeepReason::Recovery, &mut must);
        }
        if e.facts.user_request {
            latest_user = Some(i);
        }
        match e.facts.anchor {
            // Only the current instructions are left (see `drop_superseded`): all of them stay.
            Some(crate::contracts::Anchor::Instructions) => mark(i, KeepReason::Anchor, &mut must),
            Some(anchor) => {
                latest_anchor.insert(anchor, i);
            }
            None => {}
        }
        if e.facts.has_task || e.facts.has_interaction {
            let item = &candidates[i].item;
            if let Some(task) = &item.task {
                latest_task.insert(task.task_id.as_str(), i);
            }
            if let Some(interaction) = &item.interaction {
                interactions.entry(interaction.operation_id.as_str()).or_default().push(i);
            }
        }
    }
    if let Some(i) = latest_user {
        mark(i, KeepReason::LastUserRequest, &mut must);
    }
    for &i in latest_anchor.values() {
        mark(i, KeepReason::Anchor, &mut must);
    }
    for &i in latest_task.values() {
        if candidates[i].item.task.as_ref().is_some_and(|t| t.status.is_unfinished()) {
            mark(i, KeepReason::UnfinishedTask, &mut must);
        }
    }
    for members in interactions.values() {
        let latest = &candidates[*members.last().expect("grouped items exist")].item;
        let interaction = latest.interaction.as_ref().expect("grouped by interaction");
        let waiting = interaction.state == crate::contracts::InteractionState::Pending
            && interaction.expires_at.as_ref().is_none_or(|t| t > now);
        if waiting {
            for &i in members {
                mark(i, KeepReason::PendingInteraction, &mut must);
            }
        }
    }
    let mut pending_tool_calls = Vec::new();
    for unit in units.iter().filter(|u| entries[u.anchor].decision.is_none()) {
        for (k, outcome) in unit.outcomes.iter().enumerate() {
            let outcome = outcome.unwrap_or(ToolOutcome::Pending);
            if matches!(outcome, ToolOutcome::Pending | ToolOutcome::Unknown) {
                let anchor = &candidates[unit.anchor].item;
                let call = &anchor.tool_calls[k];
                mark(unit.anchor, KeepReason::UnsettledToolCall, &mut must);
                pending_tool_calls.push(PendingToolCall {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    item_id: anchor.id().to_string(),
                    outcome,
                });
            }
        }
    }
    pending_tool_calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    for unit in units.iter_mut() {
        unit.must_keep = unit.members().filter_map(|i| must[i]).min();
    }
    pending_tool_calls
}
