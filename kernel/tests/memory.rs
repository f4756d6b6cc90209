//! The governed memory lifecycle and recall, natively.

mod common;

use common::*;
use ctxkernel::store::MemStore;
use ctxkernel::{Command, ErrorCode};
use serde_json::{json, Value};

const T1: &str = "2026-06-01T12:01:00Z";
const T2: &str = "2026-06-01T12:02:00Z";

/// A session whose user says things worth remembering.
fn store_with_session(user_lines: &[&str]) -> MemStore {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    for line in user_lines {
        conv.user(line);
    }
    call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
    store
}

fn say(store: &mut MemStore, text: &str) {
    let head = call(store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": "s", "limit": 10000})).unwrap()["head"]["seq"].as_u64().unwrap();
    let mut conv = Conv::new();
    conv.user(text);
    conv.items[0]["itemId"] = json!(format!("said-{head}"));
    call(store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": head}, "items": conv.items, "now": NOW})).unwrap();
}

fn candidate(content: &str, key: Option<&str>, seq: u64) -> Value {
    let mut c = json!({"scope": "project", "scopeId": "ledger", "category": "fact", "content": content, "confidence": 0.6,
        "importance": 0.5, "provenance": {"origin": "model"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": seq}]});
    if let Some(key) = key {
        c["key"] = json!(key);
    }
    c
}

fn propose(store: &mut MemStore, candidates: Vec<Value>, authority: Option<Value>, now: &str) -> Result<Vec<Value>, ctxkernel::KernelError> {
    let mut request = json!({"schemaVersion": 1, "now": now, "candidates": candidates});
    if let Some(a) = authority {
        request["authority"] = a;
    }
    call(store, Command::ProposeMemory, &request).map(|r| r["receipts"].as_array().unwrap().clone())
}

fn decide(store: &mut MemStore, id: &str, action: &str, authority: Value, extra: Value) -> Result<Value, ctxkernel::KernelError> {
    let mut request = json!({"schemaVersion": 1, "now": T1, "memoryId": id, "action": action, "authority": authority, "scope": "project", "scopeId": "ledger"});
    for (k, v) in extra.as_object().unwrap() {
        request[k] = v.clone();
    }
    call(store, Command::DecideMemory, &request)
}

fn user(session: &str) -> Value {
    json!({"kind": "user-explicit", "sessionId": session})
}

fn admin() -> Value {
    json!({"kind": "management", "actor": "admin@example.org"})
}

fn recall(store: &mut MemStore, query: &str, scopes: Value) -> Value {
    call(store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": T2, "query": query, "scopes": scopes, "sink": "model:test"})).unwrap()
}

fn ledger() -> Value {
    json!([{"scope": "project", "scopeId": "ledger"}])
}

#[test]
fn the_scripted_lifecycle() {
    let mut store = store_with_session(&["I live in Berlin these days", "and the deploys happen on Wednesday"]);
    // propose → a candidate (a model may not activate anything)
    let first = propose(&mut store, vec![candidate("The user lives in Berlin", Some("user.city"), 1)], None, NOW).unwrap();
    let berlin = first[0]["memory"]["memoryId"].as_str().unwrap().to_string();
    assert_eq!(first[0]["memory"]["state"], "candidate");
    // merge duplicate: evidence union, the higher confidence
    let mut again = candidate("the user  lives in BERLIN!", Some("user.city"), 2);
    again["confidence"] = json!(0.8);
    let merged = propose(&mut store, vec![again], None, NOW).unwrap();
    assert_eq!(merged[0]["merged"], true);
    assert_eq!(merged[0]["memory"]["memoryId"], berlin.as_str());
    assert_eq!(merged[0]["memory"]["evidenceRefs"].as_array().unwrap().len(), 2);
    assert_eq!(merged[0]["memory"]["confidence"], 0.8);
    // activate by user evidence: only what the user actually said
    let err = decide(&mut store, &berlin, "activate", user("s"), json!({})).unwrap_err();
    assert_eq!(err.code, ErrorCode::ScopeDenied, "the latest user message does not say it");
    say(&mut store, "yes, remember that the user lives in Berlin");
    let active = decide(&mut store, &berlin, "activate", user("s"), json!({})).unwrap();
    assert_eq!(active["memory"]["state"], "active");
    assert_eq!(active["memory"]["authority"], "user-explicit");
    // a conflicting fact supersedes with lineage
    say(&mut store, "correction: I moved to Lisbon");
    let mut lisbon = candidate("I moved to Lisbon", Some("user.city"), 4);
    lisbon["validFrom"] = json!(T1);
    let moved = propose(&mut store, vec![lisbon], Some(user("s")), T1).unwrap();
    let lisbon_id = moved[0]["memory"]["memoryId"].as_str().unwrap().to_string();
    assert_eq!(moved[0]["superseded"], json!([berlin]));
    assert_eq!(moved[0]["memory"]["supersedes"], json!([berlin]));
    let recalled = recall(&mut store, "which city is the user in", ledger());
    assert_eq!(recalled["memories"][0]["memoryId"], lisbon_id.as_str());
    assert_eq!(recalled["memories"][0]["history"][0]["memoryId"], berlin.as_str(), "recall reports the history");
    assert!(recalled["memories"].as_array().unwrap().iter().all(|m| m["memoryId"] != berlin.as_str()), "the superseded fact never wins");
    // what was true at a time
    let then = call(&mut store, Command::ReadMemory, &json!({"schemaVersion": 1, "now": T2, "atTime": "2026-06-01T12:00:30Z", "scope": "project", "scopeId": "ledger"})).unwrap();
    let ids: Vec<&str> = then["memories"].as_array().unwrap().iter().map(|m| m["record"]["memoryId"].as_str().unwrap()).collect();
    assert_eq!(ids, [berlin.as_str()]);
    // expire
    let expired = decide(&mut store, &lisbon_id, "expire", json!({"kind": "policy"}), json!({})).unwrap();
    assert_eq!(expired["memory"]["state"], "expired");
    assert!(recall(&mut store, "Lisbon", ledger())["memories"].as_array().unwrap().is_empty());
    // an illegal transition leaves the record unchanged
    let before = store.entries.clone();
    let err = decide(&mut store, &lisbon_id, "activate", admin(), json!({})).unwrap_err();
    assert_eq!(err.code, ErrorCode::IllegalTransition);
    assert_eq!(store.entries, before);
    // delete with receipts; the replica stays pending
    let snapshot = store.entries.get(&format!("mem/rec/{lisbon_id}")).cloned().unwrap();
    say(&mut store, "please forget where I live");
    let deletion = call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": T2, "requestId": "req-1", "subject": "user-1",
        "scope": "project", "scopeId": "ledger", "selector": {"key": "user.city"}, "authority": user("s"), "fence": 7,
        "replicas": ["laptop"]})).unwrap();
    // Forgetting a slot forgets its history: the expired and the superseded fact alike.
    assert_eq!(deletion["matched"], 2);
    assert_eq!(deletion["status"], "partial", "a pending replica is never overall success");
    let targets: Vec<&str> = deletion["receipts"].as_array().unwrap().iter().map(|r| r["target"].as_str().unwrap()).collect();
    for target in ["store:record", "index:lexical", "cache:resident", "replica:laptop"] {
        assert!(targets.contains(&target), "{target} in {targets:?}");
    }
    let settled = call(&mut store, Command::Reconcile, &json!({"schemaVersion": 1, "now": T2, "operationId": deletion["deletionId"],
        "replicas": [{"replica": "laptop", "deleted": true}]})).unwrap();
    assert_eq!(settled["status"], "complete");
    // a replayed old write is refused by the tombstone
    store.entries.insert(format!("mem/rec/{lisbon_id}"), snapshot);
    assert!(recall(&mut store, "Lisbon", ledger())["memories"].as_array().unwrap().is_empty());
    let err = decide(&mut store, &lisbon_id, "archive", admin(), json!({})).unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let err = call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": T2, "requestId": "req-3", "subject": "user-1",
        "scope": "project", "scopeId": "ledger", "selector": {"memoryIds": [lisbon_id]}, "authority": admin(), "fence": 3})).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict, "a fence older than the tombstone's");
    // purge: a dry-run plan, then the exact confirmation
    let plan = call(&mut store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": T2, "scope": "project", "scopeId": "ledger", "authority": {"kind": "management", "actor": "ops"}, "dryRun": true})).unwrap();
    assert_eq!(plan["targets"].as_array().unwrap().len(), 2);
    for authority in [json!({"kind": "management"}), json!({"kind": "policy", "actor": "retention"}), user("s")] {
        let err = call(&mut store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": T2, "scope": "project", "scopeId": "ledger", "authority": authority, "dryRun": false, "confirmation": plan["confirmation"]})).unwrap_err();
        assert_eq!(err.code, ErrorCode::ScopeDenied, "only a named manager purges: {authority}");
    }
    let err = call(&mut store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": T2, "scope": "project", "scopeId": "ledger", "authority": {"kind": "management", "actor": "ops"}, "dryRun": false, "confirmation": "yes"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    let purged = call(&mut store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": T2, "scope": "project", "scopeId": "ledger", "authority": {"kind": "management", "actor": "ops"}, "dryRun": false, "confirmation": plan["confirmation"]})).unwrap();
    assert_eq!(purged["status"], "purged");
    assert!(!store.entries.contains_key(&format!("mem/rec/{lisbon_id}")), "the replayed copy is gone too");
    assert!(store.entries.keys().all(|k| !k.starts_with(&format!("mem/audit/{lisbon_id}/"))));
    let events = call(&mut store, Command::ReadKernelEvents, &json!({"schemaVersion": 1, "typePrefix": "memory."})).unwrap();
    let types: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    for kind in ["memory.candidate.created", "memory.activated", "memory.superseded", "memory.expired", "memory.deleted", "memory.purged"] {
        assert!(types.contains(&kind), "{kind} in {types:?}");
    }
}

