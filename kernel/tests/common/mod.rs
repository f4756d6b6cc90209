//! Builders shared by the kernel's integration tests.
#![allow(dead_code)]

pub mod generate;

use ctxkernel::planner::ContextPlan;
use ctxkernel::store::MemStore;
use ctxkernel::{Command, Kernel, KernelError};
use serde_json::{json, Value};

pub const NOW: &str = "2026-06-01T12:00:00Z";

/// A session transcript under construction; each item gets the next sequence number.
#[derive(Default, Clone)]
pub struct Conv {
    pub items: Vec<Value>,
}

impl Conv {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an item with sensible defaults; `extra` fields override them.
    pub fn push(&mut self, kind: &str, text: &str, extra: Value) -> String {
        let seq = self.items.len() as u64 + 1;
        let id = format!("i{seq:04}");
        let mut item = json!({
            "schemaVersion": 1, "itemId": id, "kind": kind, "scope": "session",
            "sourceRef": {"kind": "session", "id": "s", "seq": seq},
            "provenance": {"origin": "user"}, "trust": "user", "sensitivity": "internal",
            "allowedSinks": ["model:*"], "priority": 0, "pinned": false,
            "createdAt": format!("2026-06-01T10:{:02}:{:02}Z", (seq / 60) % 60, seq % 60),
            "content": text
        });
        for (k, v) in extra.as_object().expect("extra is an object") {
            item[k] = v.clone();
        }
        self.items.push(item);
        id
    }

    pub fn user(&mut self, text: &str) -> String {
        self.push("message", text, json!({"role": "user"}))
    }

    pub fn assistant(&mut self, text: &str) -> String {
        self.push("message", text, json!({"role": "assistant", "trust": "verified", "provenance": {"origin": "model"}}))
    }

    pub fn call(&mut self, text: &str, calls: &[&str]) -> String {
        let calls: Vec<Value> = calls.iter().map(|c| json!({"callId": c, "name": "tool"})).collect();
        self.push("message", text, json!({"role": "assistant", "trust": "verified", "toolCalls": calls}))
    }

    pub fn result(&mut self, call: &str, text: &str, outcome: &str) -> String {
        self.push("tool-evidence", text, json!({"trust": "verified", "provenance": {"origin": "tool"},
            "toolResult": {"callId": call, "outcome": outcome}}))
    }
}

pub fn model(window: u64) -> Value {
    json!({"profile": "test", "window": window, "reservedOutput": 0, "safetyMargin": 0})
}

pub fn request(items: &[Value], window: u64) -> Value {
    json!({"schemaVersion": 1, "now": NOW, "model": model(window), "sink": "model:test", "items": items})
}

/// Runs one command on a store through the same entry point hosts use.
pub fn call(store: &mut MemStore, command: Command, request: &Value) -> Result<Value, KernelError> {
    let text = Kernel::default().call(store, command, &request.to_string())?;
    Ok(parse_canonical(&text))
}

/// Parses a response, checking it is canonical: re-encoding it through a
/// sorted tree gives the same bytes.
pub fn parse_canonical(text: &str) -> Value {
    let value: Value = serde_json::from_str(text).expect("the kernel answers JSON");
    assert_eq!(serde_json::to_string(&value).unwrap(), text, "a response is not canonical JSON");
    value
}

pub fn plan_value(request: &Value) -> Result<Value, KernelError> {
    call(&mut MemStore::default(), Command::PlanContext, request)
}

pub fn plan(items: &[Value], window: u64) -> Result<ContextPlan, KernelError> {
    plan_value(&request(items, window)).map(|v| serde_json::from_value(v).expect("a plan"))
}

pub fn kept(plan: &ContextPlan) -> Vec<&str> {
    plan.context.iter().map(|p| p.item_id.as_str()).collect()
}

pub fn reason_of(plan: &ContextPlan, id: &str) -> String {
    if let Some(p) = plan.context.iter().find(|p| p.item_id == id) {
        return format!("keep:{}", serde_json::to_value(p.keep).unwrap().as_str().unwrap());
    }
    let d = plan.dropped.iter().find(|d| d.item_id == id).unwrap_or_else(|| panic!("{id} is neither kept nor dropped"));
    format!("drop:{}", serde_json::to_value(d.reason).unwrap().as_str().unwrap())
}

/// Text of roughly `tokens` tokens.
pub fn words(tokens: usize) -> String {
    vec!["word"; tokens].join(" ")
}
