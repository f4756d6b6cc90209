//! Session event logs and the command envelope, natively.

mod common;

use common::*;
use ctxkernel::store::MemStore;
use ctxkernel::{Command, ErrorCode, Kernel};
use serde_json::{json, Value};

fn append(store: &mut MemStore, items: &[Value], expected: Value) -> Result<Value, ctxkernel::KernelError> {
    call(store, Command::AppendEvents, &json!({
        "schemaVersion": 1, "sessionId": "s/1 会话", "expectedHead": expected, "items": items, "now": NOW
    }))
}

fn session_plan(kernel: &mut Kernel, store: &mut MemStore, window: u64) -> Result<Value, ctxkernel::KernelError> {
    let request = json!({"schemaVersion": 1, "now": NOW, "model": model(window), "sink": "model:test", "sessionId": "s/1 会话"});
    kernel.call(store, Command::PlanContext, &request.to_string()).map(|t| parse_canonical(&t))
}

#[test]
fn appends_chain_and_read_back() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("hello");
    conv.assistant("hi");
    for item in &mut conv.items {
        item.as_object_mut().unwrap().remove("itemId");
    }
    let first = append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    assert_eq!(first["head"]["seq"], 2);
    let ids: Vec<&str> = first["appended"].as_array().unwrap().iter().map(|a| a["itemId"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|id| id.starts_with("it-")) && ids[0] != ids[1]);
    // Same content again: new ids (derived with the sequence number), same chain rules.
    let second = append(&mut store, &conv.items, json!({"seq": 2, "digest": first["head"]["digest"]})).unwrap();
    assert_eq!(second["head"]["seq"], 4);
    assert_ne!(second["appended"][0]["itemId"], first["appended"][0]["itemId"]);

    let read = call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": "s/1 会话", "afterSeq": 1, "limit": 2})).unwrap();
    let seqs: Vec<u64> = read["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(read["more"], true);
    assert_eq!(read["head"], second["head"]);
    assert!(store.entries.keys().all(|k| k.is_ascii()), "keys stay ASCII for any session id");
}

#[test]
fn a_stale_head_is_refused_with_the_current_head() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("one");
    let head = append(&mut store, &conv.items, json!({"seq": 0})).unwrap()["head"].clone();
    let before = store.entries.clone();
    let mut other = Conv::new();
    other.user("two");
    other.items[0]["itemId"] = json!("other-1");
    for expected in [json!({"seq": 0}), json!({"seq": 1, "digest": format!("sha256:{}", "0".repeat(64))})] {
        let err = append(&mut store, &other.items, expected).unwrap_err();
        assert_eq!(err.code, ErrorCode::Stale);
        assert_eq!(err.detail["currentHead"], head);
    }
    assert_eq!(store.entries, before, "a refused append writes nothing");
}

#[test]
fn item_ids_are_unique_within_a_session() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("one");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let before = store.entries.clone();
    let mut again = Conv::new();
    again.user("fresh");
    again.user("same id as before");
    again.items[0]["itemId"] = json!("fresh-1");
    again.items[1]["itemId"] = json!("i0001");
    let err = append(&mut store, &again.items, json!({"seq": 1})).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert!(err.message.contains("already event 1"), "{}", err.message);
    assert_eq!(store.entries, before, "no half-written batch");
}

#[test]
fn a_second_instance_sees_new_events_incrementally() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("first");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let mut reader = Kernel::default();
    let plan1 = session_plan(&mut reader, &mut store, 5_000).unwrap();
    assert_eq!(plan1["context"].as_array().unwrap().len(), 1);
    // Another host (another kernel instance) appends.
    let mut more = Conv::new();
    more.user("x");
    more.user("second");
    more.items[0]["itemId"] = json!("m-1");
    more.items[1]["itemId"] = json!("m-2");
    append(&mut store, &more.items, json!({"seq": 1})).unwrap();
    let plan2 = session_plan(&mut reader, &mut store, 5_000).unwrap();
    assert_eq!(plan2["binding"]["sessionHead"]["seq"], 3);
    assert_eq!(plan2["context"].as_array().unwrap().len(), 3);
    // A fresh instance agrees byte for byte with the incrementally updated one.
    let fresh = session_plan(&mut Kernel::default(), &mut store, 5_000).unwrap();
    assert_eq!(fresh, plan2);
}

