//! Memory at scale: a keyed read and a resident snapshot read what they
//! answer with, not the whole scope, and answer exactly what a pass over
//! every record of the scope answers — on generated scopes, on a store the
//! lookups were never written for, and on one whose lookups were tampered
//! with.

mod common;

use common::*;
use ctxkernel::store::{Entry, MemStore, PutError, Store};
use ctxkernel::{Command, Kernel};
use proptest::prelude::*;
use serde_json::{json, Value};

const LATER: &str = "2026-06-01T12:05:00Z";

/// A store that counts what the kernel reads from it: one per `get`, one
/// per entry a `scan` returns.
struct Counting<'s> {
    inner: &'s mut MemStore,
    reads: u64,
}

impl Store for Counting<'_> {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String> {
        self.reads += 1;
        self.inner.get(key)
    }
    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String> {
        let page = self.inner.scan(prefix, start_after, limit)?;
        self.reads += page.len() as u64 + 1;
        Ok(page)
    }
    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError> {
        self.inner.put(key, value, expected)
    }
    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError> {
        self.inner.remove(key, expected)
    }
}

/// The answer and the store reads of one command.
fn counted(store: &mut MemStore, command: Command, request: &Value) -> (Value, u64) {
    let mut counting = Counting { inner: store, reads: 0 };
    let text = Kernel::default().call(&mut counting, command, &request.to_string()).unwrap();
    (parse_canonical(&text), counting.reads)
}

fn admin() -> Value {
    json!({"kind": "management", "actor": "admin@example.org"})
}

fn memory(scope_id: &str, n: usize, importance: f64, confidence: f64) -> Value {
    json!({"scope": "project", "scopeId": scope_id, "category": "fact", "content": format!("fact number {n} about module m{n}"),
        "confidence": confidence, "importance": importance, "provenance": {"origin": "tool"}, "allowedSinks": ["model:*"], "evidenceRefs": [{"kind": "import", "id": "corpus"}],
        "key": format!("k{}", n % 50)})
}

fn propose(store: &mut MemStore, candidates: Vec<Value>) -> Vec<Value> {
    let request = json!({"schemaVersion": 1, "now": NOW, "authority": admin(), "candidates": candidates});
    call(store, Command::ProposeMemory, &request).unwrap()["receipts"].as_array().unwrap().clone()
}

fn keyed_read(key: &str) -> Value {
    json!({"schemaVersion": 1, "now": LATER, "scope": "project", "scopeId": "big", "key": key, "states": ["active", "reinforced", "superseded", "expired"]})
}

fn snapshot(max_tokens: u32, sink: &str) -> Value {
    json!({"schemaVersion": 1, "now": LATER, "scope": "project", "scopeId": "big", "sink": sink, "maxTokens": max_tokens})
}

/// The same store without its lookups' mark: every read falls back to the records.
fn unmarked(store: &MemStore) -> MemStore {
    let mut copy = store.clone();
    copy.entries.remove("mem/lookups");
    copy
}

/// Three thousand memories in one scope (and some beside it), a tenth of
/// them deleted.
fn big_store() -> MemStore {
    let mut store = MemStore::default();
    for batch in 0..3 {
        let candidates = (0..1000).map(|i| batch * 1000 + i).map(|n| memory("big", n, (n % 7) as f64 / 7.0, (n % 3) as f64 / 3.0)).collect();
        propose(&mut store, candidates);
    }
    propose(&mut store, (0..50).map(|n| memory("beside", n, 1.0, 1.0)).collect());
    let ids: Vec<String> = (0..300).map(|n| n * 10).map(|n| memory_id(&mut store, n)).collect();
    call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r", "subject": "u", "scope": "project",
        "scopeId": "big", "selector": {"memoryIds": ids}, "authority": admin(), "fence": 1})).unwrap();
    store
}

fn memory_id(store: &mut MemStore, n: usize) -> String {
    let read = call(store, Command::ReadMemory, &json!({"schemaVersion": 1, "now": NOW, "scope": "project", "scopeId": "big", "key": format!("k{}", n % 50)})).unwrap();
    let wanted = format!("fact number {n} about");
    let found = read["memories"].as_array().unwrap().iter().find(|m| m["record"]["content"].as_str().unwrap().starts_with(&wanted));
    found.unwrap()["record"]["memoryId"].as_str().unwrap().to_string()
}

