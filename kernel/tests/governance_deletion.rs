//! Deletion and integrity: a raw copy of the store replayed after a deletion
//! (any part of a memory's entries, at its old revision or above its
//! tombstone) is found by `verify-store`, and purge removes every trace of
//! it but the tombstone and fence.

mod common;

use common::*;
use ctxkernel::store::MemStore;
use ctxkernel::{Command, ErrorCode, Kernel};
use serde_json::{json, Value};

const CONTENT: &str = "The quarterly board deck lives in the Zanzibar folder";

fn admin() -> Value {
    json!({"kind": "management", "actor": "ops"})
}

fn verify(store: &mut MemStore) -> Value {
    call(store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap()
}

fn kinds(report: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = report["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap().to_string()).collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// A store holding one active memory (with a key, tags, an embedding and an
/// earlier version), the memory's id, and the store before the correction.
fn remembered() -> (MemStore, String, MemStore) {
    let mut store = MemStore::default();
    let candidate = |content: &str| {
        json!({"scope": "project", "scopeId": "web", "category": "fact", "content": content, "key": "board.deck", "tags": ["board"],
            "confidence": 0.8, "importance": 0.5, "embedding": [0.25, -0.5, 1.0], "provenance": {"origin": "host"},
            "evidenceRefs": [{"kind": "host", "id": "ctxk"}], "allowedSinks": ["model:*"]})
    };
    let proposed = call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "authority": admin(), "candidates": [candidate(CONTENT)]})).unwrap();
    let id = proposed["receipts"][0]["memory"]["memoryId"].as_str().unwrap().to_string();
    // The same words again (reinforced), then corrected: an earlier version.
    call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T12:00:00Z", "authority": admin(), "candidates": [candidate(CONTENT)]})).unwrap();
    let earlier = store.clone();
    call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T13:00:00Z", "memoryId": id, "action": "correct",
        "content": "The quarterly board deck lives in the Zanzibar share", "authority": admin(), "scope": "project", "scopeId": "web"})).unwrap();
    (store, id, earlier)
}

fn delete(store: &mut MemStore, id: &str) {
    delete_in(store, id, ("project", "web"));
}

fn delete_in(store: &mut MemStore, id: &str, (scope, scope_id): (&str, &str)) {
    let fence = call(store, Command::Info, &json!({"schemaVersion": 1})).unwrap()["store"]["memoryRevision"].clone();
    let receipt = call(store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": "2026-06-03T12:00:00Z", "requestId": format!("forget-{id}"),
        "subject": "ops", "scope": scope, "scopeId": scope_id, "selector": {"memoryIds": [id]}, "authority": admin(), "fence": fence})).unwrap();
    assert_eq!(receipt["status"], "complete", "{receipt}");
}

fn purge(store: &mut MemStore) -> Value {
    purge_in(store, ("project", "web"))
}

fn purge_in(store: &mut MemStore, (scope, scope_id): (&str, &str)) -> Value {
    let purge = |store: &mut MemStore, confirmation: Value| {
        call(store, Command::PurgeMemory, &json!({"schemaVersion": 1, "now": "2026-06-04T12:00:00Z", "scope": scope, "scopeId": scope_id,
            "authority": admin(), "dryRun": confirmation.is_null(), "confirmation": confirmation}))
    };
    let plan = purge(store, Value::Null).unwrap();
    purge(store, plan["confirmation"].clone()).unwrap()
}

