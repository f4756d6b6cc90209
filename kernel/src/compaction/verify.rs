//! VERIFYING: the invariants a compaction must keep before it may commit.
//! What had to stay verbatim did, the summary may reach the sink, and no tool
//! call is separated from its results.

use crate::canonical::Timestamp;
use crate::contracts::{ItemKind, Sensitivity, Trust};
use crate::error::{KernelError, Result};
use crate::session::{self, Candidate};
use std::collections::BTreeMap;
use super::prepare::{must_preserve, tool_units, Prepared};

/// Checks the invariants a compaction must keep before it may commit.
pub(super) fn verify(prepared: &Prepared, after: &[Candidate], now: &Timestamp, sink: &str) -> Result<()> {
    let fail = |what: String| Err(KernelError::internal(format!("compaction failed verification: {what}")));
    let by_id: BTreeMap<&str, &Candidate> = after.iter().map(|c| (c.item.id(), c)).collect();
    // Everything that had to stay is there, byte for byte.
    for i in must_preserve(&prepared.before, now) {
        let original = &prepared.before[i].item;
        match by_id.get(original.id()) {
            Some(kept) if kept.item.digest == original.digest && kept.item.interaction == original.interaction => {}
            _ => return fail(format!("`{}` must stay verbatim", original.id())),
        }
    }
    // Tool pairs stay whole (a call without results is marked pending by the planner).
    if let Err(problem) = check_pairing(&prepared.before, after) {
        return fail(problem);
    }
    // The summary never claims more trust or less sensitivity than its inputs.
    let summary = after.iter().find(|c| c.item.summary_of.is_some());
    if let Some(summary) = summary.filter(|_| prepared.summarizes()) {
        let lowest = prepared.inputs.iter().map(|c| c.item.trust).max().unwrap_or(Trust::Host);
        let strictest = prepared.inputs.iter().map(|c| c.item.sensitivity).max().unwrap_or(Sensitivity::Public);
        if summary.item.trust < lowest || summary.item.sensitivity < strictest {
            return fail("the summary raised trust or lowered sensitivity".into());
        }
        if !session::sink_permits(&summary.item, sink) {
            return fail("the summary cannot reach the sink it was written for".into());
        }
        if summary.item.kind == ItemKind::SystemPolicy {
            return fail("a summary may not be system policy".into());
        }
    }
    Ok(())
}

/// Compaction never separates a call from its results, in either direction:
/// a result that had its call before has the same call after, and a call
/// that stays keeps every result it had (so its outcome is never lost and a
/// finished call is never reported pending). Results that never had a call
/// are the planner's to drop, with a reason.
pub fn check_pairing(before: &[Candidate], after: &[Candidate]) -> std::result::Result<(), String> {
    let pairs = |cs: &[Candidate]| -> BTreeMap<String, (String, Vec<String>)> {
        tool_units(cs)
            .into_iter()
            .map(|(call, results)| {
                let id = cs[call].item.id().to_string();
                (id.clone(), (id, results.iter().map(|&r| cs[r].item.id().to_string()).collect()))
            })
            .collect()
    };
    let (had, has) = (pairs(before), pairs(after));
    let owner_before: BTreeMap<&str, &str> =
        had.values().flat_map(|(call, results)| results.iter().map(move |r| (r.as_str(), call.as_str()))).collect();
    let owner_after: BTreeMap<&str, &str> =
        has.values().flat_map(|(call, results)| results.iter().map(move |r| (r.as_str(), call.as_str()))).collect();
    for c in after {
        let id = c.item.id();
        if let Some(call) = owner_before.get(id) {
            if owner_after.get(id) != Some(call) {
                let call_id = c.item.tool_result.as_ref().map_or("", |r| r.call_id.as_str());
                return Err(format!("result `{id}` lost its call `{call_id}` (item `{call}`)"));
            }
        }
    }
    for (call, (_, results)) in &has {
        let Some((_, results_before)) = had.get(call) else { continue };
        if let Some(lost) = results_before.iter().find(|r| !results.contains(r)) {
            return Err(format!("call `{call}` lost its result `{lost}`"));
        }
    }
    Ok(())
}
