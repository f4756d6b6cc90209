//! Memory benchmarks and the recall evaluation, through the component on the
//! embedded SQLite store, with SQLite FTS5 `bm25()` as the baseline on the
//! same corpus in the same run.
//!
//! Sections: `recall-eval` (hit@1 / hit@5 on labelled queries; `make eval`)
//! and `memory` (writes, recall latency, index load and rebuild, deletion
//! until settled; `make bench`).

mod common;
mod corpus;

use common::{ms, percentiles};
use corpus::{Corpus, Query};
use ctxkernel_host::{Kernel, MemoryStore, Runtime, SqliteStore};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

const NOW: &str = "2026-06-01T12:00:00Z";
const SCOPE: &str = "eval";

fn scopes() -> Value {
    json!([{"scope": "project", "scopeId": SCOPE}])
}

/// Writes the corpus through the component, 1000 records per call, active at
/// once (management authority); returns each record's memory id.
fn load(kernel: &mut Kernel, corpus: &Corpus) -> Vec<String> {
    let mut ids = Vec::with_capacity(corpus.records.len());
    for batch in corpus.records.chunks(1000) {
        let candidates: Vec<Value> = batch
            .iter()
            .map(|r| {
                json!({"scope": "project", "scopeId": SCOPE, "category": "fact", "key": r.key, "content": r.content,
                    "validFrom": r.valid_from, "confidence": 0.8, "importance": 0.5, "provenance": {"origin": "import"},
                    "evidenceRefs": [{"kind": "import", "id": "corpus"}], "allowedSinks": ["model:*"]})
            })
            .collect();
        let request = json!({"schemaVersion": 1, "now": NOW, "authority": {"kind": "management", "actor": "bench"}, "candidates": candidates});
        let response = kernel.propose_memory(&request).unwrap();
        for receipt in response["receipts"].as_array().unwrap() {
            ids.push(receipt["memory"]["memoryId"].as_str().unwrap().to_string());
        }
    }
    ids
}

fn recall_request(query: &str) -> String {
    json!({"schemaVersion": 1, "now": NOW, "query": query, "scopes": scopes(), "sink": "model:bench", "k": 5}).to_string()
}

fn kernel_top(kernel: &mut Kernel, query: &str) -> Vec<String> {
    let response: Value = serde_json::from_str(&kernel.call("recall-memory", &recall_request(query)).unwrap()).unwrap();
    response["memories"].as_array().unwrap().iter().map(|m| m["memoryId"].as_str().unwrap().to_string()).collect()
}

/// SQLite FTS5 over every stored memory text, ranked by `bm25()`: a plain
/// FTS5 memory table, with no lifecycle, so superseded facts stay searchable.
struct Fts5 {
    db: Connection,
    trigram: bool,
}

impl Fts5 {
    fn new(corpus: &Corpus, tokenizer: &str) -> Fts5 {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(&format!("CREATE VIRTUAL TABLE memories USING fts5(body, tokenize = '{tokenizer}');")).unwrap();
        let tx = db.unchecked_transaction().unwrap();
        {
            let mut insert = tx.prepare("INSERT INTO memories(rowid, body) VALUES (?1, ?2)").unwrap();
            for (i, record) in corpus.records.iter().enumerate() {
                insert.execute(rusqlite::params![i as i64, record.content]).unwrap();
            }
        }
        tx.commit().unwrap();
        Fts5 { db, trigram: tokenizer == "trigram" }
    }

    /// The query as an FTS5 OR-expression of its words: what a host that
    /// hands user text to FTS5 does. The trigram tokenizer needs terms of at
    /// least three characters; a run of CJK becomes its overlapping trigrams.
    fn expression(&self, query: &str) -> Option<String> {
        let mut terms = Vec::new();
        for word in query.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
            let chars: Vec<char> = word.chars().collect();
            if !self.trigram {
                terms.push(word.to_string());
            } else if chars.len() >= 3 && chars.iter().any(|c| !c.is_ascii()) {
                terms.extend(chars.windows(3).map(|w| w.iter().collect::<String>()));
            } else if chars.len() >= 3 {
                terms.push(word.to_string());
            }
        }
        (!terms.is_empty()).then(|| terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR "))
    }

    fn top(&self, query: &str) -> Vec<usize> {
        let Some(expression) = self.expression(query) else { return Vec::new() };
        let mut statement = self.db.prepare_cached("SELECT rowid FROM memories WHERE memories MATCH ?1 ORDER BY bm25(memories) LIMIT 5").unwrap();
        statement.query_map([expression], |row| row.get::<_, i64>(0)).unwrap().map(|r| r.unwrap() as usize).collect()
    }
}

