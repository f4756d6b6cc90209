//! The in-memory inverted index of one kernel instance, sharded by scope and
//! caught up from the store's change log. Never authority: checked against
//! the memory revision at every call.
//!
//! While the store's postings per term are current (`memory::lookups_current`)
//! it holds only what recalls have needed: a query's terms in its admitted
//! scopes, and a scope's every memory once the vector channel needed them,
//! up to `HELD_CEILING`. Otherwise it loads every term vector, as a store
//! without them needs.

use crate::contracts::{MemoryRecord, MemoryState, Scope, SinkPolicies};
use crate::error::Result;
use crate::index::{self, embedding_key, stored_vector, vector_of, DocVector, Embedding, IndexMeta, Lookup, Posting, META};
use crate::memory;
use crate::store::{decode, keys, Db};
use std::collections::{BTreeMap, BTreeSet};

pub(super) struct Doc {
    pub(super) vector: DocVector,
    pub(super) embedding: Option<Vec<f32>>,
}

pub(super) type ScopeKey = (Scope, Option<String>);

/// What an instance holds of the index before a recall is ranked, at most,
/// in bytes as `Postings::held` counts them: past it, the next recall starts
/// from nothing held.
const HELD_CEILING: usize = 256 << 20;

/// One scope's part of the index. Recall reads only the shards of its
/// admitted scopes, so nothing outside them is ever scored or counted.
#[derive(Default)]
pub(super) struct Shard {
    /// The documents held.
    pub(super) slots: BTreeSet<u32>,
    /// The scope's term vectors and their total length, for BM25: counted
    /// when every vector is loaded, read from the store's statistics when
    /// loaded by term.
    pub(super) docs: u64,
    pub(super) total_length: u64,
    /// term → (slot, term frequency), in slot order: every term, or, loaded
    /// by term, those held (a term held is held whole).
    pub(super) postings: Lookup<Vec<(u32, u32)>>,
    /// Loaded by term, whether every document of the scope is held.
    whole: bool,
}

/// How an instance loaded the index: not yet, every term vector at once,
/// or by term as recalls needed them.
#[derive(Default, Clone, Copy, PartialEq)]
enum Mode {
    #[default]
    Empty,
    Whole,
    ByTerm,
}

/// What scoring and filtering read of a document, kept dense by slot so a
/// long posting list is scanned without chasing each document's pointers.
#[derive(Clone, Copy)]
pub(super) struct Facts {
    pub(super) length: u32,
    /// Its (sensitivity, allowed sinks), as an id in `Postings::policies`.
    pub(super) policy: u32,
    /// Current from this (validFrom, in ms; `i64::MIN` when it has none)
    /// while `now` is before `current_until` (`i64::MAX` when it has no end).
    current_from: i64,
    current_until: i64,
    state: MemoryState,
}

impl Facts {
    /// Why the memory is not current at `now_ms`: its state when that is not
    /// active, or the side of its validity `now_ms` falls on.
    pub(super) fn unavailable(&self, now_ms: i64) -> Option<&'static str> {
        if !matches!(self.state, MemoryState::Active | MemoryState::Reinforced) {
            Some(self.state.name())
        } else if now_ms < self.current_from {
            Some("not-yet-valid")
        } else if now_ms >= self.current_until {
            Some("expired")
        } else {
            None
        }
    }
}

/// The in-memory inverted index of one kernel instance. Never authority:
/// checked against the memory revision at every call, and every result is
/// re-read from its record before it is returned.
#[derive(Default)]
pub struct Postings {
    pub(super) revision: u64,
    mode: Mode,
    /// Roughly the bytes held, loaded by term.
    held: usize,
    pub(super) docs: Vec<Option<Doc>>,
    /// By slot, beside `docs`.
    pub(super) facts: Vec<Facts>,
    /// The distinct (sensitivity, allowed sinks) of the documents. Not pruned
    /// before the next full load: one entry per policy ever indexed.
    pub(super) policies: SinkPolicies,
    free: Vec<u32>,
    pub(super) slot_of: Lookup<u32>,
    shards: BTreeMap<ScopeKey, Shard>,
}