#[test]
fn keyed_reads_and_snapshots_read_what_they_answer() {
    let mut store = big_store();
    let (read, reads) = counted(&mut store, Command::ReadMemory, &keyed_read("k7"));
    let shown = read["memories"].as_array().unwrap().len() as u64;
    let tombstones = read["tombstones"].as_array().unwrap().len() as u64;
    assert_eq!((shown, tombstones), (60, 300), "the slot's memories; the scope's tombstones");
    // Per memory: the slot entry, the record, its tombstone check; per link
    // to another memory (rivals for the slot), that memory's; per tombstone,
    // its entry and itself.
    let links: u64 = read["memories"].as_array().unwrap().iter().map(|m| m["record"]["conflictsWith"].as_array().map_or(0, Vec::len) as u64).sum();
    assert!(links > 0, "rivals for one slot are linked");
    assert!(reads <= 3 * shown + 2 * links + 2 * tombstones + 16, "a keyed read took {reads} store reads");
    let (slow, slow_reads) = counted(&mut unmarked(&store), Command::ReadMemory, &keyed_read("k7"));
    assert_eq!(read, slow, "the lookups answer what the records answer");
    assert!(slow_reads > 5_000, "the fall-back reads the whole scope ({slow_reads})");

    let (resident, reads) = counted(&mut store, Command::ResidentSnapshot, &snapshot(120, "model:test"));
    let included = resident["included"].as_array().unwrap().len() as u64;
    assert!(included >= 5, "{resident}");
    assert!(reads <= 64 + 2 * 64 + 16, "a snapshot of {included} took {reads} store reads");
    let (slow, _) = counted(&mut unmarked(&store), Command::ResidentSnapshot, &snapshot(120, "model:test"));
    assert_eq!(resident, slow);
}

#[test]
fn a_full_snapshot_looks_ahead_a_bounded_way() {
    let mut store = big_store();
    // Every budget leaves a different remainder too small for the next line,
    // which the walk looks past a bounded number of times, whatever the scope holds.
    for budget in 100..140 {
        let (resident, reads) = counted(&mut store, Command::ResidentSnapshot, &snapshot(budget, "model:test"));
        let included = resident["included"].as_array().unwrap().len() as u64;
        assert!(reads <= 4 * (included + 64) + 16, "a snapshot of {included} at {budget} took {reads} store reads");
        assert!(resident["tokens"].as_u64().unwrap() <= u64::from(budget));
        assert_eq!(resident, call(&mut unmarked(&store), Command::ResidentSnapshot, &snapshot(budget, "model:test")).unwrap());
    }
    // A long memory ranked first does not shut out the short ones after it.
    let mut long = memory("big", 9_999, 1.0, 1.0);
    long["content"] = json!(vec!["lengthy"; 400].join(" "));
    propose(&mut store, vec![long]);
    let resident = call(&mut store, Command::ResidentSnapshot, &snapshot(120, "model:test")).unwrap();
    assert!(resident["included"].as_array().unwrap().len() >= 5, "{resident}");
    assert!(!resident["text"].as_str().unwrap().contains("lengthy"), "{resident}");
}