#[derive(Default, Clone, Copy)]
struct Hits {
    at1: usize,
    at5: usize,
    total: usize,
}

impl Hits {
    fn add(&mut self, position: Option<usize>) {
        self.total += 1;
        self.at1 += usize::from(position == Some(0));
        self.at5 += usize::from(position.is_some_and(|p| p < 5));
    }

    fn cell(&self) -> String {
        let pct = |n: usize| 100.0 * n as f64 / self.total.max(1) as f64;
        format!("{:.1}% / {:.1}%", pct(self.at1), pct(self.at5))
    }
}

fn evaluation() -> String {
    let corpus = Corpus::generate(2100, 260);
    let runtime = Runtime::new().unwrap();
    let mut kernel = Kernel::with_runtime(runtime, MemoryStore::new());
    let ids = load(&mut kernel, &corpus);
    let systems = ["ctxkernel", "FTS5 trigram", "FTS5 unicode61"];
    let (trigram, unicode) = (Fts5::new(&corpus, "trigram"), Fts5::new(&corpus, "unicode61"));
    let mut table: BTreeMap<&str, [Hits; 3]> = BTreeMap::new();
    let mut overall = [Hits::default(); 3];
    let superseded: Vec<&String> = ids.iter().zip(&corpus.records).filter(|(_, r)| r.superseded).map(|(id, _)| id).collect();
    let mut superseded_won = 0;
    for Query { text, kind, answer } in &corpus.queries {
        let found = kernel_top(&mut kernel, text);
        superseded_won += usize::from(found.first().is_some_and(|top| superseded.contains(&top)));
        let positions = [
            found.iter().position(|id| *id == ids[*answer]),
            trigram.top(text).iter().position(|i| i == answer),
            unicode.top(text).iter().position(|i| i == answer),
        ];
        if std::env::var_os("CTXK_EVAL_MISSES").is_some() && positions[0] != Some(0) {
            let got = found.first().and_then(|id| ids.iter().position(|x| x == id)).map_or("nothing", |i| corpus.records[i].content.as_str());
            eprintln!("miss [{kind}] {text}\n  want: {}\n  got:  {got}", corpus.records[*answer].content);
        }
        let row = table.entry(kind).or_default();
        for (s, position) in positions.into_iter().enumerate() {
            row[s].add(position);
            overall[s].add(position);
        }
    }
    let mut out = format!(
        "{} records ({} superseded), {} labelled queries; each cell is hit@1 / hit@5. The kernel runs lexical-only \
         (no embeddings); FTS5 indexes every record's text, as a plain FTS5 memory table does. `*-synonym` queries \
         use words the answer does not contain; only a vector channel (host embeddings) can close that gap.\n\n| queries | n | {} |\n|---|---:|---:|---:|---:|\n",
        corpus.records.len(),
        corpus.records.iter().filter(|r| r.superseded).count(),
        corpus.queries.len(),
        systems.join(" | ")
    );
    for (kind, row) in &table {
        out.push_str(&format!("| {kind} | {} | {} |\n", row[0].total, row.iter().map(Hits::cell).collect::<Vec<_>>().join(" | ")));
    }
    out.push_str(&format!("| **all** | {} | {} |\n", overall[0].total, overall.iter().map(|h| format!("**{}**", h.cell())).collect::<Vec<_>>().join(" | ")));
    out.push_str(&format!("\nA superseded fact ranked first for {superseded_won} of {} queries.\n", corpus.queries.len()));
    out
}

fn temp_store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ctxk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn open(runtime: &Runtime, path: &Path) -> Kernel {
    Kernel::with_runtime(runtime.clone(), SqliteStore::open(path).unwrap())
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed().as_secs_f64() * 1e3)
}

/// Deletes `ids` with one pending replica, then settles the replica.
fn delete_until_settled(kernel: &mut Kernel, ids: &[String], request_id: &str) {
    let deletion = kernel
        .delete_memory(&json!({"schemaVersion": 1, "now": NOW, "requestId": request_id, "subject": "bench", "scope": "project",
            "scopeId": SCOPE, "selector": {"memoryIds": ids}, "authority": {"kind": "management", "actor": "bench"}, "fence": 1,
            "replicas": ["mirror"]}))
        .unwrap();
    assert_eq!(deletion["matched"], ids.len());
    let settled = kernel
        .reconcile(&json!({"schemaVersion": 1, "now": NOW, "operationId": deletion["deletionId"], "replicas": [{"replica": "mirror", "deleted": true}]}))
        .unwrap();
    assert_eq!(settled["status"], "complete");
}

