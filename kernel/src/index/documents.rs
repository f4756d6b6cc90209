//! Each memory's stored term vector and embedding, and the change log that
//! lets an in-memory index catch up.

use crate::canonical::Timestamp;
use crate::contracts::{AuthorityKind, MemoryRecord, MemoryState, Scope, Sensitivity};
use crate::error::{KernelError, Result};
use crate::store::{keys, Db};
use serde_json::json;
use super::term_postings::{keep, unpost};
use super::tokenize::terms;

/// Longest embedding accepted.
pub const MAX_DIMENSIONS: usize = 4096;
contract! {
/// What the index keeps of one memory: its terms and what filtering needs.
pub struct DocVector {
    pub allowed_sinks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<AuthorityKind>,
    pub confidence: f64,
    pub conflicts: u32,
    /// When it starts being current (validFrom), in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    pub importance: f64,
    pub length: u32,
    pub memory_id: String,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sensitivity: Sensitivity,
    pub state: MemoryState,
    /// `term:tf` pairs, space separated, in term order.
    pub terms: String,
    /// When it stops being current (validTo, or the TTL), in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
}
}

impl DocVector {
    /// Its `(term, frequency)` pairs, in term order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, u32)> {
        self.terms.split(' ').filter_map(|pair| pair.rsplit_once(':').map(|(t, n)| (t, n.parse().unwrap_or(1))))
    }

    /// How often `term` appears in it.
    pub fn frequency(&self, term: &str) -> Option<u32> {
        self.pairs().find(|(t, _)| *t == term).map(|(_, n)| n)
    }
}

/// Where each memory's term vector is kept, by id.
pub(crate) const DOCS: &str = "mem/idx/doc/";
/// Where each memory's embedding is kept, by id.
pub(crate) const EMBEDDINGS: &str = "mem/emb/";

pub(crate) fn doc_key(id: &str) -> String {
    format!("{DOCS}{}", keys::segment(id))
}

pub(crate) fn embedding_key(id: &str) -> String {
    format!("{EMBEDDINGS}{}", keys::segment(id))
}

pub(crate) const META: &str = "mem/idx/meta";

contract! {
pub(crate) struct IndexMeta {
    pub(crate) revision: u64,
}
}

contract! {
pub(crate) struct Embedding {
    pub(crate) vector: Vec<f32>,
}
}

pub(crate) fn vector_of(record: &MemoryRecord) -> DocVector {
    // A space ends every word, so the parts' terms are those of the parts joined.
    let summary = record.summary.as_deref().unwrap_or("");
    let tags = record.tags.iter().map(String::as_str);
    let mut all: Vec<String> = Vec::new();
    for part in [record.content.as_str(), summary].into_iter().chain(tags).chain([record.category.as_str(), record.key.as_deref().unwrap_or("")]) {
        all.extend(terms(part));
    }
    let mut sorted: Vec<&str> = all.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let mut pairs = String::with_capacity(sorted.len() * 8);
    for run in sorted.chunk_by(|a, b| a == b) {
        if !pairs.is_empty() {
            pairs.push(' ');
        }
        pairs.push_str(run[0]);
        pairs.push(':');
        pairs.push_str(itoa::Buffer::new().format(run.len()));
    }
    DocVector {
        allowed_sinks: record.allowed_sinks.clone(),
        authority: record.authority,
        confidence: record.confidence,
        conflicts: record.conflicts_with.len() as u32,
        from_ms: record.valid_from.as_ref().map(Timestamp::unix_millis),
        importance: record.importance,
        length: all.len() as u32,
        memory_id: record.memory_id.clone(),
        scope: record.scope,
        scope_id: record.scope_id.clone(),
        sensitivity: record.sensitivity,
        state: record.state,
        terms: pairs,
        // Past the calendar's end (a TTL of centuries) is never, in ms.
        until_ms: record.ends_at().map(|end| i64::try_from(end.div_euclid(1_000_000)).unwrap_or(i64::MAX)),
    }
}