#[test]
fn a_store_without_lookups_answers_the_same_and_gets_them_at_its_next_write() {
    let mut store = big_store();
    let before = (call(&mut store, Command::ResidentSnapshot, &snapshot(400, "model:test")).unwrap(), call(&mut store, Command::ReadMemory, &keyed_read("k3")).unwrap());
    // As a kernel that kept no lookups left it.
    store.entries.retain(|k, _| !k.starts_with("mem/rank/") && !k.starts_with("mem/tombs/") && k != "mem/lookups");
    let old = (call(&mut store, Command::ResidentSnapshot, &snapshot(400, "model:test")).unwrap(), call(&mut store, Command::ReadMemory, &keyed_read("k3")).unwrap());
    assert_eq!(before, old);
    let verify = call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(verify["ok"], json!(true), "lookups not kept are not required: {verify}");
    let seq: Value = serde_json::from_slice(&store.entries["meta/event-seq"].1).unwrap();
    propose(&mut store, vec![memory("elsewhere", 1, 0.5, 0.5)]);
    let events = call(&mut store, Command::ReadKernelEvents, &json!({"schemaVersion": 1, "afterSeq": seq["seq"], "typePrefix": "memory.lookups"})).unwrap();
    let rebuilt = &events["events"].as_array().unwrap()[0]["data"];
    assert_eq!((rebuilt["ranked"].as_u64(), rebuilt["tombstones"].as_u64()), (Some(2751), Some(300)), "the write's own memory too: {events}");
    let (mut after, reads) = counted(&mut store, Command::ResidentSnapshot, &snapshot(400, "model:test"));
    assert_eq!(after["memoryRevision"], json!(before.0["memoryRevision"].as_u64().unwrap() + 1));
    after["memoryRevision"] = before.0["memoryRevision"].clone();
    assert_eq!(after, before.0, "the new memory is in another scope");
    assert!(reads < 500, "the rebuilt ranking is read, not the scope ({reads})");
    let verify = call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(verify["ok"], json!(true), "{verify}");
}

