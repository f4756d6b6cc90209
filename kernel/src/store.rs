//! The storage port and the kernel's key layout.
//!
//! Hosts supply a plain key-value store with per-key revisions (the WIT
//! `store` interface); everything above that — which keys exist, what their
//! bytes mean, when they change — is decided here, so a store written by one
//! host opens in every other host.
//!
//! Key layout (all ASCII; user-supplied ids are percent-encoded):
//!
//! | key                          | value                                   |
//! |------------------------------|-----------------------------------------|
//! | `meta/format`                | store format marker                     |
//! | `meta/revision`              | store-wide revision, +1 per writing call |
//! | `meta/memory-revision`       | revision of the memory store            |
//! | `ses/<sid>/head`             | session head: seq, chain digest         |
//! | `ses/<sid>/ev/<seq:020>`     | one session event                       |
//! | `ses/<sid>/id/<itemId>`      | item id → seq                           |
//! | `ses/<sid>/last-user`        | seq of the latest user message          |
//! | `mem/rec/<id>`, `mem/tomb/<id>`, `mem/…` | memories (see `memory`)     |
//! | `meta/event-seq`             | last kernel event number                |
//! | `evt/<seq:020>`              | one kernel event (metrics, no bodies)   |
//! | `op/<operationId>`           | an operation's journal entry            |
//! | `blob/<hex>/meta`            | content: length, chunk digests, access  |
//! | `blob/<hex>/c/<n:08>`        | content chunk n (raw bytes)             |

use crate::contracts::{check_version, SCHEMA_VERSION};
use crate::error::{ErrorCode, KernelError, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One stored value and its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub revision: u64,
    pub value: Vec<u8>,
}

/// A failed conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutError {
    /// The current revision (0: absent) differs from the expected one.
    Conflict(u64),
    Failure(String),
}

/// The port, as the WIT `store` interface describes it.
pub trait Store {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String>;
    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String>;
    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError>;
    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError>;
}

/// Keys of the store layout.
pub mod keys {
    pub const FORMAT: &str = "meta/format";
    pub const REVISION: &str = "meta/revision";
    pub const MEMORY_REVISION: &str = "meta/memory-revision";
    pub const EVENT_SEQ: &str = "meta/event-seq";
    pub const KERNEL_EVENTS: &str = "evt/";

    /// Percent-encodes everything but `[A-Za-z0-9._-]`, so user ids can hold
    /// `/` or any Unicode without breaking prefix scans.
    pub fn segment(id: &str) -> String {
        let mut out = String::with_capacity(id.len());
        for byte in id.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' => out.push(byte as char),
                _ => out.push_str(&format!("%{byte:02X}")),
            }
        }
        out
    }

    /// A memory scope's key segment: its name, then its id escaped, or `-`
    /// for none. `-` is the one id [`segment`] writes as `-`, so that id is
    /// escaped too: no id is written the way "no id" is.
    pub fn scope(scope: crate::contracts::Scope, scope_id: &Option<String>) -> String {
        let id = match scope_id.as_deref() {
            None => "-".to_string(),
            Some("-") => "%2D".to_string(),
            Some(id) => segment(id),
        };
        format!("{}/{id}", scope.name())
    }

    pub fn session_head(session: &str) -> String {
        format!("ses/{}/head", segment(session))
    }

    pub fn session_events(session: &str) -> String {
        format!("ses/{}/ev/", segment(session))
    }

    pub fn session_event(session: &str, seq: u64) -> String {
        format!("ses/{}/ev/{seq:020}", segment(session))
    }

    pub fn session_last_user(session: &str) -> String {
        format!("ses/{}/last-user", segment(session))
    }

    pub fn session_item(session: &str, item_id: &str) -> String {
        format!("ses/{}/id/{}", segment(session), segment(item_id))
    }

    pub fn kernel_event(seq: u64) -> String {
        format!("evt/{seq:020}")
    }

    pub fn operation(id: &str) -> String {
        format!("op/{}", segment(id))
    }

    pub fn blob_meta(hex: &str) -> String {
        format!("blob/{hex}/meta")
    }

    pub fn blob_chunk(hex: &str, n: u64) -> String {
        format!("blob/{hex}/c/{n:08}")
    }
}

/// How many entries one `scan` call asks for.
const SCAN_PAGE: u32 = 512;

