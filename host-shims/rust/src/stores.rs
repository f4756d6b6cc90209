//! Stores implementing the kernel's storage port, with the transactions each
//! kernel call runs in.

use crate::engine::bindings::ctxkernel::kernel::store::{Entry, PutError};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The storage port (the WIT `store` interface) plus one transaction per kernel call.
pub trait HostStore: Send {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String>;
    /// `limit` entries, or fewer only when no more follow: the kernel reads
    /// a short page as the end.
    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String>;
    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError>;
    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError>;
    /// Opens a call's transaction; `write` is false for a command that only reads.
    fn begin(&mut self, write: bool) -> Result<(), String>;
    fn commit(&mut self) -> Result<(), String>;
    fn rollback(&mut self) -> Result<(), String>;
}

/// A store in process memory, for tests and throwaway sessions.
#[derive(Default)]
pub struct MemoryStore {
    entries: BTreeMap<String, (u64, Vec<u8>)>,
    /// Values before the current transaction touched them.
    undo: Option<BTreeMap<String, Option<(u64, Vec<u8>)>>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every entry, in key order (for dumps and tests).
    pub fn entries(&self) -> impl Iterator<Item = (&str, u64, &[u8])> {
        self.entries.iter().map(|(k, (r, v))| (k.as_str(), *r, v.as_slice()))
    }

    fn touch(&mut self, key: &str) {
        if let Some(undo) = &mut self.undo {
            undo.entry(key.to_string()).or_insert_with(|| self.entries.get(key).cloned());
        }
    }
}

fn check(current: u64, expected: Option<u64>) -> Result<(), PutError> {
    match expected {
        Some(expected) if expected != current => Err(PutError::Conflict(current)),
        _ => Ok(()),
    }
}

impl HostStore for MemoryStore {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String> {
        Ok(self.entries.get(key).map(|(revision, value)| Entry {
            key: key.to_string(),
            revision: *revision,
            value: value.clone(),
        }))
    }

    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String> {
        let from = if start_after < prefix { prefix } else { start_after };
        Ok(self
            .entries
            .range::<str, _>((std::ops::Bound::Included(from), std::ops::Bound::Unbounded))
            .filter(|(k, _)| k.as_str() > start_after)
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit as usize)
            .map(|(key, (revision, value))| Entry { key: key.clone(), revision: *revision, value: value.clone() })
            .collect())
    }

    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError> {
        let current = self.entries.get(key).map_or(0, |(r, _)| *r);
        check(current, expected)?;
        self.touch(key);
        self.entries.insert(key.to_string(), (current + 1, value.to_vec()));
        Ok(current + 1)
    }

    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError> {
        check(self.entries.get(key).map_or(0, |(r, _)| *r), expected)?;
        self.touch(key);
        self.entries.remove(key);
        Ok(())
    }

    fn begin(&mut self, _write: bool) -> Result<(), String> {
        if self.undo.is_some() {
            return Err("a transaction is already open".into());
        }
        self.undo = Some(BTreeMap::new());
        Ok(())
    }

    fn commit(&mut self) -> Result<(), String> {
        self.undo.take().map(|_| ()).ok_or_else(|| "no transaction is open".into())
    }

    fn rollback(&mut self) -> Result<(), String> {
        let undo = self.undo.take().ok_or("no transaction is open")?;
        for (key, before) in undo {
            match before {
                Some(entry) => self.entries.insert(key, entry),
                None => self.entries.remove(&key),
            };
        }
        Ok(())
    }
}

/// `PRAGMA application_id` of a ctxkernel store: "ctk1".
pub const APPLICATION_ID: i64 = 0x6374_6b31;
/// `PRAGMA user_version` of the table layout below.
pub const LAYOUT_VERSION: i64 = 1;

/// The embedded default: one SQLite file, the same layout in every host.
///
/// ```sql
/// CREATE TABLE ctxk_entries (key TEXT PRIMARY KEY NOT NULL,
///   revision INTEGER NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
/// ```
/// Keys compare bytewise (SQLite's BINARY collation), which is the order
/// `scan` promises. Each kernel call is one transaction: a command that writes
/// takes the write lock when it begins (`BEGIN IMMEDIATE`), waiting up to the
/// busy timeout for another connection to release it; one that only reads
/// takes none (`BEGIN DEFERRED`) and reads a snapshot (WAL), so it never waits
/// on a writer.
pub struct SqliteStore {
    conn: Connection,
    busy_timeout: Duration,
}