/// Every stored embedding, by its memory's key segment (unreadable ones skipped:
/// those memories are found lexically only).
fn stored_embeddings(db: &mut Db) -> Result<BTreeMap<String, Vec<f32>>> {
    let mut embeddings = BTreeMap::new();
    db.visit("mem/emb/", |key, bytes| {
        if let Ok(embedding) = serde_json::from_slice::<Embedding>(bytes) {
            embeddings.insert(key["mem/emb/".len()..].to_string(), embedding.vector);
        }
        Ok(())
    })?;
    Ok(embeddings)
}

/// Roughly what holding a document costs, in bytes.
fn doc_bytes(vector: &DocVector, embedding: Option<&Vec<f32>>) -> usize {
    256 + vector.terms.len() + vector.memory_id.len() + embedding.map_or(0, |e| 4 * e.len())
}

impl Postings {
    pub(super) fn doc(&self, slot: u32) -> &Doc {
        self.docs[slot as usize].as_ref().expect("a slot in a shard holds a document")
    }

    fn remove_doc(&mut self, id: &str) {
        let Some(slot) = self.slot_of.remove(id) else { return };
        let doc = self.docs[slot as usize].take().expect("an indexed slot holds a document");
        let key = (doc.vector.scope, doc.vector.scope_id.clone());
        if let Some(shard) = self.shards.get_mut(&key) {
            shard.slots.remove(&slot);
            // Saturating: loaded by term, these are the store's statistics.
            shard.docs = shard.docs.saturating_sub(1);
            shard.total_length = shard.total_length.saturating_sub(u64::from(doc.vector.length));
            for (term, _) in doc.vector.pairs() {
                if let Some(list) = shard.postings.get_mut(term) {
                    if let Ok(at) = list.binary_search_by_key(&slot, |&(s, _)| s) {
                        list.remove(at);
                    }
                    // Loaded by term, an empty list still says the term is held.
                    if list.is_empty() && self.mode == Mode::Whole {
                        shard.postings.remove(term);
                    }
                }
            }
            if shard.slots.is_empty() && self.mode == Mode::Whole {
                self.shards.remove(&key);
            }
        }
        self.free.push(slot);
    }

