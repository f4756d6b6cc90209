//! Memory records in the store: the key layout, the lookup entries (scope
//! membership, slot, fingerprint, resident ranking, each scope's tombstone
//! list), load and save, the audit trail, and a record's state at `now`.
//!
//! | key                                        | value                         |
//! |--------------------------------------------|-------------------------------|
//! | `mem/rec/<id>`                             | the record                    |
//! | `mem/tomb/<id>`                            | its tombstone, once deleted   |
//! | `mem/scope/<scope>/<id>`                   | link: the scope's members     |
//! | `mem/slot/<scope>/<key>/<id>`              | link: a key's memories        |
//! | `mem/fp/<scope>/<fingerprint>`             | link: the record with these words |
//! | `mem/rank/<scope>/<importance><confidence>/<id>` | link: the snapshot's order |
//! | `mem/tombs/<scope>/<id>`                   | link: the scope's tombstones  |
//! | `mem/lookups`                              | memory revision the ranking, tombstone lists and postings (`index`) were kept at |

use crate::authority;
use crate::canonical::{self, Timestamp};
use crate::contracts::{MemoryRecord, MemoryState, Scope, Sensitivity, SourceRef};
use crate::error::Result;
use crate::index;
use crate::store::{keys, Db};
use serde_json::json;
use std::collections::BTreeMap;
use super::requests::{AuditEntry, Authority, DeletionReceipt, Tombstone};

/// Most records one scan of a scope reads, and so the most one delete or
/// purge may touch.
pub const MAX_SELECTED: usize = 100_000;

contract! {
struct Counter {
    revision: u64,
}
}

contract! {
/// The memory revision the lookups were last kept at, and the layout they
/// were kept in: a store whose lookups a kernel with fewer of them kept is
/// not current.
struct LookupsMark {
    layout: u32,
    revision: u64,
}
}

/// The lookups kept: 2 adds each scope's postings per term.
const LOOKUPS_LAYOUT: u32 = 2;

contract! {
struct AuditCounter {
    next: u64,
}
}

contract! {
/// A scope's membership entry: the key is escaped, the value says the id.
/// A lookup entry pointing at a record (scope membership, slot, fingerprint).
pub(super) struct Link {
    pub(super) memory_id: String,
}
}

contract! {
pub(super) struct Deletion {
    pub(super) pending: Vec<String>,
    pub(super) receipt: DeletionReceipt,
}
}

contract! {
/// A deleted memory's words, by fingerprint, in the scope it was in.
/// What a deletion leaves so that the fact is not learned again: its words'
/// digest is the key; the rest recognises it in other words.
pub(super) struct ContentFence {
    pub(super) deleted_at: Timestamp,
    /// The embedding the host supplied with the memory, until purge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) embedding: Option<Vec<f32>>,
    /// The session events the memory was drawn from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) evidence: Vec<SourceRef>,
    pub(super) memory_id: String,
    /// Digests of its names and numbers (`Dana`, `1990`), which read the
    /// same in any language; until purge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) names: Vec<String>,
}
}

// ---- keys

/// A scope's key segment (see [`keys::scope`]).
fn scope_segment(scope: Scope, scope_id: &Option<String>) -> String {
    keys::scope(scope, scope_id)
}

pub(super) fn record_key(id: &str) -> String {
    format!("mem/rec/{}", keys::segment(id))
}

pub(super) fn tombstone_key(id: &str) -> String {
    format!("mem/tomb/{}", keys::segment(id))
}

fn member_key(scope: Scope, scope_id: &Option<String>, id: &str) -> String {
    format!("mem/scope/{}/{}", scope_segment(scope, scope_id), keys::segment(id))
}

fn members_prefix(scope: Scope, scope_id: &Option<String>) -> String {
    format!("mem/scope/{}/", scope_segment(scope, scope_id))
}

/// Where lookup entries live: scope memberships, slots, fingerprints and
/// the resident ranking.
pub(super) const LINK_PREFIXES: [&str; 4] = ["mem/scope/", "mem/slot/", "mem/fp/", RANKING];

/// Where each scope's resident ranking lives: an entry per memory a
/// snapshot may show, keyed so that key order is the snapshot's order.
pub(super) const RANKING: &str = "mem/rank/";