fn memory_benchmarks() -> String {
    let runtime = Runtime::new().unwrap();
    let mut writes = String::from("| records | write through the component (SQLite) | records/s |\n|---:|---:|---:|\n");
    let mut recalls = String::from(
        "| records | ctxkernel recall p50 | p95 | FTS5 trigram p50 | p95 | FTS5 / ctxkernel (p95) | index load, fresh instance | index rebuild from records |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut deletes = String::from("| records deleted | until every receipt settled (SQLite) |\n|---:|---:|\n");
    for size in [1_000usize, 10_000, 100_000] {
        let corpus = Corpus::generate(size, 200);
        let path = temp_store(&format!("memory-{size}.sqlite"));
        let mut kernel = open(&runtime, &path);
        let (ids, write_ms) = timed(|| load(&mut kernel, &corpus));
        writes.push_str(&format!("| {} | {} | {:.0} |\n", ids.len(), ms(write_ms), ids.len() as f64 / (write_ms / 1e3)));
        if size < 10_000 {
            continue;
        }

        // Index load on a fresh instance (from the stored vectors), and a rebuild from the records:
        // the median of three of each.
        let median = |mut times: Vec<f64>| {
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        };
        let load_ms = median(
            (0..3).map(|_| timed(|| open(&runtime, &path).call("recall-memory", &recall_request("warm up")).unwrap()).1).collect(),
        );
        let rebuild_ms = median(
            (0..3)
                .map(|_| {
                    let connection = Connection::open(&path).unwrap();
                    let meta: Vec<u8> =
                        connection.query_row("SELECT value FROM ctxk_entries WHERE key = 'mem/idx/meta'", [], |r| r.get(0)).unwrap();
                    connection.execute("DELETE FROM ctxk_entries WHERE key = 'mem/idx/meta'", []).unwrap();
                    let (response, t) = timed(|| open(&runtime, &path).call("recall-memory", &recall_request("warm up")).unwrap());
                    assert!(response.contains("rebuilt from the records"));
                    connection.execute("INSERT INTO ctxk_entries (key, revision, value) VALUES ('mem/idx/meta', 1, ?1)", [meta]).unwrap();
                    t
                })
                .collect(),
        );

        // Recall latency on a warm instance, and FTS5 trigram on the same corpus and queries.
        let fts = Fts5::new(&corpus, "trigram");
        let requests: Vec<String> = corpus.queries.iter().map(|q| recall_request(&q.text)).collect();
        let mut warm = open(&runtime, &path);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..3 {
            for (request, query) in requests.iter().zip(&corpus.queries) {
                let (_, t) = timed(|| warm.call("recall-memory", request).unwrap());
                let (_, f) = timed(|| fts.top(&query.text));
                if round > 0 {
                    ours.push(t);
                    theirs.push(f);
                }
            }
        }
        let ((p50, p95), (f50, f95)) = (percentiles(ours), percentiles(theirs));
        recalls.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1}× | {} | {} |\n",
            ids.len(), ms(p50), ms(p95), ms(f50), ms(f95), f95 / p95, ms(load_ms), ms(rebuild_ms)
        ));

        if size == 100_000 {
            let mut remaining = ids.clone();
            for count in [1usize, 100, 10_000] {
                let batch: Vec<String> = remaining.drain(..count).collect();
                let (_, t) = timed(|| delete_until_settled(&mut warm, &batch, &format!("bench-{count}")));
                deletes.push_str(&format!("| {count} | {} |\n", ms(t)));
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    format!(
        "Writes: batches of 1000 candidates per `propose-memory`, activated by management authority.\n\n{writes}\n\
         Recall: k = 5, lexical, over 200 queries × 2 rounds after a warm-up round, on a warm instance. The index \
         load is the first recall of a fresh instance (stored term vectors); the rebuild is the same after the index \
         metadata is lost (every record re-read and re-tokenized); each the median of three.\n\n{recalls}\n\
         Deletion: one `delete-memory` with a pending replica, then `reconcile` settling it, on the 100k store.\n\n{deletes}"
    )
}

fn main() {
    common::run_sections(&[("recall-eval", &evaluation), ("memory", &memory_benchmarks)]);
}