#[test]
fn a_tampered_ranking_is_never_believed() {
    let mut store = big_store();
    let honest = call(&mut store, Command::ResidentSnapshot, &snapshot(400, "model:test")).unwrap();
    let first = honest["included"][0].as_str().unwrap().to_string();
    let ranked: Vec<String> = store.entries.keys().filter(|k| k.starts_with("mem/rank/project/big/")).cloned().collect();
    // The top entry points at a memory of the scope's tail.
    let mut tampered = store.clone();
    let tail = tampered.entries[ranked.last().unwrap()].clone();
    tampered.entries.insert(ranked[0].clone(), tail);
    assert_eq!(call(&mut tampered, Command::ResidentSnapshot, &snapshot(400, "model:test")).unwrap(), honest);
    // An entry that does not decode.
    let mut garbled = store.clone();
    garbled.entries.get_mut(&ranked[0]).unwrap().1 = b"\xff".to_vec();
    assert_eq!(call(&mut garbled, Command::ResidentSnapshot, &snapshot(400, "model:test")).unwrap(), honest);
    // A missing entry: reads cannot tell, verify-store does.
    let mut missing = store.clone();
    missing.entries.remove(&ranked[0]);
    let verify = call(&mut missing, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    let problem = &verify["problems"][0];
    assert_eq!((problem["kind"].as_str(), problem["memoryId"].as_str()), (Some("missing-link"), Some(first.as_str())), "{verify}");
    // A tombstone list naming a live memory is not believed either.
    let mut listed = store.clone();
    let live = format!("mem/tombs/project/big/{first}");
    listed.entries.insert(live.clone(), (1, json!({"memoryId": first}).to_string().into_bytes()));
    assert_eq!(call(&mut listed, Command::ReadMemory, &keyed_read("k3")).unwrap(), call(&mut store, Command::ReadMemory, &keyed_read("k3")).unwrap());
    let verify = call(&mut listed, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert!(verify["problems"].as_array().unwrap().iter().any(|p| p["key"] == json!(live) && p["kind"] == json!("dangling-link")), "{verify}");
}

/// One generated memory: its rank, state, sensitivity, sinks and validity.
#[derive(Debug, Clone)]
struct Shape {
    importance: f64,
    confidence: f64,
    action: Option<&'static str>,
    sensitivity: &'static str,
    sinks: &'static [&'static str],
    valid: Option<(&'static str, &'static str)>,
    words: usize,
}

fn shape() -> impl Strategy<Value = Shape> {
    // Few distinct ranks, so ties are common; the ends of the range included.
    let rank = prop_oneof![Just(0.0), Just(1.0), Just(0.5), (0u32..4).prop_map(|n| f64::from(n) / 3.0)];
    (
        rank.clone(),
        rank,
        prop_oneof![Just(None), Just(Some("expire")), Just(Some("archive")), Just(Some("reinforce"))],
        prop_oneof![Just("public"), Just("internal"), Just("personal"), Just("secret")],
        prop_oneof![Just(&["model:*"][..]), Just(&["model:other"][..]), Just(&["model:test", "log:*"][..])],
        prop_oneof![
            Just(None),
            Just(Some(("2026-06-01T12:10:00Z", "2026-06-02T00:00:00Z"))),
            Just(Some(("2026-01-01T00:00:00Z", "2026-06-01T12:04:00Z"))),
            Just(Some(("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"))),
        ],
        1usize..40,
    )
        .prop_map(|(importance, confidence, action, sensitivity, sinks, valid, words)| Shape { importance, confidence, action, sensitivity, sinks, valid, words })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the scope holds, the snapshot and keyed reads from the
    /// lookups are those from every record, for any budget and sink, after
    /// any transitions and a deletion.
    #[test]
    fn the_lookups_answer_what_the_records_answer(shapes in prop::collection::vec(shape(), 1..40), budget in 20u32..600, sink in prop_oneof![Just("model:test"), Just("model:other"), Just("log:x")], deleted in 0usize..40) {
        let mut store = MemStore::default();
        let candidates: Vec<Value> = shapes.iter().enumerate().map(|(n, s)| {
            let mut c = memory("big", n, s.importance, s.confidence);
            c["content"] = json!(format!("{n} {}", vec!["word"; s.words].join(" ")));
            c["sensitivity"] = json!(s.sensitivity);
            c["allowedSinks"] = json!(s.sinks);
            if let Some((from, to)) = s.valid {
                c["validFrom"] = json!(from);
                c["validTo"] = json!(to);
            }
            c
        }).collect();
        let receipts = propose(&mut store, candidates);
        // Neighbours whose scope ids look like this one's, ranked above everything.
        for neighbour in ["bi", "big/x", "big%2F", "big-", "bIg"] {
            propose(&mut store, vec![memory(neighbour, 0, 1.0, 1.0)]);
        }
        for (receipt, s) in receipts.iter().zip(&shapes) {
            let id = receipt["memory"]["memoryId"].as_str().unwrap();
            if let Some(action) = s.action {
                let request = json!({"schemaVersion": 1, "now": NOW, "memoryId": id, "action": action, "authority": admin(), "scope": "project", "scopeId": "big"});
                let _ = call(&mut store, Command::DecideMemory, &request);
            }
        }
        if let Some(receipt) = receipts.get(deleted) {
            call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r", "subject": "u", "scope": "project",
                "scopeId": "big", "selector": {"memoryIds": [receipt["memory"]["memoryId"]]}, "authority": admin(), "fence": 1})).unwrap();
        }
        let mut request = snapshot(budget, sink);
        let fast = call(&mut store, Command::ResidentSnapshot, &request).unwrap();
        prop_assert_eq!(&fast, &call(&mut unmarked(&store), Command::ResidentSnapshot, &request).unwrap());
        request["now"] = json!("2026-06-01T12:30:00Z");
        prop_assert_eq!(call(&mut store, Command::ResidentSnapshot, &request).unwrap(), call(&mut unmarked(&store), Command::ResidentSnapshot, &request).unwrap());
        let mut whole = keyed_read("k0");
        whole.as_object_mut().unwrap().remove("key");
        let whole = call(&mut store, Command::ReadMemory, &whole).unwrap();
        for key in ["k0", "k1", "k9"] {
            let read = call(&mut store, Command::ReadMemory, &keyed_read(key)).unwrap();
            prop_assert_eq!(&read, &call(&mut unmarked(&store), Command::ReadMemory, &keyed_read(key)).unwrap());
            let in_slot: Vec<&Value> = whole["memories"].as_array().unwrap().iter().filter(|m| m["record"]["key"] == json!(key)).collect();
            prop_assert_eq!(read["memories"].as_array().unwrap().iter().collect::<Vec<_>>(), in_slot);
            prop_assert_eq!(&read["tombstones"], &whole["tombstones"]);
        }
        prop_assert_eq!(call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap()["ok"].clone(), json!(true));
    }
}

