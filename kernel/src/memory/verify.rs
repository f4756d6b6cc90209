//! `verify-store`: every memory entry read against the record it belongs to,
//! changing nothing. The kernel's own writes keep them in step; a store
//! restored from a raw copy, replicated by hand or edited leaves traces the
//! reads skip or trust: a link to nothing, an index entry of a deleted
//! memory, a record replayed above its tombstone. Each is named by key.

use crate::contracts::{check_version, MemoryRecord};
use crate::error::Result;
use crate::index::{self, DocVector, Posting, ScopeStats};
use crate::store::{self, keys, Db};
use std::collections::{BTreeMap, BTreeSet};
use super::records::{buried_key, journal_receipts, links, lookups_current, receipt_memory, record_key, Link, BURIED, JOURNALS, LINK_PREFIXES, RANKING};
use super::requests::Tombstone;

/// Most problems a report lists; `problemCount` counts them all.
const MAX_LISTED: usize = 1000;

contract! {
pub struct VerifyRequest {
    pub schema_version: u32,
}
}

contract! {
pub struct VerifyReport {
    /// Entries read, by what they are.
    pub checked: BTreeMap<String, u64>,
    /// True when nothing is wrong.
    pub ok: bool,
    pub problem_count: u64,
    /// The first problems in key order within each pass (at most 1000).
    pub problems: Vec<Problem>,
    pub schema_version: u32,
}
}

contract! {
pub struct Problem {
    pub key: String,
    pub kind: ProblemKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
    pub message: String,
}
}

label! {
pub enum ProblemKind {
    /// A value that does not decode as what its key holds.
    Undecodable,
    /// A record above its memory's tombstone: ids are never reused, so only
    /// a replayed copy writes one. Reads see it again; purge removes it.
    RevivedRecord,
    /// A record at or below its tombstone: no read sees it; purge removes it.
    BuriedCopy,
    /// Something left of a purged memory besides its tombstone and fence.
    PurgedTrace,
    /// A scope, slot, fingerprint or ranking entry whose memory is not live,
    /// or that its memory does not have; a tombstone list's entry with no
    /// such tombstone.
    DanglingLink,
    /// A live memory's scope, slot or ranking entry, or a tombstone's entry
    /// in its scope's list, is missing (a fingerprint entry may have moved on
    /// to a newer memory with the same words).
    MissingLink,
    /// A term vector or embedding of a memory that is not live; a posting
    /// its memory's term vector does not have.
    DanglingIndexEntry,
    /// A live memory's posting is missing, or a scope's recall statistics do
    /// not add up to its memories' term vectors.
    StaleIndexEntry,
    /// A version of a memory that is not live, or an audit entry of a memory
    /// the store holds nothing else of.
    Orphan,
}
}

#[derive(Default)]
struct Report {
    checked: BTreeMap<String, u64>,
    count: u64,
    problems: Vec<Problem>,
}

impl Report {
    fn problem(&mut self, key: &str, kind: ProblemKind, memory_id: Option<&str>, message: &str) {
        self.count += 1;
        if self.problems.len() < MAX_LISTED {
            self.problems.push(Problem { key: key.into(), kind, memory_id: memory_id.map(str::to_string), message: message.into() });
        }
    }

    fn seen(&mut self, what: &str) {
        *self.checked.entry(what.into()).or_default() += 1;
    }
}

/// The memory id's key segment in `key` past `prefix` (`mem/ver/<seg>/…`).
fn segment_of<'k>(key: &'k str, prefix: &str) -> &'k str {
    key[prefix.len()..].split('/').next().unwrap_or("")
}