/// How long a call waits for another connection's write lock before `storage-failure`.
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

impl SqliteStore {
    /// Opens (creating if needed) a store file. Fails on a file that is not
    /// SQLite, or is another application's database, or a newer layout.
    pub fn open(path: impl AsRef<Path>) -> anyhow::Result<Self> {
        Self::open_with(path, BUSY_TIMEOUT)
    }

    /// `open` with its own busy timeout.
    pub fn open_with(path: impl AsRef<Path>, busy_timeout: Duration) -> anyhow::Result<Self> {
        Self::init(Connection::open(path)?, busy_timeout)
    }

    pub fn in_memory() -> anyhow::Result<Self> {
        Self::init(Connection::open_in_memory()?, BUSY_TIMEOUT)
    }

    fn init(conn: Connection, busy_timeout: Duration) -> anyhow::Result<Self> {
        conn.busy_timeout(busy_timeout)?;
        let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
        let layout: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if app != APPLICATION_ID && (app != 0 || tables != 0) {
            anyhow::bail!("this SQLite file is not a ctxkernel store (application_id {app:#x})");
        }
        if layout > LAYOUT_VERSION {
            anyhow::bail!("this store has layout {layout}; this host reads layout {LAYOUT_VERSION}");
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        if app == 0 {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE;
                 CREATE TABLE IF NOT EXISTS ctxk_entries (
                   key TEXT PRIMARY KEY NOT NULL,
                   revision INTEGER NOT NULL,
                   value BLOB NOT NULL
                 ) WITHOUT ROWID;
                 PRAGMA application_id = {APPLICATION_ID};
                 PRAGMA user_version = {LAYOUT_VERSION};
                 COMMIT;"
            ))?;
        }
        Ok(SqliteStore { conn, busy_timeout })
    }

    /// A SQLite error as the port reports it; a lock not had in time reads
    /// the same in every host's store.
    fn fail(&self, e: rusqlite::Error) -> String {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) => {
                format!("the store is busy: another connection held its write lock for more than {} ms", self.busy_timeout.as_millis())
            }
            _ => e.to_string(),
        }
    }

    /// Loads exported entries, revisions included, into this store; it must be empty.
    pub fn restore(&mut self, entries: &[Entry]) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        let existing: i64 = tx.query_row("SELECT count(*) FROM ctxk_entries", [], |r| r.get(0))?;
        if existing != 0 {
            anyhow::bail!("the store already holds {existing} entries; import into a new file");
        }
        {
            let mut insert = tx.prepare("INSERT INTO ctxk_entries (key, revision, value) VALUES (?1, ?2, ?3)")?;
            for e in entries {
                insert.execute(rusqlite::params![e.key, e.revision as i64, e.value])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn revision(&self, key: &str) -> Result<u64, String> {
        self.conn
            .prepare_cached("SELECT revision FROM ctxk_entries WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get::<_, i64>(0)).optional())
            .map(|r| r.map_or(0, |r| r as u64))
            .map_err(|e| self.fail(e))
    }
}

/// The smallest string above every string starting with `prefix`, when keys are ASCII.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0x7f {
            bytes.push(last + 1);
            return String::from_utf8(bytes).ok();
        }
    }
    None
}

