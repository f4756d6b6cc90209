//! `edges`: one fixed scenario — append, plan, compact, propose, recall, … —
//! whose timestamps and numbers the input replaces, as raw JSON text, so
//! the fuzzer works on exactly the spellings a host might send: RFC 3339
//! instants at the ends of the calendar and of UTC offsets, `-0`, `1.0`,
//! `1e308`, `u64::MAX` and one past it.
//!
//! The input is lines of `slot=value` (see [`SLOTS`]); `value` is spliced
//! into the requests as it is, and an empty value leaves an optional field
//! out. A line naming no slot still sets one (picked by the name's hash), so
//! any bytes mean something. Every call is checked by [`Host`], and the
//! scenario is replayed on a fresh kernel at the end.

use crate::host::{Call, Checks, Host};
use ctxkernel::store::keys;
use ctxkernel::Command;
use std::collections::BTreeMap;

/// A place in the scenario the input may fill, and what it holds by default
/// (empty: an optional field left out). The JSON key is the name's last part.
pub struct Slot {
    pub name: &'static str,
    pub default: &'static str,
}

macro_rules! slots {
    ($($name:literal = $default:literal,)*) => {
        pub const SLOTS: &[Slot] = &[$(Slot { name: $name, default: $default },)*];
    };
}

slots! {
    "now" = r#""2026-06-01T09:00:00Z""#,
    "later" = r#""2026-06-01T10:00:00Z""#,
    "item.createdAt" = r#""2026-06-01T08:59:00Z""#,
    "item.expiresAt" = "",
    "item.priority" = "0",
    "item.tokenEstimate" = "",
    "sourceRef.seq" = "1",
    "sourceRef.span" = "",
    "interaction.expiresAt" = "",
    "expectedHead.seq" = "0",
    "model.window" = "8192",
    "model.reservedOutput" = "1024",
    "model.safetyMargin" = "256",
    "plan.policy" = "",
    "memory.confidence" = "0.7",
    "memory.importance" = "0.5",
    "retention.mode" = r#""ttl""#,
    "retention.ttlSeconds" = "86400",
    "retention.purgeAfterSeconds" = "",
    "memory.validFrom" = "",
    "memory.validTo" = "",
    "memory.embedding" = "[0.5, -0.25]",
    "decide.expectedRevision" = "",
    "recall.k" = "5",
    "recall.maxTokens" = "2000",
    "recall.queryEmbedding" = "[0.5, -0.25]",
    "readMemory.atTime" = "",
    "resident.maxTokens" = "200",
    "compact.keepFromSeq" = "4",
    "compact.policy" = r#"{"externalizeOverBytes": 1024, "headChars": 40, "keepRecentBp": 1000, "summaryMaxTokens": 200, "tailChars": 20, "triggerBp": 100, "version": "ctxk-compaction-1"}"#,
    "provider.maxTokens" = "600",
    "usage.inputTokens" = "1200",
    "usage.outputTokens" = "80",
    "readEvents.afterSeq" = "0",
    "readEvents.limit" = "100",
    "kernelEvents.afterSeq" = "0",
    "kernelEvents.limit" = "100",
    "delete.fence" = "1",
    "consolidate.afterSeq" = "0",
}

const MODEL: &str = r#"{"profile": "m-8k", "reservedOutput": ${model.reservedOutput}, "safetyMargin": ${model.safetyMargin}, "window": ${model.window}}"#;

const ITEMS: &str = r#"[
 {@{item.expiresAt}@{item.tokenEstimate}"allowedSinks": ["model:*", "log"], "content": "remember: deploys happen on Wednesday", "createdAt": ${item.createdAt},
  "itemId": "u1", "kind": "message", "pinned": false, "priority": ${item.priority}, "provenance": {"origin": "user"}, "role": "user",
  "schemaVersion": 1, "scope": "session", "sensitivity": "internal", "sourceRef": {@{sourceRef.span}"id": "s1", "kind": "session", "seq": ${sourceRef.seq}}, "trust": "user"},
 {"allowedSinks": ["model:*"], "content": "looking", "createdAt": ${item.createdAt}, "itemId": "a1", "kind": "message", "pinned": false,
  "priority": 0, "provenance": {"origin": "model"}, "role": "assistant", "schemaVersion": 1, "scope": "session", "sensitivity": "internal",
  "sourceRef": {"id": "s1", "kind": "session"}, "toolCalls": [{"callId": "c1", "name": "grep"}], "trust": "verified"},
 {"allowedSinks": ["model:*"], "content": "%LONG%",
  "createdAt": ${item.createdAt}, "itemId": "t1", "kind": "tool-evidence", "pinned": false, "priority": 0, "provenance": {"origin": "tool"},
  "schemaVersion": 1, "scope": "session", "sensitivity": "internal", "sourceRef": {"id": "grep", "kind": "tool"},
  "toolResult": {"callId": "c1", "outcome": "success"}, "trust": "external"},
 {"allowedSinks": ["model:*"], "content": "approve the deploy?", "createdAt": ${item.createdAt}, "itemId": "q1",
  "interaction": {@{interaction.expiresAt}"kind": "approval", "operationId": "ask-1", "state": "pending"}, "kind": "task-state",
  "pinned": true, "priority": 1, "provenance": {"origin": "host"}, "schemaVersion": 1, "scope": "session", "sensitivity": "internal",
  "sourceRef": {"id": "s1", "kind": "session"}, "task": {"status": "blocked", "taskId": "deploy"}, "trust": "host"}
]"#;