#[test]
fn secrets_never_enter_memory() {
    let mut store = store_with_session(&["hello"]);
    for secret in [
        "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE=",
        "use Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789",
        "aws key AKIAZ3MXQ7RJ2KTN4WPL",
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "clone https://deploy:hunter2pass@git.example.org/repo.git",
        "recovery codes: 8f3k-29dj 1k2m-0ppq",
        "cookie sessionid=3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "REGISTRY_TOKEN=rk_live_51HZxample0000000000000000",
        "the db password: Tr0ub4dor&3",
    ] {
        let before = store.entries.clone();
        let err = propose(&mut store, vec![candidate(secret, None, 1)], None, NOW).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{secret}");
        assert!(err.detail["detector"].is_string());
        assert_eq!(store.entries, before);
    }
    for benign in [
        "The user prefers pnpm over npm",
        "docs live at https://docs.example.org/guide:intro and http://localhost:8080/",
        "password rotation happens monthly; the token bucket refills at 10/s",
        "ask for a bearer token in the header",
        "tickets look like ABCD-1234 and sk-short",
        "the mapping is key: value, ratio = 3",
    ] {
        assert!(propose(&mut store, vec![candidate(benign, None, 1)], None, NOW).is_ok(), "{benign}");
    }
}

#[test]
fn candidates_inherit_the_strictest_policy_of_their_sources() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.push("message", "my employee id is 4411", json!({"role": "user", "sensitivity": "personal", "allowedSinks": ["model:local"]}));
    conv.user("and I like tea");
    call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
    let mut c = candidate("employee 4411 likes tea", None, 1);
    c["evidenceRefs"] = json!([{"kind": "session", "id": "s", "seq": 1}, {"kind": "session", "id": "s", "seq": 2}]);
    c["sensitivity"] = json!("public");
    let receipt = propose(&mut store, vec![c], None, NOW).unwrap();
    assert_eq!(receipt[0]["memory"]["sensitivity"], "personal", "never lowered by derivation");
    assert_eq!(receipt[0]["memory"]["allowedSinks"], json!(["model:local"]));
    let mut missing = candidate("x", None, 99);
    missing["content"] = json!("a fact with no evidence event");
    assert_eq!(propose(&mut store, vec![missing], None, NOW).unwrap_err().code, ErrorCode::NotFound);
    let mut bare = candidate("y", None, 1);
    bare["evidenceRefs"] = json!([]);
    assert_eq!(propose(&mut store, vec![bare], None, NOW).unwrap_err().code, ErrorCode::InvalidRequest);
}

