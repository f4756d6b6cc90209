//! The built component, run by wasmtime: its interface, typed errors for bad
//! input, one transaction per call (rolled back on error, trap or host panic),
//! and two kernels sharing one SQLite file.

use ctxkernel_host::{Entry, ErrorCode, HostStore, Kernel, Limits, MemoryStore, PutError, Runtime, SqliteStore, COMPONENT, READ_ONLY, TRAPPED};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const NOW: &str = "2026-06-01T12:00:00Z";

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

fn item(seq: u64, role: &str, text: &str) -> Value {
    json!({
        "schemaVersion": 1, "itemId": format!("e{seq}"), "kind": "message", "role": role, "scope": "session",
        "sourceRef": {"kind": "session", "id": "s1", "seq": seq}, "provenance": {"origin": "user"},
        "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0,
        "pinned": false, "createdAt": NOW, "content": text
    })
}

fn append_request(from: u64, count: u64) -> Value {
    let items: Vec<Value> = (from + 1..=from + count).map(|i| item(i, "user", &format!("message {i} with some words"))).collect();
    json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": {"seq": from}, "items": items, "now": NOW})
}

fn plan_request() -> Value {
    json!({"schemaVersion": 1, "now": NOW, "sink": "model:test", "sessionId": "s1",
           "model": {"profile": "test", "window": 8000, "reservedOutput": 1000, "safetyMargin": 100}})
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
fn two_kernels_share_one_sqlite_file() {
    let dir = std::env::temp_dir().join(format!("ctxk-share-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let runtime = Runtime::new().unwrap();
    let mut a = Kernel::with_runtime(runtime.clone(), SqliteStore::open(&path).unwrap());
    let mut b = Kernel::with_runtime(runtime, SqliteStore::open(&path).unwrap());

    a.append_events(&append_request(0, 2)).unwrap();
    let seen = b.plan_context(&plan_request()).unwrap();
    assert_eq!(seen["binding"]["sessionHead"]["seq"], 2, "b sees a's writes");
    // Both build on seq 2; the second writer loses the race and learns the head.
    let won = a.append_events(&append_request(2, 1)).unwrap();
    let lost = b.append_events(&append_request(2, 1)).unwrap_err();
    assert_eq!(lost.code, ErrorCode::Stale);
    assert_eq!(lost.detail["currentHead"], won["head"]);
    // b recomputes from the current head and succeeds.
    b.append_events(&json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": won["head"],
        "items": [item(40, "assistant", "from b")], "now": NOW})).unwrap();
    let info_a = a.info().unwrap();
    let info_b = b.info().unwrap();
    assert_eq!(info_a["store"], info_b["store"]);
    assert_eq!(info_a["store"]["revision"], 3);
    assert_eq!(a.plan_context(&plan_request()).unwrap(), b.plan_context(&plan_request()).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foreign_files_are_not_opened_as_stores() {
    let dir = std::env::temp_dir().join(format!("ctxk-foreign-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x42u8; 8192]).unwrap();
    assert!(SqliteStore::open(&garbage).is_err());
    let other = dir.join("other.sqlite");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE invoices (id INTEGER);").unwrap();
    let err = SqliteStore::open(&other).err().unwrap().to_string();
    assert!(err.contains("not a ctxkernel store"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
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

#[test]
fn memory_written_by_one_kernel_is_recalled_by_another() {
    let dir = std::env::temp_dir().join(format!("ctxk-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let runtime = Runtime::new().unwrap();
    let mut writer = Kernel::with_runtime(runtime.clone(), SqliteStore::open(&path).unwrap());
    let mut reader = Kernel::with_runtime(runtime, SqliteStore::open(&path).unwrap());
    writer.append_events(&append_request(0, 1)).unwrap();
    let admin = json!({"kind": "management", "actor": "lead"});
    // Same slot, same authority: the later `validFrom` supersedes (no last-write-wins).
    let remember = |kernel: &mut Kernel, content: &str, valid_from: &str| -> String {
        let proposed = kernel.propose_memory(&json!({"schemaVersion": 1, "now": NOW, "candidates": [{"scope": "project", "scopeId": "p",
            "category": "fact", "key": "ci.runner", "content": content, "confidence": 0.7, "importance": 0.5, "validFrom": valid_from,
            "provenance": {"origin": "model"}, "evidenceRefs": [{"kind": "session", "id": "s1", "seq": 1}]}]})).unwrap();
        let id = proposed["receipts"][0]["memory"]["memoryId"].as_str().unwrap().to_string();
        kernel.decide_memory(&json!({"schemaVersion": 1, "now": NOW, "memoryId": id, "action": "activate", "authority": admin,
            "scope": "project", "scopeId": "p"})).unwrap();
        id
    };
    let recall = |kernel: &mut Kernel| -> Vec<String> {
        let found = kernel.recall_memory(&json!({"schemaVersion": 1, "now": NOW, "query": "which CI runner do we use",
            "scopes": [{"scope": "project", "scopeId": "p"}], "sink": "model:test"})).unwrap();
        found["memories"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_string()).collect()
    };
    remember(&mut writer, "CI runs on the self-hosted runner", "2026-01-01T00:00:00Z");
    assert_eq!(recall(&mut reader), ["CI runs on the self-hosted runner"]);
    // The reader's index catches up with the writer's supersession.
    let newer = remember(&mut writer, "CI runs on the hosted runner since June", "2026-06-01T00:00:00Z");
    assert_eq!(recall(&mut reader), ["CI runs on the hosted runner since June"]);
    // A refused transition through the component leaves the file unchanged.
    let before = reader.info().unwrap()["store"].clone();
    let err = reader.decide_memory(&json!({"schemaVersion": 1, "now": NOW, "memoryId": newer, "action": "activate",
        "authority": admin, "scope": "project", "scopeId": "p"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::IllegalTransition);
    assert_eq!(writer.info().unwrap()["store"], before);
    // Deleted by the reader, gone for the writer.
    let deleted = reader.delete_memory(&json!({"schemaVersion": 1, "now": NOW, "requestId": "forget-ci", "subject": "team",
        "scope": "project", "scopeId": "p", "selector": {"key": "ci.runner"}, "authority": admin, "fence": 1})).unwrap();
    assert_eq!(deleted["status"], "complete");
    assert_eq!(deleted["matched"], 2);
    assert!(recall(&mut writer).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
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

#[test]
fn readers_never_wait_on_a_writer_and_a_busy_writer_gets_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("ctxk-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut kernel = Kernel::new(SqliteStore::open_with(&path, std::time::Duration::from_millis(300)).unwrap()).unwrap();
    kernel.append_events(&append_request(0, 2)).unwrap();
    // Another connection holds the write lock, as a long compaction would.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE; UPDATE ctxk_entries SET revision = revision + 1;").unwrap();
    let started = std::time::Instant::now();
    assert_eq!(kernel.plan_context(&plan_request()).unwrap()["binding"]["sessionHead"]["seq"], 2);
    assert_eq!(kernel.read_events(&json!({"schemaVersion": 1, "sessionId": "s1"})).unwrap()["events"].as_array().unwrap().len(), 2);
    assert_eq!(kernel.info().unwrap()["store"]["revision"], 1, "readers see the last commit, not the open transaction");
    assert!(started.elapsed().as_millis() < 300, "no read waited for the lock");
    let started = std::time::Instant::now();
    let busy = kernel.append_events(&append_request(2, 1)).unwrap_err();
    assert!(started.elapsed().as_millis() >= 290);
    assert_eq!(busy.code, ErrorCode::StorageFailure);
    assert_eq!(busy.message, "cannot begin a transaction: the store is busy: another connection held its write lock for more than 300 ms");
    writer.execute_batch("ROLLBACK").unwrap();
    assert_eq!(kernel.append_events(&append_request(2, 1)).unwrap()["head"]["seq"], 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
