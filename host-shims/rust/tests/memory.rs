//! Memory through the component: written by one kernel, recalled, refused
//! and deleted through another on the same SQLite file.

mod common;

use common::{append_request, NOW};
use ctxkernel_host::{ErrorCode, Kernel, Runtime, SqliteStore};
use serde_json::json;

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