#[test]
fn tampered_or_garbage_events_are_reported_not_trusted() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("the original words");
    conv.assistant("reply");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let key = store.entries.keys().find(|k| k.contains("/ev/") && k.ends_with('1')).unwrap().clone();

    let mut tampered = store.clone();
    let (rev, bytes) = tampered.entries.get(&key).unwrap().clone();
    let text = String::from_utf8(bytes).unwrap().replace("the original words", "words an attacker wrote");
    tampered.entries.insert(key.clone(), (rev, text.into_bytes()));
    let err = session_plan(&mut Kernel::default(), &mut tampered, 5_000).unwrap_err();
    assert_eq!(err.code, ErrorCode::DigestMismatch);

    let mut garbage = store.clone();
    garbage.entries.insert(key, (rev, vec![0xff, 0x00, 0x7b]));
    let err = session_plan(&mut Kernel::default(), &mut garbage, 5_000).unwrap_err();
    assert_eq!(err.code, ErrorCode::StorageFailure);
}

#[test]
fn bad_envelopes_are_typed_errors_and_change_nothing() {
    let mut store = MemStore::default();
    let mut conv = Conv::new();
    conv.user("seed");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let before = store.entries.clone();
    let good = json!({"schemaVersion": 1, "sessionId": "s/1 会话", "expectedHead": {"seq": 1}, "items": conv.items, "now": NOW});
    let mut wrong_type = good.clone();
    wrong_type["items"][0]["trust"] = json!("very-trusted");
    let mut item_v2 = good.clone();
    item_v2["items"][0]["schemaVersion"] = json!(2);
    item_v2["items"][0]["futureField"] = json!(true);
    let mut envelope_v9 = good.clone();
    envelope_v9["schemaVersion"] = json!(9);
    let mut unknown_field = good.clone();
    unknown_field["expectedHaed"] = json!({"seq": 1});
    let mut bad_time = good.clone();
    bad_time["now"] = json!("yesterday");
    let cases: Vec<(String, ErrorCode, &str)> = vec![
        ("{not json".into(), ErrorCode::InvalidRequest, "not valid JSON"),
        (format!("{good} trailing"), ErrorCode::InvalidRequest, "not valid JSON"),
        (wrong_type.to_string(), ErrorCode::InvalidRequest, "items[0].trust"),
        (item_v2.to_string(), ErrorCode::UnsupportedSchema, "schemaVersion 2"),
        (envelope_v9.to_string(), ErrorCode::UnsupportedSchema, "schemaVersion 9"),
        (unknown_field.to_string(), ErrorCode::InvalidRequest, "expectedHaed"),
        (bad_time.to_string(), ErrorCode::InvalidRequest, "RFC 3339"),
        ("\"just a string\"".into(), ErrorCode::InvalidRequest, ""),
        (format!("{{\"pad\":\"{}\"}}", "x".repeat(65 << 20)), ErrorCode::LimitExceeded, "ceiling"),
    ];
    for (request, code, needle) in cases {
        let err = Kernel::default().call(&mut store, Command::AppendEvents, &request).unwrap_err();
        assert_eq!(err.code, code, "{}", &request[..request.len().min(120)]);
        assert!(err.message.contains(needle), "`{}` lacks `{needle}`", err.message);
    }
    assert_eq!(store.entries, before);
}

