//! Compaction invariants over generated conversations, cutting at every
//! position. After each compaction the session is planned, rendered into
//! Anthropic Messages and OpenAI Chat Completions form, and checked against
//! each API's tool-pairing rules; pinned items, pending approvals, the last
//! user request, unfinished task state and system policy must come through
//! byte for byte, and the
//! summary may not claim more trust than its inputs. proptest prints the
//! shrunk failing input; keep each as a named test in `compaction.rs`.

mod common;

use common::generate::{build, op};
use common::*;
use ctxkernel::store::MemStore;
use ctxkernel::Command;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The messages a host would send, rendered from a plan.
struct Rendered {
    /// (role, tool-use ids, tool-result ids) per message, Anthropic style
    /// (consecutive same-role messages merged).
    anthropic: Vec<(String, Vec<String>, Vec<String>)>,
    /// (role, tool-call ids, tool-call-id) per message, OpenAI style.
    openai: Vec<(String, Vec<String>, Option<String>)>,
}

fn render(plan: &Value) -> Rendered {
    let pending: BTreeSet<String> =
        plan["pendingToolCalls"].as_array().unwrap().iter().map(|p| p["callId"].as_str().unwrap().to_string()).collect();
    let context = plan["context"].as_array().unwrap();
    let mut anthropic: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    let mut openai = Vec::new();
    let mut push = |role: &str, uses: Vec<String>, results: Vec<String>| match anthropic.last_mut() {
        Some(last) if last.0 == role => {
            last.1.extend(uses);
            last.2.extend(results);
        }
        _ => anthropic.push((role.to_string(), uses, results)),
    };
    for (at, planned) in context.iter().enumerate() {
        let item = &planned["item"];
        // Results follow their call directly (ids may repeat across turns).
        let answered: BTreeSet<String> = context[at + 1..]
            .iter()
            .map_while(|p| p["item"]["toolResult"]["callId"].as_str().map(str::to_string))
            .collect();
        if item["kind"] == "system-policy" && planned["partition"] == "system" {
            continue; // the system prompt
        }
        let calls: Vec<String> =
            item["toolCalls"].as_array().into_iter().flatten().map(|c| c["callId"].as_str().unwrap().to_string()).collect();
        if let Some(call) = item["toolResult"]["callId"].as_str() {
            push("user", vec![], vec![call.to_string()]);
            openai.push(("tool".to_string(), vec![], Some(call.to_string())));
        } else if item["role"] == "assistant" {
            push("assistant", calls.clone(), vec![]);
            openai.push(("assistant".to_string(), calls.clone(), None));
            // A call without a result yet gets an explicit pending result.
            for call in calls.iter().filter(|c| !answered.contains(*c)) {
                assert!(pending.contains(call), "call {call} has no result and no pending marker");
                push("user", vec![], vec![call.clone()]);
                openai.push(("tool".to_string(), vec![], Some(call.clone())));
            }
        } else {
            push("user", vec![], vec![]);
            openai.push(("user".to_string(), vec![], None));
        }
    }
    Rendered { anthropic, openai }
}

/// Anthropic: every tool_use is answered by a tool_result in the very next
/// (user) message, and every tool_result answers a tool_use of the message
/// right before it.
fn check_anthropic(messages: &[(String, Vec<String>, Vec<String>)]) -> Result<(), String> {
    for (i, (role, uses, results)) in messages.iter().enumerate() {
        let previous_uses: BTreeSet<&String> = if i > 0 { messages[i - 1].1.iter().collect() } else { BTreeSet::new() };
        for result in results {
            if role != "user" || !previous_uses.contains(result) {
                return Err(format!("message {i}: tool_result {result} does not answer the previous message"));
            }
        }
        if !uses.is_empty() {
            let next: BTreeSet<&String> = messages.get(i + 1).map(|m| m.2.iter().collect()).unwrap_or_default();
            if let Some(missing) = uses.iter().find(|u| !next.contains(u)) {
                return Err(format!("message {i}: tool_use {missing} is not answered by the next message"));
            }
        }
    }
    Ok(())
}

/// OpenAI: tool messages follow the assistant message that called them, with
/// only tool messages between; every call is answered before the next
/// non-tool message.
fn check_openai(messages: &[(String, Vec<String>, Option<String>)]) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut calls_of_last_assistant: BTreeSet<String> = BTreeSet::new();
    for (i, (role, calls, call_id)) in messages.iter().enumerate() {
        if role == "tool" {
            let id = call_id.clone().unwrap();
            if !calls_of_last_assistant.contains(&id) {
                return Err(format!("message {i}: tool message for {id} does not follow its call"));
            }
            open.retain(|c| *c != id);
            continue;
        }
        if let Some(unanswered) = open.first() {
            return Err(format!("message {i}: call {unanswered} unanswered before the next message"));
        }
        calls_of_last_assistant = if role == "assistant" { calls.iter().cloned().collect() } else { BTreeSet::new() };
        open = calls.clone();
    }
    match open.first() {
        Some(unanswered) => Err(format!("call {unanswered} is never answered")),
        None => Ok(()),
    }
}