#[test]
fn scopes_are_never_crossed() {
    let mut store = store_with_session(&["remember that the staging host is db-7"]);
    let mut a = candidate("the staging host is db-7", None, 1);
    a["scopeId"] = json!("project-a");
    let mut b = candidate("the staging host is db-9", None, 1);
    b["scopeId"] = json!("project-b");
    propose(&mut store, vec![a, b], Some(user("s")), NOW).unwrap_err();
    // Grounding fails for b (the user never said db-9); nothing was written.
    let receipts = propose(&mut store, vec![candidate("the staging host is db-7", None, 1)], Some(admin()), NOW).unwrap();
    let id = receipts[0]["memory"]["memoryId"].as_str().unwrap().to_string();
    let found = recall(&mut store, "staging host", json!([{"scope": "project", "scopeId": "other"}]));
    assert!(found["memories"].as_array().unwrap().is_empty(), "a project-B query never returns project-A memory");
    let err = call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": T1, "memoryId": id, "action": "archive",
        "authority": admin(), "scope": "project", "scopeId": "other"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::ScopeDenied);
    let err = propose(&mut store, vec![{ let mut g = candidate("global fact", None, 1); g["scope"] = json!("global"); g }], Some(admin()), NOW).unwrap_err();
    assert_eq!(err.code, ErrorCode::ScopeDenied, "nothing is proposed into global");
    let err = decide(&mut store, &id, "promote", admin(), json!({"targetScope": "global"})).unwrap_err();
    assert_eq!(err.code, ErrorCode::ScopeDenied, "global needs allowGlobal");
    let promoted = decide(&mut store, &id, "promote", admin(), json!({"targetScope": "user", "targetScopeId": "u1"})).unwrap();
    assert_eq!(promoted["memory"]["scope"], "user");
}

