//! Context items for the common cases, with the defaults every host gives
//! (held to `tests/items/constructors.json`, as every host's are):
//!
//! - [`user`]: the user's words (trust `user`, origin `user`);
//! - [`assistant`]: the model's answer and the calls it makes (trust `verified`, origin `model`);
//! - [`system`]: the host's own instructions, a `system-policy` item (trust `host`);
//! - [`tool_result`]: a tool's answer to a call, as evidence (trust `verified`, origin `tool`;
//!   set `trust` to `external` for a tool that reads the web: its words then ground nothing);
//! - [`task_state`]: where a task stands (trust `host`);
//! - [`pinned_rule`]: a project rule kept under any budget (trust `host`).
//!
//! Each gives the same defaults: scope `session`, no scope id (the session's,
//! for `session`), sensitivity `internal`, allowed sinks `["model:*"]`,
//! created now by the host clock, source `{"kind": "host", "id": "host"}`, no
//! item id (the kernel derives it) and priority 0. The item is JSON: change
//! any field by setting it (`item["trust"] = json!("external")`). The kernel
//! checks everything it is given; these only spare writing it.

use crate::clock::utc_now;
use crate::errors::{ErrorCode, KernelError};
use serde_json::{json, Value};

fn item(kind: &str, text: &str, trust: &str, origin: &str) -> Value {
    json!({
        "schemaVersion": 1,
        "kind": kind,
        "content": text,
        "scope": "session",
        "sourceRef": {"kind": "host", "id": "host"},
        "provenance": {"origin": origin},
        "trust": trust,
        "sensitivity": "internal",
        "allowedSinks": ["model:*"],
        "priority": 0,
        "pinned": false,
        "createdAt": utc_now(),
    })
}

/// The user's words: a `message` with role `user`.
pub fn user(text: &str) -> Value {
    let mut made = item("message", text, "user", "user");
    made["role"] = json!("user");
    made
}

/// The model's answer: a `message` with role `assistant`.
pub fn assistant(text: &str) -> Value {
    let mut made = item("message", text, "verified", "model");
    made["role"] = json!("assistant");
    made
}

/// The model's answer and the tool calls it makes (`{"callId", "name",
/// "arguments"}`, the arguments as the model wrote them). It needs text,
/// calls, or both; calls alone have the empty text, as a provider's
/// transcript gives them.
pub fn assistant_with_calls(text: Option<&str>, tool_calls: Vec<Value>) -> Result<Value, KernelError> {
    if text.is_none() && tool_calls.is_empty() {
        return Err(KernelError::with_detail(ErrorCode::InvalidRequest, "an assistant item needs text or tool calls", json!({"field": "toolCalls"})));
    }
    let mut made = assistant(text.unwrap_or(""));
    if !tool_calls.is_empty() {
        made["toolCalls"] = Value::Array(tool_calls);
    }
    Ok(made)
}

/// The host's own instructions: a `system-policy` item.
pub fn system(text: &str) -> Value {
    item("system-policy", text, "host", "host")
}

/// What a tool answered to the call `call_id`: a `tool-evidence` item
/// (`outcome`: `success`, `error`, `pending` or `unknown`).
pub fn tool_result(call_id: &str, text: &str, outcome: &str) -> Value {
    let mut made = item("tool-evidence", text, "verified", "tool");
    made["toolResult"] = json!({"callId": call_id, "outcome": outcome});
    made
}

/// Where the task `task_id` stands: a `task-state` item.
pub fn task_state(task_id: &str, status: &str, text: &str) -> Value {
    let mut made = item("task-state", text, "host", "host");
    made["task"] = json!({"taskId": task_id, "status": status});
    made
}

/// A project rule the model always sees: a pinned `project-rule` item.
pub fn pinned_rule(text: &str) -> Value {
    let mut made = item("project-rule", text, "host", "host");
    made["pinned"] = json!(true);
    made
}