/// Typed access to the port: JSON values, mapped errors, the store revision.
pub struct Db<'s> {
    store: &'s mut dyn Store,
    revision: u64,
    writes: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Format {
    kernel: String,
    schema_version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Counter {
    revision: u64,
}

impl<'s> Db<'s> {
    /// Opens the store for one call: checks its format and reads its revision.
    pub fn open(store: &'s mut dyn Store) -> Result<Self> {
        let mut db = Db { store, revision: 0, writes: 0 };
        if let Some((_, format)) = db.get::<Format>(keys::FORMAT)? {
            if format.kernel != "ctxkernel" {
                return Err(KernelError::storage(format!("the store belongs to `{}`, not ctxkernel", format.kernel)));
            }
            check_version("the store format", format.schema_version)?;
        }
        db.revision = db.get::<Counter>(keys::REVISION)?.map_or(0, |(_, c)| c.revision);
        Ok(db)
    }

    /// The store-wide revision seen when this call started.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn get<T: DeserializeOwned>(&mut self, key: &str) -> Result<Option<(u64, T)>> {
        match self.store.get(key).map_err(|e| KernelError::storage(format!("get `{key}`: {e}")))? {
            None => Ok(None),
            Some(entry) => Ok(Some((entry.revision, decode(&entry.key, &entry.value)?))),
        }
    }

    /// Every entry under `prefix` after `start_after`, decoded, in key order,
    /// stopping after `limit` entries.
    pub fn scan<T: DeserializeOwned>(&mut self, prefix: &str, start_after: &str, limit: usize) -> Result<Vec<(String, T)>> {
        let raw = self.scan_bytes(prefix, start_after, limit)?;
        raw.into_iter()
            .map(|(key, value)| {
                let decoded = decode(&key, &value)?;
                Ok((key, decoded))
            })
            .collect()
    }

    /// `scan` without decoding, for callers that tolerate unreadable values.
    pub fn scan_bytes(&mut self, prefix: &str, start_after: &str, limit: usize) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut after = start_after.to_string();
        while out.len() < limit {
            let want = SCAN_PAGE.min((limit - out.len()).try_into().unwrap_or(u32::MAX));
            let page = self
                .store
                .scan(prefix, &after, want)
                .map_err(|e| KernelError::storage(format!("scan `{prefix}`: {e}")))?;
            let full = page.len() as u32 == want;
            for entry in page {
                if !entry.key.starts_with(prefix) || entry.key.as_str() <= after.as_str() {
                    return Err(KernelError::storage(format!(
                        "scan `{prefix}` returned `{}` out of order or outside the prefix",
                        entry.key
                    )));
                }
                after.clone_from(&entry.key);
                out.push((entry.key, entry.value));
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Hands every entry under `prefix` to `visit`, one page at a time, so a
    /// pass over many entries never holds them all.
    pub fn visit(&mut self, prefix: &str, mut visit: impl FnMut(&str, &[u8]) -> Result<()>) -> Result<()> {
        let mut after = String::new();
        loop {
            let page = self.scan_bytes(prefix, &after, SCAN_PAGE as usize)?;
            let done = page.len() < SCAN_PAGE as usize;
            for (key, value) in &page {
                visit(key, value)?;
            }
            match page.into_iter().last() {
                Some((key, _)) if !done => after = key,
                _ => return Ok(()),
            }
        }
    }

    /// Raw bytes at `key` (for content chunks, which are not JSON).
    pub fn get_bytes(&mut self, key: &str) -> Result<Option<Vec<u8>>> {
        let entry = self.store.get(key).map_err(|e| KernelError::storage(format!("get `{key}`: {e}")))?;
        Ok(entry.map(|e| e.value))
    }

    pub fn put_bytes(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64> {
        self.writes += 1;
        self.store.put(key, value, expected).map_err(|e| put_error(key, e))
    }

    /// Writes `value` if the key is at `expected` (see the WIT for its meaning).
    pub fn put<T: Serialize>(&mut self, key: &str, value: &T, expected: Option<u64>) -> Result<u64> {
        let bytes = crate::canonical::to_bytes(value)?;
        self.writes += 1;
        self.store.put(key, &bytes, expected).map_err(|e| put_error(key, e))
    }

    pub fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<()> {
        self.writes += 1;
        self.store.remove(key, expected).map_err(|e| put_error(key, e))
    }

    /// Ends a call: when it wrote anything, stamps the format and advances the
    /// store-wide revision once, so other hosts notice the change.
    pub fn finish(mut self) -> Result<u64> {
        if self.writes == 0 {
            return Ok(self.revision);
        }
        let format_absent = self.store.get(keys::FORMAT).map_err(KernelError::storage)?.is_none();
        if format_absent {
            let format = Format { schema_version: SCHEMA_VERSION, kernel: "ctxkernel".into() };
            self.put(keys::FORMAT, &format, Some(0))?;
        }
        let current = self.get::<Counter>(keys::REVISION)?;
        let expected = current.as_ref().map_or(0, |(rev, _)| *rev);
        let next = current.map_or(0, |(_, c)| c.revision) + 1;
        self.put(keys::REVISION, &Counter { revision: next }, Some(expected))?;
        Ok(next)
    }

    /// The memory store's revision (0 before any memory was written).
    pub fn memory_revision(&mut self) -> Result<u64> {
        Ok(self.get::<Counter>(keys::MEMORY_REVISION)?.map_or(0, |(_, c)| c.revision))
    }
}

pub fn decode<T: DeserializeOwned>(key: &str, value: &[u8]) -> Result<T> {
    serde_json::from_slice(value).map_err(|e| {
        KernelError::storage(format!("stored value at `{key}` is not what this kernel wrote: {e}")).with_detail(json!({"key": key}))
    })
}

fn put_error(key: &str, error: PutError) -> KernelError {
    match error {
        PutError::Conflict(current) => {
            KernelError::new(ErrorCode::Conflict, format!("`{key}` changed underneath this call"))
                .with_detail(json!({"key": key, "currentRevision": current}))
        }
        PutError::Failure(message) => KernelError::storage(format!("write `{key}`: {message}")),
    }
}

/// An in-memory store for native use and tests (hosts bring their own).
#[derive(Default, Clone)]
pub struct MemStore {
    pub entries: std::collections::BTreeMap<String, (u64, Vec<u8>)>,
}

impl Store for MemStore {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String> {
        Ok(self.entries.get(key).map(|(revision, value)| Entry {
            key: key.to_string(),
            revision: *revision,
            value: value.clone(),
        }))
    }

    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String> {
        use std::ops::Bound;
        // Start at the prefix itself when the cursor is before it, not at the first key.
        let start = if start_after < prefix { Bound::Included(prefix) } else { Bound::Excluded(start_after) };
        Ok(self
            .entries
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(key, (revision, value))| Entry { key: key.clone(), revision: *revision, value: value.clone() })
            .collect())
    }

    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError> {
        let current = self.entries.get(key).map_or(0, |(r, _)| *r);
        if expected.is_some_and(|e| e != current) {
            return Err(PutError::Conflict(current));
        }
        self.entries.insert(key.to_string(), (current + 1, value.to_vec()));
        Ok(current + 1)
    }

    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError> {
        let current = self.entries.get(key).map_or(0, |(r, _)| *r);
        if expected.is_some_and(|e| e != current) {
            return Err(PutError::Conflict(current));
        }
        self.entries.remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_escape_everything_but_safe_ascii() {
        assert_eq!(keys::segment("a-b_c.d"), "a-b_c.d");
        assert_eq!(keys::segment("vscode:ws/1"), "vscode%3Aws%2F1");
        assert_eq!(keys::segment("会"), "%E4%BC%9A");
        assert_eq!(keys::session_event("s", 7), "ses/s/ev/00000000000000000007");
    }

    #[test]
    fn revision_advances_once_per_writing_call() {
        let mut store = MemStore::default();
        let mut db = Db::open(&mut store).unwrap();
        assert_eq!(db.revision(), 0);
        db.put("x/1", &json!({"a": 1}), None).unwrap();
        db.put("x/2", &json!({"a": 2}), None).unwrap();
        assert_eq!(db.finish().unwrap(), 1);
        let db = Db::open(&mut store).unwrap();
        assert_eq!(db.revision(), 1);
        assert_eq!(db.finish().unwrap(), 1, "a read-only call leaves the revision alone");
    }

    #[test]
    fn garbage_in_the_store_is_a_storage_failure() {
        let mut store = MemStore::default();
        store.put("meta/revision", b"\xff\xfe", None).unwrap();
        assert_eq!(Db::open(&mut store).err().unwrap().code, ErrorCode::StorageFailure);
    }

    #[test]
    fn a_newer_store_format_is_unsupported() {
        let mut store = MemStore::default();
        store.put("meta/format", br#"{"schemaVersion":2,"kernel":"ctxkernel"}"#, None).unwrap();
        assert_eq!(Db::open(&mut store).err().unwrap().code, ErrorCode::UnsupportedSchema);
    }

    #[test]
    fn scan_pages_through_large_prefixes_in_order() {
        let mut store = MemStore::default();
        for i in 0..1300u32 {
            store.put(&format!("p/{i:05}"), b"1", None).unwrap();
        }
        store.put("q/0", b"1", None).unwrap();
        let mut db = Db::open(&mut store).unwrap();
        let all: Vec<(String, u32)> = db.scan("p/", "", usize::MAX).unwrap();
        assert_eq!(all.len(), 1300);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        let tail: Vec<(String, u32)> = db.scan("p/", "p/01295", 10).unwrap();
        assert_eq!(tail.len(), 4);
    }
}
