//! The in-memory inverted index of one kernel instance, sharded by scope and
//! caught up from the store's change log. Never authority: checked against
//! the memory revision at every call.

use crate::contracts::{MemoryRecord, MemoryState, Scope, SinkPolicies};
use crate::error::Result;
use crate::index::{doc_key, embedding_key, vector_of, DocVector, Embedding, IndexMeta, Lookup, META};
use crate::memory;
use crate::store::{decode, keys, Db};
use std::collections::{BTreeMap, BTreeSet};
use super::requests::ScopeRef;

pub(super) struct Doc {
    pub(super) vector: DocVector,
    pub(super) embedding: Option<Vec<f32>>,
}

type ScopeKey = (Scope, Option<String>);

/// One scope's part of the index. Recall reads only the shards of its
/// admitted scopes, so nothing outside them is ever scored or counted.
#[derive(Default)]
pub(super) struct Shard {
    pub(super) slots: BTreeSet<u32>,
    pub(super) total_length: u64,
    /// term → (slot, term frequency), in slot order.
    pub(super) postings: Lookup<Vec<(u32, u32)>>,
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
    loaded: bool,
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

/// `term:tf` pairs of a stored vector.
fn term_pairs(terms: &str) -> impl Iterator<Item = (&str, u32)> {
    terms.split(' ').filter_map(|pair| pair.rsplit_once(':').map(|(t, n)| (t, n.parse().unwrap_or(1))))
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
            shard.total_length -= u64::from(doc.vector.length);
            for (term, _) in term_pairs(&doc.vector.terms) {
                if let Some(list) = shard.postings.get_mut(term) {
                    if let Ok(at) = list.binary_search_by_key(&slot, |&(s, _)| s) {
                        list.remove(at);
                    }
                    if list.is_empty() {
                        shard.postings.remove(term);
                    }
                }
            }
            if shard.slots.is_empty() {
                self.shards.remove(&key);
            }
        }
        self.free.push(slot);
    }

    fn add_doc(&mut self, vector: DocVector, embedding: Option<Vec<f32>>) {
        self.remove_doc(&vector.memory_id);
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
        shard.total_length += u64::from(vector.length);
        for (term, tf) in term_pairs(&vector.terms) {
            match shard.postings.get_mut(term) {
                // Slots mostly grow: mostly a push.
                Some(list) if list.last().is_none_or(|&(last, _)| last < slot) => list.push((slot, tf)),
                Some(list) => {
                    let at = list.partition_point(|&(s, _)| s < slot);
                    list.insert(at, (slot, tf));
                }
                None => {
                    shard.postings.insert(term.to_string(), vec![(slot, tf)]);
                }
            }
        }
        self.slot_of.insert(vector.memory_id.clone(), slot);
        self.docs[slot as usize] = Some(Doc { vector, embedding });
    }

    /// Allowed to the sink (by `SinkPolicies::admitted`) and current at `now_ms`.
    pub(super) fn admits(&self, slot: u32, permitted: &[bool], now_ms: i64) -> bool {
        let facts = self.facts[slot as usize];
        permitted[facts.policy as usize] && facts.unavailable(now_ms).is_none()
    }

    /// The shards of the admitted scopes.
    pub(super) fn admitted<'a>(&'a self, scopes: &'a [ScopeRef]) -> impl Iterator<Item = &'a Shard> + 'a {
        let keys: BTreeSet<ScopeKey> = scopes.iter().map(|s| (s.scope, s.scope_id.clone())).collect();
        keys.into_iter().filter_map(|key| self.shards.get(&key))
    }

    /// The term vector and embedding of one memory, from the store; rebuilt
    /// from the record when the stored vector is missing or unreadable.
    fn load_doc(&mut self, db: &mut Db, id: &str) -> Result<()> {
        let Some((_, record)) = memory::load(db, id)? else {
            self.remove_doc(id);
            return Ok(());
        };
        let vector = match db.get::<DocVector>(&doc_key(id)) {
            Ok(Some((_, v))) if v.memory_id == id => v,
            _ => vector_of(&record),
        };
        let embedding = db.get::<Embedding>(&embedding_key(id)).ok().flatten().map(|(_, e)| e.vector);
        self.add_doc(vector, embedding);
        Ok(())
    }

    /// Brings the index to the store's memory revision. Returns true when it
    /// had to rebuild everything from the records.
    pub fn catch_up(&mut self, db: &mut Db) -> Result<bool> {
        let revision = db.memory_revision()?;
        let meta = db.get::<IndexMeta>(META).ok().flatten().map(|(_, m)| m.revision);
        let consistent = meta == Some(revision) || (revision == 0 && meta.is_none());
        if self.loaded && self.revision == revision && consistent {
            return Ok(false);
        }
        if self.loaded && consistent && revision > self.revision {
            let start = format!("mem/log/{:020}/~", self.revision);
            let changed: Vec<(String, serde_json::Value)> = db.scan("mem/log/", &start, usize::MAX)?;
            let ids: BTreeSet<String> = changed.into_iter().filter_map(|(_, v)| v["memoryId"].as_str().map(str::to_string)).collect();
            for id in ids {
                self.load_doc(db, &id)?;
            }
            self.revision = revision;
            return Ok(false);
        }
        *self = Postings::default();
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
        self.revision = revision;
        self.loaded = true;
        Ok(!consistent)
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
            self.load_doc(db, &id)?;
        }
        Ok(())
    }
}