#[test]
fn a_keyed_delete_does_not_trust_the_slot() {
    let mut store = MemStore::default();
    propose(&mut store, vec![memory("big", 7, 0.5, 0.5)]);
    // A partial restore lost the slot entry; the scope's membership still names the memory.
    store.entries.retain(|k, _| !k.starts_with("mem/slot/"));
    let receipt = call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r", "subject": "u", "scope": "project",
        "scopeId": "big", "selector": {"key": "k7"}, "authority": admin(), "fence": 1})).unwrap();
    assert_eq!(receipt["matched"], json!(1), "{receipt}");
}

fn recall(query: &str, scope_ids: &[&str], embedding: Option<Vec<f32>>) -> Value {
    let scopes: Vec<Value> = scope_ids.iter().map(|id| json!({"scope": "project", "scopeId": id})).collect();
    let mut request = json!({"schemaVersion": 1, "now": LATER, "query": query, "scopes": scopes, "sink": "model:test", "k": 8});
    if let Some(embedding) = embedding {
        request["queryEmbedding"] = json!(embedding);
    }
    request
}

/// How many rivals for their slots a recall's results have.
fn rivals(recalled: &Value) -> usize {
    recalled["memories"].as_array().unwrap().iter().map(|m| m["conflicts"].as_array().unwrap().len()).sum()
}

/// The store as a kernel that kept no postings left it: the mark says an
/// older layout, so every term vector is loaded.
fn older_layout(store: &MemStore) -> MemStore {
    let mut copy = store.clone();
    if let Some((_, revision)) = copy.entries.get("meta/memory-revision") {
        let revision: Value = serde_json::from_slice(revision).unwrap();
        copy.entries.insert("mem/lookups".into(), (1, json!({"revision": revision["revision"]}).to_string().into_bytes()));
    }
    copy.entries.retain(|k, _| !k.starts_with("mem/idx/term/") && !k.starts_with("mem/idx/stat/"));
    copy
}

#[test]
fn a_fresh_recall_reads_its_terms_not_the_scope() {
    let mut store = big_store();
    // "1234" is in one memory; "fact", "module" and the "m" of "m1234" in every one.
    for query in ["1234", "1234 m1234", "fact number 1234", "module"] {
        let (fresh, reads) = counted(&mut store, Command::RecallMemory, &recall(query, &["big"], None));
        assert!(!fresh["memories"].as_array().unwrap().is_empty(), "{query}: {fresh}");
        let (whole, whole_reads) = counted(&mut older_layout(&store), Command::RecallMemory, &recall(query, &["big"], None));
        assert_eq!(fresh, whole, "{query}: postings by term answer what every vector answers");
        assert!(whole_reads > 2_750, "a whole load reads every vector ({whole_reads})");
        // Each of its terms' postings, each memory they name once, and the
        // results' records with their rivals for the slot.
        let named: Vec<&String> = ctxkernel::index::terms(query)
            .iter()
            .flat_map(|term| store.entries.range(ctxkernel::index::term_prefix(ctxkernel::contracts::Scope::Project, &Some("big".into()), term)..).take_while(move |(k, _)| k.starts_with(&ctxkernel::index::term_prefix(ctxkernel::contracts::Scope::Project, &Some("big".into()), term))).map(|(k, _)| k))
            .collect();
        let memories = named.iter().map(|k| k.rsplit('/').next().unwrap()).collect::<std::collections::BTreeSet<_>>().len();
        assert!(reads as usize <= named.len() + memories + 2 * rivals(&fresh) + 100, "{query}: a fresh recall took {reads} store reads for {} postings", named.len());
    }
    // A warm instance reads what it holds from nothing but the change log.
    let mut kernel = Kernel::default();
    let mut counting = Counting { inner: &mut store, reads: 0 };
    kernel.call(&mut counting, Command::RecallMemory, &recall("m1234", &["big"], None).to_string()).unwrap();
    let first = counting.reads;
    kernel.call(&mut counting, Command::RecallMemory, &recall("m1234", &["big"], None).to_string()).unwrap();
    assert!(counting.reads - first < first / 2, "the second recall read {} of the first's {first}", counting.reads - first);
}

