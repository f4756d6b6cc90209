//! The context planner: what one model call sees.
//!
//! ```text
//! input budget = window − reserved output − safety margin
//!
//! items ──► partition (by kind, never raising trust)
//!       ──► units (a tool call travels with its results)
//!       ──► filters (expired, sink-denied, orphan results)
//!       ──► must-keep set (never dropped for tokens, else context-over-budget)
//!       ──► minimums reserved, then greedy selection per partition in a
//!           fixed order (priority, kind, recency, id) under ceilings
//!       ──► plan: kept items in prompt order, dropped items with reasons,
//!           bound to session head + memory revision + policy + model
//! ```
//!
//! The planner is a pure function of its inputs: the command layer loads the
//! session and passes it in. A shuffled input gives a byte-identical plan.

use crate::canonical::{self, Timestamp};
use crate::contracts::{
    check_id, check_sink, check_version, sink_admits, Anchor, ContextItem, ItemKind, ItemLimits, Role, SinkPolicies, ToolOutcome, Trust,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::session::Head;
use crate::tokens;
use serde_json::json;
use serde_json::value::RawValue;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The largest model window accepted, in tokens.
pub const MAX_WINDOW: u64 = 16_000_000;
/// The largest `maxItemBytes` a policy may set.
pub const MAX_ITEM_BYTES_CEILING: u64 = crate::session::MAX_EVENT_BYTES;
/// Basis points: 10 000 = the whole input budget.
const BP: u64 = 10_000;

label! {
/// The seven budget partitions, in allocation order.
pub enum Partition {
    /// Trusted system and safety policy.
    System,
    /// Current task, pending interactions, goal and workspace identity.
    Task,
    /// Tool and skill schemas.
    Tools,
    /// Recent conversation.
    Conversation,
    /// Tool evidence and artifacts (and anything demoted for its trust).
    Evidence,
    /// Recalled memory and project rules.
    Memory,
    /// Compaction and recovery reserve.
    Reserve,
}
}

pub const PARTITIONS: [Partition; 7] = [
    Partition::System,
    Partition::Task,
    Partition::Tools,
    Partition::Conversation,
    Partition::Evidence,
    Partition::Memory,
    Partition::Reserve,
];

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
}
}

contract! {
/// The model a plan is for. The input budget is
/// `window − reservedOutput − safetyMargin`.
pub struct ModelProfile {
    pub profile: String,
    pub reserved_output: u64,
    pub safety_margin: u64,
    pub window: u64,
}
}

contract! {
/// A partition's share of the input budget, in basis points (1/100 of a percent).
pub struct PartitionLimits {
    pub ceiling_bp: u32,
    /// An absolute cap on top of `ceilingBp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_tokens: Option<u64>,
    /// Held for this partition while it has candidates.
    pub minimum_bp: u32,
}
}

contract! {
pub struct PartitionPolicy {
    pub conversation: PartitionLimits,
    pub evidence: PartitionLimits,
    pub memory: PartitionLimits,
    pub reserve: PartitionLimits,
    pub system: PartitionLimits,
    pub task: PartitionLimits,
    pub tools: PartitionLimits,
}
}

contract! {
/// How budgets are shaped. Plans are bound to its version and digest.
pub struct PlanPolicy {
    /// Framing tokens a provider spends per item (role markers, separators).
    pub item_overhead_tokens: u32,
    /// Largest item text, in bytes; bigger content belongs behind a contentRef.
    pub max_item_bytes: u64,
    /// Most candidate items one plan considers.
    pub max_items: u32,
    pub partitions: PartitionPolicy,
    pub version: String,
}
}

impl Default for PlanPolicy {
    fn default() -> Self {
        let limits = |minimum_bp, ceiling_bp| PartitionLimits { minimum_bp, ceiling_bp, ceiling_tokens: None };
        PlanPolicy {
            version: "ctxk-default-1".into(),
            partitions: PartitionPolicy {
                // Minimums keep later partitions from being starved; ceilings
                // keep any one kind from taking everything. Tool evidence is
                // the bulk of an agent's context, so its ceiling is generous.
                system: limits(0, 2_500),
                task: limits(0, 2_000),
                tools: limits(0, 3_000),
                conversation: limits(2_000, 8_000),
                evidence: limits(500, 7_000),
                memory: limits(500, 2_000),
                reserve: limits(300, 1_000),
            },
            max_items: 100_000,
            max_item_bytes: 1 << 20,
            item_overhead_tokens: 4,
        }
    }
}

impl PlanPolicy {
    pub fn limits(&self, partition: Partition) -> &PartitionLimits {
        let p = &self.partitions;
        match partition {
            Partition::System => &p.system,
            Partition::Task => &p.task,
            Partition::Tools => &p.tools,
            Partition::Conversation => &p.conversation,
            Partition::Evidence => &p.evidence,
            Partition::Memory => &p.memory,
            Partition::Reserve => &p.reserve,
        }
    }

