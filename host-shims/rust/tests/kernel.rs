//! The built component, run by wasmtime: its interface, typed errors for bad
//! input, one transaction per call (rolled back on error, trap or host panic),
//! content by digest, and a provider compaction.

mod common;

use common::{append_request, item, plan_request, NOW};
use ctxkernel_host::{Entry, ErrorCode, HostStore, Kernel, Limits, MemoryStore, PutError, Runtime, SqliteStore, COMPONENT, READ_ONLY, TRAPPED};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A memory store the test can inspect while a kernel uses it, with faults to inject.
#[derive(Clone, Default)]
struct Probe {
    inner: Arc<Mutex<ProbeState>>,
}

#[derive(Default)]
struct ProbeState {
    store: MemoryStore,
    puts: usize,
    removes: usize,
    fail_put_at: Option<usize>,
    panic_put_at: Option<usize>,
}

impl Probe {
    fn dump(&self) -> Vec<(String, u64, Vec<u8>)> {
        let state = self.inner.lock().unwrap();
        state.store.entries().map(|(k, r, v)| (k.to_string(), r, v.to_vec())).collect()
    }

    fn with<R>(&self, f: impl FnOnce(&mut ProbeState) -> R) -> R {
        f(&mut self.inner.lock().unwrap())
    }
}

impl HostStore for Probe {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String> {
        self.with(|s| s.store.get(key))
    }
    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String> {
        self.with(|s| s.store.scan(prefix, start_after, limit))
    }
    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError> {
        let (panic, fail) = self.with(|s| {
            s.puts += 1;
            (s.panic_put_at == Some(s.puts), s.fail_put_at == Some(s.puts))
        });
        if panic {
            panic!("the host store blew up");
        }
        if fail {
            return Err(PutError::Failure("disk full".into()));
        }
        self.with(|s| s.store.put(key, value, expected))
    }
    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError> {
        self.with(|s| {
            s.removes += 1;
            s.store.remove(key, expected)
        })
    }
    fn begin(&mut self, write: bool) -> Result<(), String> {
        self.with(|s| s.store.begin(write))
    }
    fn commit(&mut self) -> Result<(), String> {
        self.with(|s| s.store.commit())
    }
    fn rollback(&mut self) -> Result<(), String> {
        self.with(|s| s.store.rollback())
    }
}

#[test]
fn the_component_imports_its_store_and_exports_the_kernel() {
    let (imports, exports) = Runtime::new().unwrap().interfaces();
    assert!(imports.contains(&"ctxkernel:kernel/store@0.1.0".to_string()), "{imports:?}");
    assert_eq!(exports, ["ctxkernel:kernel/kernel@0.1.0"]);
    // Nothing that could make it non-deterministic: no clocks, randomness, files or sockets.
    for import in &imports {
        let allowed = import.starts_with("ctxkernel:kernel/") || import.starts_with("wasi:cli/") || import.starts_with("wasi:io/");
        assert!(allowed, "unexpected import {import}");
    }
}

#[test]
fn bad_input_through_the_component_is_typed_and_changes_nothing() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    kernel.append_events(&append_request(0, 3)).unwrap();
    let before = probe.dump();

    let mut wrong_type = plan_request();
    wrong_type["model"]["window"] = json!("large");
    let mut negative = plan_request();
    negative["model"]["reservedOutput"] = json!(-5);
    let mut version = append_request(3, 1);
    version["items"][0]["schemaVersion"] = json!(7);
    let mut oversized = plan_request();
    oversized["items"] = json!([item(99, "user", &"x".repeat(2 << 20))]);
    let cases: Vec<(&str, String, ErrorCode)> = vec![
        ("plan-context", "{\"schemaVersion\":1,".into(), ErrorCode::InvalidRequest),
        ("plan-context", wrong_type.to_string(), ErrorCode::InvalidRequest),
        ("plan-context", negative.to_string(), ErrorCode::InvalidRequest),
        ("plan-context", plan_request().to_string().replace("8000", "99999999999999999999"), ErrorCode::InvalidRequest),
        ("plan-context", oversized.to_string(), ErrorCode::LimitExceeded),
        ("append-events", version.to_string(), ErrorCode::UnsupportedSchema),
        ("append-events", append_request(0, 1).to_string(), ErrorCode::Stale),
        ("read-events", json!({"schemaVersion": 1, "sessionId": "nope"}).to_string(), ErrorCode::NotFound),
        ("no-such-command", "{}".into(), ErrorCode::InvalidRequest),
    ];
    for (command, request, code) in cases {
        let err = kernel.call(command, &request).unwrap_err();
        assert_eq!(err.code, code, "{command}: {}", err.message);
        assert!(!err.message.is_empty());
    }
    let stale = kernel.append_events(&append_request(0, 1)).unwrap_err();
    assert_eq!(stale.detail["currentHead"]["seq"], 3, "stale carries the current head");
    assert_eq!(probe.dump(), before, "errors leave the store unchanged");
    // And the kernel still works.
    assert_eq!(kernel.plan_context(&plan_request()).unwrap()["context"].as_array().unwrap().len(), 3);
}

