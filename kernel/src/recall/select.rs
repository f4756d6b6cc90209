//! The last word is the record's: each ranked memory re-read and checked,
//! near-duplicates skipped, clipped to the token budget, with the history it
//! superseded and the conflicts it stands in, all held to the request's
//! scopes and sink.

use crate::contracts::{MemoryRecord, MemoryState};
use crate::error::Result;
use crate::index::terms;
use crate::memory;
use crate::store::Db;
use crate::tokens;
use std::collections::{BTreeMap, BTreeSet};
use super::rank::Ranked;
use super::requests::{HistoryEntry, RecallRequest, Recalled};

/// The results, in rank order, within `k` and the token budget.
pub(super) fn select(db: &mut Db, request: &RecallRequest, ranked: Vec<Ranked>, filtered: &mut BTreeMap<String, u32>) -> Result<Vec<Recalled>> {
    // Supersession is settled by state above; conflicts stay and are attributed.
    // Diversity: skip near-duplicates; then the token budget.
    // What this request may see of any record: in an admitted scope and
    // allowed to the sink (history and conflicts are held to it too), and
    // for a result also live at `now`.
    let visible = |record: &MemoryRecord| {
        request.scopes.iter().any(|s| s.scope == record.scope && s.scope_id == record.scope_id) && memory::sink_permits(record, &request.sink)
    };
    let admitted = |record: &MemoryRecord| {
        visible(record) && matches!(memory::effective_state(record, &request.now), MemoryState::Active | MemoryState::Reinforced)
    };
    let mut memories = Vec::new();
    let mut chosen_terms: Vec<BTreeSet<String>> = Vec::new();
    let mut budget = request.max_tokens;
    for (id, relevance, channels) in ranked {
        if memories.len() as u32 >= request.k || budget == 0 {
            break;
        }
        // The record, not the index, has the last word.
        let record = match memory::load(db, &id)? {
            Some((_, record)) if admitted(&record) && record.valid_from.as_ref().is_none_or(|from| *from <= request.now) => record,
            _ => {
                *filtered.entry("index-stale".into()).or_default() += 1;
                continue;
            }
        };
        let own: BTreeSet<String> = terms(&record.content).into_iter().collect();
        let duplicate = chosen_terms.iter().any(|other| {
            let common = own.intersection(other).count() as f64;
            let union = own.union(other).count().max(1) as f64;
            common / union > 0.85
        });
        if duplicate {
            *filtered.entry("near-duplicate".into()).or_default() += 1;
            continue;
        }
        // Within the budget, always: a memory that does not fit is clipped
        // to what does, and one that cannot fit at all ends the list.
        let mut content = record.content.clone();
        let mut tokens = tokens::estimate(&content);
        let truncated = tokens > budget;
        if truncated {
            let chars: Vec<char> = content.chars().collect();
            let clipped = |n: usize| chars[..n].iter().collect::<String>() + " …";
            let (mut lo, mut hi) = (0, chars.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if tokens::estimate(&clipped(mid)) <= budget {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            if lo == 0 {
                break;
            }
            content = clipped(lo);
            tokens = tokens::estimate(&content);
        }
        budget = budget.saturating_sub(tokens);
        let mut history = Vec::new();
        let mut seen_history = BTreeSet::new();
        let mut queue = record.supersedes.clone();
        while let Some(previous) = queue.pop() {
            if !seen_history.insert(previous.clone()) || history.len() >= 8 {
                continue;
            }
            if let Some((_, old)) = memory::load(db, &previous)? {
                // History is charged to the budget too: what does not fit is left out.
                let cost = tokens::estimate(&old.content);
                if visible(&old) && cost <= budget {
                    budget -= cost;
                    tokens += cost;
                    queue.extend(old.supersedes.clone());
                    history.push(HistoryEntry { content: old.content, memory_id: old.memory_id, valid_to: old.valid_to });
                }
            }
        }
        let mut conflicts = Vec::new();
        for other in &record.conflicts_with {
            if memory::load(db, other)?.is_some_and(|(_, rival)| visible(&rival)) {
                conflicts.push(other.clone());
            }
        }
        chosen_terms.push(own);
        memories.push(Recalled {
            authority: record.authority,
            confidence: record.confidence,
            conflicts,
            content,
            evidence_refs: record.evidence_refs.clone(),
            history,
            memory_id: record.memory_id.clone(),
            matched_by: channels,
            rank: memories.len() as u32 + 1,
            relevance: (relevance * 1000.0).round() / 1000.0,
            scope: record.scope,
            scope_id: record.scope_id.clone(),
            tokens,
            truncated,
        });
    }
    Ok(memories)
}