/// What a store holds of the memory's words, by key: in a value, or in the
/// key itself (a posting's key names its term).
fn holding_words(store: &MemStore) -> Vec<String> {
    store
        .entries
        .iter()
        .filter(|(k, (_, v))| k.to_lowercase().contains("zanzibar") || String::from_utf8_lossy(v).to_lowercase().contains("zanzibar"))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The memory's entries as they stood before the deletion: what a raw
/// replay of an old copy of the store writes back.
fn entries_of(store: &MemStore, id: &str) -> Vec<(String, (u64, Vec<u8>))> {
    let segment = id.to_string();
    store
        .entries
        .iter()
        .filter(|(key, (_, value))| {
            !key.starts_with("mem/log/") && !key.starts_with("mem/audit/") && (key.contains(&segment) || String::from_utf8_lossy(value).contains(&segment))
        })
        .filter(|(key, _)| key.starts_with("mem/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The record's revision set to `revision`, the rest of its bytes kept.
fn at_revision(value: &[u8], revision: u64) -> Vec<u8> {
    let mut record: Value = serde_json::from_slice(value).unwrap();
    record["revision"] = json!(revision);
    serde_json::to_vec(&record).unwrap()
}

#[test]
fn a_store_the_kernel_wrote_verifies_clean() {
    let report = verify(&mut MemStore::default());
    assert_eq!((report["ok"].clone(), report["problemCount"].clone()), (json!(true), json!(0)), "{report}");
    let (mut store, id, _) = remembered();
    let report = verify(&mut store);
    assert_eq!(report["ok"], true, "{report}");
    for what in ["records", "links", "indexEntries", "versions", "audit"] {
        assert!(report["checked"][what].as_u64().is_some_and(|n| n > 0), "{what}: {report}");
    }
    delete(&mut store, &id);
    assert_eq!(verify(&mut store)["ok"], true);
    let before = store.entries.clone();
    purge(&mut store);
    assert_ne!(store.entries, before);
    assert_eq!(verify(&mut store)["ok"], true);
    assert!(holding_words(&store).is_empty(), "{:?}", holding_words(&store));
}

#[test]
fn a_replayed_copy_is_named_and_purge_removes_every_trace() {
    let (store, id, earlier) = remembered();
    // Entries of the memory as it stands and as it stood before its
    // correction (the earlier fingerprint entry).
    let mut entries = entries_of(&store, &id);
    entries.extend(entries_of(&earlier, &id).into_iter().filter(|(k, _)| !store.entries.contains_key(k)));
    // Each entry replayed or not, but the postings all or none (one per
    // term: every subset of them would be too many to try).
    let (postings, mut old): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(k, _)| k.starts_with("mem/idx/term/"));
    assert!(postings.len() >= 4, "a posting per term: {postings:?}");
    let mut old: Vec<Vec<_>> = old.drain(..).map(|entry| vec![entry]).collect();
    old.push(postings);
    assert!(old.len() >= 9, "record, scope, slot and two fingerprint links, term vector, embedding, version, postings: {old:?}");
    let record_at = old.iter().position(|group| group[0].0.starts_with("mem/rec/")).unwrap();
    let record_key = old[record_at][0].0.clone();
    let revision = serde_json::from_slice::<Value>(&old[record_at][0].1 .1).unwrap()["revision"].as_u64().unwrap();
    let mut deleted = store.clone();
    delete(&mut deleted, &id);
    // Every subset of the memory's entries replayed, the record at its old
    // revision (a buried copy) or above its tombstone (revived).
    let mut revived_seen = false;
    for mask in 0u32..(1 << old.len()) {
        for above in [false, true] {
            let mut replayed = deleted.clone();
            for (i, group) in old.iter().enumerate() {
                if mask & (1 << i) == 0 {
                    continue;
                }
                for (key, (rev, value)) in group {
                    let value = if *key == record_key && above { at_revision(value, revision + 1) } else { value.clone() };
                    replayed.entries.insert(key.clone(), (rev + 100, value));
                }
            }
            let report = verify(&mut replayed);
            let record = mask & (1 << record_at) != 0;
            assert_eq!(report["ok"], json!(mask == 0), "mask {mask:b}: {report}");
            if record {
                let expected = if above { "revived-record" } else { "buried-copy" };
                assert!(kinds(&report).contains(&expected.to_string()), "mask {mask:b}: {report}");
                if above {
                    // Reads see it again: that is why it is reported.
                    let read = call(&mut replayed, Command::ReadMemory, &json!({"schemaVersion": 1, "now": NOW, "scope": "project", "scopeId": "web"})).unwrap();
                    revived_seen |= read["memories"].as_array().is_some_and(|m| !m.is_empty());
                }
            } else if mask != 0 {
                assert!(kinds(&report).iter().all(|k| k.starts_with("dangling-") || k == "orphan"), "mask {mask:b}: {report}");
            }
            purge(&mut replayed);
            let after = verify(&mut replayed);
            assert_eq!(after["ok"], true, "mask {mask:b} above {above}: purge left {after}");
            assert!(holding_words(&replayed).is_empty(), "mask {mask:b}: {:?}", holding_words(&replayed));
            let recalled = call(&mut replayed, Command::RecallMemory, &json!({"schemaVersion": 1, "now": NOW, "query": "board deck Zanzibar",
                "queryEmbedding": [0.25, -0.5, 1.0], "scopes": [{"scope": "project", "scopeId": "web"}], "sink": "model:test"})).unwrap();
            assert_eq!(recalled["memories"], json!([]), "mask {mask:b}");
        }
    }
    assert!(revived_seen, "a record above its tombstone is read as live");
}

#[test]
fn what_does_not_decode_is_reported_not_trapped() {
    let (mut store, _, _) = remembered();
    for (key, value) in [
        ("mem/scope/project/web/zz", b"not json".to_vec()),
        ("mem/rec/zz", b"{\"memoryId\":1}".to_vec()),
        ("mem/tomb/zz", vec![0xff, 0xfe]),
        ("mem/idx/doc/zz", b"[]".to_vec()),
        ("mem/emb/zz", b"{}".to_vec()),
        ("mem/ver/zz/00000001", b"{}".to_vec()),
        ("mem/audit/zz/00000001", b"{}".to_vec()),
    ] {
        store.entries.insert(key.to_string(), (1, value));
    }
    let before = store.entries.clone();
    let report = verify(&mut store);
    assert_eq!(store.entries, before, "verify-store writes nothing");
    assert_eq!(report["problemCount"], 7, "{report}");
    assert_eq!(kinds(&report), ["dangling-index-entry", "orphan", "undecodable"], "{report}");
    let text = Kernel::default().call(&mut store, Command::VerifyStore, r#"{"schemaVersion":2}"#).unwrap_err();
    assert_eq!(text.code, ErrorCode::UnsupportedSchema);
    let text = Kernel::default().call(&mut store, Command::VerifyStore, r#"{"schemaVersion":1,"repair":true}"#).unwrap_err();
    assert_eq!(text.code, ErrorCode::InvalidRequest);
}

#[test]
fn purge_sweeps_every_scope_journals_and_a_replay_after_purge() {
    let (mut store, id, _) = remembered();
    let before_promotion = store.clone();
    call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T14:00:00Z", "memoryId": id, "action": "promote",
        "targetScope": "user", "targetScopeId": "u1", "authority": admin(), "scope": "project", "scopeId": "web"})).unwrap();
    assert_eq!(verify(&mut store)["ok"], true);
    let fence = call(&mut store, Command::Info, &json!({"schemaVersion": 1})).unwrap()["store"]["memoryRevision"].clone();
    call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": "2026-06-03T12:00:00Z", "requestId": "forget-u1",
        "subject": "ops", "scope": "user", "scopeId": "u1", "selector": {"memoryIds": [id]}, "authority": admin(), "fence": fence})).unwrap();
    // A replay of the store from before the promotion: entries in the old scope.
    for (key, entry) in entries_of(&before_promotion, &id) {
        store.entries.insert(key, entry);
    }
    assert_eq!(verify(&mut store)["ok"], false);
    let purge_user = |store: &mut MemStore| {
        let request = |confirmation: Value| json!({"schemaVersion": 1, "now": "2026-06-04T12:00:00Z", "scope": "user", "scopeId": "u1",
            "authority": admin(), "dryRun": confirmation.is_null(), "confirmation": confirmation});
        let plan = call(store, Command::PurgeMemory, &request(Value::Null)).unwrap();
        call(store, Command::PurgeMemory, &request(plan["confirmation"].clone())).unwrap()
    };
    assert_eq!(purge_user(&mut store)["targets"], json!([id]));
    assert_eq!(verify(&mut store)["ok"], true, "{}", verify(&mut store));
    assert!(holding_words(&store).is_empty(), "{:?}", holding_words(&store));
    // The same replay after the purge: purged again.
    for (key, entry) in entries_of(&before_promotion, &id) {
        store.entries.insert(key, entry);
    }
    assert!(kinds(&verify(&mut store)).contains(&"purged-trace".to_string()));
    assert_eq!(purge_user(&mut store)["targets"], json!([id]));
    assert_eq!(verify(&mut store)["ok"], true, "{}", verify(&mut store));
    assert!(holding_words(&store).is_empty());
    // Only its postings replayed, whose keys name its words: purged again.
    let postings: Vec<_> = entries_of(&before_promotion, &id).into_iter().filter(|(k, _)| k.starts_with("mem/idx/term/")).collect();
    assert!(!postings.is_empty());
    store.entries.extend(postings);
    assert!(!holding_words(&store).is_empty());
    assert!(kinds(&verify(&mut store)).contains(&"dangling-index-entry".to_string()), "{}", verify(&mut store));
    assert_eq!(purge_user(&mut store)["targets"], json!([id]));
    assert_eq!(verify(&mut store)["ok"], true, "{}", verify(&mut store));
    assert!(holding_words(&store).is_empty(), "{:?}", holding_words(&store));
}

