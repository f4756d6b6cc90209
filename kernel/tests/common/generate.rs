//! Generated conversations: parallel tool calls, orphan and late results,
//! pending and resolved approvals, task state, pinned items, anchors, policy
//! of every trust level, memories, and text in English, Chinese and code.

use super::{words, Conv};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
pub enum Op {
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
    /// A call and its result, one of them pinned (the call when true).
    PinnedPair(bool),
    /// A call whose id every such call reuses (`call_0`, as some providers
    /// number calls per turn), with the outcome of its result (4: none).
    Reused(u8),
}

pub fn op() -> impl Strategy<Value = Op> {
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
        1 => any::<bool>().prop_map(Op::PinnedPair),
        1 => (0u8..5).prop_map(Op::Reused),
    ]
}

const TRUST: [&str; 5] = ["host", "verified", "user", "external", "untrusted"];

/// Text of about `n` tokens in one of four scripts.
pub fn text(n: u16, script: u8) -> String {
    let n = n as usize;
    match script {
        0 => words(n),
        1 => "上下文规划器保留最后的请求".chars().cycle().take(n).collect(),
        2 => "fn plan(&mut self) -> Result<Plan, Error> { self.items.sort(); } ".repeat(n / 20 + 1),
        _ => format!("{} 中文 mixed `snake_case` 🚀 {}", words(n / 2), "测试".repeat(n / 4)),
    }
}

pub fn build(ops: &[Op]) -> Conv {
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
                            // Every third result is long, in every script: old ones shrink to fit.
                            let long = if call_no % 3 == 0 { 500 } else { 0 };
                            conv.result(id, &text(30 + 7 * *o as u16 + long, (call_no % 4) as u8), outcome);
                        }
                    }
                }
            }
            Op::Orphan => {
                conv.result("never-called", "stray", "success");
            }
            Op::Approval(resolved) => {
                let op_id = format!("op{}", conv.items.len());
                // Every other one is a question to the user rather than an approval.
                let kind = if conv.items.len() % 2 == 0 { "approval" } else { "question" };
                let interaction = |state: &str| json!({"kind": kind, "operationId": op_id, "nonce": "n", "state": state,
                    "expiresAt": "2026-06-02T00:00:00Z", "binding": {"turnId": "t"}});
                conv.push("message", "approve?", json!({"role": "assistant", "trust": "host", "interaction": interaction("pending")}));
                if *resolved {
                    conv.push("message", "approved", json!({"role": "user", "interaction": interaction("resolved")}));
                }
            }
            Op::Task(t, s) => {
                let status = ["open", "in-progress", "blocked", "done", "failed", "cancelled"][*s as usize];
                conv.push("task-state", "task", json!({"trust": "host", "task": {"taskId": format!("t{t}"), "status": status}}));
            }
            Op::PinnedPair(pin_call) => {
                call_no += 1;
                let id = format!("p{call_no}");
                let call = conv.call("calling a pinned tool", &[&id]);
                let result = conv.result(&id, &words(40), "success");
                let pinned = if *pin_call { call } else { result };
                let at = conv.items.iter().position(|i| i["itemId"] == pinned.as_str()).expect("just pushed");
                conv.items[at]["pinned"] = json!(true);
            }
            Op::Reused(o) => {
                conv.call("calling again", &["call_0"]);
                if let Some(outcome) = ["success", "error", "pending", "unknown"].get(*o as usize) {
                    conv.result("call_0", &words(20), outcome);
                }
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