#[test]
fn unreadable_store_values_are_storage_failures_not_traps() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    kernel.append_events(&append_request(0, 2)).unwrap();
    for garbage in [vec![0xff, 0xfe, 0x00], b"{\"seq\": \"two\"}".to_vec()] {
        probe.with(|s| {
            let key = "ses/s1/ev/00000000000000000002";
            let rev = s.store.get(key).unwrap().unwrap().revision;
            s.store.put(key, &garbage, Some(rev)).unwrap();
        });
        let err = Kernel::new(probe.clone()).unwrap().plan_context(&plan_request()).unwrap_err();
        assert_eq!(err.code, ErrorCode::StorageFailure, "{}", err.message);
    }
}

#[test]
fn a_failing_store_write_rolls_the_whole_call_back() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    kernel.append_events(&append_request(0, 1)).unwrap();
    let before = probe.dump();
    probe.with(|s| s.fail_put_at = Some(s.puts + 3));
    let err = kernel.append_events(&append_request(1, 4)).unwrap_err();
    assert_eq!(err.code, ErrorCode::StorageFailure);
    assert_eq!(probe.dump(), before, "two puts landed before the failure and were rolled back");
}

#[test]
fn a_host_panic_mid_call_rolls_back_and_the_kernel_recovers() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    kernel.append_events(&append_request(0, 1)).unwrap();
    let before = probe.dump();
    probe.with(|s| s.panic_put_at = Some(s.puts + 2));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kernel.append_events(&append_request(1, 4))));
    assert!(outcome.is_err(), "the host's panic propagates");
    assert_eq!(probe.dump(), before);
    let head = kernel.append_events(&append_request(1, 4)).unwrap()["head"]["seq"].clone();
    assert_eq!(head, 5, "a fresh instance continues over the same store");
}

#[test]
fn a_trap_mid_call_rolls_back_and_the_kernel_recovers() {
    // Find the smallest fuel that completes the call; one unit less traps at
    // its very end, after the writes.
    let runtime = Runtime::with_limits(COMPONENT, Limits { fuel_per_call: Some(1), max_memory_bytes: None }).unwrap();
    let run = |fuel: u64| {
        let probe = Probe::default();
        let mut limited = runtime.clone();
        limited.set_fuel_per_call(fuel).unwrap();
        let mut kernel = Kernel::with_runtime(limited, probe.clone());
        let result = kernel.append_events(&append_request(0, 20));
        (result, probe, kernel)
    };
    let (mut low, mut high) = (1u64, 1u64 << 40);
    while low < high {
        let mid = low + (high - low) / 2;
        if run(mid).0.is_ok() { high = mid } else { low = mid + 1 }
    }
    let (result, probe, mut kernel) = run(low - 1);
    let err = result.unwrap_err();
    assert_eq!((err.code, err.message.as_str(), err.detail_json.as_str()), (ErrorCode::Internal, TRAPPED, "{}"));
    assert!(probe.with(|s| s.puts) > 40, "the trap came after the writes");
    assert!(probe.dump().is_empty(), "every write of the trapped call was rolled back");
    // The instance was replaced; with the same fuel a smaller call completes.
    kernel.append_events(&append_request(0, 1)).unwrap();
    assert!(!probe.dump().is_empty());
}

#[test]
fn a_memory_ceiling_stops_a_runaway_request() {
    let runtime = Runtime::with_limits(COMPONENT, Limits { fuel_per_call: None, max_memory_bytes: Some(8 << 20) }).unwrap();
    let probe = Probe::default();
    let mut kernel = Kernel::with_runtime(runtime, probe.clone());
    let big: Vec<Value> = (1..=40).map(|i| item(i, "user", &"y".repeat(512 << 10))).collect();
    let request = json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": 0}, "items": big, "now": NOW});
    let err = kernel.append_events(&request).unwrap_err();
    assert_eq!((err.code, err.message.as_str(), err.detail_json.as_str()), (ErrorCode::Internal, TRAPPED, "{}"));
    assert!(probe.dump().is_empty());
    kernel.append_events(&append_request(0, 2)).unwrap();
}