#[test]
fn a_consolidation_journal_goes_with_the_memories_it_proposed() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("Remember that the Zanzibar folder holds the board deck.");
    call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
    let consolidated = call(&mut store, Command::ConsolidateMemory, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW,
        "strategy": "local", "scope": "agent", "scopeId": "a"})).unwrap();
    let id = consolidated["receipts"][0]["memory"]["memoryId"].as_str().unwrap_or_else(|| panic!("{consolidated}")).to_string();
    assert!(store.entries.keys().any(|k| k.starts_with("mem/ext/")));
    delete_in(&mut store, &id, ("agent", "a"));
    assert_eq!(verify(&mut store)["ok"], true, "a journal may hold a deleted memory until it is purged");
    purge_in(&mut store, ("agent", "a"));
    assert_eq!(verify(&mut store)["ok"], true, "{}", verify(&mut store));
    // The journal stays (a retry still answers, merging nothing twice),
    // without the purged memory's receipt.
    let journal = store.entries.iter().find(|(k, _)| k.starts_with("mem/ext/")).map(|(_, (_, v))| String::from_utf8_lossy(v).to_string()).unwrap();
    assert!(!journal.contains(&id), "{journal}");
    let retried = call(&mut store, Command::ConsolidateMemory, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW,
        "strategy": "local", "scope": "agent", "scopeId": "a"})).unwrap();
    assert!(!retried.to_string().contains(&id), "{retried}");
    // Only the session itself still holds the words.
    assert!(holding_words(&store).iter().all(|k| k.starts_with("ses/")), "{:?}", holding_words(&store));
}

