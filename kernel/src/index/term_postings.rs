//! Each scope's postings in the store, so that a recall reads the postings
//! of its own terms and no others: one entry per (scope, term, memory), and
//! per scope the two numbers BM25 weighs with.
//!
//! | key                                  | value                                  |
//! |--------------------------------------|----------------------------------------|
//! | `mem/idx/term/<scope>/<term>/<id>`   | the memory the term appears in         |
//! | `mem/idx/stat/<scope>`               | its term vectors and their total length |
//!
//! They move with each term vector (`keep`), and they are lookups in the
//! memory layer's sense: believed only while its lookups' mark is current,
//! and rebuilt from the records with the other lookups when it is not. A
//! term's frequency stays in the memory's term vector, which a reader loads
//! anyway for what filtering and fusion need.

use crate::contracts::Scope;
use crate::error::Result;
use crate::store::{keys, Db};
use std::collections::{BTreeMap, BTreeSet};
use super::documents::DocVector;

/// Where the postings live.
pub(crate) const TERMS: &str = "mem/idx/term/";
/// Where each scope's statistics live.
pub(crate) const STATS: &str = "mem/idx/stat/";

contract! {
/// A posting: the memory a term appears in.
pub struct Posting {
    pub memory_id: String,
}
}

contract! {
/// What BM25 needs of a whole scope: its term vectors and their total length.
#[derive(Default)]
pub struct ScopeStats {
    pub docs: u64,
    pub length: u64,
}
}

/// The postings of one term in one scope. A term's segment holds no `/`,
/// so no term's prefix covers another's.
pub fn term_prefix(scope: Scope, scope_id: &Option<String>, term: &str) -> String {
    format!("{TERMS}{}/{}/", keys::scope(scope, scope_id), keys::segment(term))
}

pub(crate) fn posting_key(scope: Scope, scope_id: &Option<String>, term: &str, id: &str) -> String {
    format!("{}{}", term_prefix(scope, scope_id, term), keys::segment(id))
}

pub(crate) fn stats_key(scope: Scope, scope_id: &Option<String>) -> String {
    format!("{STATS}{}", keys::scope(scope, scope_id))
}

/// A scope's statistics; none for a scope without memories.
pub fn scope_stats(db: &mut Db, scope: Scope, scope_id: &Option<String>) -> Result<ScopeStats> {
    Ok(db.get::<ScopeStats>(&stats_key(scope, scope_id))?.map(|(_, s)| s).unwrap_or_default())
}

/// The posting keys of a term vector.
pub(crate) fn posting_keys(vector: &DocVector) -> BTreeSet<String> {
    vector.pairs().map(|(term, _)| posting_key(vector.scope, &vector.scope_id, term, &vector.memory_id)).collect()
}

/// Moves a memory's postings, and its scope's statistics, from the term
/// vector it had to the one it has (either may be none). Only the
/// difference is written: a change of state rewrites nothing here.
pub(crate) fn keep(db: &mut Db, old: Option<&DocVector>, new: Option<&DocVector>) -> Result<()> {
    post(db, old, new)?;
    count(db, old, new)
}

/// Removes the postings of a term vector a replay brought back: the
/// memory's deletion already took it out of its scope's statistics.
pub(crate) fn unpost(db: &mut Db, replayed: &DocVector) -> Result<()> {
    post(db, Some(replayed), None)
}

fn post(db: &mut Db, old: Option<&DocVector>, new: Option<&DocVector>) -> Result<()> {
    let (before, after) = (old.map(posting_keys).unwrap_or_default(), new.map(posting_keys).unwrap_or_default());
    for key in before.difference(&after) {
        db.remove(key, None)?;
    }
    if let Some(new) = new {
        for key in after.difference(&before) {
            db.put(key, &Posting { memory_id: new.memory_id.clone() }, None)?;
        }
    }
    Ok(())
}

fn count(db: &mut Db, old: Option<&DocVector>, new: Option<&DocVector>) -> Result<()> {
    let mut deltas: BTreeMap<String, (i128, i128)> = BTreeMap::new();
    for (vector, sign) in old.map(|v| (v, -1)).into_iter().chain(new.map(|v| (v, 1))) {
        let delta = deltas.entry(stats_key(vector.scope, &vector.scope_id)).or_default();
        delta.0 += sign;
        delta.1 += sign * i128::from(vector.length);
    }
    for (key, (docs, length)) in deltas.into_iter().filter(|(_, d)| *d != (0, 0)) {
        let stats = db.get::<ScopeStats>(&key).ok().flatten().map(|(_, s)| s).unwrap_or_default();
        // Kept from honest vectors these never go below zero; clamped so a
        // store that lost one cannot wrap them.
        let add = |n: u64, d: i128| u64::try_from((i128::from(n) + d).max(0)).unwrap_or(u64::MAX);
        let stats = ScopeStats { docs: add(stats.docs, docs), length: add(stats.length, length) };
        if stats.docs == 0 {
            db.remove(&key, None)?;
        } else {
            db.put(&key, &stats, None)?;
        }
    }
    Ok(())
}