/// A tool's output, repeated past the compaction policy's externalizing size.
const LONG: &str = "src/main.rs:1: fn main() {} src/lib.rs:9: pub mod planner; ";

const MORE_ITEMS: &str = r#"[
 {"allowedSinks": ["model:*"], "content": "and on Fridays too, since the freeze", "createdAt": ${later}, "kind": "message", "pinned": false,
  "priority": 0, "provenance": {"origin": "user"}, "role": "user", "schemaVersion": 1, "scope": "session", "sensitivity": "internal",
  "sourceRef": {"id": "s1", "kind": "session"}, "trust": "user"},
 {"allowedSinks": ["model:*"], "content": "noted", "createdAt": ${later}, "kind": "message", "pinned": false, "priority": 0,
  "provenance": {"origin": "model"}, "role": "assistant", "schemaVersion": 1, "scope": "session", "sensitivity": "internal",
  "sourceRef": {"id": "s1", "kind": "session"}, "trust": "verified"}
]"#;

/// The scenario: each step's command and request template. `%MEMORY%`,
/// `%OPERATION%` and `%HEAD%` stand for what earlier responses said.
const STEPS: &[(Command, &str)] = &[
    (Command::AppendEvents, r#"{"expectedHead": {"seq": ${expectedHead.seq}}, "items": %ITEMS%, "now": ${now}, "schemaVersion": 1, "sessionId": "s1"}"#),
    (Command::ReadEvents, r#"{"afterSeq": ${readEvents.afterSeq}, "limit": ${readEvents.limit}, "schemaVersion": 1, "sessionId": "s1"}"#),
    (Command::PutContent, r#"{"allowedSinks": ["*"], "now": ${now}, "schemaVersion": 1, "sensitivity": "internal"}"#),
    (Command::ProposeMemory, r#"{"candidates": [
        {@{memory.validFrom}@{memory.validTo}"category": "fact", "confidence": ${memory.confidence}, "content": "deploys happen on Wednesday",
         "embedding": ${memory.embedding}, "evidenceRefs": [{"id": "s1", "kind": "session", "seq": 1}], "importance": ${memory.importance},
         "key": "release.day", "provenance": {"origin": "user"},
         "retentionPolicy": {@{retention.purgeAfterSeconds}@{retention.ttlSeconds}"mode": ${retention.mode}}, "scope": "project", "scopeId": "web"},
        {"allowedSinks": ["model:*"], "category": "preference", "confidence": ${memory.confidence}, "content": "the user prefers tabs",
         "evidenceRefs": [{"id": "notes.md", "kind": "file"}], "importance": ${memory.importance}, "provenance": {"origin": "model"}, "scope": "project", "scopeId": "web"}
       ], "now": ${now}, "schemaVersion": 1}"#),
    (Command::DecideMemory, r#"{@{decide.expectedRevision}"action": "activate", "authority": {"actor": "lead@example.org", "kind": "management"}, "memoryId": "%MEMORY%",
        "now": ${later}, "schemaVersion": 1, "scope": "project", "scopeId": "web"}"#),
    (Command::PlanContext, r#"{@{plan.policy}"model": %MODEL%, "now": ${later}, "schemaVersion": 1, "sessionId": "s1", "sink": "model:test"}"#),
    (Command::RecallMemory, r#"{"k": ${recall.k}, "maxTokens": ${recall.maxTokens}, "now": ${later}, "query": "when do deploys happen",
        "queryEmbedding": ${recall.queryEmbedding}, "schemaVersion": 1, "scopes": [{"scope": "project", "scopeId": "web"}], "sink": "model:test"}"#),
    (Command::ReadMemory, r#"{@{readMemory.atTime}"includeAudit": true, "now": ${later}, "schemaVersion": 1, "scope": "project", "scopeId": "web",
        "states": ["candidate", "active", "reinforced", "expired"]}"#),
    (Command::ResidentSnapshot, r#"{"maxTokens": ${resident.maxTokens}, "now": ${later}, "schemaVersion": 1, "scope": "project", "scopeId": "web", "sink": "model:test"}"#),
    (Command::CompactContext, r#"{@{compact.keepFromSeq}@{compact.policy}"force": true, "model": %MODEL%, "now": ${later}, "schemaVersion": 1,
        "sessionId": "s1", "sink": "model:test", "strategy": "local"}"#),
    (Command::AppendEvents, r#"{"expectedHead": {"seq": %HEAD%}, "items": %MORE_ITEMS%, "now": ${later}, "schemaVersion": 1, "sessionId": "s1"}"#),
    (Command::CompactContext, r#"{@{compact.policy}"force": true, "keepFromSeq": 6, "model": %MODEL%, "now": ${later}, "provider": {"maxTokens": ${provider.maxTokens}, "model": "summarizer-1"},
        "schemaVersion": 1, "sessionId": "s1", "sink": "model:test", "strategy": "provider"}"#),
    (Command::ContinueOperation, r#"{"now": ${later}, "operationId": "%OPERATION%", "response": {"outcome": "success",
        "text": "The user deploys on Wednesdays and Fridays; a grep ran.", "usage": {"inputTokens": ${usage.inputTokens}, "outputTokens": ${usage.outputTokens}}},
        "schemaVersion": 1}"#),
    (Command::ReadKernelEvents, r#"{"afterSeq": ${kernelEvents.afterSeq}, "limit": ${kernelEvents.limit}, "schemaVersion": 1}"#),
    (Command::ConsolidateMemory, r#"{"afterSeq": ${consolidate.afterSeq}, "now": ${later}, "schemaVersion": 1, "sessionId": "s1", "strategy": "local"}"#),
    (Command::DeleteMemory, r#"{"authority": {"actor": "lead@example.org", "kind": "management"}, "fence": ${delete.fence}, "now": ${later},
        "requestId": "forget-1", "schemaVersion": 1, "scope": "project", "scopeId": "web", "selector": {"key": "release.day"}, "subject": "u1"}"#),
    (Command::PurgeMemory, r#"{"dryRun": true, "now": ${later}, "schemaVersion": 1, "scope": "project", "scopeId": "web"}"#),
    (Command::PlanContext, r#"{"model": %MODEL%, "now": ${later}, "schemaVersion": 1, "sessionId": "s1", "sink": "model:test"}"#),
];

pub fn run(data: &[u8]) {
    let values = parse(&String::from_utf8_lossy(data));
    let mut host = Host::new(Checks::ALL);
    let (mut memory, mut operation) = ("mem-missing".to_string(), "op-missing".to_string());
    for (command, template) in STEPS {
        // The session's head as the host sees it in its store.
        let head = host.store.entries.get(&keys::session_head("s1")).and_then(|(_, bytes)| {
            serde_json::from_slice::<serde_json::Value>(bytes).ok().and_then(|h| h["seq"].as_u64())
        });
        let request = render(template, &values)
            .replace("%ITEMS%", &render(ITEMS, &values))
            .replace("%MORE_ITEMS%", &render(MORE_ITEMS, &values))
            .replace("%MODEL%", &render(MODEL, &values))
            .replace("%LONG%", &LONG.repeat(12))
            .replace("%MEMORY%", &memory)
            .replace("%OPERATION%", &operation)
            .replace("%HEAD%", &head.unwrap_or(0).to_string());
        let call = match command {
            Command::PutContent => Call::Put(request, b"chunk of stored bytes ".repeat(40)),
            command => Call::Json(*command, request),
        };
        let outcome = host.call(call);
        let Some(response) = outcome.json() else { continue };
        if let Some(id) = response.pointer("/receipts/0/memory/memoryId").and_then(|v| v.as_str()) {
            memory = id.to_string();
        }
        if let Some(id) = response.get("operationId").and_then(|v| v.as_str()) {
            operation = id.to_string();
        }
    }
    host.check_replay();
}

/// The slot values an input sets, over the defaults.
pub fn parse(text: &str) -> BTreeMap<&'static str, String> {
    let mut values: BTreeMap<&'static str, String> = SLOTS.iter().map(|s| (s.name, s.default.to_string())).collect();
    for line in text.lines().take(64) {
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let slot = SLOTS.iter().find(|s| s.name == name.trim()).unwrap_or_else(|| {
            let hash = name.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(usize::from(b)));
            &SLOTS[hash % SLOTS.len()]
        });
        values.insert(slot.name, value.to_string());
    }
    values
}

/// Fills a template: `${slot}` is the value as it is; `@{slot}` is
/// `"key": value, ` (the key being the slot name's last part), or nothing
/// when the value is empty.
fn render(template: &str, values: &BTreeMap<&'static str, String>) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(at) = rest.find(['$', '@']) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let Some(end) = from.find('}').filter(|_| from[1..].starts_with('{')) else {
            out.push_str(&from[..1]);
            rest = &from[1..];
            continue;
        };
        let name = &from[2..end];
        let value = values.get(name).map_or("", String::as_str);
        if from.starts_with('$') {
            out.push_str(value);
        } else if !value.is_empty() {
            let key = name.rsplit('.').next().unwrap_or(name);
            out.push_str(&format!("\"{key}\": {value}, "));
        }
        rest = &from[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_scenario_is_valid_json_throughout() {
        let values = parse("");
        for (_, template) in STEPS {
            let request = render(template, &values)
                .replace("%ITEMS%", &render(ITEMS, &values))
                .replace("%MORE_ITEMS%", &render(MORE_ITEMS, &values))
                .replace("%MODEL%", &render(MODEL, &values))
                .replace("%HEAD%", "0");
            serde_json::from_str::<serde_json::Value>(&request).unwrap_or_else(|e| panic!("{e}: {request}"));
        }
    }
}