fn plan_session(store: &mut MemStore) -> Value {
    call(store, Command::PlanContext, &json!({"schemaVersion": 1, "now": NOW, "sessionId": "s", "sink": "model:test",
        "model": {"profile": "big", "window": 2_000_000, "reservedOutput": 0, "safetyMargin": 0}})).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_its_invariants_at_every_cut(ops in prop::collection::vec(op(), 2..45)) {
        let conv = build(&ops);
        let items = &conv.items;
        let mut seeded = MemStore::default();
        call(&mut seeded, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": items, "now": NOW})).unwrap();
        let by_id: BTreeMap<&str, &Value> = items.iter().map(|i| (i["itemId"].as_str().unwrap(), i)).collect();
        let last_user = items.iter().rev().find(|i| i["role"] == "user").map(|i| i["itemId"].as_str().unwrap());

        for cut in 1..=items.len() as u64 + 1 {
            let mut store = seeded.clone();
            let receipt = call(&mut store, Command::CompactContext, &json!({
                "schemaVersion": 1, "sessionId": "s", "now": NOW, "strategy": "local", "sink": "model:test", "force": true,
                "keepFromSeq": cut, "model": {"profile": "big", "window": 2_000_000, "reservedOutput": 0, "safetyMargin": 0}
            }));
            let receipt = match receipt {
                Ok(r) => r,
                Err(e) => return Err(TestCaseError::fail(format!("cut {cut}: {e}"))),
            };
            if receipt["status"] == "not-needed" {
                continue;
            }
            prop_assert_eq!(&receipt["status"], "committed");
            let plan = plan_session(&mut store);
            let rendered = render(&plan);
            check_anthropic(&rendered.anthropic).map_err(|e| TestCaseError::fail(format!("cut {cut}, Anthropic: {e}")))?;
            check_openai(&rendered.openai).map_err(|e| TestCaseError::fail(format!("cut {cut}, OpenAI: {e}")))?;

            let kept: BTreeMap<&str, &Value> = plan["context"].as_array().unwrap().iter()
                .map(|p| (p["itemId"].as_str().unwrap(), &p["item"])).collect();
            let verbatim = |id: &str| -> Result<(), TestCaseError> {
                let original = by_id[id];
                let Some(now) = kept.get(id) else { return Err(TestCaseError::fail(format!("cut {cut}: {id} is gone"))) };
                prop_assert_eq!(&now["content"], &original["content"], "cut {}: {} changed", cut, id);
                prop_assert_eq!(&now["interaction"], &original["interaction"]);
                Ok(())
            };
            for item in items {
                let id = item["itemId"].as_str().unwrap();
                if item["pinned"] == true || item["kind"] == "system-policy" {
                    verbatim(id)?;
                }
            }
            if let Some(id) = last_user {
                verbatim(id)?;
            }
            // The latest state of every unfinished task comes through as it was.
            let mut latest_task: BTreeMap<&str, &Value> = BTreeMap::new();
            for item in items.iter().filter(|i| !i["task"].is_null()) {
                latest_task.insert(item["task"]["taskId"].as_str().unwrap(), item);
            }
            for item in latest_task.values().filter(|i| ["open", "in-progress", "blocked"].contains(&i["task"]["status"].as_str().unwrap())) {
                verbatim(item["itemId"].as_str().unwrap())?;
            }
            // No call the session finished is reported pending (each result
            // answers the latest call of its id before it).
            let mut latest: BTreeMap<&str, &str> = BTreeMap::new();
            let mut finished: BTreeSet<(&str, &str)> = BTreeSet::new();
            for item in items {
                if let Some(call) = item["toolResult"]["callId"].as_str() {
                    if ["success", "error"].contains(&item["toolResult"]["outcome"].as_str().unwrap()) {
                        if let Some(owner) = latest.get(call) {
                            finished.insert((owner, call));
                        }
                    }
                }
                for c in item["toolCalls"].as_array().into_iter().flatten() {
                    latest.insert(c["callId"].as_str().unwrap(), item["itemId"].as_str().unwrap());
                }
            }
            for p in plan["pendingToolCalls"].as_array().unwrap() {
                prop_assert!(kept.contains_key(p["itemId"].as_str().unwrap()));
                let key = (p["itemId"].as_str().unwrap(), p["callId"].as_str().unwrap());
                prop_assert!(!finished.contains(&key), "cut {}: finished call {:?} reported pending", cut, key);
            }
            let record = &receipt["compaction"];
            prop_assert!(record["metrics"]["outputTokens"].as_u64() < record["metrics"]["inputTokens"].as_u64());
            if let Some(summary) = kept.values().find(|i| !i["summaryOf"].is_null()) {
                let cut_seq = record["cutSeq"].as_u64().unwrap();
                let rank = |t: &Value| ["host", "verified", "user", "external", "untrusted"].iter().position(|x| t == x).unwrap();
                // Items are appended in order: event n is items[n - 1].
                let lowest = items.iter().enumerate()
                    .filter(|(n, i)| *n as u64 + 1 <= cut_seq && !kept.contains_key(i["itemId"].as_str().unwrap()))
                    .map(|(_, i)| rank(&i["trust"])).max().unwrap_or(0);
                prop_assert!(rank(&summary["trust"]) >= lowest, "cut {}: the summary raised trust", cut);
            }
        }
    }
}