    pub fn validate(&self) -> Result<()> {
        check_id("policy.version", &self.version)?;
        let mut minimums = 0u64;
        for partition in PARTITIONS {
            let limits = self.limits(partition);
            if limits.minimum_bp > limits.ceiling_bp || u64::from(limits.ceiling_bp) > BP {
                return Err(KernelError::invalid(format!(
                    "policy partition `{}`: need minimumBp <= ceilingBp <= {BP}",
                    partition.name()
                )));
            }
            minimums += u64::from(limits.minimum_bp);
        }
        if minimums > BP {
            return Err(KernelError::invalid(format!("policy minimums add up to {minimums} bp, more than {BP}")));
        }
        if self.max_item_bytes == 0 || self.max_item_bytes > MAX_ITEM_BYTES_CEILING {
            return Err(KernelError::limit(format!("policy.maxItemBytes must be within 1..={MAX_ITEM_BYTES_CEILING}")));
        }
        if self.max_items == 0 {
            return Err(KernelError::invalid("policy.maxItems must be at least 1"));
        }
        Ok(())
    }
}

impl Partition {
    pub fn name(self) -> &'static str {
        match self {
            Partition::System => "system",
            Partition::Task => "task",
            Partition::Tools => "tools",
            Partition::Conversation => "conversation",
            Partition::Evidence => "evidence",
            Partition::Memory => "memory",
            Partition::Reserve => "reserve",
        }
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
        }
    }
}