#[test]
fn info_reports_the_store_revision() {
    let mut store = MemStore::default();
    let info = call(&mut store, Command::Info, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(info["store"]["revision"], 0);
    assert_eq!(info["commands"].as_array().unwrap().len(), Command::ALL.len());
    let mut conv = Conv::new();
    conv.user("x");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let info = call(&mut store, Command::Info, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(info["store"]["revision"], 1);
    assert_eq!(store.entries.get("meta/format").map(|(_, v)| v.as_slice()), Some(&br#"{"kernel":"ctxkernel","schemaVersion":1}"#[..]));
}

#[test]
fn a_stored_session_withholds_what_inline_items_would() {
    // A stored session decides each distinct sink policy once; the verdicts
    // must be the ones each item's own policy gives, for every sink asked.
    let mut conv = Conv::new();
    conv.user("start");
    conv.push("tool-evidence", "debug dump", json!({"allowedSinks": ["log"]}));
    conv.push("tool-evidence", "token=abc", json!({"sensitivity": "secret", "allowedSinks": ["*"]}));
    conv.push("tool-evidence", "token=def", json!({"sensitivity": "secret", "allowedSinks": ["model:test"]}));
    conv.push("tool-evidence", "internal, anywhere", json!({"allowedSinks": ["*"]}));
    conv.push("tool-evidence", "same grant, secret", json!({"sensitivity": "secret", "allowedSinks": ["log"]}));
    conv.user("go on");
    let mut store = MemStore::default();
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();
    let mut kernel = Kernel::default();
    let decisions = |plan: &Value| -> Vec<(String, String)> {
        let kept = plan["context"].as_array().unwrap().iter().map(|p| (p["itemId"].to_string(), "kept".to_string()));
        let dropped = plan["dropped"].as_array().unwrap().iter().map(|d| (d["itemId"].to_string(), d["reason"].to_string()));
        let mut all: Vec<_> = kept.chain(dropped).collect();
        all.sort();
        all
    };
    for sink in ["model:test", "log", "model:other", "model:test"] {
        let mut request = request(&conv.items, 10_000);
        request["sink"] = json!(sink);
        let inline = plan_value(&request).unwrap();
        request.as_object_mut().unwrap().remove("items");
        request["sessionId"] = json!("s/1 会话");
        let stored = parse_canonical(&kernel.call(&mut store, Command::PlanContext, &request.to_string()).unwrap());
        assert_eq!(decisions(&stored), decisions(&inline), "sink {sink}");
        assert!(decisions(&stored).iter().any(|(_, d)| d == "\"sink-denied\""), "sink {sink}");
    }
}

#[test]
fn a_shrunk_result_is_served_back_by_the_digest_its_placeholder_shows() {
    let mut store = MemStore::default();
    let mut kernel = Kernel::default();
    let mut conv = Conv::new();
    // More than a page of events before the results, so the walk crosses pages.
    for n in 0..300 {
        conv.user(&format!("note {n}"));
    }
    let big = words(3_000);
    conv.user("Look at both logs.");
    conv.call("Reading both.", &["c_big", "c_same"]);
    let first = conv.result("c_big", &big, "success");
    let second = conv.result("c_same", &big, "success");
    conv.assistant(&words(200));
    conv.user("What did they say?");
    append(&mut store, &conv.items, json!({"seq": 0})).unwrap();

    let plan = session_plan(&mut kernel, &mut store, 2_000).unwrap();
    let shrunk = plan["context"].as_array().unwrap().iter().find(|p| p["itemId"] == first.as_str()).unwrap();
    let digest = shrunk["shrunk"]["digest"].as_str().expect("the large result is shrunk").to_string();
    assert!(shrunk["item"]["content"].as_str().unwrap().contains(&digest));
    let before = store.entries.clone();

    let read = |store: &mut MemStore, extra: Value| {
        let mut request = json!({"schemaVersion": 1, "sessionId": "s/1 会话", "contentDigest": digest});
        request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        call(store, Command::ReadEvents, &request)
    };
    let all = read(&mut store, json!({})).unwrap();
    let found: Vec<(&str, &str)> = all["events"].as_array().unwrap().iter()
        .map(|e| (e["item"]["itemId"].as_str().unwrap(), e["item"]["content"].as_str().unwrap())).collect();
    assert_eq!(found, [(first.as_str(), big.as_str()), (second.as_str(), big.as_str())], "both results holding that content, in order");
    assert_eq!(all["more"], false);
    // `limit` counts what is returned; the walk goes on from the last one.
    let one = read(&mut store, json!({"limit": 1})).unwrap();
    assert_eq!((one["events"].as_array().unwrap().len(), &one["more"]), (1, &json!(true)));
    let next = read(&mut store, json!({"limit": 1, "afterSeq": one["events"][0]["seq"]})).unwrap();
    assert_eq!(next["events"][0]["item"]["itemId"], second.as_str());
    // A digest nothing holds finds nothing; a malformed one is refused by name.
    let none = call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": "s/1 会话", "contentDigest": ctxkernel::canonical::digest_bytes(b"other")})).unwrap();
    assert_eq!((none["events"].as_array().unwrap().len(), &none["more"]), (0, &json!(false)));
    for bad in [json!("sha256:ABC"), json!(digest.to_uppercase()), json!(""), json!(7), json!(format!("{digest}\u{200b}"))] {
        let err = call(&mut store, Command::ReadEvents, &json!({"schemaVersion": 1, "sessionId": "s/1 会话", "contentDigest": bad})).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad}");
        assert!(err.message.contains("contentDigest"), "{bad}: {}", err.message);
        assert_eq!(err.detail["path"], "contentDigest", "{bad}");
    }
    assert_eq!(store.entries, before, "reading writes nothing");
}
