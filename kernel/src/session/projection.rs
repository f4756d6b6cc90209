//! A session as the kernel holds it (its items and compactions), and what a
//! model sees of it.

use crate::contracts::{CompactionRecord, ContentRef, ContextItem, Head};
use crate::session::Candidate;
use crate::tokens;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use super::candidate::LogTables;

/// A session as the kernel holds it: its item events and its compactions.
pub struct SessionLog {
    pub head: Head,
    pub items: Vec<Candidate>,
    pub compactions: Vec<(u64, Rc<CompactionRecord>)>,
    pub tables: LogTables,
}

impl SessionLog {
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