#[test]
fn unresolved_conflicts_keep_both_and_are_reported() {
    let mut store = store_with_session(&["x"]);
    let a = propose(&mut store, vec![candidate("deploys happen on Wednesday", Some("deploy.day"), 1)], Some(admin()), NOW).unwrap();
    let b = propose(&mut store, vec![candidate("deploys happen on Thursday", Some("deploy.day"), 1)], Some(admin()), NOW).unwrap();
    assert_eq!(b[0]["conflicts"], json!([a[0]["memory"]["memoryId"]]));
    let found = recall(&mut store, "when do deploys happen", ledger());
    let memories = found["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 2, "not last-write-wins: both stay");
    assert!(memories.iter().all(|m| !m["conflicts"].as_array().unwrap().is_empty()));
}

#[test]
fn recall_is_stable_under_shuffled_insertion() {
    let facts = ["the api gateway runs on port 8443", "billing rounds half-even at the cent", "pnpm is preferred over npm",
        "the staging database is db-7", "deploys happen on Thursday at 15:00", "用户喜欢简洁的回答", "日志保存在 /var/log/ledger"];
    let top = |order: &[usize]| {
        let mut store = store_with_session(&["x"]);
        for &i in order {
            propose(&mut store, vec![candidate(facts[i], None, 1)], Some(admin()), NOW).unwrap();
        }
        recall(&mut store, "which port does the gateway use", ledger())["memories"].clone()
    };
    let forward: Vec<usize> = (0..facts.len()).collect();
    let backward: Vec<usize> = (0..facts.len()).rev().collect();
    assert_eq!(top(&forward), top(&backward));
}

#[test]
fn the_resident_snapshot_is_bounded_data() {
    let mut store = store_with_session(&["x"]);
    propose(&mut store, vec![candidate("pnpm is preferred over npm", None, 1), candidate("billing rounds half-even", None, 1)], Some(admin()), NOW).unwrap();
    propose(&mut store, vec![candidate("a candidate nobody confirmed", None, 1)], None, NOW).unwrap();
    let mut personal = candidate("the user's doctor is Dr. Weiss", None, 1);
    personal["sensitivity"] = json!("personal");
    propose(&mut store, vec![personal], Some(admin()), NOW).unwrap();
    let snapshot = call(&mut store, Command::ResidentSnapshot, &json!({"schemaVersion": 1, "now": T1, "scope": "project", "scopeId": "ledger", "sink": "model:test", "maxTokens": 200})).unwrap();
    let text = snapshot["text"].as_str().unwrap();
    assert!(text.starts_with("[MEMORY — data"), "{text}");
    assert_eq!(snapshot["included"].as_array().unwrap().len(), 2, "no candidates, nothing sensitive");
    assert!(!text.contains("candidate nobody") && !text.contains("Weiss"));
    assert!(snapshot["tokens"].as_u64().unwrap() <= 200);
}

#[test]
fn a_lost_index_is_rebuilt_from_the_records() {
    let mut store = store_with_session(&["x"]);
    propose(&mut store, vec![candidate("the api gateway runs on port 8443", None, 1)], Some(admin()), NOW).unwrap();
    let keys: Vec<String> = store.entries.keys().filter(|k| k.starts_with("mem/idx/")).cloned().collect();
    for key in keys {
        store.entries.remove(&key);
    }
    let found = recall(&mut store, "gateway port", ledger());
    assert_eq!(found["memories"].as_array().unwrap().len(), 1);
    assert!(found["degraded"].as_array().unwrap().iter().any(|d| d.as_str().unwrap().contains("rebuilt")));
}

#[test]
fn the_record_not_the_index_has_the_last_word() {
    let mut store = store_with_session(&["x"]);
    let receipt = propose(&mut store, vec![candidate("the api gateway runs on port 8443", None, 1)], Some(admin()), NOW).unwrap();
    let id = receipt[0]["memory"]["memoryId"].as_str().unwrap().to_string();
    let vector_key = format!("mem/idx/doc/{id}");
    let stale_vector = store.entries[&vector_key].clone();
    decide(&mut store, &id, "archive", admin(), json!({})).unwrap();
    // A replayed index write says the memory is still active.
    store.entries.insert(vector_key, stale_vector);
    let found = recall(&mut store, "gateway port", ledger());
    assert!(found["memories"].as_array().unwrap().is_empty());
    assert_eq!(found["filtered"]["index-stale"], 1);
}

#[test]
fn the_vector_channel_fuses_and_degrades_gracefully() {
    let mut store = store_with_session(&["x"]);
    let mut a = candidate("the user enjoys hiking in the alps", None, 1);
    a["embedding"] = json!([1.0, 0.0, 0.0]);
    let mut b = candidate("billing rounds half-even", None, 1);
    b["embedding"] = json!([0.0, 1.0, 0.0]);
    propose(&mut store, vec![a, b], Some(admin()), NOW).unwrap();
    let with = call(&mut store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": T2, "query": "mountain walks", "queryEmbedding": [0.9, 0.1, 0.0], "scopes": ledger(), "sink": "model:test"})).unwrap();
    assert_eq!(with["memories"][0]["matchedBy"], json!(["vector"]), "a paraphrase found by meaning");
    assert!(with["degraded"].as_array().unwrap().is_empty());
    let wrong = call(&mut store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": T2, "query": "billing", "queryEmbedding": [1.0, 0.0], "scopes": ledger(), "sink": "model:test"})).unwrap();
    assert_eq!(wrong["memories"][0]["matchedBy"], json!(["lexical"]));
    assert!(!wrong["degraded"].as_array().unwrap().is_empty(), "a wrong dimension is lexical-only, marked degraded");
    let none = recall(&mut store, "billing", ledger());
    assert!(none["degraded"][0].as_str().unwrap().starts_with("vector"));
}

#[test]
fn after_delete_nothing_of_the_memory_is_found() {
    let mut store = store_with_session(&["x"]);
    let mut a = candidate("the api gateway runs on port 8443", None, 1);
    a["embedding"] = json!([1.0, 0.0]);
    let receipt = propose(&mut store, vec![a], Some(admin()), NOW).unwrap();
    let id = receipt[0]["memory"]["memoryId"].clone();
    call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": T2, "requestId": "r", "subject": "u", "scope": "project",
        "scopeId": "ledger", "selector": {"memoryIds": [id]}, "authority": admin(), "fence": 1})).unwrap();
    let lexical = recall(&mut store, "gateway port", ledger());
    let vector = call(&mut store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": T2, "query": "zzz", "queryEmbedding": [1.0, 0.0], "scopes": ledger(), "sink": "model:test"})).unwrap();
    assert!(lexical["memories"].as_array().unwrap().is_empty() && vector["memories"].as_array().unwrap().is_empty());
    assert!(store.entries.keys().all(|k| !k.contains(id.as_str().unwrap()) || k.starts_with("mem/tomb/") || k.starts_with("mem/tombs/") || k.starts_with("mem/audit/") || k.starts_with("mem/log/")));
}

#[test]
fn an_error_in_a_batch_names_the_element_in_its_detail() {
    let mut store = store_with_session(&["we ship on Tuesdays"]);
    let with = |field: &str, value: Value| {
        let mut bad = candidate("the ledger closes at noon", None, 1);
        bad[field] = value;
        json!({"schemaVersion": 1, "now": NOW, "candidates": [candidate("we ship on Tuesdays", None, 1), bad]})
    };
    for (request, field, path) in [
        (with("embedding", json!([])), "candidates[1].embedding", "candidates[1].embedding"),
        (with("embedding", json!([0.5, 1e39])), "", "candidates[1].embedding[1]"),
        (with("key", json!("ghp_Qx7rT2mWz9Lk4pHs8VdYe2NfRb6JcTq1XuAo")), "candidates[1].key", ""),
    ] {
        let err = call(&mut store, Command::ProposeMemory, &request).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{err:?}");
        if !field.is_empty() {
            assert_eq!(err.detail["field"], field, "{err:?}");
        }
        if !path.is_empty() {
            assert_eq!(err.detail["path"], path, "{err:?}");
        }
        assert!(err.message.contains("candidates[1]"), "{err:?}");
    }
}