#[test]
fn a_store_of_an_older_layout_is_read_whole_and_gets_its_postings_at_its_next_write() {
    let mut store = older_layout(&big_store());
    let before = call(&mut store, Command::RecallMemory, &recall("77 7", &["big", "beside"], None)).unwrap();
    let verify = call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(verify["ok"], json!(true), "postings not kept are not required: {verify}");
    let seq: Value = serde_json::from_slice(&store.entries["meta/event-seq"].1).unwrap();
    propose(&mut store, vec![memory("elsewhere", 1, 0.5, 0.5)]);
    let events = call(&mut store, Command::ReadKernelEvents, &json!({"schemaVersion": 1, "afterSeq": seq["seq"], "typePrefix": "memory.lookups"})).unwrap();
    let rebuilt = &events["events"].as_array().unwrap()[0]["data"];
    assert!(rebuilt["postings"].as_u64().unwrap() > 2_750 * 5, "{events}");
    let (mut after, reads) = counted(&mut store, Command::RecallMemory, &recall("77 7", &["big", "beside"], None));
    after["memoryRevision"] = before["memoryRevision"].clone();
    assert_eq!(after, before);
    assert!(reads < 3 * rivals(&after) as u64 + 100, "the rebuilt postings are read, not every vector ({reads}, {} rivals)", rivals(&after));
    let verify = call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert_eq!(verify["ok"], json!(true), "{verify}");
}