contract! {
/// `plan-context`: plan inline items, a stored session, or both.
pub struct PlanRequest {
    #[serde(default)]
    pub items: Vec<ContextItem>,
    pub model: ModelProfile,
    pub now: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PlanPolicy>,
    pub schema_version: u32,
    /// Plan this session's stored events (plus any inline `items`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Where the plan goes (e.g. `model:anthropic`); items must allow it.
    pub sink: String,
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

/// A candidate item and its position in the transcript (the session event's
/// sequence number, or the inline item's `sourceRef.seq`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub item: Rc<ContextItem>,
    pub seq: Option<u64>,
    /// The item's canonical JSON, when the session log already made it.
    pub canonical: Option<Rc<RawValue>>,
    facts: Facts,
    /// Where the item sits in its session log's tables, when it is logged.
    logged: Option<LogPlace>,
}

impl Candidate {
    pub fn new(item: Rc<ContextItem>, seq: Option<u64>, canonical: Option<Rc<RawValue>>) -> Self {
        Candidate { facts: Facts::of(&item), item, seq, canonical, logged: None }
    }

    /// The item's id, read from its log's `ids` when it is logged there.
    fn id<'a>(&'a self, log: &'a LogTables) -> &'a str {
        self.logged.and_then(|at| log.ids.get(at.id_start..at.id_end)).unwrap_or_else(|| self.item.id())
    }

    /// Whether the item may go to the sink `admitted` was decided for.
    fn admitted(&self, admitted: &[bool], sink: &str) -> bool {
        match self.logged.and_then(|at| admitted.get(at.policy as usize)) {
            Some(&verdict) => verdict,
            None => sink_permits(&self.item, sink),
        }
    }
}

/// What a session log keeps beside its candidates for planning: a long
/// session's items, spread over the heap, are slow to visit one by one (a
/// cache miss each, on every plan). Their ids sit side by side here, where a
/// plan reads the thousands it drops, and their few distinct sink policies
/// are decided once per plan.
#[derive(Debug, Clone, Default)]
pub struct LogTables {
    ids: String,
    policies: SinkPolicies,
}

/// Where a logged item sits in its log's [`LogTables`].
#[derive(Debug, Clone, Copy)]
struct LogPlace {
    id_start: usize,
    id_end: usize,
    policy: u32,
}

impl LogTables {
    /// Logs `candidate`'s item in the tables.
    pub fn log(&mut self, candidate: Candidate) -> Candidate {
        let id_start = self.ids.len();
        self.ids.push_str(candidate.item.id());
        let policy = self.policies.id(candidate.item.sensitivity, &candidate.item.allowed_sinks);
        Candidate { logged: Some(LogPlace { id_start, id_end: self.ids.len(), policy }), ..candidate }
    }
}

/// A kept item in a plan. A stored item is written out from the canonical
/// JSON its session log keeps rather than serialized again: the bodies are
/// most of a long session's plan.
#[derive(Debug, Clone)]
pub struct ItemBody {
    item: Rc<ContextItem>,
    canonical: Option<Rc<RawValue>>,
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

/// Everything a plan depends on besides the request's own fields.
pub struct PlanInputs<'a> {
    /// Normalized items with unique ids.
    pub candidates: Vec<Candidate>,
    /// The tables of the session log the logged candidates come from.
    pub log: &'a LogTables,
    pub memory_revision: u64,
    pub session: Option<(String, Head)>,
}

/// Validates the request's model, policy and sink; returns the policy to use
/// and the input budget.
pub fn admit(request: &PlanRequest) -> Result<(PlanPolicy, u64)> {
    check_version("request", request.schema_version)?;
    check_sink(&request.sink)?;
    check_id("model.profile", &request.model.profile)?;
    let policy = request.policy.clone().unwrap_or_default();
    policy.validate()?;
    let m = &request.model;
    if m.window > MAX_WINDOW {
        return Err(KernelError::limit(format!("model.window {} is over the ceiling of {MAX_WINDOW}", m.window)));
    }
    let input = m
        .reserved_output
        .checked_add(m.safety_margin)
        .and_then(|held| m.window.checked_sub(held))
        .filter(|input| *input > 0)
        .ok_or_else(|| {
            KernelError::invalid(format!(
                "window {} leaves no input budget after reservedOutput {} and safetyMargin {}",
                m.window, m.reserved_output, m.safety_margin
            ))
        })?;
    Ok((policy, input))
}

/// Prepares inline items (checking them, deriving ids and token estimates);
/// [`plan`] hashes the ones it keeps.
pub fn normalize_inline(items: Vec<ContextItem>, policy: &PlanPolicy) -> Result<Vec<Candidate>> {
    let limits = ItemLimits { max_item_bytes: policy.max_item_bytes };
    items
        .into_iter()
        .map(|mut item| {
            item.prepare(limits, "")?;
            let seq = item.source_ref.seq;
            Ok(Candidate::new(Rc::new(item), seq, None))
        })
        .collect()
}

/// What the planner reads of an item, whatever the request: read once, when
/// the candidate is made. A stored session's candidates are cached with their
/// facts, so a plan walks one dense array rather than ten thousand items
/// spread over the heap.
#[derive(Debug, Clone, Copy)]
struct Facts {
    partition: Partition,
    /// Claimed a more trusted partition than its trust allows.
    demoted: bool,
    kind: ItemKind,
    priority: i32,
    token_estimate: u32,
    /// `expiresAt`, in nanoseconds since the Unix epoch.
    expires: Option<i128>,
    pinned: bool,
    summary: bool,
    user_request: bool,
    /// Only a trusted item can be an anchor.
    anchor: Option<Anchor>,
    calls_tools: bool,
    answers_call: bool,
    has_task: bool,
    has_interaction: bool,
}

impl Facts {
    fn of(item: &ContextItem) -> Facts {
        let (partition, demoted) = partition_of(item);
        // What an item claims about itself counts only when it is trusted:
        // an external page cannot pin itself, pose as the user's request,
        // or hold a task, approval or anchor open.
        let trusted = item.trust <= Trust::User;
        let summary = item.summary_of.is_some();
        Facts {
            partition,
            demoted,
            kind: item.kind,
            priority: item.priority,
            token_estimate: item.token_estimate.unwrap_or(0),
            expires: item.expires_at.as_ref().map(Timestamp::unix_nanos),
            pinned: item.pinned && trusted,
            summary,
            user_request: trusted && !summary && item.kind == ItemKind::Message && item.role == Some(Role::User),
            anchor: item.anchor.filter(|_| trusted),
            calls_tools: !item.tool_calls.is_empty(),
            answers_call: item.tool_result.is_some(),
            has_task: item.task.is_some() && trusted,
            has_interaction: item.interaction.is_some() && trusted,
        }
    }
}

/// A candidate as this plan sees it: its facts and what the request makes of them.
struct Entry {
    facts: Facts,
    tokens: u64,
    /// Why this item keeps its whole unit out of the plan, if it does.
    offence: Option<DropReason>,
    decision: Option<Decision>,
}

impl Entry {
    fn of(facts: Facts, admitted: bool, now: &Timestamp, overhead: u64) -> Entry {
        let offence = if facts.expires.is_some_and(|t| t <= now.unix_nanos()) {
            Some(DropReason::Expired)
        } else if !admitted {
            Some(DropReason::SinkDenied)
        } else {
            None
        };
        Entry { facts, tokens: u64::from(facts.token_estimate) + overhead, offence, decision: None }
    }

    fn kept(&self) -> bool {
        matches!(self.decision, Some(Decision::Keep(_)))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Decision {
    Keep(KeepReason),
    Drop(DropReason),
}

/// Items that are kept or dropped together: an item, and when it calls tools,
/// the results of those calls.
struct Unit {
    /// Entry index of the item (the call, or the lone item).
    anchor: usize,
    /// Entry indexes of the results answering the anchor's calls, in transcript order.
    results: Vec<usize>,
    /// For each of the anchor's tool calls, the outcome its latest result gives.
    outcomes: Vec<Option<ToolOutcome>>,
    must_keep: Option<KeepReason>,
    /// The highest priority among its members.
    priority: i32,
}

impl Unit {
    fn members(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.anchor).chain(self.results.iter().copied())
    }
}

/// Transcript order: sequence when known, then creation time, then id.
pub(crate) fn chrono(c: &Candidate) -> (u64, &Timestamp, &str) {
    (c.seq.unwrap_or(u64::MAX), &c.item.created_at, c.item.id())
}

/// The partition an item lands in, and whether that is lower than its kind
/// claims. Only evidence holds external or untrusted content, whatever kind,
/// pin or interaction it claims: trust never rises by labelling.
fn partition_of(item: &ContextItem) -> (Partition, bool) {
    let claimed = match item.kind {
        _ if item.summary_of.is_some() => Partition::Conversation,
        ItemKind::SystemPolicy => Partition::System,
        _ if item.interaction.is_some() || item.anchor.is_some() => Partition::Task,
        ItemKind::TaskState => Partition::Task,
        ItemKind::ToolSchema | ItemKind::Skill => Partition::Tools,
        ItemKind::Message => Partition::Conversation,
        ItemKind::ToolEvidence | ItemKind::ArtifactRef => Partition::Evidence,
        ItemKind::Memory | ItemKind::ProjectRule => Partition::Memory,
    };
    if item.trust <= Trust::User || claimed == Partition::Evidence {
        (claimed, false)
    } else {
        (Partition::Evidence, true)
    }
}

pub(crate) fn sink_permits(item: &ContextItem, sink: &str) -> bool {
    sink_admits(item.sensitivity, &item.allowed_sinks, sink)
}

/// Plans. `candidates` are normalized; `policy` and `input` come from [`admit`].
///
/// Each phase below is its own function, kept out of line: the JVM host runs
/// this code as bytecode, and HotSpot never compiles a method over 8 000
/// bytes, so one 20 KB `plan` would run interpreted there.
pub fn plan(request: &PlanRequest, policy: &PlanPolicy, input: u64, inputs: PlanInputs) -> Result<ContextPlan> {
    let PlanInputs { mut candidates, log, session, memory_revision } = inputs;
    if candidates.len() > policy.max_items as usize {
        return Err(KernelError::limit(format!(
            "{} candidate items; policy.maxItems is {}",
            candidates.len(),
            policy.max_items
        )));
    }
    // One canonical order, whatever order the items came in: from here on a
    // candidate's index is its transcript rank (ids are unique, so `chrono`
    // is a strict order). A stored session arrives in order already.
    let in_order = candidates.windows(2).all(|w| matches!((w[0].seq, w[1].seq), (Some(a), Some(b)) if a < b));
    if !in_order {
        candidates.sort_by(|a, b| chrono(a).cmp(&chrono(b)));
    }
    let overhead = u64::from(policy.item_overhead_tokens);
    let admitted = log.policies.admitted(&request.sink);
    let mut entries: Vec<Entry> = candidates
        .iter()
        .map(|c| Entry::of(c.facts, c.admitted(&admitted, &request.sink), &request.now, overhead))
        .collect();
    let mut units = group_units(&candidates, &mut entries);
    drop_offending_units(&units, &mut entries);
    let pending_tool_calls = mark_must_keep(&mut units, &candidates, &entries, &request.now);

    let mut recovery = Recovery::new(session.as_ref(), memory_revision, policy)?;
    let mut budget = Budget::new(input, policy);
    budget.keep_must_keep(&units, &mut entries, recovery.tokens);
    if budget.must_total() > input {
        return Err(over_budget(&budget, &candidates, &entries));
    }
    budget.hold_minimums();
    budget.select(&units, &mut entries);

    hash_kept(&mut candidates, &entries);
    let context = prompt_order(&units, &candidates, &entries);
    let (dropped, dropped_digest) = dropped_items(&candidates, &entries, log);
    recovery.dropped_digest = dropped_digest;
    finish(request, &budget, session, recovery, context, dropped, pending_tool_calls)
}

impl Recovery {
    /// The recovery block with its tokens (framing included) counted. The
    /// dropped digest is filled in last; its length is fixed, so the count holds.
    #[inline(never)]
    fn new(session: Option<&(String, Head)>, memory_revision: u64, policy: &PlanPolicy) -> Result<Recovery> {
        let mut recovery = Recovery {
            session_id: session.map(|(id, _)| id.clone()),
            session_head: session.map(|(_, head)| head.clone()),
            memory_revision,
            policy_digest: canonical::digest_value(policy)?,
            dropped_digest: canonical::digest_bytes(b""),
            tokens: 0,
        };
        recovery.tokens = u64::from(tokens::estimate(&canonical::to_string(&recovery)?))
            + u64::from(policy.item_overhead_tokens);
        Ok(recovery)
    }
}

/// Groups candidates into units, each tool call with its results; a result
/// whose call is not among the candidates is dropped as an orphan.
#[inline(never)]
fn group_units(candidates: &[Candidate], entries: &mut [Entry]) -> Vec<Unit> {
    // Only looked up, never iterated: hashing order cannot leak into the plan.
    let mut call_owner: rustc_hash::FxHashMap<&str, (usize, usize)> = Default::default();
    let mut units: Vec<Unit> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        // Only calls and results are read from their items: most items are neither.
        let result = if c.facts.answers_call { c.item.tool_result.as_ref() } else { None };
        if let Some(result) = result {
            // A result answers the latest call of its id before it (providers
            // reuse ids across turns); one with no such call is an orphan.
            match call_owner.get(result.call_id.as_str()) {
                Some(&(u, k)) => {
                    units[u].results.push(i);
                    units[u].outcomes[k] = Some(result.outcome);
                    units[u].priority = units[u].priority.max(entries[i].facts.priority);
                }
                None => entries[i].decision = Some(Decision::Drop(DropReason::OrphanToolResult)),
            }
            continue;
        }
        let mut outcomes = Vec::new();
        if c.facts.calls_tools {
            for (k, call) in c.item.tool_calls.iter().enumerate() {
                call_owner.insert(&call.call_id, (units.len(), k));
            }
            outcomes = vec![None; c.item.tool_calls.len()];
        }
        units.push(Unit { anchor: i, results: Vec::new(), outcomes, must_keep: None, priority: entries[i].facts.priority });
    }
    units
}

/// Expiry and sinks drop a whole unit: the offending item for its reason,
/// the rest of the unit as `pair-dropped`.
fn drop_offending_units(units: &[Unit], entries: &mut [Entry]) {
    for unit in units {
        let Some((culprit, reason)) = unit.members().find_map(|i| entries[i].offence.map(|r| (i, r))) else {
            continue;
        };
        for i in unit.members() {
            let reason = if i == culprit { reason } else { DropReason::PairDropped };
            entries[i].decision = Some(Decision::Drop(reason));
        }
    }
}

/// Marks each live unit's must-keep reason (the strongest of its members')
/// and returns the tool calls without a settled outcome.
#[inline(never)]
fn mark_must_keep(units: &mut [Unit], candidates: &[Candidate], entries: &[Entry], now: &Timestamp) -> Vec<PendingToolCall> {
    let mut must: Vec<Option<KeepReason>> = vec![None; candidates.len()];
    let mark = |i: usize, reason: KeepReason, must: &mut Vec<Option<KeepReason>>| {
        if must[i].is_none_or(|r| reason < r) {
            must[i] = Some(reason);
        }
    };
    let mut latest_user = None;
    let mut latest_anchor = BTreeMap::new();
    let mut latest_task = BTreeMap::new();
    let mut interactions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate().filter(|(_, e)| e.decision.is_none()) {
        if e.facts.pinned {
            mark(i, KeepReason::Pinned, &mut must);
        }
        if e.facts.summary {
            mark(i, KeepReason::Recovery, &mut must);
        }
        if e.facts.user_request {
            latest_user = Some(i);
        }
        if let Some(anchor) = e.facts.anchor {
            latest_anchor.insert(anchor, i);
        }
        if e.facts.has_task || e.facts.has_interaction {
            let item = &candidates[i].item;
            if let Some(task) = &item.task {
                latest_task.insert(task.task_id.as_str(), i);
            }
            if let Some(interaction) = &item.interaction {
                interactions.entry(interaction.operation_id.as_str()).or_default().push(i);
            }
        }
    }
    if let Some(i) = latest_user {
        mark(i, KeepReason::LastUserRequest, &mut must);
    }
    for &i in latest_anchor.values() {
        mark(i, KeepReason::Anchor, &mut must);
    }
    for &i in latest_task.values() {
        if candidates[i].item.task.as_ref().is_some_and(|t| t.status.is_unfinished()) {
            mark(i, KeepReason::UnfinishedTask, &mut must);
        }
    }
    for members in interactions.values() {
        let latest = &candidates[*members.last().expect("grouped items exist")].item;
        let interaction = latest.interaction.as_ref().expect("grouped by interaction");
        let waiting = interaction.state == crate::contracts::InteractionState::Pending
            && interaction.expires_at.as_ref().is_none_or(|t| t > now);
        if waiting {
            for &i in members {
                mark(i, KeepReason::PendingInteraction, &mut must);
            }
        }
    }
    let mut pending_tool_calls = Vec::new();
    for unit in units.iter().filter(|u| entries[u.anchor].decision.is_none()) {
        for (k, outcome) in unit.outcomes.iter().enumerate() {
            let outcome = outcome.unwrap_or(ToolOutcome::Pending);
            if matches!(outcome, ToolOutcome::Pending | ToolOutcome::Unknown) {
                let anchor = &candidates[unit.anchor].item;
                let call = &anchor.tool_calls[k];
                mark(unit.anchor, KeepReason::UnsettledToolCall, &mut must);
                pending_tool_calls.push(PendingToolCall {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    item_id: anchor.id().to_string(),
                    outcome,
                });
            }
        }
    }
    pending_tool_calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    for unit in units.iter_mut() {
        unit.must_keep = unit.members().filter_map(|i| must[i]).min();
    }
    pending_tool_calls
}

/// The token accounts of one plan, per partition (indexed by `Partition as usize`).
struct Budget<'p> {
    policy: &'p PlanPolicy,
    /// window − reserved output − safety margin.
    input: u64,
    used: [u64; 7],
    must_keep: [u64; 7],
    /// Tokens of the live items that are not must-keep.
    demand: [u64; 7],
    /// Minimums still held for each partition.
    held: [u64; 7],
    /// Tokens any partition may take, within its ceiling.
    pool: u64,
}