impl HostStore for SqliteStore {
    fn get(&mut self, key: &str) -> Result<Option<Entry>, String> {
        self.conn
            .prepare_cached("SELECT revision, value FROM ctxk_entries WHERE key = ?1")
            .and_then(|mut s| {
                s.query_row([key], |r| {
                    Ok(Entry { key: key.to_string(), revision: r.get::<_, i64>(0)? as u64, value: r.get(1)? })
                })
                .optional()
            })
            .map_err(|e| self.fail(e))
    }

    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>, String> {
        // Keys are ASCII, so DEL sorts after every key.
        let end = prefix_end(prefix).unwrap_or_else(|| "\u{7f}".into());
        // One lower bound per query, so SQLite seeks to it: with both
        // `>= prefix` and `> start_after` it may seek to the prefix and
        // step over every earlier page again.
        let (sql, from) = if start_after < prefix {
            ("SELECT key, revision, value FROM ctxk_entries WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT ?3", prefix)
        } else {
            ("SELECT key, revision, value FROM ctxk_entries WHERE key > ?1 AND key < ?2 ORDER BY key LIMIT ?3", start_after)
        };
        let rows = self.conn.prepare_cached(sql).and_then(|mut statement| {
            statement
                .query_map(params![from, end, limit], |r| {
                    Ok(Entry { key: r.get(0)?, revision: r.get::<_, i64>(1)? as u64, value: r.get(2)? })
                })?
                .filter(|r| r.as_ref().map_or(true, |e| e.key.starts_with(prefix)))
                .collect::<Result<Vec<_>, _>>()
        });
        rows.map_err(|e| self.fail(e))
    }

    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, PutError> {
        let current = self.revision(key).map_err(PutError::Failure)?;
        check(current, expected)?;
        let next = current + 1;
        self.conn
            .prepare_cached(
                "INSERT INTO ctxk_entries (key, revision, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET revision = excluded.revision, value = excluded.value",
            )
            .and_then(|mut s| s.execute(params![key, next as i64, value]))
            .map_err(|e| PutError::Failure(self.fail(e)))?;
        Ok(next)
    }

    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), PutError> {
        check(self.revision(key).map_err(PutError::Failure)?, expected)?;
        self.conn
            .prepare_cached("DELETE FROM ctxk_entries WHERE key = ?1")
            .and_then(|mut s| s.execute([key]))
            .map_err(|e| PutError::Failure(self.fail(e)))?;
        Ok(())
    }

    fn begin(&mut self, write: bool) -> Result<(), String> {
        self.conn.execute_batch(if write { "BEGIN IMMEDIATE" } else { "BEGIN DEFERRED" }).map_err(|e| self.fail(e))
    }

    fn commit(&mut self) -> Result<(), String> {
        self.conn.execute_batch("COMMIT").map_err(|e| self.fail(e))
    }

    fn rollback(&mut self) -> Result<(), String> {
        self.conn.execute_batch("ROLLBACK").map_err(|e| self.fail(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(store: &mut dyn HostStore) {
        store.begin(true).unwrap();
        assert_eq!(store.put("b/2", b"x", Some(0)).unwrap(), 1);
        assert_eq!(store.put("b/1", b"y", None).unwrap(), 1);
        assert_eq!(store.put("b/1", b"z", Some(1)).unwrap(), 2);
        assert!(matches!(store.put("b/1", b"w", Some(1)), Err(PutError::Conflict(2))));
        assert!(matches!(store.put("b/1", b"w", Some(0)), Err(PutError::Conflict(2))));
        store.put("a", b"0", None).unwrap();
        store.put("c", b"0", None).unwrap();
        store.commit().unwrap();
        let keys: Vec<String> = store.scan("b/", "", 10).unwrap().into_iter().map(|e| e.key).collect();
        assert_eq!(keys, ["b/1", "b/2"]);
        let after: Vec<String> = store.scan("b/", "b/1", 10).unwrap().into_iter().map(|e| e.key).collect();
        assert_eq!(after, ["b/2"]);
        assert_eq!(store.scan("", "", 10).unwrap().len(), 4);
        store.begin(true).unwrap();
        store.put("b/1", b"gone", None).unwrap();
        store.remove("b/2", Some(1)).unwrap();
        store.put("d", b"new", None).unwrap();
        store.rollback().unwrap();
        let entry = store.get("b/1").unwrap().unwrap();
        assert_eq!((entry.revision, entry.value.as_slice()), (2, b"z".as_slice()));
        assert!(store.get("b/2").unwrap().is_some());
        assert!(store.get("d").unwrap().is_none());
    }

    #[test]
    fn memory_store_keeps_the_port_contract() {
        exercise(&mut MemoryStore::new());
    }

    #[test]
    fn sqlite_store_keeps_the_port_contract() {
        exercise(&mut SqliteStore::in_memory().unwrap());
    }

    #[test]
    fn prefix_end_is_the_next_ascii_string() {
        assert_eq!(prefix_end("ses/a/").as_deref(), Some("ses/a0"));
        assert_eq!(prefix_end(""), None);
    }
}