#[test]
fn a_fingerprint_that_moved_on_is_no_problem() {
    let (mut store, id, _) = remembered();
    call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T14:00:00Z", "memoryId": id, "action": "archive",
        "authority": admin(), "scope": "project", "scopeId": "web"})).unwrap();
    // The same words again: a new memory takes the fingerprint, then goes.
    let again = call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T15:00:00Z", "candidates": [{
        "scope": "project", "scopeId": "web", "category": "fact", "content": "The quarterly board deck lives in the Zanzibar share",
        "confidence": 0.8, "importance": 0.5, "provenance": {"origin": "host"}, "evidenceRefs": [{"kind": "host", "id": "ctxk"}], "allowedSinks": ["model:*"]}]})).unwrap();
    let other = again["receipts"][0]["memory"]["memoryId"].clone();
    if other != json!(id) {
        call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": "2026-06-02T16:00:00Z", "memoryId": other, "action": "reject",
            "authority": admin(), "scope": "project", "scopeId": "web"})).unwrap();
    }
    assert_eq!(verify(&mut store)["ok"], true, "{}", verify(&mut store));
}

#[test]
fn a_deleted_fact_is_fenced_in_other_spellings_languages_and_embeddings() {
    let mut store = MemStore::default();
    let said = |store: &mut MemStore, seq: u64, text: &str| {
        let mut conv = Conv::new();
        conv.user(text);
        conv.items[0]["itemId"] = json!(format!("u{seq}"));
        // The first two before the deletions, the rest after.
        let now = if seq <= 2 { NOW } else { "2026-06-01T13:00:00Z" };
        conv.items[0]["createdAt"] = json!(now);
        call(store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": seq - 1}, "items": conv.items, "now": now})).unwrap();
    };
    said(&mut store, 1, "记住我的经理是Dana。我住在柏林。");
    said(&mut store, 2, "My favourite colour is teal, by the way.");
    let candidate = |content: &str, seq: u64, embedding: Option<[f32; 3]>| {
        let mut c = json!({"scope": "agent", "scopeId": "a", "category": "fact", "content": content, "confidence": 0.8, "importance": 0.5,
            "provenance": {"origin": "model"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": seq}]});
        if let Some(e) = embedding {
            c["embedding"] = json!(e);
        }
        c
    };
    let propose = |store: &mut MemStore, c: Value| call(store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "authority": admin(), "candidates": [c]}));
    let manager = propose(&mut store, candidate("The user's manager is Dana", 1, Some([0.9, 0.1, 0.0]))).unwrap();
    let colour = propose(&mut store, candidate("My favourite colour is teal", 2, None)).unwrap();
    for receipt in [&manager, &colour] {
        let id = receipt["receipts"][0]["memory"]["memoryId"].as_str().unwrap().to_string();
        let fence = call(&mut store, Command::Info, &json!({"schemaVersion": 1})).unwrap()["store"]["memoryRevision"].clone();
        call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": "2026-06-01T12:30:00Z", "requestId": format!("forget-{id}"),
            "subject": "ops", "scope": "agent", "scopeId": "a", "selector": {"memoryIds": [id]}, "authority": admin(), "fence": fence})).unwrap();
    }
    let fenced = |store: &mut MemStore, c: Value| {
        let err = propose(store, c.clone()).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict, "{c}: {}", err.message);
        err.message
    };
    // Another spelling of the same words.
    // Look-alike letters (Cyrillic `о`) and full-width forms included.
    for variant in ["My favorite color is teal", "my FAVORITE colour is teal!", "My favourite color is teal", "My favorite cоlor is teal", "My ｆavourite colour is teal"] {
        assert!(fenced(&mut store, candidate(variant, 2, None)).contains("deleted"), "{variant}");
    }
    // The fence is the scope's: the same words in another scope are another memory.
    let mut elsewhere = candidate("My favorite color is teal", 2, Some([0.9, 0.1, 0.0]));
    elsewhere["scopeId"] = json!("b");
    propose(&mut store, elsewhere).unwrap_or_else(|e| panic!("another scope: {}", e.message));
    // The same fact in other words, drawn from the message it was drawn from.
    for other in ["我的经理是Dana", "Dana manages the user", "經理：Dana"] {
        assert!(fenced(&mut store, candidate(other, 1, None)).contains("same message"), "{other}");
    }
    // In any words, where the host's embedding says it is the same.
    assert!(fenced(&mut store, candidate("Mein Chef heißt Dana", 2, Some([0.88, 0.12, 0.01]))).contains("embedding"));
    // Not fenced: another fact from the same message, another colour said
    // since, an unrelated embedding.
    said(&mut store, 3, "Actually, my favorite color is red now.");
    for (content, seq, embedding) in [
        ("我住在柏林", 1, None),
        ("The user's home is in Berlin", 1, None),
        ("My favorite color is red", 3, None),
        ("My wife's favorite color is red", 2, None),
        ("The office is in Lisbon", 2, Some([0.0, 0.2, 0.9])),
        // Close to the deleted embedding, but said since: new.
        ("The user's manager is Dana again", 3, Some([0.9, 0.1, 0.0])),
    ] {
        propose(&mut store, candidate(content, seq, embedding)).unwrap_or_else(|e| panic!("{content}: {}", e.message));
    }
    // The rules consolidator skips the deleted fact in the message it came from.
    let consolidated = call(&mut store, Command::ConsolidateMemory, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW,
        "strategy": "local", "scope": "agent", "scopeId": "a"})).unwrap();
    assert!(!consolidated.to_string().contains("Dana\""), "{consolidated}");
    // Said again after the deletion, it may be remembered again.
    said(&mut store, 4, "My favorite color is teal.");
    propose(&mut store, candidate("My favorite color is teal", 4, None)).unwrap();
}

#[test]
fn purge_and_read_see_every_tombstone_of_a_scope_however_many_the_store_holds() {
    let (mut store, id, _) = remembered();
    delete(&mut store, &id);
    // More tombstones of another scope than any one page or limit, all
    // sorting before this scope's.
    let filler = |n: u32| {
        let tomb = json!({"authority": "management", "deletedAt": NOW, "fence": 1, "memoryId": format!("0-{n:06}"), "purged": false,
            "requestId": "bulk", "revision": 1, "scope": "project", "scopeId": "other"});
        (format!("mem/tomb/0-{n:06}"), (1, serde_json::to_vec(&tomb).unwrap()))
    };
    store.entries.extend((0..100_001).map(filler));
    let read = call(&mut store, Command::ReadMemory, &json!({"schemaVersion": 1, "now": NOW, "scope": "project", "scopeId": "web"})).unwrap();
    assert_eq!(read["tombstones"].as_array().unwrap().len(), 1, "this scope's tombstone is listed");
    let receipt = purge(&mut store);
    assert_eq!((receipt["status"].clone(), receipt["targets"].clone()), (json!("purged"), json!([id])), "{receipt}");
    assert!(holding_words(&store).is_empty(), "{:?}", holding_words(&store));
}