#[test]
fn postings_that_disagree_with_the_vectors_are_named_and_never_widen_a_recall() {
    let mut store = MemStore::default();
    propose(&mut store, (0..20).map(|n| memory("big", n, 0.5, 0.5)).collect());
    propose(&mut store, (0..20).map(|n| memory("beside", n, 0.5, 0.5)).collect());
    let honest = call(&mut store, Command::RecallMemory, &recall("fact", &["big"], None)).unwrap();
    let postings: Vec<String> = store.entries.keys().filter(|k| k.starts_with("mem/idx/term/project/big/")).cloned().collect();
    let beside: Vec<String> = store.entries.keys().filter(|k| k.starts_with("mem/idx/term/project/beside/fact/")).cloned().collect();
    // A posting in the admitted scope that points at a memory of another scope.
    let mut crossed = store.clone();
    let foreign = crossed.entries[&beside[0]].clone();
    crossed.entries.insert("mem/idx/term/project/big/fact/zz-foreign".into(), foreign);
    let recalled = call(&mut crossed, Command::RecallMemory, &recall("fact", &["big"], None)).unwrap();
    assert_eq!(recalled, honest, "another scope's memory is never scored here");
    let verify = call(&mut crossed, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    assert!(verify["problems"].as_array().unwrap().iter().any(|p| p["kind"] == json!("dangling-index-entry")), "{verify}");
    // A missing posting and a wrong statistic are named by key.
    let mut damaged = store.clone();
    damaged.entries.remove(&postings[0]);
    damaged.entries.insert("mem/idx/stat/project/big".into(), (1, json!({"docs": 3, "length": 9}).to_string().into_bytes()));
    let verify = call(&mut damaged, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap();
    let named: Vec<(&str, &str)> = verify["problems"].as_array().unwrap().iter().map(|p| (p["kind"].as_str().unwrap(), p["key"].as_str().unwrap())).collect();
    assert!(named.contains(&("stale-index-entry", postings[0].as_str())), "{verify}");
    assert!(named.contains(&("stale-index-entry", "mem/idx/stat/project/big")), "{verify}");
    // An undecodable statistic is a typed failure, and the store is unchanged.
    let mut garbled = store.clone();
    garbled.entries.get_mut("mem/idx/stat/project/big").unwrap().1 = b"\xff".to_vec();
    let before = garbled.entries.clone();
    let error = call(&mut garbled, Command::RecallMemory, &recall("fact", &["big"], None)).unwrap_err();
    assert_eq!(error.code, ctxkernel::error::ErrorCode::StorageFailure, "{error:?}");
    assert_eq!(garbled.entries, before);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Whatever the scopes hold and however they changed, a recall answers
    /// the same from a fresh instance (postings by term), from one instance
    /// kept warm across every write (held lists caught up from the change
    /// log), and from every term vector loaded at once.
    #[test]
    fn recall_answers_alike_fresh_warm_and_whole(
        shapes in prop::collection::vec(shape(), 1..30),
        words in prop::collection::vec(prop_oneof![Just("alpha"), Just("beta"), Just("gamma"), Just("deploy"), Just("Tuesday"), Just("名前"), Just("x_y")], 1..6),
        queries in prop::collection::vec(prop::collection::vec(prop_oneof![Just("alpha"), Just("beta"), Just("gamma"), Just("deploy"), Just("tuesday"), Just("名前"), Just("y"), Just("nothing")], 1..4), 1..4),
        hybrid in any::<bool>(),
        deleted in 0usize..30,
    ) {
        let mut store = MemStore::default();
        let mut warm = Kernel::default();
        let ask = |query: &Vec<&str>, scopes: &[&str]| recall(&query.join(" "), scopes, hybrid.then(|| vec![0.5, -0.25, 1.0]));
        let check = |store: &mut MemStore, warm: &mut Kernel| -> Result<(), TestCaseError> {
            for query in &queries {
                for scopes in [&["big"][..], &["big", "beside"][..]] {
                    let request = ask(query, scopes);
                    let fresh = call(store, Command::RecallMemory, &request).unwrap();
                    let kept = parse_canonical(&warm.call(store, Command::RecallMemory, &request.to_string()).unwrap());
                    prop_assert_eq!(&fresh, &kept);
                    prop_assert_eq!(&fresh, &call(&mut older_layout(store), Command::RecallMemory, &request).unwrap());
                }
            }
            Ok(())
        };
        check(&mut store, &mut warm)?;
        let candidates: Vec<Value> = shapes.iter().enumerate().map(|(n, s)| {
            let mut c = memory(if n % 3 == 0 { "beside" } else { "big" }, n, s.importance, s.confidence);
            c["content"] = json!(format!("{n} {}", words.iter().cycle().skip(n).take(s.words % 7 + 1).copied().collect::<Vec<_>>().join(" ")));
            c["sensitivity"] = json!(s.sensitivity);
            c["allowedSinks"] = json!(s.sinks);
            if n % 2 == 0 {
                c["embedding"] = json!([(n % 5) as f32 - 2.0, 1.0, (n % 3) as f32]);
            }
            if let Some((from, to)) = s.valid {
                c["validFrom"] = json!(from);
                c["validTo"] = json!(to);
            }
            c
        }).collect();
        let (first, second) = candidates.split_at(candidates.len() / 2);
        let mut receipts = if first.is_empty() { Vec::new() } else { propose(&mut store, first.to_vec()) };
        check(&mut store, &mut warm)?;
        receipts.extend(propose(&mut store, second.to_vec()));
        for (receipt, s) in receipts.iter().zip(&shapes) {
            let memory = &receipt["memory"];
            if let Some(action) = s.action {
                let request = json!({"schemaVersion": 1, "now": NOW, "memoryId": memory["memoryId"], "action": action, "authority": admin(), "scope": "project", "scopeId": memory["scopeId"]});
                let _ = call(&mut store, Command::DecideMemory, &request);
            }
        }
        check(&mut store, &mut warm)?;
        if let Some(receipt) = receipts.get(deleted) {
            let memory = &receipt["memory"];
            call(&mut store, Command::DeleteMemory, &json!({"schemaVersion": 1, "now": NOW, "requestId": "r", "subject": "u", "scope": "project",
                "scopeId": memory["scopeId"], "selector": {"memoryIds": [memory["memoryId"]]}, "authority": admin(), "fence": 1})).unwrap();
        }
        check(&mut store, &mut warm)?;
        prop_assert_eq!(call(&mut store, Command::VerifyStore, &json!({"schemaVersion": 1})).unwrap()["ok"].clone(), json!(true));
    }
}