    /// Holds a document, in the lists of its terms: all of them when every
    /// vector is loaded, the ones held when loaded by term. Returns its slot.
    fn add_doc(&mut self, vector: DocVector, embedding: Option<Vec<f32>>) -> u32 {
        self.remove_doc(&vector.memory_id);
        self.held += doc_bytes(&vector, embedding.as_ref());
        let whole = self.mode == Mode::Whole;
        let facts = Facts {
            length: vector.length,
            policy: self.policies.id(vector.sensitivity, &vector.allowed_sinks),
            current_from: vector.from_ms.unwrap_or(i64::MIN),
            current_until: vector.until_ms.unwrap_or(i64::MAX),
            state: vector.state,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.facts[slot as usize] = facts;
                slot
            }
            None => {
                self.docs.push(None);
                self.facts.push(facts);
                (self.docs.len() - 1) as u32
            }
        };
        let shard = self.shards.entry((vector.scope, vector.scope_id.clone())).or_default();
        shard.slots.insert(slot);
        shard.docs += 1;
        shard.total_length += u64::from(vector.length);
        for (term, tf) in vector.pairs() {
            match shard.postings.get_mut(term) {
                // Slots mostly grow: mostly a push.
                Some(list) if list.last().is_none_or(|&(last, _)| last < slot) => list.push((slot, tf)),
                Some(list) => {
                    let at = list.partition_point(|&(s, _)| s < slot);
                    list.insert(at, (slot, tf));
                }
                None if whole => {
                    shard.postings.insert(term.to_string(), vec![(slot, tf)]);
                }
                None => {}
            }
        }
        self.held += 8 * vector.pairs().count();
        self.slot_of.insert(vector.memory_id.clone(), slot);
        self.docs[slot as usize] = Some(Doc { vector, embedding });
        slot
    }

    /// Allowed to the sink (by `SinkPolicies::admitted`) and current at `now_ms`.
    pub(super) fn admits(&self, slot: u32, permitted: &[bool], now_ms: i64) -> bool {
        let facts = self.facts[slot as usize];
        permitted[facts.policy as usize] && facts.unavailable(now_ms).is_none()
    }

    /// The shards of the admitted scopes.
    pub(super) fn admitted<'a>(&'a self, scopes: &'a BTreeSet<ScopeKey>) -> impl Iterator<Item = &'a Shard> + 'a {
        scopes.iter().filter_map(|key| self.shards.get(key))
    }

    fn embedding(db: &mut Db, id: &str) -> Option<Vec<f32>> {
        db.get::<Embedding>(&embedding_key(id)).ok().flatten().map(|(_, e)| e.vector)
    }

    /// The term vector of one live memory, from the store; rebuilt from the
    /// record when the stored vector is missing or unreadable.
    fn live_vector(db: &mut Db, id: &str) -> Result<Option<DocVector>> {
        let Some((_, record)) = memory::load(db, id)? else { return Ok(None) };
        Ok(Some(stored_vector(db, id).unwrap_or_else(|| vector_of(&record))))
    }

    /// A memory's stored term vector, trusted as a whole load trusts it;
    /// the live record's when the stored one does not read back.
    fn vector(db: &mut Db, id: &str) -> Result<Option<DocVector>> {
        match stored_vector(db, id) {
            Some(vector) => Ok(Some(vector)),
            None => Self::live_vector(db, id),
        }
    }

    /// Takes in a memory the change log names: held again when every vector
    /// is loaded, or when, loaded by term, its scope is held whole or one of
    /// its terms is held.
    fn reload_doc(&mut self, db: &mut Db, id: &str) -> Result<()> {
        self.remove_doc(id);
        let Some(vector) = Self::live_vector(db, id)? else { return Ok(()) };
        let wanted = self.mode == Mode::Whole
            || self.shards.get(&(vector.scope, vector.scope_id.clone())).is_some_and(|s| s.whole || vector.pairs().any(|(t, _)| s.postings.contains_key(t)));
        if wanted {
            let embedding = Self::embedding(db, id);
            self.add_doc(vector, embedding);
        }
        Ok(())
    }

    /// Brings the index to the store's memory revision. Returns true when it
    /// had to rebuild everything from the records.
    pub fn catch_up(&mut self, db: &mut Db) -> Result<bool> {
        let revision = db.memory_revision()?;
        let meta = db.get::<IndexMeta>(META).ok().flatten().map(|(_, m)| m.revision);
        let consistent = meta == Some(revision) || (revision == 0 && meta.is_none());
        let mode = if consistent && memory::lookups_current(db)? { Mode::ByTerm } else { Mode::Whole };
        if self.mode == mode && consistent && revision >= self.revision {
            if revision > self.revision {
                let start = format!("mem/log/{:020}/~", self.revision);
                let changed: Vec<(String, serde_json::Value)> = db.scan("mem/log/", &start, usize::MAX)?;
                let ids: BTreeSet<String> = changed.into_iter().filter_map(|(_, v)| v["memoryId"].as_str().map(str::to_string)).collect();
                for id in ids {
                    self.reload_doc(db, &id)?;
                }
                self.revision = revision;
            }
            return Ok(false);
        }
        *self = Postings { mode, revision, ..Postings::default() };
        if mode == Mode::ByTerm {
            return Ok(false);
        }
        if consistent {
            self.load_stored(db)?;
        } else {
            // The index lost track of the records: rebuild it from them.
            let mut embeddings = stored_embeddings(db)?;
            let tombstones = memory::tombstones(db)?;
            db.visit("mem/rec/", |key, bytes| {
                let record: MemoryRecord = decode(key, bytes)?;
                if tombstones.get(&record.memory_id).is_none_or(|&revision| record.revision > revision) {
                    let embedding = embeddings.remove(&keys::segment(&record.memory_id));
                    self.add_doc(vector_of(&record), embedding);
                }
                Ok(())
            })?;
        }
        Ok(!consistent)
    }

    /// Loaded by term, holds what a recall will read: each admitted scope's
    /// statistics and the postings of the query's terms, and with `whole`
    /// (the vector channel reads every memory) all of each scope's memories.
    /// Past the ceiling, first lets go of everything held.
    pub(super) fn hold(&mut self, db: &mut Db, scopes: &BTreeSet<ScopeKey>, terms: &BTreeSet<String>, whole: bool) -> Result<()> {
        if self.mode != Mode::ByTerm {
            return Ok(());
        }
        if self.held > HELD_CEILING {
            *self = Postings { mode: Mode::ByTerm, revision: self.revision, ..Postings::default() };
        }
        for key in scopes {
            self.shards.entry(key.clone()).or_default();
            if whole && !self.shards[key].whole {
                self.hold_scope(db, key)?;
            }
            for term in terms {
                if !self.shards[key].postings.contains_key(term) {
                    self.hold_term(db, key, term)?;
                }
            }
            let stats = index::scope_stats(db, key.0, &key.1)?;
            let shard = self.shards.get_mut(key).expect("held above");
            (shard.docs, shard.total_length) = (stats.docs, stats.length);
        }
        Ok(())
    }

    /// Holds every memory of a scope, with its embedding.
    fn hold_scope(&mut self, db: &mut Db, key: &ScopeKey) -> Result<()> {
        for id in memory::scope_members(db, key.0, &key.1)? {
            match self.slot_of.get(&id) {
                Some(&slot) => {
                    let embedding = Self::embedding(db, &id);
                    self.held += embedding.as_ref().map_or(0, |e| 4 * e.len());
                    self.docs[slot as usize].as_mut().expect("a held slot holds a document").embedding = embedding;
                }
                None => {
                    if let Some(vector) = Self::vector(db, &id)? {
                        let embedding = Self::embedding(db, &id);
                        self.add_doc(vector, embedding);
                    }
                }
            }
        }
        self.shards.get_mut(key).expect("held by the caller").whole = true;
        Ok(())
    }

    /// Holds one term's postings in one scope: its memories' term vectors,
    /// each read once. A posting whose memory's vector does not have the
    /// term, or is of another scope, is passed over.
    fn hold_term(&mut self, db: &mut Db, key: &ScopeKey, term: &str) -> Result<()> {
        let mut ids = Vec::new();
        db.visit(&index::term_prefix(key.0, &key.1, term), |_, value| {
            if let Ok(posting) = serde_json::from_slice::<Posting>(value) {
                ids.push(posting.memory_id);
            }
            Ok(())
        })?;
        let mut list = Vec::with_capacity(ids.len());
        for id in ids {
            let slot = match self.slot_of.get(&id) {
                Some(&slot) => slot,
                None => match Self::vector(db, &id)? {
                    Some(vector) if (vector.scope, &vector.scope_id) == (key.0, &key.1) => self.add_doc(vector, None),
                    _ => continue,
                },
            };
            let vector = &self.doc(slot).vector;
            if let Some(tf) = vector.frequency(term).filter(|_| (vector.scope, &vector.scope_id) == (key.0, &key.1)) {
                list.push((slot, tf));
            }
        }
        list.sort_unstable();
        list.dedup_by_key(|&mut (slot, _)| slot);
        self.held += 8 * list.len() + term.len();
        self.shards.get_mut(key).expect("held by the caller").postings.insert(term.to_string(), list);
        Ok(())
    }

    /// A first load from the stored term vectors and embeddings; a vector
    /// that does not read back is rebuilt from its record.
    fn load_stored(&mut self, db: &mut Db) -> Result<()> {
        let mut embeddings = stored_embeddings(db)?;
        let mut unreadable = Vec::new();
        db.visit("mem/idx/doc/", |key, bytes| {
            let segment = &key["mem/idx/doc/".len()..];
            match serde_json::from_slice::<DocVector>(bytes) {
                Ok(vector) if keys::segment(&vector.memory_id) == segment => {
                    let embedding = embeddings.remove(segment);
                    self.add_doc(vector, embedding);
                }
                // Memory ids are their own key segments.
                _ => unreadable.push(segment.to_string()),
            }
            Ok(())
        })?;
        for id in unreadable {
            self.reload_doc(db, &id)?;
        }
        Ok(())
    }
}
