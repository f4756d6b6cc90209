//! Ranking: the lexical channel (BM25 over the admitted shards), the vector
//! channel (cosine against the query's embedding), and their fusion. Only
//! eligible memories are scored: the sink and time filters decide each one
//! first, and count what they exclude.

use crate::contracts::AuthorityKind;
use crate::index::cosine;
use std::collections::{BTreeMap, BTreeSet};
use super::postings::{Postings, ScopeKey, Shard};
use super::requests::RecallRequest;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalization.
const B: f64 = 0.75;
/// Reciprocal-rank fusion's damping: a channel's n-th result (from 1) adds 1 / (RRF_K + n).
const RRF_K: f64 = 60.0;

/// A memory either channel found: its id, fused and adjusted score, and the
/// channels that found it.
pub(super) type Ranked = (String, f64, Vec<String>);

/// The eligible memories of the admitted scopes that either channel finds,
/// best first. Scope admission is the shards read: nothing outside them is
/// scored or counted.
pub(super) fn rank(index: &Postings, request: &RecallRequest, scopes: &BTreeSet<ScopeKey>, terms: &BTreeSet<String>, filtered: &mut BTreeMap<String, u32>, degraded: &mut Vec<String>) -> Vec<Ranked> {
    let shards: Vec<&Shard> = index.admitted(scopes).collect();
    let permitted = index.policies.admitted(&request.sink);
    let mut filter = Filter { index, permitted, now_ms: request.now.unix_millis(), verdicts: vec![Verdict::Unseen; index.docs.len()] };
    let lexical = lexical(index, &shards, terms, &mut filter, filtered);
    let vector = vector(index, &shards, request, &filter.permitted, degraded);
    fuse(index, lexical, vector, request.k)
}

#[derive(Clone, Copy, PartialEq)]
enum Verdict {
    Unseen,
    Eligible,
    Excluded,
}

/// The sink and time filters: each memory decided once, before it is scored,
/// and each exclusion counted under its reason.
struct Filter<'a> {
    index: &'a Postings,
    permitted: Vec<bool>,
    now_ms: i64,
    verdicts: Vec<Verdict>,
}

impl Filter<'_> {
    fn eligible(&mut self, slot: u32, filtered: &mut BTreeMap<String, u32>) -> bool {
        let verdict = &mut self.verdicts[slot as usize];
        if *verdict == Verdict::Unseen {
            let facts = self.index.facts[slot as usize];
            let reason = if !self.permitted[facts.policy as usize] { Some("sink-denied") } else { facts.unavailable(self.now_ms) };
            if let Some(reason) = reason {
                *filtered.entry(reason.into()).or_default() += 1;
            }
            *verdict = if reason.is_some() { Verdict::Excluded } else { Verdict::Eligible };
        }
        *verdict == Verdict::Eligible
    }
}

/// BM25 with the statistics of the admitted scopes.
fn lexical(index: &Postings, shards: &[&Shard], query_terms: &BTreeSet<String>, filter: &mut Filter, filtered: &mut BTreeMap<String, u32>) -> Vec<(u32, f64)> {
    let n: f64 = shards.iter().map(|s| s.docs as f64).sum();
    let avg_len = if n == 0.0 { 1.0 } else { shards.iter().map(|s| s.total_length as f64).sum::<f64>() / n };
    let mut scores = vec![0f64; index.docs.len()];
    let mut touched: Vec<u32> = Vec::new();
    for term in query_terms {
        let lists: Vec<&Vec<(u32, u32)>> = shards.iter().filter_map(|s| s.postings.get(term)).collect();
        let df: f64 = lists.iter().map(|l| l.len() as f64).sum();
        if df == 0.0 {
            continue;
        }
        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
        for list in lists {
            for &(slot, tf) in list {
                if !filter.eligible(slot, filtered) {
                    continue;
                }
                if scores[slot as usize] == 0.0 {
                    touched.push(slot);
                }
                let tf = f64::from(tf);
                let norm = K1 * (1.0 - B + B * f64::from(index.facts[slot as usize].length) / avg_len);
                scores[slot as usize] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
    }
    touched.into_iter().map(|slot| (slot, scores[slot as usize])).collect()
}

/// Cosine over the admitted, eligible memories with embeddings.
fn vector(index: &Postings, shards: &[&Shard], request: &RecallRequest, permitted: &[bool], degraded: &mut Vec<String>) -> Vec<(u32, f64)> {
    let now_ms = request.now.unix_millis();
    let mut vector: Vec<(u32, f64)> = Vec::new();
    match &request.query_embedding {
        None => degraded.push("vector: no query embedding; lexical only".into()),
        Some(query) => {
            let mut wrong = 0;
            for &slot in shards.iter().flat_map(|s| s.slots.iter()) {
                let Some(embedding) = &index.doc(slot).embedding else { continue };
                if embedding.len() != query.len() {
                    wrong += 1;
                    continue;
                }
                if index.admits(slot, permitted, now_ms) {
                    let score = cosine(query, embedding);
                    if score > 0.0 {
                        vector.push((slot, score));
                    }
                }
            }
            if wrong > 0 {
                degraded.push(format!("vector: {wrong} embeddings of another dimension ignored"));
            }
        }
    }
    vector
}

/// Reciprocal-rank fusion over each channel's head, the channels weighed
/// equally, then each score adjusted by the memory's authority, confidence
/// and importance. Ties go to the smaller memory id.
fn fuse(index: &Postings, lexical: Vec<(u32, f64)>, vector: Vec<(u32, f64)>, k: u32) -> Vec<Ranked> {
    let depth = (k as usize * 8).max(64);
    let mut fused: BTreeMap<&str, (f64, Vec<String>)> = BTreeMap::new();
    for (channel, list) in [("lexical", lexical), ("vector", vector)] {
        for (rank, slot) in top(index, list, depth).into_iter().enumerate() {
            let entry = fused.entry(index.doc(slot).vector.memory_id.as_str()).or_insert((0.0, Vec::new()));
            entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            entry.1.push(channel.into());
        }
    }
    let mut scored: Vec<Ranked> = fused
        .into_iter()
        .map(|(id, (score, channels))| {
            let doc = &index.doc(index.slot_of[id]).vector;
            let authority = match doc.authority {
                Some(AuthorityKind::UserExplicit) => 1.0,
                Some(AuthorityKind::Management) => 0.95,
                _ => 0.9,
            };
            let adjusted = score * 1000.0 * (0.5 + 0.5 * doc.confidence) * authority * (0.9 + 0.1 * doc.importance);
            (id.to_string(), adjusted, channels)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// A channel's best `depth` candidates, by score and then memory id.
fn top(index: &Postings, mut list: Vec<(u32, f64)>, depth: usize) -> Vec<u32> {
    let order = |a: &(u32, f64), b: &(u32, f64)| {
        b.1.total_cmp(&a.1).then_with(|| index.doc(a.0).vector.memory_id.cmp(&index.doc(b.0).vector.memory_id))
    };
    if list.len() > depth {
        list.select_nth_unstable_by(depth, order);
        list.truncate(depth);
    }
    list.sort_by(order);
    list.into_iter().map(|(slot, _)| slot).collect()
}