impl<'p> Budget<'p> {
    fn new(input: u64, policy: &'p PlanPolicy) -> Self {
        Budget { policy, input, used: [0; 7], must_keep: [0; 7], demand: [0; 7], held: [0; 7], pool: 0 }
    }

    fn share(&self, bp: u32) -> u64 {
        self.input * u64::from(bp) / BP
    }

    fn minimum(&self, p: Partition) -> u64 {
        self.share(self.policy.limits(p).minimum_bp)
    }

    fn ceiling(&self, p: Partition) -> u64 {
        let limits = self.policy.limits(p);
        self.share(limits.ceiling_bp).min(limits.ceiling_tokens.unwrap_or(u64::MAX))
    }

    fn must_total(&self) -> u64 {
        self.must_keep.iter().sum()
    }

    /// Keeps every must-keep unit, charges the recovery block to the reserve,
    /// and counts what the other live items would need.
    #[inline(never)]
    fn keep_must_keep(&mut self, units: &[Unit], entries: &mut [Entry], recovery_tokens: u64) {
        for unit in units {
            if entries[unit.anchor].decision.is_some() {
                continue;
            }
            for i in unit.members() {
                let (p, tokens) = (entries[i].facts.partition as usize, entries[i].tokens);
                if let Some(reason) = unit.must_keep {
                    entries[i].decision = Some(Decision::Keep(reason));
                    self.used[p] += tokens;
                    self.must_keep[p] += tokens;
                } else {
                    self.demand[p] += tokens;
                }
            }
        }
        let reserve = Partition::Reserve as usize;
        self.used[reserve] += recovery_tokens;
        self.must_keep[reserve] += recovery_tokens;
    }