/// Where each scope's tombstones are listed, by id.
pub(super) const BURIED: &str = "mem/tombs/";

/// The memory revision the ranking, the tombstone lists and the postings
/// were last kept at (see [`lookups_current`]).
const LOOKUPS: &str = "mem/lookups";

/// Where consolidation journals live (see `consolidation`).
pub(super) const JOURNALS: &str = "mem/ext/";

/// A consolidation journal's receipts, each holding the memory it proposed
/// or merged into (a retried extraction answers with them).
pub(super) fn journal_receipts(journal: &mut serde_json::Value) -> Option<&mut Vec<serde_json::Value>> {
    journal.pointer_mut("/response/receipts").and_then(serde_json::Value::as_array_mut)
}

/// The id of the memory a receipt holds.
pub(super) fn receipt_memory(receipt: &serde_json::Value) -> Option<&str> {
    receipt.pointer("/memory/memoryId").and_then(serde_json::Value::as_str)
}

fn slot_key(scope: Scope, scope_id: &Option<String>, key: &str, id: &str) -> String {
    format!("{}{}", slot_prefix(scope, scope_id, key), keys::segment(id))
}

pub(super) fn slot_prefix(scope: Scope, scope_id: &Option<String>, key: &str) -> String {
    format!("mem/slot/{}/{}/", scope_segment(scope, scope_id), keys::segment(key))
}

pub(super) fn fingerprint_key(scope: Scope, scope_id: &Option<String>, fingerprint: &str) -> String {
    format!("mem/fp/{}/{}", scope_segment(scope, scope_id), fingerprint.trim_start_matches("sha256:"))
}

/// A record's place in its scope's resident ranking: most important first,
/// then most certain, then by id. Only active memories a snapshot may show
/// (sensitivity `internal` or below) have one.
pub(super) fn rank_key(record: &MemoryRecord) -> Option<String> {
    if !matches!(record.state, MemoryState::Active | MemoryState::Reinforced) || record.sensitivity > Sensitivity::Internal {
        return None;
    }
    // `f64::total_cmp`'s order as unsigned bits, flipped: larger first.
    let descending = |x: f64| {
        let bits = x.to_bits();
        !(if bits >> 63 == 1 { !bits } else { bits | 1 << 63 })
    };
    let (importance, confidence) = (descending(record.importance), descending(record.confidence));
    Some(format!("{}{importance:016x}{confidence:016x}/{}", ranking_prefix(record.scope, &record.scope_id), keys::segment(&record.memory_id)))
}

fn ranking_prefix(scope: Scope, scope_id: &Option<String>) -> String {
    format!("{RANKING}{}/", scope_segment(scope, scope_id))
}

fn buried_prefix(scope: Scope, scope_id: &Option<String>) -> String {
    format!("{BURIED}{}/", scope_segment(scope, scope_id))
}

pub(super) fn buried_key(tomb: &Tombstone) -> String {
    format!("{}{}", buried_prefix(tomb.scope, &tomb.scope_id), keys::segment(&tomb.memory_id))
}

fn audit_key(id: &str, n: u64) -> String {
    format!("mem/audit/{}/{n:08}", keys::segment(id))
}

/// The keys a memory's words are fenced under, by the scope and the content
/// alone (a re-extraction under another category or key is still the same
/// words): the words as a reader sees them (`Frank\u{200b}furt` and
/// `Ｆrankfurt` are `frankfurt`), and again with British spellings read as
/// American ones (`favourite colour` is `favorite color`).
pub(super) fn fence_keys(scope: Scope, scope_id: &Option<String>, content: &str) -> Result<Vec<String>> {
    let key = |words: Vec<String>| -> Result<String> {
        let digest = canonical::digest_value(&json!([scope, scope_id, words.join(" ")]))?;
        Ok(format!("{}{}", fences_prefix(scope, scope_id), digest.trim_start_matches("sha256:")))
    };
    let plain = key(authority::words(content))?;
    let folded = key(authority::words(&american(content)))?;
    Ok(if folded == plain { vec![plain] } else { vec![plain, folded] })
}

/// Where a scope's fences are.
pub(super) fn fences_prefix(scope: Scope, scope_id: &Option<String>) -> String {
    format!("mem/fence/{}/", scope_segment(scope, scope_id))
}

