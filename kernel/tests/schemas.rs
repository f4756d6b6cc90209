//! `wit/schemas/` are the JSON Schemas of every v1 envelope. They are
//! generated from the Rust types, so this test fails when the two drift;
//! `CTXK_BLESS=1 cargo test --features schema --test schemas` rewrites them.
//! Real requests and responses are then validated against them with an
//! independent validator, so the schemas also match what the kernel accepts
//! and emits on the wire.

mod common;

use common::*;
use ctxkernel::commands::{InfoRequest, InfoResponse};
use ctxkernel::compaction::{CompactRequest, CompactResponse, ContinueRequest, ReconcileRequest};
use ctxkernel::contracts::CompactionRecord;
use ctxkernel::memory::consolidation::{ConsolidateRequest, ConsolidateResponse};
use ctxkernel::content::{GetContentRequest, PutContentRequest, PutContentResponse};
use ctxkernel::events::{ReadKernelEventsRequest, ReadKernelEventsResponse};
use ctxkernel::contracts::{ContentRef, ContextItem, MemoryRecord, Provenance, RetentionPolicy, Scope, SourceRef};
use ctxkernel::memory::{DecideRequest, DeleteRequest, DeletionReceipt, MemoryReceipt, ProposeRequest, ProposeResponse, PurgeReceipt, PurgeRequest, ReadMemoryRequest, ReadMemoryResponse, VerifyReport, VerifyRequest};
use ctxkernel::planner::{ContextPlan, PlanRequest};
use ctxkernel::recall::{RecallRequest, RecallResponse, ResidentRequest, ResidentSnapshot};
use ctxkernel::session::{AppendEventsRequest, AppendEventsResponse, ReadEventsRequest, ReadEventsResponse};
use ctxkernel::store::MemStore;
use ctxkernel::transcripts::{ImportRequest, ImportResponse, RenderRequest, RenderResponse, ValidateRequest, ValidateResponse};
use ctxkernel::Command;
use schemars::{schema_for, Schema};
use serde_json::{json, Value};
use std::path::PathBuf;

fn schemas() -> Vec<(&'static str, Schema)> {
    vec![
        ("context-item", schema_for!(ContextItem)),
        ("memory-record", schema_for!(MemoryRecord)),
        ("scope", schema_for!(Scope)),
        ("source-ref", schema_for!(SourceRef)),
        ("provenance", schema_for!(Provenance)),
        ("content-ref", schema_for!(ContentRef)),
        ("retention-policy", schema_for!(RetentionPolicy)),
        ("context-plan", schema_for!(ContextPlan)),
        ("plan-context.request", schema_for!(PlanRequest)),
        ("append-events.request", schema_for!(AppendEventsRequest)),
        ("append-events.response", schema_for!(AppendEventsResponse)),
        ("read-events.request", schema_for!(ReadEventsRequest)),
        ("read-events.response", schema_for!(ReadEventsResponse)),
        ("info.request", schema_for!(InfoRequest)),
        ("info.response", schema_for!(InfoResponse)),
        ("compaction-record", schema_for!(CompactionRecord)),
        ("compact-context.request", schema_for!(CompactRequest)),
        ("compact-context.response", schema_for!(CompactResponse)),
        ("continue-operation.request", schema_for!(ContinueRequest)),
        ("reconcile.request", schema_for!(ReconcileRequest)),
        ("put-content.request", schema_for!(PutContentRequest)),
        ("put-content.response", schema_for!(PutContentResponse)),
        ("get-content.request", schema_for!(GetContentRequest)),
        ("read-kernel-events.request", schema_for!(ReadKernelEventsRequest)),
        ("read-kernel-events.response", schema_for!(ReadKernelEventsResponse)),
        ("propose-memory.request", schema_for!(ProposeRequest)),
        ("propose-memory.response", schema_for!(ProposeResponse)),
        ("consolidate-memory.request", schema_for!(ConsolidateRequest)),
        ("consolidate-memory.response", schema_for!(ConsolidateResponse)),
        ("decide-memory.request", schema_for!(DecideRequest)),
        ("memory-receipt", schema_for!(MemoryReceipt)),
        ("delete-memory.request", schema_for!(DeleteRequest)),
        ("deletion-receipt", schema_for!(DeletionReceipt)),
        ("purge-memory.request", schema_for!(PurgeRequest)),
        ("purge-memory.response", schema_for!(PurgeReceipt)),
        ("read-memory.request", schema_for!(ReadMemoryRequest)),
        ("read-memory.response", schema_for!(ReadMemoryResponse)),
        ("recall-memory.request", schema_for!(RecallRequest)),
        ("recall-memory.response", schema_for!(RecallResponse)),
        ("resident-snapshot.request", schema_for!(ResidentRequest)),
        ("resident-snapshot.response", schema_for!(ResidentSnapshot)),
        ("import-messages.request", schema_for!(ImportRequest)),
        ("import-messages.response", schema_for!(ImportResponse)),
        ("render-context.request", schema_for!(RenderRequest)),
        ("render-context.response", schema_for!(RenderResponse)),
        ("validate-request.request", schema_for!(ValidateRequest)),
        ("validate-request.response", schema_for!(ValidateResponse)),
        ("verify-store.request", schema_for!(VerifyRequest)),
        ("verify-store.response", schema_for!(VerifyReport)),
    ]
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../wit/schemas")
}

