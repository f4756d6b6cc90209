//! Requests the host tests share.
// Each test binary uses only some of these.
#![allow(dead_code)]

use serde_json::{json, Value};

pub const NOW: &str = "2026-06-01T12:00:00Z";

pub fn item(seq: u64, role: &str, text: &str) -> Value {
    json!({
        "schemaVersion": 1, "itemId": format!("e{seq}"), "kind": "message", "role": role, "scope": "session",
        "sourceRef": {"kind": "session", "id": "s1", "seq": seq}, "provenance": {"origin": "user"},
        "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0,
        "pinned": false, "createdAt": NOW, "content": text
    })
}

pub fn append_request(from: u64, count: u64) -> Value {
    let items: Vec<Value> = (from + 1..=from + count).map(|i| item(i, "user", &format!("message {i} with some words"))).collect();
    json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": from}, "items": items, "now": NOW})
}

pub fn plan_request() -> Value {
    json!({"schemaVersion": 1, "now": NOW, "sink": "model:test", "sessionId": "s1",
           "model": {"profile": "test", "window": 8000, "reservedOutput": 1000, "safetyMargin": 100}})
}