fn pending_revision(db: &mut Db) -> Result<u64> {
    Ok(db.memory_revision()? + 1)
}

fn log(db: &mut Db, id: &str) -> Result<()> {
    let revision = pending_revision(db)?;
    db.put(&format!("mem/log/{revision:020}/{}", keys::segment(id)), &json!({"memoryId": id}), None)?;
    db.put(META, &IndexMeta { revision }, None)?;
    Ok(())
}

/// A memory's stored term vector, if it reads back as that memory's.
pub(crate) fn stored_vector(db: &mut Db, id: &str) -> Option<DocVector> {
    db.get::<DocVector>(&doc_key(id)).ok().flatten().map(|(_, v)| v).filter(|v| v.memory_id == id)
}

/// Writes a record's term vector, and moves its postings with it (called
/// whenever a record is saved).
pub fn add(db: &mut Db, record: &MemoryRecord) -> Result<()> {
    let vector = vector_of(record);
    let old = stored_vector(db, &record.memory_id);
    keep(db, old.as_ref(), Some(&vector))?;
    db.put(&doc_key(&record.memory_id), &vector, None)?;
    log(db, &record.memory_id)
}

/// Writes a live memory's postings as a rebuild does, from its stored term
/// vector or, when that does not read back, one built from its record.
pub(crate) fn repost(db: &mut Db, record: &MemoryRecord) -> Result<u64> {
    let vector = stored_vector(db, &record.memory_id).unwrap_or_else(|| vector_of(record));
    keep(db, None, Some(&vector))?;
    Ok(vector.pairs().count() as u64)
}

/// Removes a memory from every index; returns the receipts' targets.
pub fn remove(db: &mut Db, id: &str) -> Result<Vec<String>> {
    let old = stored_vector(db, id);
    keep(db, old.as_ref(), None)?;
    drop_entries(db, id)
}

/// Removes what a replay brought back of a deleted memory's index entries.
/// Its scope's statistics stopped counting it at its deletion, so they are
/// left as they are.
pub(crate) fn remove_replayed(db: &mut Db, id: &str) -> Result<()> {
    if let Some(replayed) = stored_vector(db, id) {
        unpost(db, &replayed)?;
    }
    drop_entries(db, id).map(drop)
}

fn drop_entries(db: &mut Db, id: &str) -> Result<Vec<String>> {
    db.remove(&doc_key(id), None)?;
    let mut targets = vec!["index:lexical".to_string()];
    // Read as bytes: an entry that does not decode is removed all the same.
    if db.get_bytes(&embedding_key(id))?.is_some() {
        db.remove(&embedding_key(id), None)?;
        targets.push("index:vector".into());
    }
    log(db, id)?;
    Ok(targets)
}

/// Cosine similarity, in f64, in one order; 0 for a zero vector.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Stores a memory's embedding (supplied by the host with the proposal).
pub fn embed(db: &mut Db, id: &str, vector: &[f32]) -> Result<()> {
    check_embedding("embedding", vector)?;
    db.put(&embedding_key(id), &Embedding { vector: vector.to_vec() }, None).map(|_| ())
}

/// An embedding, stored or queried: 1..=MAX_DIMENSIONS numbers, each finite
/// as an f32 (so `1e308` is refused, not read as infinity).
pub(crate) fn check_embedding(field: &str, vector: &[f32]) -> Result<()> {
    if let Some(at) = vector.iter().position(|x| !x.is_finite()) {
        let path = format!("{field}[{at}]");
        return Err(KernelError::invalid(format!("at `{path}`: past a 32-bit float's range (±3.4028235e38); {field} has 1..={MAX_DIMENSIONS} finite numbers"))
            .with_detail(json!({"field": field, "path": path})));
    }
    if vector.is_empty() || vector.len() > MAX_DIMENSIONS {
        return Err(KernelError::invalid(format!("{field} has 1..={MAX_DIMENSIONS} numbers, each finite as a 32-bit float"))
            .with_detail(json!({"field": field, "path": field})));
    }
    Ok(())
}
