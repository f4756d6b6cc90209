//! The plan as hosts receive it: kept items with their keep reason, dropped
//! items with their drop reason, the budget per partition, the binding and
//! the recovery block.

use crate::canonical::Timestamp;
use crate::contracts::{ContextItem, Head, Partition, ToolOutcome};
use serde_json::value::RawValue;
use std::rc::Rc;

label! {
/// Why an item was kept.
pub enum KeepReason {
    /// Part of the recovery references: a compaction's summary and archive,
    /// the session head, revisions and digests.
    Recovery,
    Pinned,
    /// The latest user message: the request being answered.
    LastUserRequest,
    /// An approval, question or human task still waiting, with its binding.
    PendingInteraction,
    /// The latest state of a task that is not finished.
    UnfinishedTask,
    /// The latest goal, workspace identity or permission ceiling.
    Anchor,
    /// A tool call whose outcome is pending or unknown, with what results exist.
    UnsettledToolCall,
    /// Chosen under the budget.
    Selected,
}
}

label! {
/// Why an item was left out.
pub enum DropReason {
    /// `expiresAt` is not after `now`.
    Expired,
    /// Its allowed sinks or sensitivity keep it from this sink.
    SinkDenied,
    /// Its tool-call partner was dropped, and a pair never travels split.
    PairDropped,
    /// A tool result whose call is not among the items.
    OrphanToolResult,
    /// Its partition's ceiling is reached.
    PartitionCeiling,
    /// The input budget is spent.
    BudgetExhausted,
    /// An older conversation turn after the history was cut.
    HistoryCutoff,
    /// Instructions a later set replaced (the latest `instructions` anchor's).
    Superseded,
}
}

impl KeepReason {
    pub fn name(self) -> &'static str {
        match self {
            KeepReason::Recovery => "recovery",
            KeepReason::Pinned => "pinned",
            KeepReason::LastUserRequest => "last-user-request",
            KeepReason::PendingInteraction => "pending-interaction",
            KeepReason::UnfinishedTask => "unfinished-task",
            KeepReason::Anchor => "anchor",
            KeepReason::UnsettledToolCall => "unsettled-tool-call",
            KeepReason::Selected => "selected",
        }
    }
}

impl DropReason {
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Expired => "expired",
            DropReason::SinkDenied => "sink-denied",
            DropReason::PairDropped => "pair-dropped",
            DropReason::OrphanToolResult => "orphan-tool-result",
            DropReason::PartitionCeiling => "partition-ceiling",
            DropReason::BudgetExhausted => "budget-exhausted",
            DropReason::HistoryCutoff => "history-cutoff",
            DropReason::Superseded => "superseded",
        }
    }
}

contract! {
/// A decided context. Everything but the kept items' bodies is
/// covered by `digest`; the bodies are covered by their own digests.
pub struct ContextPlan {
    pub binding: PlanBinding,
    pub budget: BudgetSummary,
    /// Kept items in prompt order.
    pub context: Vec<PlannedItem>,
    pub digest: String,
    #[cfg_attr(feature = "schema", schemars(with = "Vec<DroppedItem>"))]
    pub dropped: Dropped,
    pub now: Timestamp,
    pub partitions: Vec<PartitionUsage>,
    /// Tool calls without a settled outcome: the model must not assume one.
    pub pending_tool_calls: Vec<PendingToolCall>,
    pub plan_id: String,
    pub recovery: Recovery,
    pub schema_version: u32,
}
}

contract! {
/// What a plan is valid for; a change to any of these invalidates it.
pub struct PlanBinding {
    pub memory_revision: u64,
    pub model_profile: String,
    pub policy_digest: String,
    pub policy_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_head: Option<Head>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub sink: String,
}
}

contract! {
pub struct BudgetSummary {
    pub free: u64,
    /// window − reservedOutput − safetyMargin.
    pub input: u64,
    /// Headroom held back by the reserve partition.
    pub reserved: u64,
    pub reserved_output: u64,
    pub safety_margin: u64,
    /// Tokens of the kept items and the recovery block.
    pub used: u64,
    pub window: u64,
}
}

contract! {
pub struct PartitionUsage {
    pub ceiling: u64,
    pub dropped: u32,
    pub kept: u32,
    pub minimum: u64,
    pub must_keep: u64,
    pub name: Partition,
    pub used: u64,
}
}

contract! {
pub struct PlannedItem {
    /// Claimed a more trusted partition than its trust allows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub demoted: bool,
    #[cfg_attr(feature = "schema", schemars(with = "ContextItem"))]
    pub item: ItemBody,
    pub item_id: String,
    pub keep: KeepReason,
    pub partition: Partition,
    /// The session event (or the inline item's `sourceRef.seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// A tool result too large for what was left, shown as a placeholder:
    /// `item` carries the placeholder, this the result it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<Shrunk>,
    /// What the item costs here (a shrunk result's placeholder).
    pub tokens: u64,
}
}