#[test]
fn content_up_to_100_mib_round_trips_through_the_component() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    let bytes: Vec<u8> = (0..100u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let request = json!({"schemaVersion": 1, "allowedSinks": ["model:*"], "sensitivity": "internal", "now": NOW, "mimeType": "application/octet-stream"});
    let put: Value = serde_json::from_str(&kernel.put_content(&request.to_string(), &bytes).unwrap()).unwrap();
    let reference = &put["contentRef"];
    assert_eq!(reference["byteLength"], 100u64 << 20);
    assert_eq!(put["created"], true);
    let object = reference["objectId"].as_str().unwrap().to_string();
    let back = kernel.get_content(&json!({"schemaVersion": 1, "objectId": object, "sink": "model:x"}).to_string()).unwrap();
    assert!(back == bytes, "the bytes come back unchanged");
    // Stored again: nothing new is written.
    let again: Value = serde_json::from_str(&kernel.put_content(&request.to_string(), &bytes).unwrap()).unwrap();
    assert_eq!(again["created"], false);
    // A flipped byte in the store is caught, never returned.
    probe.with(|s| {
        let key = format!("blob/{object}/c/00000042");
        let entry = s.store.get(&key).unwrap().unwrap();
        let mut value = entry.value.clone();
        value[7] ^= 0x80;
        s.store.put(&key, &value, Some(entry.revision)).unwrap();
    });
    let err = kernel.get_content(&json!({"schemaVersion": 1, "objectId": object, "sink": "model:x"}).to_string()).unwrap_err();
    assert_eq!(err.code, ErrorCode::DigestMismatch);
    let err = kernel.get_content(&json!({"schemaVersion": 1, "objectId": object, "sink": "sync"}).to_string()).unwrap_err();
    assert_eq!(err.code, ErrorCode::ScopeDenied);
}

