//! Planner invariants over generated conversations. proptest prints the
//! shrunk failing input; keep each as a named test in `planner.rs`.

mod common;

use common::*;
use ctxkernel::planner::{ContextPlan, KeepReason, Partition};
use ctxkernel::ErrorCode;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
enum Op {
    User(u16, u8),
    Assistant(u16, u8),
    /// Parallel calls; per call: 0 success, 1 error, 2 pending, 3 unknown, 4 no result; late results come after a message.
    Calls(Vec<u8>, bool),
    Orphan,
    Approval(bool),
    Task(u8, u8),
    Pinned(u16),
    Anchor(u8, u8),
    Policy(u8),
    Memory(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u16..400, 0u8..4).prop_map(|(n, s)| Op::User(n, s)),
        4 => (1u16..600, 0u8..4).prop_map(|(n, s)| Op::Assistant(n, s)),
        3 => (prop::collection::vec(0u8..5, 1..4), any::<bool>()).prop_map(|(o, late)| Op::Calls(o, late)),
        1 => Just(Op::Orphan),
        1 => any::<bool>().prop_map(Op::Approval),
        1 => (0u8..3, 0u8..6).prop_map(|(t, s)| Op::Task(t, s)),
        1 => (1u16..200).prop_map(Op::Pinned),
        1 => (0u8..3, 0u8..5).prop_map(|(a, t)| Op::Anchor(a, t)),
        1 => (0u8..5).prop_map(Op::Policy),
        1 => (1u16..300).prop_map(Op::Memory),
    ]
}

const TRUST: [&str; 5] = ["host", "verified", "user", "external", "untrusted"];

/// Text of about `n` tokens in one of four scripts.
fn text(n: u16, script: u8) -> String {
    let n = n as usize;
    match script {
        0 => words(n),
        1 => "上下文规划器保留最后的请求".chars().cycle().take(n).collect(),
        2 => "fn plan(&mut self) -> Result<Plan, Error> { self.items.sort(); } ".repeat(n / 20 + 1),
        _ => format!("{} 中文 mixed `snake_case` 🚀 {}", words(n / 2), "测试".repeat(n / 4)),
    }
}

fn build(ops: &[Op]) -> Conv {
    let mut conv = Conv::new();
    let mut call_no = 0;
    let mut pending_late: Vec<(String, &'static str)> = Vec::new();
    for op in ops {
        match op {
            Op::User(n, s) => {
                conv.user(&text(*n, *s));
            }
            Op::Assistant(n, s) => {
                conv.assistant(&text(*n, *s));
                for (call, outcome) in pending_late.drain(..) {
                    conv.result(&call, "late result", outcome);
                }
            }
            Op::Calls(outcomes, late) => {
                let ids: Vec<String> = outcomes.iter().map(|_| { call_no += 1; format!("c{call_no}") }).collect();
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                conv.call("calling tools", &refs);
                for (id, o) in ids.iter().zip(outcomes) {
                    let outcome = ["success", "error", "pending", "unknown"].get(*o as usize).copied();
                    match (outcome, late) {
                        (None, _) => {}
                        (Some(outcome), true) => pending_late.push((id.clone(), outcome)),
                        (Some(outcome), false) => {
                            conv.result(id, &words(30 + 7 * *o as usize), outcome);
                        }
                    }
                }
            }
            Op::Orphan => {
                conv.result("never-called", "stray", "success");
            }
            Op::Approval(resolved) => {
                let op_id = format!("op{}", conv.items.len());
                let interaction = |state: &str| json!({"kind": "approval", "operationId": op_id, "nonce": "n", "state": state, "binding": {"turnId": "t"}});
                conv.push("message", "approve?", json!({"role": "assistant", "trust": "host", "interaction": interaction("pending")}));
                if *resolved {
                    conv.push("message", "approved", json!({"role": "user", "interaction": interaction("resolved")}));
                }
            }
            Op::Task(t, s) => {
                let status = ["open", "in-progress", "blocked", "done", "failed", "cancelled"][*s as usize];
                conv.push("task-state", "task", json!({"trust": "host", "task": {"taskId": format!("t{t}"), "status": status}}));
            }
            Op::Pinned(n) => {
                conv.push("message", &words(*n as usize), json!({"role": "user", "pinned": true}));
            }
            Op::Anchor(a, t) => {
                let anchor = ["goal", "workspace", "permission-ceiling"][*a as usize];
                conv.push("task-state", anchor, json!({"anchor": anchor, "trust": TRUST[*t as usize]}));
            }
            Op::Policy(t) => {
                conv.push("system-policy", "policy text", json!({"trust": TRUST[*t as usize], "pinned": *t > 2}));
            }
            Op::Memory(n) => {
                conv.push("memory", &words(*n as usize), json!({"sourceRef": {"kind": "memory", "id": "m"}}));
            }
        }
    }
    for (call, outcome) in pending_late {
        conv.result(&call, "late result", outcome);
    }
    conv
}

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
    let dropped: BTreeSet<&str> = plan.dropped.iter().map(|d| d.item_id.as_str()).collect();
    prop_assert_eq!(kept.len() + dropped.len(), items.len(), "every item decided once");
    prop_assert!(kept.is_disjoint(&dropped));

    let mut call_owner: BTreeMap<&str, &str> = BTreeMap::new();
    for item in items {
        for call in item["toolCalls"].as_array().into_iter().flatten() {
            call_owner.insert(call["callId"].as_str().unwrap(), item["itemId"].as_str().unwrap());
        }
    }
    for item in items {
        let id = item["itemId"].as_str().unwrap();
        if let Some(call) = item["toolResult"]["callId"].as_str() {
            match call_owner.get(call) {
                None => prop_assert!(!kept.contains(id), "orphan {} kept", id),
                Some(owner) => prop_assert_eq!(kept.contains(id), kept.contains(owner), "pair split: {} / {}", id, owner),
            }
        }
    }
    // Results follow their call directly in the prompt.
    let order: Vec<&str> = plan.context.iter().map(|p| p.item_id.as_str()).collect();
    for (i, id) in order.iter().enumerate() {
        if let Some(call) = by_id[id]["toolResult"]["callId"].as_str() {
            let owner = call_owner[call];
            let start = order.iter().position(|o| *o == owner).unwrap();
            prop_assert!(start < i && order[start + 1..i].iter().all(|o| by_id[o]["toolResult"].is_object()));
        }
    }
    // Must-keep items are kept; the latest user message always is.
    let last_user = items.iter().rev().find(|i| i["role"] == "user").map(|i| i["itemId"].as_str().unwrap());
    if let Some(id) = last_user {
        prop_assert!(kept.contains(id), "the last user request was dropped");
    }
    for item in items.iter().filter(|i| i["pinned"] == true) {
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
                let plan: ContextPlan = serde_json::from_value(a).unwrap();
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
