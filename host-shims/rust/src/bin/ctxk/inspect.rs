//! `ctxk inspect`, `export` and `import`: the store seen from outside the
//! kernel, read through the same port the kernel uses.

use crate::report::preview;
use anyhow::Context as _;
use ctxkernel_host::{Entry, HostStore, SqliteStore};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum What {
    Sessions,
    Memories,
    Tombstones,
    Operations,
    Events,
}

const EXPORT_FORMAT: &str = "ctxkernel-store-export";

/// Every entry under `prefix`, in key order.
fn entries(store: &mut SqliteStore, prefix: &str) -> anyhow::Result<Vec<Entry>> {
    let mut out: Vec<Entry> = Vec::new();
    loop {
        let after = out.last().map_or(String::new(), |e| e.key.clone());
        let page = store.scan(prefix, &after, 1000).map_err(|e| anyhow::anyhow!("cannot read the store: {e}"))?;
        if page.is_empty() {
            return Ok(out);
        }
        out.extend(page);
    }
}

fn json_values(store: &mut SqliteStore, prefix: &str) -> anyhow::Result<Vec<(String, Value)>> {
    entries(store, prefix)?
        .into_iter()
        .map(|e| Ok((e.key.clone(), serde_json::from_slice(&e.value).with_context(|| format!("`{}` is not JSON", e.key))?)))
        .collect()
}

/// Undoes the kernel's percent-escaping of ids inside keys.
fn unescape(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], segment.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

pub fn list(store: &mut SqliteStore, what: What, as_json: bool) -> anyhow::Result<String> {
    let rows: Vec<Value> = match what {
        What::Sessions => json_values(store, "ses/")?
            .into_iter()
            .filter_map(|(key, head)| {
                let id = key.strip_prefix("ses/")?.strip_suffix("/head")?;
                Some(json!({"sessionId": unescape(id), "head": head}))
            })
            .collect(),
        What::Memories => json_values(store, "mem/rec/")?.into_iter().map(|(_, record)| record).collect(),
        What::Tombstones => json_values(store, "mem/tomb/")?.into_iter().map(|(_, tomb)| tomb).collect(),
        What::Operations => {
            let mut rows = Vec::new();
            for (prefix, kind) in [("op/", "compaction"), ("mem/ext/", "extraction"), ("mem/del/", "deletion")] {
                for (key, value) in json_values(store, prefix)? {
                    let status = ["status", "state"]
                        .iter()
                        .find_map(|f| value.get(*f).or_else(|| value["response"].get(*f)).or_else(|| value["receipt"].get(*f)))
                        .cloned()
                        .unwrap_or(Value::Null);
                    rows.push(json!({"operationId": unescape(&key[prefix.len()..]), "kind": kind, "status": status}));
                }
            }
            rows
        }
        What::Events => json_values(store, "evt/")?.into_iter().map(|(_, event)| event).collect(),
    };
    if as_json {
        return Ok(format!("{}\n", Value::Array(rows)));
    }
    let mut out = String::new();
    for row in &rows {
        let line = match what {
            What::Sessions => format!("{:<32} head seq {}", text(&row["sessionId"]), text(&row["head"]["seq"])),
            What::Memories => format!(
                "{} {:<11} {}:{} key {} · {}",
                text(&row["memoryId"]),
                text(&row["state"]),
                text(&row["scope"]),
                text(&row["scopeId"]),
                text(&row["key"]),
                preview(row["content"].as_str().unwrap_or(""), 60)
            ),
            What::Tombstones => format!(
                "{} deleted {} fence {} request {}{}",
                text(&row["memoryId"]),
                text(&row["deletedAt"]),
                text(&row["fence"]),
                text(&row["requestId"]),
                if row["purged"] == true { " (purged)" } else { "" }
            ),
            What::Operations => format!("{:<40} {:<10} {}", text(&row["operationId"]), text(&row["kind"]), text(&row["status"])),
            What::Events => format!("{:>6} {} {}", text(&row["seq"]), text(&row["at"]), text(&row["type"])),
        };
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "({} {})", rows.len(), match what {
        What::Sessions => "sessions",
        What::Memories => "memories",
        What::Tombstones => "tombstones",
        What::Operations => "operations",
        What::Events => "events",
    });
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> anyhow::Result<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).context("bad hex in the export"))
        .collect()
}

/// JSON lines: a header, then one entry a line (UTF-8 values as text, others as hex).
pub fn export(store: &mut SqliteStore, file: &Path) -> anyhow::Result<usize> {
    let all = entries(store, "")?;
    let mut out = format!("{}\n", json!({"format": EXPORT_FORMAT, "version": 1, "entries": all.len()}));
    for e in &all {
        let line = match std::str::from_utf8(&e.value) {
            Ok(text) => json!({"key": e.key, "revision": e.revision, "value": text}),
            Err(_) => json!({"key": e.key, "revision": e.revision, "hex": hex(&e.value)}),
        };
        let _ = writeln!(out, "{line}");
    }
    std::fs::write(file, out).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(all.len())
}

pub fn import(store_path: &Path, file: &Path) -> anyhow::Result<usize> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or("")).context("the export has no header line")?;
    if header["format"] != EXPORT_FORMAT || header["version"] != 1 {
        anyhow::bail!("{} is not a ctxkernel store export", file.display());
    }
    let mut all = Vec::new();
    for (i, line) in lines.enumerate() {
        let row: Value = serde_json::from_str(line).with_context(|| format!("line {} of the export is not JSON", i + 2))?;
        let value = match (row["value"].as_str(), row["hex"].as_str()) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(h)) => unhex(h)?,
            _ => anyhow::bail!("line {} of the export has no value", i + 2),
        };
        let key = row["key"].as_str().with_context(|| format!("line {} of the export has no key", i + 2))?.to_string();
        all.push(Entry { key, revision: row["revision"].as_u64().unwrap_or(1), value });
    }
    if header["entries"].as_u64() != Some(all.len() as u64) {
        anyhow::bail!("the export is truncated: {} of {} entries", all.len(), header["entries"]);
    }
    let mut store = SqliteStore::open(store_path).with_context(|| format!("cannot open store {}", store_path.display()))?;
    store.restore(&all)?;
    Ok(all.len())
}