#[test]
fn provider_compaction_runs_through_the_component() {
    let mut kernel = Kernel::new(SqliteStore::in_memory().unwrap()).unwrap();
    let items: Vec<Value> = (1..=120).map(|i| item(i, if i % 2 == 0 { "assistant" } else { "user" }, &"words of a long session ".repeat(40))).collect();
    kernel.append_events(&json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": 0}, "items": items, "now": NOW})).unwrap();
    let request = json!({"schemaVersion": 1, "sessionId": "s1", "now": NOW, "strategy": "provider", "sink": "model:test",
        "model": {"profile": "m", "window": 16000, "reservedOutput": 1000, "safetyMargin": 500},
        "provider": {"model": "summarizer", "maxTokens": 500}});
    let waiting = kernel.compact_context(&request).unwrap();
    assert_eq!(waiting["status"], "awaiting-provider");
    let op = waiting["operationId"].clone();
    let done = kernel.continue_operation(&json!({"schemaVersion": 1, "operationId": op, "now": NOW,
        "response": {"outcome": "success", "text": "A long session about words.", "usage": {"inputTokens": 20000, "outputTokens": 9}}})).unwrap();
    assert_eq!(done["status"], "committed");
    let events = kernel.read_kernel_events(&json!({"schemaVersion": 1})).unwrap();
    assert_eq!(events["events"].as_array().unwrap().len(), 2);
    let plan = kernel.plan_context(&plan_request()).unwrap();
    assert_eq!(plan["context"][0]["keep"], "recovery");
}

/// The host opens a read-only transaction for these commands; they must not write.
#[test]
fn read_only_commands_write_nothing() {
    let probe = Probe::default();
    let mut kernel = Kernel::new(probe.clone()).unwrap();
    kernel.append_events(&append_request(0, 6)).unwrap();
    kernel.propose_memory(&json!({"schemaVersion": 1, "now": NOW, "candidates": [{"scope": "project", "scopeId": "p", "category": "fact",
        "content": "words of a session", "confidence": 0.7, "importance": 0.5, "provenance": {"origin": "model"},
        "evidenceRefs": [{"kind": "session", "id": "s1", "seq": 1}]}]})).unwrap();
    let put: Value = serde_json::from_str(&kernel.put_content(&json!({"schemaVersion": 1, "allowedSinks": ["*"], "sensitivity": "internal", "now": NOW}).to_string(), b"bytes").unwrap()).unwrap();
    let scope = json!({"scope": "project", "scopeId": "p"});
    let requests = [
        ("info", json!({"schemaVersion": 1})),
        ("read-events", json!({"schemaVersion": 1, "sessionId": "s1"})),
        ("plan-context", plan_request()),
        ("read-kernel-events", json!({"schemaVersion": 1})),
        ("read-memory", json!({"schemaVersion": 1, "now": NOW, "scope": "project", "scopeId": "p", "states": ["candidate"]})),
        ("recall-memory", json!({"schemaVersion": 1, "now": NOW, "query": "session words", "scopes": [scope], "sink": "model:test"})),
        ("resident-snapshot", json!({"schemaVersion": 1, "now": NOW, "scope": "project", "scopeId": "p", "sink": "model:test", "maxTokens": 100})),
        ("render-context", json!({"schemaVersion": 1, "format": "openai-responses", "plan": plan_request()})),
        ("validate-request", json!({"schemaVersion": 1, "format": "openai-chat", "body": {"model": "m", "messages": [{"role": "user", "content": "x"}]}})),
        ("verify-store", json!({"schemaVersion": 1})),
    ];
    assert_eq!(requests.len() + 1, READ_ONLY.len());
    // A fresh instance, so nothing is cached from the writes above.
    let mut reader = Kernel::new(probe.clone()).unwrap();
    let before = probe.with(|s| (s.puts, s.removes));
    for (command, request) in &requests {
        reader.call(command, &request.to_string()).unwrap_or_else(|e| panic!("{command}: {e}"));
    }
    reader.get_content(&json!({"schemaVersion": 1, "objectId": put["contentRef"]["objectId"], "sink": "x"}).to_string()).unwrap();
    assert_eq!(probe.with(|s| (s.puts, s.removes)), before);
}

/// One session imported in OpenAI Chat form, rendered as Anthropic Messages and validated.
#[test]
fn a_transcript_imports_once_renders_in_another_format_and_validates() {
    let mut kernel = Kernel::new(MemoryStore::default()).unwrap();
    let import = json!({"schemaVersion": 1, "sessionId": "t1", "format": "openai-chat", "now": NOW, "expectedHead": {"seq": 0},
        "allowedSinks": ["model:*"], "sensitivity": "internal",
        "transcript": {"messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Is main green? ☕"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "ci_status", "arguments": "{\"branch\": \"main\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "green"}],
            "tools": [{"type": "function", "function": {"name": "ci_status", "parameters": {"type": "object"}}}]}});
    let first = kernel.import_messages(&import).unwrap();
    assert_eq!(first["appended"].as_array().unwrap().len(), 5, "the tool definition, the system message and three turns");
    let again = kernel.import_messages(&import).unwrap();
    assert_eq!((again["appended"].as_array().unwrap().len(), &again["skipped"], &again["head"]), (0, &json!(5), &first["head"]));
    let plan = json!({"schemaVersion": 1, "sessionId": "t1", "now": NOW, "sink": "model:test",
        "model": {"profile": "m-32k", "window": 32768, "reservedOutput": 4096, "safetyMargin": 1024}});
    let rendered = kernel.render_context(&json!({"schemaVersion": 1, "format": "anthropic-messages", "plan": plan})).unwrap();
    assert_eq!(rendered["planDigest"], kernel.plan_context(&plan).unwrap()["digest"]);
    let body = &rendered["body"];
    assert_eq!(body["system"], "Be terse.");
    assert_eq!(body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["user", "assistant", "user"]);
    assert_eq!(body["messages"][1]["content"], json!([{"type": "tool_use", "id": "call_1", "name": "ci_status", "input": {"branch": "main"}}]));
    assert_eq!(body["tools"], json!([{"name": "ci_status", "input_schema": {"type": "object"}}]));
    let verdict = kernel.validate_request(&json!({"schemaVersion": 1, "format": "anthropic-messages", "body": body})).unwrap();
    assert_eq!((&verdict["valid"], &verdict["violations"]), (&json!(true), &json!([])));
}

#[test]
fn a_broken_body_is_violations_and_a_broken_transcript_appends_nothing() {
    let mut kernel = Kernel::new(MemoryStore::default()).unwrap();
    let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}]}]});
    let verdict = kernel.validate_request(&json!({"schemaVersion": 1, "format": "anthropic-messages", "body": body})).unwrap();
    assert_eq!(verdict["valid"], false);
    let rules: Vec<&str> = verdict["violations"].as_array().unwrap().iter().map(|v| v["rule"].as_str().unwrap()).collect();
    assert!(rules.contains(&"call-without-result"), "{rules:?}");
    let orphan = json!({"schemaVersion": 1, "sessionId": "t1", "format": "openai-chat", "now": NOW, "expectedHead": {"seq": 0},
        "allowedSinks": ["model:*"], "sensitivity": "internal",
        "transcript": {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_nobody", "content": "r"}]}});
    let error = kernel.import_messages(&orphan).unwrap_err();
    assert!(error.code == ErrorCode::InvalidRequest && error.message.contains("call_nobody"), "{error:?}");
    assert_eq!(kernel.read_events(&json!({"schemaVersion": 1, "sessionId": "t1"})).unwrap_err().code, ErrorCode::NotFound);
}