pub fn verify(db: &mut Db, request: VerifyRequest) -> Result<VerifyReport> {
    check_version("request", request.schema_version)?;
    let mut report = Report::default();
    for what in ["audit", "indexEntries", "journals", "links", "postings", "records", "tombstones", "versions"] {
        report.checked.insert(what.into(), 0);
    }
    let mut tombs: BTreeMap<String, Tombstone> = BTreeMap::new();
    db.visit("mem/tomb/", |key, value| {
        report.seen("tombstones");
        match store::decode::<Tombstone>(key, value) {
            Ok(tomb) => drop(tombs.insert(tomb.memory_id.clone(), tomb)),
            Err(_) => report.problem(key, ProblemKind::Undecodable, None, "not a tombstone"),
        }
        Ok(())
    })?;
    // Live memories (what reads see), by id, with the entries each should have.
    let mut live: BTreeMap<String, Vec<String>> = BTreeMap::new();
    db.visit("mem/rec/", |key, value| {
        report.seen("records");
        let Ok(record) = store::decode::<MemoryRecord>(key, value) else {
            report.problem(key, ProblemKind::Undecodable, None, "not a memory record");
            return Ok(());
        };
        let id = record.memory_id.as_str();
        match tombs.get(id) {
            Some(tomb) if tomb.purged => report.problem(key, ProblemKind::PurgedTrace, Some(id), "the record of a purged memory"),
            Some(tomb) if record.revision <= tomb.revision => {
                report.problem(key, ProblemKind::BuriedCopy, Some(id), &format!("revision {} is at or below its tombstone's {}", record.revision, tomb.revision));
            }
            Some(tomb) => {
                report.problem(key, ProblemKind::RevivedRecord, Some(id), &format!("revision {} is above its tombstone's {}: reads see a deleted memory", record.revision, tomb.revision));
                live.insert(id.to_string(), links(&record)?);
            }
            None => drop(live.insert(id.to_string(), links(&record)?)),
        }
        Ok(())
    })?;
    let live_segments: BTreeMap<String, String> = live.keys().map(|id| (keys::segment(id), id.clone())).collect();
    let held_segments: BTreeSet<String> = tombs.values().filter(|t| !t.purged).map(|t| keys::segment(&t.memory_id)).collect();
    let purged_segments: BTreeSet<String> = tombs.values().filter(|t| t.purged).map(|t| keys::segment(&t.memory_id)).collect();
    // Lookup entries: each belongs to a live memory that has it. The
    // ranking is only read, and so only held to the records, while current.
    let current = lookups_current(db)?;
    let mut present = BTreeSet::new();
    for prefix in LINK_PREFIXES.into_iter().filter(|p| current || *p != RANKING) {
        db.visit(prefix, |key, value| {
            report.seen("links");
            present.insert(key.to_string());
            match store::decode::<Link>(key, value) {
                Err(_) => report.problem(key, ProblemKind::Undecodable, None, "not a link"),
                Ok(link) => match live.get(&link.memory_id) {
                    None => report.problem(key, ProblemKind::DanglingLink, Some(&link.memory_id), "its memory is not live"),
                    Some(entries) if !entries.iter().any(|e| e == key) => {
                        report.problem(key, ProblemKind::DanglingLink, Some(&link.memory_id), "its memory's scope, key or content does not lead here")
                    }
                    Some(_) => {}
                },
            }
            Ok(())
        })?;
    }
    // A fingerprint entry may have moved on to a newer memory with the same
    // words, and back to none when that one went: only memberships and slots
    // must be there.
    for (id, entries) in &live {
        let required = |e: &&String| !e.starts_with("mem/fp/") && (current || !e.starts_with(RANKING));
        for entry in entries.iter().filter(required).filter(|e| !present.contains(*e)) {
            report.problem(entry, ProblemKind::MissingLink, Some(id), "a live memory's lookup entry is missing");
        }
    }
    // Each scope's list of tombstones names exactly the tombstones of that scope.
    let mut listed = BTreeSet::new();
    db.visit(BURIED, |key, value| {
        report.seen("links");
        listed.insert(key.to_string());
        match store::decode::<Link>(key, value) {
            Err(_) => report.problem(key, ProblemKind::Undecodable, None, "not a link"),
            Ok(link) if tombs.get(&link.memory_id).is_none_or(|t| buried_key(t) != key) => {
                report.problem(key, ProblemKind::DanglingLink, Some(&link.memory_id), "no tombstone of this scope and id")
            }
            Ok(_) => {}
        }
        Ok(())
    })?;
    for tomb in tombs.values().filter(|_| current) {
        let key = buried_key(tomb);
        if !listed.contains(&key) {
            report.problem(&key, ProblemKind::MissingLink, Some(&tomb.memory_id), "a tombstone is missing from its scope's list");
        }
    }
    // Index entries: term vectors and embeddings of live memories only (a
    // live memory's missing vector is no problem: it is rebuilt from its record).
    let mut vectors: BTreeMap<String, DocVector> = BTreeMap::new();
    db.visit(index::DOCS, |key, value| {
        report.seen("indexEntries");
        match store::decode::<DocVector>(key, value) {
            Err(_) => report.problem(key, ProblemKind::Undecodable, None, "not a term vector"),
            Ok(doc) if !live.contains_key(&doc.memory_id) => {
                report.problem(key, ProblemKind::DanglingIndexEntry, Some(&doc.memory_id), "the term vector of a memory that is not live")
            }
            Ok(doc) if segment_of(key, index::DOCS) == keys::segment(&doc.memory_id) => drop(vectors.insert(doc.memory_id.clone(), doc)),
            Ok(_) => {}
        }
        Ok(())
    })?;
    // The postings and each scope's statistics are those of the live
    // memories' term vectors (of its record, for one whose vector does not
    // read back); read, and so held to them, only while current.
    if current {
        let mut expected: BTreeMap<String, String> = BTreeMap::new();
        let mut stats: BTreeMap<String, ScopeStats> = BTreeMap::new();
        for id in live.keys() {
            let vector = match vectors.remove(id) {
                Some(vector) => vector,
                None => match db.get::<MemoryRecord>(&record_key(id)) {
                    Ok(Some((_, record))) => index::vector_of(&record),
                    _ => continue,
                },
            };
            expected.extend(index::posting_keys(&vector).into_iter().map(|key| (key, id.clone())));
            let scope = stats.entry(index::stats_key(vector.scope, &vector.scope_id)).or_default();
            scope.docs += 1;
            scope.length += u64::from(vector.length);
        }
        db.visit(index::TERMS, |key, value| {
            report.seen("postings");
            match (store::decode::<Posting>(key, value), expected.remove(key)) {
                (Err(_), _) => report.problem(key, ProblemKind::Undecodable, None, "not a posting"),
                (Ok(posting), Some(id)) if posting.memory_id == id => {}
                (Ok(posting), _) => report.problem(key, ProblemKind::DanglingIndexEntry, Some(&posting.memory_id), "a posting its memory's term vector does not have"),
            }
            Ok(())
        })?;
        for (key, id) in &expected {
            report.problem(key, ProblemKind::StaleIndexEntry, Some(id), "a live memory's posting is missing");
        }
        db.visit(index::STATS, |key, value| {
            report.seen("postings");
            match store::decode::<ScopeStats>(key, value) {
                Err(_) => report.problem(key, ProblemKind::Undecodable, None, "not a scope's recall statistics"),
                Ok(found) if stats.remove(key).as_ref() != Some(&found) => {
                    report.problem(key, ProblemKind::StaleIndexEntry, None, "the scope's recall statistics do not add up to its memories")
                }
                Ok(_) => {}
            }
            Ok(())
        })?;
        for key in stats.keys() {
            report.problem(key, ProblemKind::StaleIndexEntry, None, "a scope's recall statistics are missing");
        }
    }
    db.visit(index::EMBEDDINGS, |key, _| {
        report.seen("indexEntries");
        if !live_segments.contains_key(segment_of(key, index::EMBEDDINGS)) {
            report.problem(key, ProblemKind::DanglingIndexEntry, None, "the embedding of a memory that is not live");
        }
        Ok(())
    })?;
    // Versions belong to live memories; audit trails to memories not purged.
    db.visit("mem/ver/", |key, _| {
        report.seen("versions");
        if !live_segments.contains_key(segment_of(key, "mem/ver/")) {
            report.problem(key, ProblemKind::Orphan, None, "a version of a memory that is not live");
        }
        Ok(())
    })?;
    db.visit("mem/audit/", |key, _| {
        report.seen("audit");
        let segment = segment_of(key, "mem/audit/");
        if purged_segments.contains(segment) {
            report.problem(key, ProblemKind::PurgedTrace, None, "the audit trail of a purged memory");
        } else if !live_segments.contains_key(segment) && !held_segments.contains(segment) {
            report.problem(key, ProblemKind::Orphan, None, "the audit trail of a memory the store holds nothing else of");
        }
        Ok(())
    })?;
    // Consolidation journals hold the memories they proposed.
    let purged: BTreeSet<String> = tombs.values().filter(|t| t.purged).map(|t| t.memory_id.clone()).collect();
    db.visit(JOURNALS, |key, value| {
        report.seen("journals");
        let Ok(mut journal) = serde_json::from_slice::<serde_json::Value>(value) else {
            report.problem(key, ProblemKind::Undecodable, None, "not a consolidation journal");
            return Ok(());
        };
        let receipts = journal_receipts(&mut journal).map(|r| r.as_slice()).unwrap_or_default();
        if let Some(id) = receipts.iter().filter_map(receipt_memory).find(|id| purged.contains(*id)) {
            report.problem(key, ProblemKind::PurgedTrace, Some(id), "a consolidation journal holds a purged memory");
        }
        Ok(())
    })?;
    Ok(VerifyReport {
        checked: report.checked,
        ok: report.count == 0,
        problem_count: report.count,
        problems: report.problems,
        schema_version: 1,
    })
}
