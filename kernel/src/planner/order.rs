//! Order: kept items in prompt order (preamble partitions by priority, then
//! the transcript), dropped items in transcript order with their digest.

use crate::canonical;
use crate::contracts::Partition;
use crate::session::{Candidate, LogTables};
use std::rc::Rc;
use super::output::{Dropped, DroppedRef, ItemBody, PlannedItem};
use super::shrink;
use super::units::{Decision, Entry, Unit};

/// Fills the kept items' digests. Only kept items are hashed: a dropped
/// body's digest is never seen.
#[inline(never)]
pub(super) fn hash_kept(candidates: &mut [Candidate], entries: &[Entry]) {
    for (entry, c) in entries.iter().zip(candidates) {
        if entry.kept() && c.item.digest.is_none() {
            let digest = c.item.content_digest();
            Rc::make_mut(&mut c.item).digest = Some(digest);
            c.canonical = None;
        }
    }
}

/// The kept items in prompt order: the preamble partitions (system, tools,
/// memory) by priority, then the transcript in sequence order with each call
/// followed by its results (a shrunk result as its placeholder).
#[inline(never)]
pub(super) fn prompt_order(units: &[Unit], candidates: &[Candidate], entries: &[Entry]) -> Vec<PlannedItem> {
    let preamble = |p: Partition| matches!(p, Partition::System | Partition::Tools | Partition::Memory);
    let mut kept_units: Vec<&Unit> = units.iter().filter(|u| entries[u.anchor].kept()).collect();
    kept_units.sort_by(|a, b| {
        let (ea, eb) = (&entries[a.anchor], &entries[b.anchor]);
        let section = |e: &Entry| if preamble(e.facts.partition) { e.facts.partition as u8 } else { u8::MAX };
        section(ea).cmp(&section(eb)).then_with(|| {
            if preamble(ea.facts.partition) {
                eb.facts.priority.cmp(&ea.facts.priority).then(ea.facts.kind.cmp(&eb.facts.kind)).then(a.anchor.cmp(&b.anchor))
            } else {
                a.anchor.cmp(&b.anchor)
            }
        })
    });
    let mut context = Vec::new();
    for unit in kept_units {
        for i in unit.members() {
            let Some(Decision::Keep(keep)) = entries[i].decision else { unreachable!("kept unit") };
            let c = &candidates[i];
            let (item, shrunk) = match entries[i].shrunk_from {
                Some(tokens) => {
                    let (placeholder, shrunk) = shrink::shrunk(c, tokens);
                    (ItemBody { item: Rc::new(placeholder), canonical: None }, Some(shrunk))
                }
                None => (ItemBody { item: Rc::clone(&c.item), canonical: c.canonical.clone() }, None),
            };
            context.push(PlannedItem {
                item_id: c.item.id().to_string(),
                seq: c.seq,
                partition: entries[i].facts.partition,
                tokens: entries[i].tokens,
                keep,
                demoted: entries[i].facts.demoted,
                shrunk,
                item,
            });
        }
    }
    context
}

/// The dropped items in transcript order, and their digest. Thousands of
/// items are dropped from a long session: the digest is over a compact form,
/// not JSON (see `Recovery::dropped_digest`).
#[inline(never)]
pub(super) fn dropped_items(candidates: &[Candidate], entries: &[Entry], log: &LogTables) -> (Dropped, String) {
    let mut dropped = Dropped::default();
    let mut bytes = Vec::new();
    for (entry, c) in entries.iter().zip(candidates) {
        if let Some(Decision::Drop(reason)) = entry.decision {
            let item_id = c.id(log);
            dropped.push(DroppedRef { item_id, seq: c.seq, partition: entry.facts.partition, tokens: entry.tokens, reason });
            bytes.extend_from_slice(item_id.as_bytes());
            bytes.extend_from_slice(&[0, entry.facts.partition as u8, reason as u8]);
            bytes.extend_from_slice(&entry.tokens.to_le_bytes());
        }
    }
    (dropped, canonical::digest_bytes(&bytes))
}