contract! {
/// The tool result a placeholder stands for. The result itself is the
/// session's event `seq` (and, when externalized, the content its
/// `contentRef` names).
pub struct Shrunk {
    /// The sha256 of the result's content, as its item's `digest`.
    pub digest: String,
    /// What the result would cost whole, framing included (as `tokens` counts).
    pub tokens: u64,
}
}

contract! {
/// An item the plan leaves out, and why.
pub struct DroppedItem {
    pub item_id: String,
    pub partition: Partition,
    pub reason: DropReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub tokens: u64,
}
}

/// The items a plan leaves out, in transcript order; on the wire, an array
/// of [`DroppedItem`]. A long session drops thousands of items, so their ids
/// share one buffer rather than each making and freeing a `String` on every
/// plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dropped {
    ids: String,
    records: Vec<DroppedRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct DroppedRecord {
    /// Where the id ends in `ids`; it starts where the previous one ends.
    id_end: usize,
    partition: Partition,
    reason: DropReason,
    seq: Option<u64>,
    tokens: u64,
}

/// One dropped item, borrowed from [`Dropped`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DroppedRef<'a> {
    pub item_id: &'a str,
    pub partition: Partition,
    pub reason: DropReason,
    pub seq: Option<u64>,
    pub tokens: u64,
}

impl Dropped {
    pub fn push(&mut self, item: DroppedRef<'_>) {
        let DroppedRef { item_id, partition, reason, seq, tokens } = item;
        self.ids.push_str(item_id);
        self.records.push(DroppedRecord { id_end: self.ids.len(), partition, reason, seq, tokens });
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = DroppedRef<'_>> {
        let starts = std::iter::once(0).chain(self.records.iter().map(|r| r.id_end));
        self.records.iter().zip(starts).map(|(r, start)| DroppedRef {
            item_id: &self.ids[start..r.id_end],
            partition: r.partition,
            reason: r.reason,
            seq: r.seq,
            tokens: r.tokens,
        })
    }
}

impl From<DroppedRef<'_>> for DroppedItem {
    fn from(item: DroppedRef<'_>) -> DroppedItem {
        let DroppedRef { item_id, partition, reason, seq, tokens } = item;
        DroppedItem { item_id: item_id.to_string(), partition, reason, seq, tokens }
    }
}

impl serde::Serialize for Dropped {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(DroppedItem::from))
    }
}

impl<'de> serde::Deserialize<'de> for Dropped {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let mut dropped = Dropped::default();
        for item in Vec::<DroppedItem>::deserialize(deserializer)? {
            let DroppedItem { item_id, partition, reason, seq, tokens } = &item;
            dropped.push(DroppedRef { item_id, partition: *partition, reason: *reason, seq: *seq, tokens: *tokens });
        }
        Ok(dropped)
    }
}

contract! {
pub struct PendingToolCall {
    pub call_id: String,
    pub item_id: String,
    pub name: String,
    pub outcome: ToolOutcome,
}
}

contract! {
/// What is needed to rebuild this context; always kept, charged to `reserve`.
pub struct Recovery {
    /// sha256 over the dropped items in transcript order, each as its id's
    /// UTF-8 bytes, a NUL (ids have no control characters), the ordinals
    /// of its partition and drop reason as one byte each (in their declared
    /// order), and its tokens as 8 little-endian bytes.
    pub dropped_digest: String,
    pub memory_revision: u64,
    pub policy_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_head: Option<Head>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub tokens: u64,
}
}

/// A kept item in a plan. A stored item is written out from the canonical
/// JSON its session log keeps rather than serialized again: the bodies are
/// most of a long session's plan.
#[derive(Debug, Clone)]
pub struct ItemBody {
    pub(super) item: Rc<ContextItem>,
    pub(super) canonical: Option<Rc<RawValue>>,
}

impl std::ops::Deref for ItemBody {
    type Target = ContextItem;
    fn deref(&self) -> &ContextItem {
        &self.item
    }
}

impl PartialEq for ItemBody {
    fn eq(&self, other: &Self) -> bool {
        self.item == other.item
    }
}

impl serde::Serialize for ItemBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match &self.canonical {
            Some(json) => json.serialize(serializer),
            None => self.item.serialize(serializer),
        }
    }
}

impl<'de> serde::Deserialize<'de> for ItemBody {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Ok(ItemBody { item: Rc::new(ContextItem::deserialize(deserializer)?), canonical: None })
    }
}
