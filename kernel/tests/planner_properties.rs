//! Planner invariants over generated conversations. proptest prints the
//! shrunk failing input; keep each as a named test in `planner.rs`.

mod common;

use common::*;
use ctxkernel::contracts::Partition;
use ctxkernel::planner::{ContextPlan, KeepReason};
use ctxkernel::ErrorCode;
use common::generate::{build, op};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn shuffled(items: &[Value], mut seed: u64) -> Vec<Value> {
    let mut out = items.to_vec();
    for i in (1..out.len()).rev() {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        out.swap(i, (seed >> 33) as usize % (i + 1));
    }
    out
}

fn check(conv: &Conv, plan: &ContextPlan) -> Result<(), TestCaseError> {
    let items = &conv.items;
    let by_id: BTreeMap<&str, &Value> = items.iter().map(|i| (i["itemId"].as_str().unwrap(), i)).collect();
    let kept: BTreeSet<&str> = plan.context.iter().map(|p| p.item_id.as_str()).collect();
    let dropped: BTreeSet<&str> = plan.dropped.iter().map(|d| d.item_id).collect();
    prop_assert_eq!(kept.len() + dropped.len(), items.len(), "every item decided once");
    prop_assert!(kept.is_disjoint(&dropped));

    // A result answers the latest call of its id before it.
    let mut latest: BTreeMap<&str, &str> = BTreeMap::new();
    let mut owner_of: BTreeMap<&str, &str> = BTreeMap::new();
    for item in items {
        let id = item["itemId"].as_str().unwrap();
        if let Some(call) = item["toolResult"]["callId"].as_str() {
            if let Some(owner) = latest.get(call) {
                owner_of.insert(id, owner);
            }
        }
        for call in item["toolCalls"].as_array().into_iter().flatten() {
            latest.insert(call["callId"].as_str().unwrap(), id);
        }
    }
    for item in items {
        let id = item["itemId"].as_str().unwrap();
        if item["toolResult"]["callId"].is_string() {
            match owner_of.get(id) {
                None => prop_assert!(!kept.contains(id), "orphan {} kept", id),
                Some(owner) => prop_assert_eq!(kept.contains(id), kept.contains(owner), "pair split: {} / {}", id, owner),
            }
        }
    }
    // Results follow their call directly in the prompt.
    let order: Vec<&str> = plan.context.iter().map(|p| p.item_id.as_str()).collect();
    for (i, id) in order.iter().enumerate() {
        if by_id[id]["toolResult"]["callId"].is_string() {
            let owner = owner_of[id];
            let start = order.iter().position(|o| *o == owner).unwrap();
            prop_assert!(start < i && order[start + 1..i].iter().all(|o| by_id[o]["toolResult"].is_object()));
        }
    }
    // Must-keep items are kept; the latest user message always is.
    let last_user = items.iter().rev().find(|i| i["role"] == "user").map(|i| i["itemId"].as_str().unwrap());
    if let Some(id) = last_user {
        prop_assert!(kept.contains(id), "the last user request was dropped");
    }
    // Pinning holds for trusted items; untrusted text cannot pin itself.
    for item in items.iter().filter(|i| i["pinned"] == true && ["host", "verified", "user"].contains(&i["trust"].as_str().unwrap())) {
        prop_assert!(kept.contains(item["itemId"].as_str().unwrap()));
    }
    for p in &plan.pending_tool_calls {
        prop_assert!(kept.contains(p.item_id.as_str()));
    }
    for p in &plan.context {
        if p.partition == Partition::System {
            prop_assert!(p.item.trust <= ctxkernel::contracts::Trust::User, "untrusted in system");
        }
        if p.keep == KeepReason::Selected {
            let usage = &plan.partitions[p.partition as usize];
            prop_assert!(usage.used <= usage.ceiling.max(usage.must_keep));
        }
    }
    // A shrunk result is a selected result, cheaper than itself, that widens
    // nothing and carries none of its content: only its size and digest.
    for p in &plan.context {
        let Some(shrunk) = &p.shrunk else { continue };
        let original = by_id[p.item_id.as_str()];
        prop_assert_eq!(p.keep, KeepReason::Selected);
        prop_assert!(original["toolResult"].is_object() && p.tokens < shrunk.tokens);
        prop_assert_eq!(serde_json::to_value(&p.item.sensitivity).unwrap(), original["sensitivity"].clone());
        prop_assert_eq!(serde_json::to_value(&p.item.trust).unwrap(), original["trust"].clone());
        prop_assert_eq!(serde_json::to_value(&p.item.allowed_sinks).unwrap(), original["allowedSinks"].clone());
        let text = p.item.content.as_deref().unwrap_or("");
        let content = original["content"].as_str().unwrap_or("");
        prop_assert!(content.len() < 8 || !text.contains(content), "the placeholder holds the result");
        prop_assert!(p.item.parts.is_empty() && text.contains(&shrunk.digest));
    }
    let b = &plan.budget;
    prop_assert!(b.used <= b.input);
    prop_assert_eq!(b.used + b.reserved + b.free, b.input);
    let kept_tokens: u64 = plan.context.iter().map(|p| p.tokens).sum::<u64>() + plan.recovery.tokens;
    prop_assert_eq!(kept_tokens, b.used);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plans_keep_their_invariants(ops in prop::collection::vec(op(), 1..60), window in 300u64..40_000, seed in any::<u64>()) {
        let conv = build(&ops);
        let original = plan_value(&request(&conv.items, window));
        let reordered = plan_value(&request(&shuffled(&conv.items, seed), window));
        match (original, reordered) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.to_string(), b.to_string(), "a shuffled input changed the plan");
                let plan: ContextPlan = serde_json::from_value(a.clone()).unwrap();
                prop_assert_eq!(serde_json::to_string(&plan).unwrap(), a.to_string(), "the plan is not written as serde writes it");
                check(&conv, &plan)?;
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(&a, &b);
                prop_assert_eq!(a.code, ErrorCode::ContextOverBudget, "{}", a.message);
                prop_assert!(a.detail["mustKeepTokens"].as_u64() > a.detail["inputBudget"].as_u64());
            }
            (a, b) => prop_assert!(false, "shuffling changed the outcome: {:?} vs {:?}", a.err(), b.err()),
        }
    }
}