/// Text lowercased, its words with British spellings read as American (a
/// word with a look-alike letter read as its skeleton first: `cоlour`).
fn american(text: &str) -> String {
    let lowered = crate::text::normalize(text).to_lowercase();
    let words = lowered.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty());
    let plain = words.map(|w| if w.is_ascii() { w.to_string() } else { unicode_security::skeleton(w).collect() });
    plain.map(|w| crate::text::fold_spelling(&w).into_owned()).collect::<Vec<_>>().join(" ")
}

/// Short digests of a text's recall terms (British spellings read as
/// American).
pub(super) fn fence_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = index::terms(&american(text)).iter().map(|t| short_digest(t)).collect();
    terms.sort();
    terms.dedup();
    terms
}

fn short_digest(term: &str) -> String {
    canonical::digest_bytes(term.as_bytes())[7..23].to_string()
}

/// [`fence_terms`] of a text's names and numbers only: words written with a
/// capital inside a sentence (a sentence's first word may be any word: `User
/// drinks tea`), or with a digit.
pub(super) fn fence_names(text: &str) -> Vec<String> {
    // Runs of cased letters and digits: uncased scripts (Han, kana) have
    // no capitals to tell a name by.
    let cased = |c: char| c.is_ascii_digit() || c.is_uppercase() || c.is_lowercase();
    let mut names = Vec::new();
    let (mut previous, mut run, mut opens) = (None::<char>, String::new(), true);
    for c in crate::text::normalize(text).chars().chain([' ']) {
        if cased(c) {
            if run.is_empty() {
                opens = previous.is_none_or(|p| matches!(p, '.' | '!' | '?' | ':' | '。' | '！' | '？'));
            }
            run.push(c);
        } else if !run.is_empty() {
            let capital = !opens && run.chars().next().is_some_and(char::is_uppercase);
            if capital || run.chars().any(|c| c.is_ascii_digit()) {
                names.extend(fence_terms(&run));
            }
            run.clear();
        }
        if !c.is_whitespace() {
            previous = Some(c);
        }
    }
    names.sort();
    names.dedup();
    names
}

pub(super) fn version_key(id: &str, revision: u64) -> String {
    format!("mem/ver/{}/{revision:08}", keys::segment(id))
}

// ---- helpers

/// Text as the user-grounding and fingerprint checks compare it.
fn normalize(text: &str) -> String {
    let lowered: String = text
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    lowered.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) fn fingerprint(scope: Scope, scope_id: &Option<String>, category: &str, key: &Option<String>, content: &str) -> Result<String> {
    canonical::digest_value(&json!([scope, scope_id, category, key, normalize(content)]))
}

/// Ends a call that changed memories: advances the memory revision, and
/// keeps the lookups current with it. Lookups this call found out of date
/// (a store written before they existed, or by a kernel that does not keep
/// them) are rebuilt from the records and tombstones first, and a kernel
/// event says so.
pub(super) fn memory_revision_bump(db: &mut Db, now: &Timestamp) -> Result<u64> {
    let current = db.get::<Counter>(keys::MEMORY_REVISION)?;
    let expected = current.as_ref().map_or(0, |(r, _)| *r);
    let revision = current.map_or(0, |(_, c)| c.revision);
    if !lookups_current(db)? {
        let (ranked, buried, postings) = rebuild_lookups(db)?;
        let data = json!({"postings": postings, "ranked": ranked, "tombstones": buried, "memoryRevision": revision});
        crate::events::emit(db, "memory.lookups-rebuilt", now, None, None, data)?;
    }
    let next = revision + 1;
    db.put(keys::MEMORY_REVISION, &Counter { revision: next }, Some(expected))?;
    db.put(LOOKUPS, &LookupsMark { layout: LOOKUPS_LAYOUT, revision: next }, None)?;
    Ok(next)
}

/// Whether the ranking, the tombstone lists and the postings were kept by
/// every call that changed memories: they were last kept, in this layout,
/// at the memory revision (or no memory was ever written). Reads fall back
/// to the records when not.
pub fn lookups_current(db: &mut Db) -> Result<bool> {
    let kept = db.get::<LookupsMark>(LOOKUPS).ok().flatten().map(|(_, m)| m);
    let revision = db.memory_revision()?;
    Ok(match kept {
        Some(mark) => mark.layout == LOOKUPS_LAYOUT && mark.revision == revision,
        None => revision == 0,
    })
}