    /// Holds each partition's minimum while it has candidates (the reserve's
    /// is headroom); with too little left for all, later partitions give way.
    fn hold_minimums(&mut self) {
        for p in PARTITIONS {
            let i = p as usize;
            let want = if p == Partition::Reserve { u64::MAX } else { self.used[i] + self.demand[i] };
            self.held[i] = self.minimum(p).min(want).saturating_sub(self.used[i]);
        }
        self.pool = self.input - self.must_total();
        for p in PARTITIONS.iter().rev() {
            let excess = self.held.iter().sum::<u64>().saturating_sub(self.pool);
            let i = *p as usize;
            self.held[i] -= excess.min(self.held[i]);
        }
        self.pool -= self.held.iter().sum::<u64>();
    }

    /// Greedy selection, partition by partition in allocation order: units by
    /// priority, kind, then newest first, each spending its partition's held
    /// minimum before the shared pool, never past a partition's ceiling.
    #[inline(never)]
    fn select(&mut self, units: &[Unit], entries: &mut [Entry]) {
        // Each partition's undecided units, highest priority first, then by
        // kind, then newest first. Anchors are unique, so the keys are too.
        let mut by_partition: [Vec<(Reverse<i32>, ItemKind, Reverse<usize>, usize)>; 7] = Default::default();
        for (u, unit) in units.iter().enumerate().filter(|(_, unit)| entries[unit.anchor].decision.is_none()) {
            let anchor = &entries[unit.anchor];
            by_partition[anchor.facts.partition as usize].push((Reverse(unit.priority), anchor.facts.kind, Reverse(unit.anchor), u));
        }
        by_partition.iter_mut().for_each(|order| order.sort_unstable());
        let ceilings = PARTITIONS.map(|p| self.ceiling(p));
        for p in PARTITIONS.into_iter().filter(|p| *p != Partition::Reserve) {
            let mut own = self.held[p as usize];
            let mut cut = false;
            for &(.., u) in &by_partition[p as usize] {
                let unit = &units[u];
                let verdict = if cut {
                    Err((DropReason::HistoryCutoff, p))
                } else {
                    let mut cost = [0u64; 7];
                    for i in unit.members() {
                        cost[entries[i].facts.partition as usize] += entries[i].tokens;
                    }
                    let total: u64 = cost.iter().sum();
                    let over = |q: usize| cost[q] > 0 && self.used[q] + cost[q] > ceilings[q];
                    if let Some(q) = PARTITIONS.into_iter().find(|q| over(*q as usize)) {
                        Err((DropReason::PartitionCeiling, q))
                    } else if total > own + self.pool {
                        Err((DropReason::BudgetExhausted, p))
                    } else {
                        let from_own = total.min(own);
                        own -= from_own;
                        self.pool -= total - from_own;
                        for (used, cost) in self.used.iter_mut().zip(cost) {
                            *used += cost;
                        }
                        Ok(())
                    }
                };
                let decision = match verdict {
                    Ok(()) => Decision::Keep(KeepReason::Selected),
                    Err((reason, full)) => {
                        // Conversation history stays contiguous: once the conversation
                        // (or the whole budget) is full, older turns follow. A tool
                        // exchange too big for the evidence share is dropped whole
                        // without cutting the history before it.
                        cut |= p == Partition::Conversation && full == p;
                        Decision::Drop(reason)
                    }
                };
                for i in unit.members() {
                    entries[i].decision = Some(decision);
                }
            }
            self.pool += own;
        }
    }
}