fn load(name: &str) -> Value {
    let path = dir().join(format!("{name}.schema.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()))).unwrap()
}

#[test]
fn checked_in_schemas_match_the_rust_types() {
    let bless = std::env::var_os("CTXK_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, schema) in schemas() {
        let path = dir().join(format!("{name}.schema.json"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if bless {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(stale.is_empty(), "schemas out of date: {stale:?}; rerun with CTXK_BLESS=1");
    let mut files: Vec<String> = std::fs::read_dir(dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files.len(), schemas().len(), "stray files in wit/schemas: {files:?}");
}

/// The wire lets a whole number past 2^53 through only where a request
/// holds a float: the list of those places must be every number-typed place
/// of every request schema.
#[test]
fn the_float_paths_of_the_number_contract_are_those_of_the_schemas() {
    fn walk(root: &Value, node: &Value, path: &str, depth: usize, out: &mut std::collections::BTreeSet<String>) {
        if depth > 12 {
            return;
        }
        if let Some(target) = node.get("$ref").and_then(Value::as_str) {
            let def = root.pointer(target.trim_start_matches('#')).unwrap_or_else(|| panic!("{target}"));
            return walk(root, def, path, depth + 1, out);
        }
        let number = |t: &Value| t == "number" || t.as_array().is_some_and(|a| a.iter().any(|x| x == "number"));
        if node.get("type").is_some_and(number) {
            out.insert(path.to_string());
        }
        for branch in ["anyOf", "oneOf", "allOf"] {
            for option in node.get(branch).and_then(Value::as_array).into_iter().flatten() {
                walk(root, option, path, depth + 1, out);
            }
        }
        if let Some(items) = node.get("items") {
            walk(root, items, &format!("{path}[]"), depth + 1, out);
        }
        for (name, property) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
            let path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            walk(root, property, &path, depth + 1, out);
        }
    }
    let mut paths = std::collections::BTreeSet::new();
    for (name, _) in schemas().into_iter().filter(|(name, _)| name.ends_with(".request")) {
        let schema = load(name);
        walk(&schema, &schema, "", 0, &mut paths);
    }
    let listed: std::collections::BTreeSet<String> = ctxkernel::wire::FLOAT_PATHS.iter().map(|f| f.to_string()).collect();
    assert_eq!(paths, listed);
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::validator_for(&load(name)).unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"))
}

fn assert_valid(name: &str, instance: &Value) {
    let errors: Vec<String> = validator(name).iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

#[test]
fn wire_messages_conform_to_their_schemas() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/demo");
    let read = |f: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(examples.join(f)).unwrap()).unwrap() };
    let append_request = read("session.json");
    let plan_request = read("plan-32k.json");
    assert_valid("append-events.request", &append_request);
    assert_valid("plan-context.request", &plan_request);
    for item in append_request["items"].as_array().unwrap() {
        assert_valid("context-item", item);
    }

    let mut store = MemStore::default();
    let appended = call(&mut store, Command::AppendEvents, &append_request).unwrap();
    assert_valid("append-events.response", &appended);
    let plan = call(&mut store, Command::PlanContext, &plan_request).unwrap();
    assert_valid("context-plan", &plan);
    let events = call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": append_request["sessionId"]})).unwrap();
    assert_valid("read-events.response", &events);
    let compact = json!({"schemaVersion": 1, "sessionId": append_request["sessionId"], "now": plan_request["now"],
        "strategy": "local", "sink": "model:local", "model": plan_request["model"]});
    assert_valid("compact-context.request", &compact);
    let compacted = call(&mut store, Command::CompactContext, &compact).unwrap();
    assert_eq!(compacted["status"], "committed");
    assert_valid("compact-context.response", &compacted);
    assert_valid("compaction-record", &compacted["compaction"]);
    assert_valid("read-events.response", &call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": append_request["sessionId"]})).unwrap());
    assert_valid("context-plan", &call(&mut store, Command::PlanContext, &plan_request).unwrap());
    let kernel_events = call(&mut store, Command::ReadKernelEvents, &json!({"schemaVersion": 1})).unwrap();
    assert_valid("read-kernel-events.response", &kernel_events);
    assert_valid("info.request", &json!({"schemaVersion": 1}));
    memory_messages_conform(&mut store, append_request["sessionId"].as_str().unwrap(), plan_request["now"].as_str().unwrap());
    transcript_messages_conform(&mut store, &plan_request);
    assert_valid("info.response", &call(&mut store, Command::Info, &json!({"schemaVersion": 1})).unwrap());
}

/// An import, a render of every format and a validation, every envelope checked.
fn transcript_messages_conform(store: &mut MemStore, plan_request: &Value) {
    let import = json!({"schemaVersion": 1, "sessionId": "imported", "expectedHead": {"seq": 0}, "format": "openai-chat", "now": plan_request["now"],
        "sensitivity": "internal", "allowedSinks": ["model:*"], "transcript": {"messages": [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}});
    assert_valid("import-messages.request", &import);
    assert_valid("import-messages.response", &call(store, Command::ImportMessages, &import).unwrap());
    let mut plan = plan_request.clone();
    plan["sessionId"] = json!("imported");
    for format in ["openai-chat", "openai-responses", "anthropic-messages", "neutral"] {
        let render = json!({"schemaVersion": 1, "format": format, "plan": plan, "policy": {"unsettledCalls": "hold"}});
        assert_valid("render-context.request", &render);
        let rendered = call(store, Command::RenderContext, &render).unwrap();
        assert_valid("render-context.response", &rendered);
        let validate = json!({"schemaVersion": 1, "format": format, "body": rendered["body"]});
        assert_valid("validate-request.request", &validate);
        assert_valid("validate-request.response", &call(store, Command::ValidateRequest, &validate).unwrap());
    }
}

/// One trip through the memory lifecycle, every envelope checked.
fn memory_messages_conform(store: &mut MemStore, session: &str, now: &str) {
    let mut checked = |command: Command, name: &str, request: Value| -> Value {
        assert_valid(&format!("{name}.request"), &request);
        call(store, command, &request).unwrap()
    };
    let propose = json!({"schemaVersion": 1, "now": now, "candidates": [{"scope": "project", "scopeId": "demo", "category": "preference",
        "content": "The team ships on Thursdays", "key": "team.ship-day", "confidence": 0.7, "importance": 0.6, "provenance": {"origin": "model"},
        "evidenceRefs": [{"kind": "session", "id": session, "seq": 1}], "tags": ["release"]}]});
    let proposed = checked(Command::ProposeMemory, "propose-memory", propose);
    assert_valid("propose-memory.response", &proposed);
    let id = proposed["receipts"][0]["memory"]["memoryId"].clone();
    let decided = checked(Command::DecideMemory, "decide-memory", json!({"schemaVersion": 1, "now": now, "memoryId": id, "action": "activate",
        "authority": {"kind": "management", "actor": "lead"}, "scope": "project", "scopeId": "demo"}));
    assert_valid("memory-receipt", &decided);
    assert_valid("memory-record", &decided["memory"]);
    let scopes = json!([{"scope": "project", "scopeId": "demo"}]);
    let recalled = checked(Command::RecallMemory, "recall-memory", json!({"schemaVersion": 1, "now": now, "query": "when do we ship", "scopes": scopes, "sink": "model:test"}));
    assert_eq!(recalled["memories"][0]["memoryId"], id);
    assert_valid("recall-memory.response", &recalled);
    let resident = checked(Command::ResidentSnapshot, "resident-snapshot", json!({"schemaVersion": 1, "now": now, "scope": "project", "scopeId": "demo", "maxTokens": 200, "sink": "model:test"}));
    assert_valid("resident-snapshot.response", &resident);
    let read = checked(Command::ReadMemory, "read-memory", json!({"schemaVersion": 1, "now": now, "scope": "project", "scopeId": "demo"}));
    assert_valid("read-memory.response", &read);
    assert_valid("verify-store.response", &checked(Command::VerifyStore, "verify-store", json!({"schemaVersion": 1})));
    let deleted = checked(Command::DeleteMemory, "delete-memory", json!({"schemaVersion": 1, "now": now, "requestId": "r1", "subject": "team",
        "scope": "project", "scopeId": "demo", "selector": {"memoryIds": [id]}, "authority": {"kind": "management", "actor": "lead"}, "fence": 1}));
    assert_valid("deletion-receipt", &deleted);
    let consolidated = checked(Command::ConsolidateMemory, "consolidate-memory", json!({"schemaVersion": 1, "now": now, "sessionId": session, "strategy": "local"}));
    assert_valid("consolidate-memory.response", &consolidated);
    let plan = checked(Command::PurgeMemory, "purge-memory", json!({"schemaVersion": 1, "now": now, "scope": "project", "scopeId": "demo", "authority": {"kind": "management", "actor": "ops"}, "dryRun": true}));
    assert_valid("purge-memory.response", &plan);
}

#[test]
fn parity_fixtures_follow_their_documented_format() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/parity");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("fixture.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut count = 0;
    for entry in std::fs::read_dir(dir.join("fixtures")).unwrap() {
        let path = entry.unwrap().path();
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator.iter_errors(&fixture).map(|e| format!("{e} at {}", e.instance_path)).take(3).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        count += 1;
    }
    assert!(count >= 30, "only {count} fixtures");
}

#[test]
fn schemas_reject_what_the_kernel_rejects() {
    let mut conv = Conv::new();
    conv.user("hello");
    let good = conv.items[0].clone();
    assert_valid("context-item", &good);
    let mutations: [(&str, Value); 4] = [
        ("trust", json!("very-trusted")),
        ("priority", json!("high")),
        ("unknownField", json!(1)),
        ("createdAt", json!(17)),
    ];
    let item_schema = validator("context-item");
    for (field, value) in mutations {
        let mut bad = good.clone();
        bad[field] = value;
        assert!(!item_schema.is_valid(&bad), "the schema accepts a bad `{field}`");
        let err = plan_value(&request(&[bad], 1_000)).unwrap_err();
        assert_eq!(err.code, ctxkernel::ErrorCode::InvalidRequest, "the kernel accepts a bad `{field}`");
    }
    let record = json!({
        "schemaVersion": 1, "memoryId": "m1", "scope": "project", "scopeId": "ledger", "category": "preference",
        "content": "Use pnpm", "provenance": {"origin": "user"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": 3}],
        "confidence": 0.9, "importance": 0.5, "tags": [], "sensitivity": "internal", "allowedSinks": ["model:*"],
        "state": "active", "retentionPolicy": {"mode": "durable"}, "createdAt": NOW, "updatedAt": NOW,
        "accessCount": 0, "revision": 1, "digest": format!("sha256:{}", "a".repeat(64))
    });
    assert_valid("memory-record", &record);
    let parsed: MemoryRecord = serde_json::from_value(record).unwrap();
    parsed.validate().unwrap();
}