/// Writes the ranking, the tombstone lists and the postings again from the
/// records and tombstones; returns how many entries of each it wrote.
fn rebuild_lookups(db: &mut Db) -> Result<(u64, u64, u64)> {
    for prefix in [RANKING, BURIED, index::TERMS, index::STATS] {
        let mut stale = Vec::new();
        db.visit(prefix, |key, _| {
            stale.push(key.to_string());
            Ok(())
        })?;
        for key in stale {
            db.remove(&key, None)?;
        }
    }
    let mut tombs: BTreeMap<String, Tombstone> = BTreeMap::new();
    db.visit("mem/tomb/", |key, value| {
        let tomb: Tombstone = crate::store::decode(key, value)?;
        tombs.insert(tomb.memory_id.clone(), tomb);
        Ok(())
    })?;
    // A page of records at a time, so a large store is never all in memory.
    let (mut ranked, mut postings) = (0, 0);
    let mut after = String::new();
    loop {
        let page = db.scan_bytes("mem/rec/", &after, 512)?;
        for (key, value) in &page {
            let record: MemoryRecord = crate::store::decode(key, value)?;
            if tombs.get(&record.memory_id).is_some_and(|t| record.revision <= t.revision) {
                continue;
            }
            if let Some(rank) = rank_key(&record) {
                db.put(&rank, &Link { memory_id: record.memory_id.clone() }, None)?;
                ranked += 1;
            }
            postings += index::repost(db, &record)?;
        }
        match page.last() {
            Some((key, _)) if page.len() == 512 => after.clone_from(key),
            _ => break,
        }
    }
    for tomb in tombs.values() {
        db.put(&buried_key(tomb), &Link { memory_id: tomb.memory_id.clone() }, None)?;
    }
    Ok((ranked, tombs.len() as u64, postings))
}

/// Every memory of a scope, by id, however many.
pub fn scope_members(db: &mut Db, scope: Scope, scope_id: &Option<String>) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    db.visit(&members_prefix(scope, scope_id), |key, value| {
        ids.push(crate::store::decode::<Link>(key, value)?.memory_id);
        Ok(())
    })?;
    Ok(ids)
}

/// The ids of a scope's memories, or of those in one of its slots when a
/// key is given (at most one more than the ceiling, so callers can tell).
pub(super) fn members(db: &mut Db, scope: Scope, scope_id: &Option<String>, key: Option<&str>) -> Result<Vec<String>> {
    let prefix = match key {
        Some(key) => slot_prefix(scope, scope_id, key),
        None => members_prefix(scope, scope_id),
    };
    let entries: Vec<(String, Link)> = db.scan(&prefix, "", MAX_SELECTED + 1)?;
    Ok(entries.into_iter().map(|(_, m)| m.memory_id).collect())
}