/// Fills the kept items' digests. Only kept items are hashed: a dropped
/// body's digest is never seen.
#[inline(never)]
fn hash_kept(candidates: &mut [Candidate], entries: &[Entry]) {
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
/// followed by its results.
#[inline(never)]
fn prompt_order(units: &[Unit], candidates: &[Candidate], entries: &[Entry]) -> Vec<PlannedItem> {
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
            context.push(PlannedItem {
                item_id: c.item.id().to_string(),
                seq: c.seq,
                partition: entries[i].facts.partition,
                tokens: entries[i].tokens,
                keep,
                demoted: entries[i].facts.demoted,
                item: ItemBody { item: Rc::clone(&c.item), canonical: c.canonical.clone() },
            });
        }
    }
    context
}

/// The dropped items in transcript order, and their digest. Thousands of
/// items are dropped from a long session: the digest is over a compact form,
/// not JSON (see `Recovery::dropped_digest`).
#[inline(never)]
fn dropped_items(candidates: &[Candidate], entries: &[Entry], log: &LogTables) -> (Dropped, String) {
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

/// Assembles the plan, binds it and takes its digest.
#[inline(never)]
fn finish(
    request: &PlanRequest,
    budget: &Budget,
    session: Option<(String, Head)>,
    recovery: Recovery,
    context: Vec<PlannedItem>,
    dropped: Dropped,
    pending_tool_calls: Vec<PendingToolCall>,
) -> Result<ContextPlan> {
    let mut kept = [0u32; 7];
    let mut not_kept = [0u32; 7];
    for item in &context {
        kept[item.partition as usize] += 1;
    }
    for item in dropped.iter() {
        not_kept[item.partition as usize] += 1;
    }
    let partitions = PARTITIONS
        .map(|p| PartitionUsage {
            name: p,
            minimum: budget.minimum(p),
            ceiling: budget.ceiling(p),
            must_keep: budget.must_keep[p as usize],
            used: budget.used[p as usize],
            kept: kept[p as usize],
            dropped: not_kept[p as usize],
        })
        .to_vec();
    let used: u64 = budget.used.iter().sum();
    let reserved = budget.held[Partition::Reserve as usize];
    let model = &request.model;
    let plan_budget = BudgetSummary {
        window: model.window,
        reserved_output: model.reserved_output,
        safety_margin: model.safety_margin,
        input: budget.input,
        used,
        reserved,
        free: budget.input - used - reserved,
    };
    let binding = PlanBinding {
        session_id: session.as_ref().map(|(id, _)| id.clone()),
        session_head: session.map(|(_, head)| head),
        memory_revision: recovery.memory_revision,
        policy_version: budget.policy.version.clone(),
        policy_digest: recovery.policy_digest.clone(),
        model_profile: model.profile.clone(),
        sink: request.sink.clone(),
    };
    let mut plan = ContextPlan {
        schema_version: 1,
        plan_id: String::new(),
        digest: String::new(),
        now: request.now.clone(),
        binding,
        budget: plan_budget,
        partitions,
        context,
        dropped,
        pending_tool_calls,
        recovery,
    };
    let digest = canonical::digest_bytes(&digest_form(&plan)?);
    plan.plan_id = canonical::derived_id("plan", &digest);
    plan.digest = digest;
    Ok(plan)
}

/// What a plan's digest is taken over: canonical JSON of every decision, the
/// kept items by their own digests rather than their bodies, the dropped ones
/// through `recovery.droppedDigest` —
/// `{"binding","budget","context":[[itemId,seq,digest,partition,tokens,keep,demoted],…],"now","partitions","pendingToolCalls","recovery"}`.
/// The kept items' tuples are written here, the rest by serde (see `to_json`).
fn digest_form(plan: &ContextPlan) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4096 + 128 * plan.context.len());
    let mut number = itoa::Buffer::new();
    out.push(b'{');
    field(&mut out, "binding", &plan.binding)?;
    field(&mut out, "budget", &plan.budget)?;
    out.extend_from_slice(b",\"context\":[");
    for (n, kept) in plan.context.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.push(b'[');
        write_str(&mut out, &kept.item_id)?;
        out.push(b',');
        match kept.seq {
            Some(seq) => out.extend_from_slice(number.format(seq).as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b',');
        write_str(&mut out, kept.item.digest.as_deref().unwrap_or(""))?;
        out.extend_from_slice(b",\"");
        out.extend_from_slice(kept.partition.name().as_bytes());
        out.extend_from_slice(b"\",");
        out.extend_from_slice(number.format(kept.tokens).as_bytes());
        out.extend_from_slice(b",\"");
        out.extend_from_slice(kept.keep.name().as_bytes());
        out.extend_from_slice(if kept.demoted { b"\",true]" } else { b"\",false]" });
    }
    out.push(b']');
    field(&mut out, "now", &plan.now)?;
    field(&mut out, "partitions", &plan.partitions)?;
    field(&mut out, "pendingToolCalls", &plan.pending_tool_calls)?;
    field(&mut out, "recovery", &plan.recovery)?;
    out.push(b'}');
    Ok(out)
}

