//! A session as the kernel holds it (its items and compactions), and what a
//! model sees of it.

use crate::contracts::{CompactionRecord, ContentRef, ContextItem, Head};
use crate::error::{ErrorCode, KernelError, Result};
use crate::store::Db;
use crate::tokens;
use serde_json::json;
use serde_json::value::RawValue;
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use super::candidate::{Candidate, LogTables};
use super::log::{genesis, load, verify_chain};

/// A session as the kernel holds it: its item events and its compactions.
pub struct SessionLog {
    pub head: Head,
    pub items: Vec<Candidate>,
    pub compactions: Vec<(u64, Rc<CompactionRecord>)>,
    pub tables: LogTables,
    /// What a command above keeps with the log between calls (what
    /// `import-messages` has read of it); never authority.
    pub memo: RefCell<Option<Box<dyn Any>>>,
}

impl SessionLog {
    /// A session with no events yet.
    pub fn new(id: &str) -> Result<SessionLog> {
        Ok(SessionLog { head: genesis(id)?, items: Vec::new(), compactions: Vec::new(), tables: LogTables::default(), memo: RefCell::default() })
    }

    /// Reads the events after this log's head up to `head`, checking that
    /// the chain adds up to it. Out of line: it walks every new event, and
    /// the JVM host compiles it only while it stays under HotSpot's size limit.
    #[inline(never)]
    pub fn catch_up(&mut self, db: &mut Db, id: &str, head: Head) -> Result<()> {
        if self.head == head {
            return Ok(());
        }
        let events = load(db, id, self.head.seq, usize::MAX)?;
        let (reached, payloads) = verify_chain(id, &self.head, &events)?;
        if reached != head {
            return Err(KernelError::new(ErrorCode::DigestMismatch, format!("session `{id}`: its events do not add up to its head"))
                .with_detail(json!({"sessionId": id, "head": head, "events": reached})));
        }
        for (event, payload) in events.into_iter().zip(payloads) {
            match (event.item, event.compaction) {
                (Some(item), _) => {
                    let canonical = RawValue::from_string(payload)
                        .map_err(|e| KernelError::internal(format!("an item's canonical JSON does not read back: {e}")))?;
                    self.push(Candidate::new(Rc::new(item), Some(event.seq), Some(canonical.into())));
                }
                (None, Some(record)) => self.compactions.push((event.seq, Rc::new(*record))),
                (None, None) => return Err(KernelError::storage(format!("session `{id}` event {} is empty", event.seq))),
            }
        }
        self.head = head;
        Ok(())
    }

    /// Adds an item event's candidate.
    pub fn push(&mut self, candidate: Candidate) {
        self.items.push(self.tables.log(candidate));
    }

    /// The log as it was at `head` (an append-only log's prefix).
    pub(crate) fn at(&self, head: &Head) -> SessionLog {
        SessionLog {
            head: head.clone(),
            items: self.items.iter().filter(|c| c.seq.unwrap_or(0) <= head.seq).cloned().collect(),
            compactions: self.compactions.iter().filter(|(seq, _)| *seq <= head.seq).cloned().collect(),
            tables: self.tables.clone(),
            memo: RefCell::default(),
        }
    }

    /// Has a compaction with a summary been committed after `seq`?
    pub(crate) fn summarized_after(&self, seq: u64) -> bool {
        self.compactions.iter().any(|(at, c)| *at > seq && c.summary.is_some())
    }
}

/// What a model sees of a session: the latest summary, then every item not
/// summarized away, with externalized bodies replaced by their ContentRef.
pub fn project(items: &[Candidate], compactions: &[(u64, Rc<CompactionRecord>)]) -> Vec<Candidate> {
    let latest = compactions.iter().rev().map(|(_, c)| c).find(|c| c.summary.is_some());
    let externalized: BTreeMap<u64, &ContentRef> =
        compactions.iter().flat_map(|(_, c)| c.externalized.iter().map(|e| (e.seq, &e.content_ref))).collect();
    let cut = latest.map_or(0, |c| c.cut_seq);
    let preserved: BTreeSet<u64> = latest.map(|c| c.preserved.iter().copied().collect()).unwrap_or_default();
    let mut out = Vec::with_capacity(items.len() + 1);
    if let Some(summary) = latest.and_then(|c| c.summary.clone()) {
        out.push(Candidate::new(summary, Some(0), None));
    }
    for c in items {
        let seq = c.seq.unwrap_or(0);
        if seq <= cut && !preserved.contains(&seq) {
            continue;
        }
        match externalized.get(&seq) {
            Some(reference) => out.push(Candidate::new(Rc::new(externalize(&c.item, reference)), c.seq, None)),
            None => out.push(c.clone()),
        }
    }
    out
}

fn externalize(item: &ContextItem, reference: &ContentRef) -> ContextItem {
    let mut item = item.clone();
    item.content = None;
    item.token_estimate = Some(tokens::estimate(&reference.summary));
    item.content_ref = Some(reference.clone());
    item
}