/// Hands `each` the scope's memories a resident snapshot may show, most
/// important first, until it returns false. Returns false, having stopped,
/// when the ranking disagrees with a record: the caller starts again with
/// `trusted` false, which reads every record of the scope instead (as it
/// does when the ranking is not current).
pub fn ranked(db: &mut Db, scope: Scope, scope_id: &Option<String>, trusted: bool, mut each: impl FnMut(&MemoryRecord) -> bool) -> Result<bool> {
    if !trusted || !lookups_current(db)? {
        let mut all = Vec::new();
        for id in members(db, scope, scope_id, None)? {
            if let Some((_, record)) = load(db, &id)? {
                if let Some(rank) = rank_key(&record).filter(|_| record.scope == scope && record.scope_id == *scope_id) {
                    all.push((rank, record));
                }
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, record) in &all {
            if !each(record) {
                break;
            }
        }
        return Ok(true);
    }
    // Snapshots are short: a small page is most of what one reads.
    const PAGE: usize = 64;
    let prefix = ranking_prefix(scope, scope_id);
    let mut after = String::new();
    loop {
        let page = db.scan_bytes(&prefix, &after, PAGE)?;
        for (key, value) in &page {
            let Ok(link) = serde_json::from_slice::<Link>(value) else { return Ok(false) };
            let Some((_, record)) = load(db, &link.memory_id)? else { return Ok(false) };
            if rank_key(&record).as_deref() != Some(key.as_str()) {
                return Ok(false);
            }
            if !each(&record) {
                return Ok(true);
            }
        }
        match page.last() {
            Some((key, _)) if page.len() == PAGE => after.clone_from(key),
            _ => return Ok(true),
        }
    }
}

/// The record and its store revision, unless a tombstone fences it off.
pub fn load(db: &mut Db, id: &str) -> Result<Option<(u64, MemoryRecord)>> {
    let Some((store_revision, record)) = db.get::<MemoryRecord>(&record_key(id))? else {
        return Ok(None);
    };
    Ok(is_live(db, &record)?.then_some((store_revision, record)))
}

/// The tombstones of one scope, however many the store holds: read a page
/// at a time, never cut off at a count. From the scope's list when it is
/// current and agrees with every tombstone it names; from all tombstones
/// otherwise.
pub fn scope_tombstones(db: &mut Db, scope: Scope, scope_id: &Option<String>) -> Result<Vec<Tombstone>> {
    if lookups_current(db)? {
        let mut ids = Vec::new();
        let mut readable = true;
        db.visit(&buried_prefix(scope, scope_id), |key, value| {
            match serde_json::from_slice::<Link>(value) {
                Ok(link) => ids.push((key.to_string(), link.memory_id)),
                Err(_) => readable = false,
            }
            Ok(())
        })?;
        let mut found = Vec::with_capacity(ids.len());
        for (key, id) in ids.iter().take_while(|_| readable) {
            match db.get::<Tombstone>(&tombstone_key(id)) {
                Ok(Some((_, tomb))) if buried_key(&tomb) == *key => found.push(tomb),
                _ => break,
            }
        }
        if readable && found.len() == ids.len() {
            return Ok(found);
        }
    }
    let mut found = Vec::new();
    db.visit("mem/tomb/", |key, value| {
        let tomb: Tombstone = crate::store::decode(key, value)?;
        if tomb.scope == scope && tomb.scope_id == *scope_id {
            found.push(tomb);
        }
        Ok(())
    })?;
    Ok(found)
}

/// Every tombstone's memory id and the revision it buried.
pub fn tombstones(db: &mut Db) -> Result<BTreeMap<String, u64>> {
    Ok(db.scan::<Tombstone>("mem/tomb/", "", usize::MAX)?.into_iter().map(|(_, t)| (t.memory_id, t.revision)).collect())
}

/// False for a replayed copy of a deleted memory: dead, whatever the store holds.
fn is_live(db: &mut Db, record: &MemoryRecord) -> Result<bool> {
    Ok(db.get::<Tombstone>(&tombstone_key(&record.memory_id))?.is_none_or(|(_, tomb)| record.revision > tomb.revision))
}

/// The state a record is in at `now` (validity and retention applied).
pub fn effective_state(record: &MemoryRecord, now: &Timestamp) -> MemoryState {
    let live = matches!(record.state, MemoryState::Active | MemoryState::Reinforced | MemoryState::Candidate);
    if !live {
        return record.state;
    }
    if record.ends_at().is_some_and(|end| end <= now.unix_nanos()) && record.state != MemoryState::Candidate {
        MemoryState::Expired
    } else {
        record.state
    }
}

pub(super) fn audit(db: &mut Db, record: &MemoryRecord, action: &str, from: Option<MemoryState>, authority: Option<&Authority>, at: &Timestamp, note: Option<String>) -> Result<()> {
    let counter_key = format!("mem/audit/{}/next", keys::segment(&record.memory_id));
    let current = db.get::<AuditCounter>(&counter_key)?;
    let revision = current.as_ref().map_or(0, |(r, _)| *r);
    let n = current.map_or(0, |(_, c)| c.next);
    let entry = AuditEntry {
        action: action.into(),
        at: at.clone(),
        authority: authority.cloned(),
        content_digest: record.digest.clone(),
        from,
        note,
        revision: record.revision,
        to: record.state,
    };
    db.put(&audit_key(&record.memory_id, n), &entry, Some(0))?;
    db.put(&counter_key, &AuditCounter { next: n + 1 }, Some(revision))?;
    Ok(())
}

pub(super) fn event_data(record: &MemoryRecord) -> serde_json::Value {
    json!({
        "memoryId": record.memory_id, "scope": record.scope, "state": record.state, "revision": record.revision,
        "category": record.category, "digest": record.digest,
    })
}

/// Writes a record over the one at `store_revision` (0: a new one), and
/// moves its lookup entries with it: those of the version it replaces that
/// the new one no longer has (another scope, words or rank) go.
pub(super) fn save(db: &mut Db, store_revision: u64, record: &mut MemoryRecord, now: &Timestamp) -> Result<()> {
    record.updated_at = now.clone();
    record.digest = canonical::digest_bytes(record.content.as_bytes());
    record.validate()?;
    let previous = if store_revision == 0 { None } else { db.get::<MemoryRecord>(&record_key(&record.memory_id))?.map(|(_, r)| r) };
    db.put(&record_key(&record.memory_id), record, Some(store_revision))?;
    if let Some(previous) = previous {
        let kept = links(record)?;
        for key in links(&previous)?.into_iter().filter(|k| !kept.contains(k)) {
            drop_link(db, &key, &record.memory_id)?;
        }
    }
    link(db, record)?;
    index::add(db, record)?;
    Ok(())
}

/// A record's lookup entries: its scope membership, its slot, its
/// fingerprint, its place in the resident ranking.
pub(super) fn links(record: &MemoryRecord) -> Result<Vec<String>> {
    let mut out = vec![member_key(record.scope, &record.scope_id, &record.memory_id)];
    if let Some(key) = &record.key {
        out.push(slot_key(record.scope, &record.scope_id, key, &record.memory_id));
    }
    let fp = fingerprint(record.scope, &record.scope_id, &record.category, &record.key, &record.content)?;
    out.push(fingerprint_key(record.scope, &record.scope_id, &fp));
    out.extend(rank_key(record));
    Ok(out)
}

fn link(db: &mut Db, record: &MemoryRecord) -> Result<()> {
    for key in links(record)? {
        // A state change keeps the same entries; rewriting them would only churn revisions.
        if db.get::<Link>(&key)?.is_some_and(|(_, l)| l.memory_id == record.memory_id) {
            continue;
        }
        db.put(&key, &Link { memory_id: record.memory_id.clone() }, None)?;
    }
    Ok(())
}

/// Removes the lookup entries that point at this record (a fingerprint may
/// have moved on to a newer record with the same text).
pub(super) fn unlink(db: &mut Db, record: &MemoryRecord) -> Result<()> {
    for key in links(record)? {
        drop_link(db, &key, &record.memory_id)?;
    }
    Ok(())
}

fn drop_link(db: &mut Db, key: &str, memory_id: &str) -> Result<()> {
    if db.get::<Link>(key)?.is_some_and(|(_, l)| l.memory_id == memory_id) {
        db.remove(key, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scope() -> impl Strategy<Value = Scope> {
        prop_oneof![Just(Scope::Session), Just(Scope::Agent), Just(Scope::Project), Just(Scope::User), Just(Scope::Global)]
    }

    fn scope_id() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("-".to_string())),
            Just(Some("%2D".to_string())),
            Just(Some("a/b".to_string())),
            "[-a-z%/.é名\u{200b}]{1,6}".prop_map(Some),
        ]
    }

    proptest! {
        /// Different scopes never share a key, and no scope's prefix covers
        /// another scope's keys.
        #[test]
        fn scope_keys_are_injective_and_prefix_free(a in (scope(), scope_id()), b in (scope(), scope_id()), id in "[a-z0-9-]{1,8}") {
            prop_assume!(a != b);
            prop_assert_ne!(scope_segment(a.0, &a.1), scope_segment(b.0, &b.1));
            prop_assert!(!member_key(b.0, &b.1, &id).starts_with(&members_prefix(a.0, &a.1)));
            prop_assert!(!slot_key(b.0, &b.1, "k", &id).starts_with(&slot_prefix(a.0, &a.1, "k")));
            prop_assert_ne!(fingerprint_key(a.0, &a.1, "sha256:00"), fingerprint_key(b.0, &b.1, "sha256:00"));
            for (pa, pb) in [(ranking_prefix(a.0, &a.1), ranking_prefix(b.0, &b.1)), (buried_prefix(a.0, &a.1), buried_prefix(b.0, &b.1))] {
                prop_assert!(!pa.starts_with(&pb) && !pb.starts_with(&pa));
            }
        }
    }
}