/// Writes a JSON string as serde does, through serde only when it needs escaping.
fn write_str(out: &mut Vec<u8>, s: &str) -> Result<()> {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return canonical::write(out, s);
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
    Ok(())
}

impl ContextPlan {
    /// The plan's canonical JSON: the bytes its derived `Serialize` writes
    /// (a test holds the two equal). A long session drops thousands of
    /// items, and serde passes every key and label of those small records
    /// through its string escaper, which made writing them over a third of
    /// a stored plan's cost; they are written here, every other field by serde.
    pub fn to_json(&self) -> Result<String> {
        let ContextPlan {
            binding,
            budget,
            context,
            digest,
            dropped,
            now,
            partitions,
            pending_tool_calls,
            plan_id,
            recovery,
            schema_version,
        } = self;
        // Sized up front: the kept bodies of a wide window run to megabytes,
        // and growing the buffer through them copies it over and over.
        let bodies: usize = context.iter().map(|p| p.item.canonical.as_ref().map_or(1024, |json| json.get().len())).sum();
        let mut out = Vec::with_capacity((64 << 10) + bodies + 256 * context.len() + 96 * dropped.len());
        out.push(b'{');
        field(&mut out, "binding", binding)?;
        field(&mut out, "budget", budget)?;
        field(&mut out, "context", context)?;
        field(&mut out, "digest", digest)?;
        out.extend_from_slice(b",\"dropped\":");
        write_dropped(&mut out, dropped)?;
        field(&mut out, "now", now)?;
        field(&mut out, "partitions", partitions)?;
        field(&mut out, "pendingToolCalls", pending_tool_calls)?;
        field(&mut out, "planId", plan_id)?;
        field(&mut out, "recovery", recovery)?;
        field(&mut out, "schemaVersion", schema_version)?;
        out.push(b'}');
        String::from_utf8(out).map_err(|e| KernelError::internal(format!("a plan is not UTF-8: {e}")))
    }
}

/// Writes one object member with serde, after a comma unless it is the first.
fn field<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, key: &str, value: &T) -> Result<()> {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    canonical::write(out, value)
}

/// The dropped records as serde writes them: keys in bytewise order, labels
/// that need no escaping.
fn write_dropped(out: &mut Vec<u8>, dropped: &Dropped) -> Result<()> {
    let mut number = itoa::Buffer::new();
    out.push(b'[');
    for (n, record) in dropped.iter().enumerate() {
        let DroppedRef { item_id, partition, reason, seq, tokens } = record;
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"itemId\":");
        write_str(out, item_id)?;
        out.extend_from_slice(b",\"partition\":\"");
        out.extend_from_slice(partition.name().as_bytes());
        out.extend_from_slice(b"\",\"reason\":\"");
        out.extend_from_slice(reason.name().as_bytes());
        out.push(b'"');
        if let Some(seq) = seq {
            out.extend_from_slice(b",\"seq\":");
            out.extend_from_slice(number.format(seq).as_bytes());
        }
        out.extend_from_slice(b",\"tokens\":");
        out.extend_from_slice(number.format(tokens).as_bytes());
        out.push(b'}');
    }
    out.push(b']');
    Ok(())
}

fn over_budget(budget: &Budget, candidates: &[Candidate], entries: &[Entry]) -> KernelError {
    let (input, must_total) = (budget.input, budget.must_total());
    let partitions: Vec<_> = PARTITIONS
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "mustKeep": budget.must_keep[*p as usize],
                "ceiling": budget.share(budget.policy.limits(*p).ceiling_bp),
            })
        })
        .collect();
    let mut largest: Vec<(u64, &str, Partition, KeepReason)> = entries
        .iter()
        .zip(candidates)
        .filter_map(|(e, c)| match e.decision {
            Some(Decision::Keep(reason)) => Some((e.tokens, c.item.id(), e.facts.partition, reason)),
            _ => None,
        })
        .collect();
    largest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let largest: Vec<_> = largest
        .iter()
        .take(10)
        .map(|(tokens, id, p, reason)| json!({"itemId": id, "partition": p, "tokens": tokens, "keep": reason}))
        .collect();
    KernelError::new(
        ErrorCode::ContextOverBudget,
        format!("the must-keep context needs {must_total} tokens but the input budget is {input}"),
    )
    .with_detail(json!({
        "inputBudget": input,
        "mustKeepTokens": must_total,
        "partitions": partitions,
        "largestMustKeep": largest,
    }))
}
