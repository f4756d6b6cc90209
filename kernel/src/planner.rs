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
    check_id, check_version, sink_allowed, ContextItem, ItemKind, ItemLimits, Role, Sensitivity, ToolOutcome, Trust,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::session::Head;
use crate::tokens;
use serde_json::json;
use serde_json::value::RawValue;
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
    pub dropped: Vec<DroppedItem>,
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
pub struct DroppedItem {
    pub item_id: String,
    pub partition: Partition,
    pub reason: DropReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub tokens: u64,
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
pub struct PlanInputs {
    /// Normalized items with unique ids.
    pub candidates: Vec<Candidate>,
    pub memory_revision: u64,
    pub session: Option<(String, Head)>,
}

/// Validates the request's model, policy and sink; returns the policy to use
/// and the input budget.
pub fn admit(request: &PlanRequest) -> Result<(PlanPolicy, u64)> {
    check_version("request", request.schema_version)?;
    check_id("sink", &request.sink)?;
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
            Ok(Candidate { item: Rc::new(item), seq, canonical: None })
        })
        .collect()
}

/// One item's facts for planning.
struct Entry {
    decision: Option<Decision>,
    demoted: bool,
    partition: Partition,
    tokens: u64,
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
    /// Entry indexes of the results answering the anchor's calls.
    results: Vec<usize>,
    must_keep: Option<KeepReason>,
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

fn partition_of(item: &ContextItem) -> (Partition, bool) {
    let trusted = item.trust <= Trust::User;
    let pending = item.interaction.is_some();
    match item.kind {
        _ if item.summary_of.is_some() => (Partition::Conversation, false),
        ItemKind::SystemPolicy if trusted => (Partition::System, false),
        ItemKind::SystemPolicy => (Partition::Evidence, true),
        _ if pending || item.anchor.is_some() => (Partition::Task, false),
        ItemKind::TaskState => (Partition::Task, false),
        ItemKind::ToolSchema | ItemKind::Skill => (Partition::Tools, false),
        ItemKind::Message => (Partition::Conversation, false),
        ItemKind::ToolEvidence | ItemKind::ArtifactRef => (Partition::Evidence, false),
        ItemKind::Memory | ItemKind::ProjectRule => (Partition::Memory, false),
    }
}

pub(crate) fn sink_permits(item: &ContextItem, sink: &str) -> bool {
    if item.sensitivity >= Sensitivity::Secret {
        // Secrets need the sink named, not a wildcard.
        let named: Vec<String> = item.allowed_sinks.iter().filter(|s| *s != "*").cloned().collect();
        return sink_allowed(&named, sink);
    }
    sink_allowed(&item.allowed_sinks, sink)
}

/// Plans. `candidates` are normalized; `policy` and `input` come from [`admit`].
pub fn plan(request: &PlanRequest, policy: &PlanPolicy, input: u64, inputs: PlanInputs) -> Result<ContextPlan> {
    let PlanInputs { candidates, session, memory_revision } = inputs;
    if candidates.len() > policy.max_items as usize {
        return Err(KernelError::limit(format!(
            "{} candidate items; policy.maxItems is {}",
            candidates.len(),
            policy.max_items
        )));
    }
    let now = &request.now;
    let overhead = u64::from(policy.item_overhead_tokens);

    // Candidates in one canonical order, whatever order they came in.
    let mut candidates = candidates;
    candidates.sort_by(|a, b| chrono(a).cmp(&chrono(b)));

    let mut entries: Vec<Entry> = candidates
        .iter()
        .map(|c| {
            let (partition, demoted) = partition_of(&c.item);
            let tokens = u64::from(c.item.token_estimate.unwrap_or(0)) + overhead;
            Entry { partition, demoted, tokens, decision: None }
        })
        .collect();

    // Units: each tool call travels with its results.
    let mut call_owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        for call in &c.item.tool_calls {
            if call_owner.insert(&call.call_id, i).is_some() {
                return Err(KernelError::invalid(format!("callId `{}` is used by two tool calls", call.call_id)));
            }
        }
    }
    let mut unit_of: Vec<Option<usize>> = vec![None; candidates.len()];
    let mut units: Vec<Unit> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        if c.item.tool_result.is_none() {
            unit_of[i] = Some(units.len());
            units.push(Unit { anchor: i, results: Vec::new(), must_keep: None, priority: c.item.priority });
        }
    }
    for (i, c) in candidates.iter().enumerate() {
        let Some(result) = &c.item.tool_result else { continue };
        match call_owner.get(result.call_id.as_str()).and_then(|&owner| unit_of[owner]) {
            Some(unit) => units[unit].results.push(i),
            None => entries[i].decision = Some(Decision::Drop(DropReason::OrphanToolResult)),
        }
    }

    // Filters: expiry and sinks drop a whole unit.
    for unit in &mut units {
        let offence = unit.members().find_map(|i| {
            let item = &candidates[i].item;
            if item.expires_at.as_ref().is_some_and(|t| t <= now) {
                Some((i, DropReason::Expired))
            } else if !sink_permits(item, &request.sink) {
                Some((i, DropReason::SinkDenied))
            } else {
                None
            }
        });
        if let Some((culprit, reason)) = offence {
            for i in unit.members() {
                let reason = if i == culprit { reason } else { DropReason::PairDropped };
                entries[i].decision = Some(Decision::Drop(reason));
            }
        }
        unit.priority = unit.members().map(|i| candidates[i].item.priority).max().unwrap_or(0);
    }
    let live = |entries: &Vec<Entry>, i: usize| entries[i].decision.is_none();

    // The must-keep set.
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
    for (i, c) in candidates.iter().enumerate() {
        if !live(&entries, i) {
            continue;
        }
        let item = &c.item;
        if item.pinned {
            mark(i, KeepReason::Pinned, &mut must);
        }
        if item.summary_of.is_some() {
            mark(i, KeepReason::Recovery, &mut must);
        }
        if item.kind == ItemKind::Message && item.role == Some(Role::User) {
            latest_user = Some(i);
        }
        if let Some(anchor) = item.anchor.filter(|_| item.trust <= Trust::User) {
            latest_anchor.insert(anchor, i);
        }
        if let Some(task) = &item.task {
            latest_task.insert(task.task_id.as_str(), i);
        }
        if let Some(interaction) = &item.interaction {
            interactions.entry(interaction.operation_id.as_str()).or_default().push(i);
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
    for unit in &units {
        let anchor = &candidates[unit.anchor].item;
        if anchor.tool_calls.is_empty() || !live(&entries, unit.anchor) {
            continue;
        }
        for call in &anchor.tool_calls {
            // Results are in transcript order: the last one tells the outcome.
            let outcome = unit
                .results
                .iter()
                .filter_map(|&i| candidates[i].item.tool_result.as_ref())
                .filter(|r| r.call_id == call.call_id)
                .last()
                .map_or(ToolOutcome::Pending, |r| r.outcome);
            if matches!(outcome, ToolOutcome::Pending | ToolOutcome::Unknown) {
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
    for unit in &mut units {
        unit.must_keep = unit.members().filter_map(|i| must[i]).min();
    }

    // Budget: must-keep first, then minimums, then greedy selection.
    let share = |bp: u32| input * u64::from(bp) / BP;
    let ceiling = |p: Partition| {
        let limits = policy.limits(p);
        share(limits.ceiling_bp).min(limits.ceiling_tokens.unwrap_or(u64::MAX))
    };
    let mut used = [0u64; 7];
    let mut must_keep_tokens = [0u64; 7];
    let mut demand = [0u64; 7];
    for unit in &units {
        if !live(&entries, unit.anchor) {
            continue;
        }
        for i in unit.members() {
            let p = entries[i].partition as usize;
            if let Some(reason) = unit.must_keep {
                entries[i].decision = Some(Decision::Keep(reason));
                used[p] += entries[i].tokens;
                must_keep_tokens[p] += entries[i].tokens;
            } else {
                demand[p] += entries[i].tokens;
            }
        }
    }

    let policy_digest = canonical::digest_value(policy)?;
    let mut recovery = Recovery {
        session_id: session.as_ref().map(|(id, _)| id.clone()),
        session_head: session.as_ref().map(|(_, head)| head.clone()),
        memory_revision,
        policy_digest: policy_digest.clone(),
        dropped_digest: canonical::digest_bytes(b""),
        tokens: 0,
    };
    // The dropped digest is filled in last; its length is fixed, so the
    // estimate made now holds.
    recovery.tokens = u64::from(tokens::estimate(&canonical::to_string(&recovery)?)) + overhead;
    let reserve = Partition::Reserve as usize;
    used[reserve] += recovery.tokens;
    must_keep_tokens[reserve] += recovery.tokens;

    let must_total: u64 = must_keep_tokens.iter().sum();
    if must_total > input {
        return Err(over_budget(input, must_total, &must_keep_tokens, policy, &candidates, &entries));
    }

    // Minimums: held for partitions with candidates (the reserve's is headroom).
    let mut held = [0u64; 7];
    for p in PARTITIONS {
        let i = p as usize;
        let want = if p == Partition::Reserve { u64::MAX } else { used[i] + demand[i] };
        held[i] = share(policy.limits(p).minimum_bp).min(want).saturating_sub(used[i]);
    }
    let mut pool = input - must_total;
    for p in PARTITIONS.iter().rev() {
        // Too little left for every minimum: the later partitions give way.
        let excess = held.iter().sum::<u64>().saturating_sub(pool);
        let i = *p as usize;
        held[i] -= excess.min(held[i]);
    }
    pool -= held.iter().sum::<u64>();

    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| {
        let (ua, ub) = (&units[a], &units[b]);
        let (ca, cb) = (&candidates[ua.anchor], &candidates[ub.anchor]);
        ub.priority
            .cmp(&ua.priority)
            .then(ca.item.kind.cmp(&cb.item.kind))
            .then_with(|| chrono(cb).cmp(&chrono(ca)))
    });
    for p in PARTITIONS.into_iter().filter(|p| *p != Partition::Reserve) {
        let mut own = held[p as usize];
        let mut cut = false;
        for &u in &order {
            let unit = &units[u];
            let anchor = unit.anchor;
            if entries[anchor].partition != p || entries[anchor].decision.is_some() {
                continue;
            }
            let verdict = if cut {
                Err((DropReason::HistoryCutoff, p))
            } else {
                let mut cost = [0u64; 7];
                for i in unit.members() {
                    cost[entries[i].partition as usize] += entries[i].tokens;
                }
                let total: u64 = cost.iter().sum();
                let over = |q: Partition| cost[q as usize] > 0 && used[q as usize] + cost[q as usize] > ceiling(q);
                if let Some(q) = PARTITIONS.into_iter().find(|q| over(*q)) {
                    Err((DropReason::PartitionCeiling, q))
                } else if total > own + pool {
                    Err((DropReason::BudgetExhausted, p))
                } else {
                    let from_own = total.min(own);
                    own -= from_own;
                    pool -= total - from_own;
                    for q in 0..7 {
                        used[q] += cost[q];
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
        pool += own;
    }

    // Output: preamble partitions, then the transcript in sequence order with
    // each call followed by its results.
    let preamble = |p: Partition| matches!(p, Partition::System | Partition::Tools | Partition::Memory);
    let mut kept_units: Vec<&Unit> = units
        .iter()
        .filter(|u| matches!(entries[u.anchor].decision, Some(Decision::Keep(_))))
        .collect();
    kept_units.sort_by(|a, b| {
        let (ea, eb) = (&entries[a.anchor], &entries[b.anchor]);
        let (ca, cb) = (&candidates[a.anchor], &candidates[b.anchor]);
        let section = |e: &Entry| if preamble(e.partition) { e.partition as u8 } else { u8::MAX };
        section(ea).cmp(&section(eb)).then_with(|| {
            if preamble(ea.partition) {
                cb.item
                    .priority
                    .cmp(&ca.item.priority)
                    .then(ca.item.kind.cmp(&cb.item.kind))
                    .then_with(|| chrono(ca).cmp(&chrono(cb)))
            } else {
                chrono(ca).cmp(&chrono(cb))
            }
        })
    });
    for (entry, c) in entries.iter().zip(&mut candidates) {
        if matches!(entry.decision, Some(Decision::Keep(_))) && c.item.digest.is_none() {
            let digest = c.item.content_digest();
            Rc::make_mut(&mut c.item).digest = Some(digest);
            c.canonical = None;
        }
    }
    let mut context = Vec::new();
    for unit in kept_units {
        let mut results = unit.results.clone();
        results.sort_by(|&a, &b| chrono(&candidates[a]).cmp(&chrono(&candidates[b])));
        for i in std::iter::once(unit.anchor).chain(results) {
            let Some(Decision::Keep(keep)) = entries[i].decision else { unreachable!("kept unit") };
            context.push(PlannedItem {
                item_id: candidates[i].item.id().to_string(),
                seq: candidates[i].seq,
                partition: entries[i].partition,
                tokens: entries[i].tokens,
                keep,
                demoted: entries[i].demoted,
                item: ItemBody { item: Rc::clone(&candidates[i].item), canonical: candidates[i].canonical.clone() },
            });
        }
    }
    let mut dropped: Vec<DroppedItem> = Vec::new();
    // Thousands of items are dropped from a long session: their digest is
    // over a compact form, not JSON (see `Recovery::dropped_digest`).
    let mut dropped_bytes = Vec::new();
    for (entry, c) in entries.iter().zip(&candidates) {
        if let Some(Decision::Drop(reason)) = entry.decision {
            dropped.push(DroppedItem {
                item_id: c.item.id().to_string(),
                seq: c.seq,
                partition: entry.partition,
                tokens: entry.tokens,
                reason,
            });
            dropped_bytes.extend_from_slice(c.item.id().as_bytes());
            dropped_bytes.extend_from_slice(&[0, entry.partition as u8, reason as u8]);
            dropped_bytes.extend_from_slice(&entry.tokens.to_le_bytes());
        }
    }
    recovery.dropped_digest = canonical::digest_bytes(&dropped_bytes);

    let mut partitions = Vec::with_capacity(7);
    for p in PARTITIONS {
        let count = |keep: bool| {
            entries
                .iter()
                .filter(|e| e.partition == p && matches!(e.decision, Some(Decision::Keep(_))) == keep)
                .count() as u32
        };
        partitions.push(PartitionUsage {
            name: p,
            minimum: share(policy.limits(p).minimum_bp),
            ceiling: ceiling(p),
            must_keep: must_keep_tokens[p as usize],
            used: used[p as usize],
            kept: count(true),
            dropped: count(false),
        });
    }
    let total_used: u64 = used.iter().sum();
    let reserved = held[reserve];
    let budget = BudgetSummary {
        window: request.model.window,
        reserved_output: request.model.reserved_output,
        safety_margin: request.model.safety_margin,
        input,
        used: total_used,
        reserved,
        free: input - total_used - reserved,
    };
    let binding = PlanBinding {
        session_id: session.as_ref().map(|(id, _)| id.clone()),
        session_head: session.map(|(_, head)| head),
        memory_revision,
        policy_version: policy.version.clone(),
        policy_digest,
        model_profile: request.model.profile.clone(),
        sink: request.sink.clone(),
    };
    pending_tool_calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));

    let mut plan = ContextPlan {
        schema_version: 1,
        plan_id: String::new(),
        digest: String::new(),
        now: now.clone(),
        binding,
        budget,
        partitions,
        context,
        dropped,
        pending_tool_calls,
        recovery,
    };
    let digest = canonical::digest_value(&DigestView {
        binding: &plan.binding,
        budget: &plan.budget,
        context: plan
            .context
            .iter()
            .map(|p| (&p.item_id, p.seq, p.item.digest.as_deref().unwrap_or(""), p.partition, p.tokens, p.keep, p.demoted))
            .collect(),
        now: &plan.now,
        partitions: &plan.partitions,
        pending_tool_calls: &plan.pending_tool_calls,
        recovery: &plan.recovery,
    })?;
    plan.plan_id = canonical::derived_id("plan", &digest);
    plan.digest = digest;
    Ok(plan)
}

/// What a plan's digest covers: every decision, the kept items by their own
/// digests rather than their bodies, the dropped ones through
/// `recovery.droppedDigest`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DigestView<'a> {
    binding: &'a PlanBinding,
    budget: &'a BudgetSummary,
    #[allow(clippy::type_complexity)]
    context: Vec<(&'a String, Option<u64>, &'a str, Partition, u64, KeepReason, bool)>,
    now: &'a Timestamp,
    partitions: &'a [PartitionUsage],
    pending_tool_calls: &'a [PendingToolCall],
    recovery: &'a Recovery,
}

fn over_budget(
    input: u64,
    must_total: u64,
    must_keep_tokens: &[u64; 7],
    policy: &PlanPolicy,
    candidates: &[Candidate],
    entries: &[Entry],
) -> KernelError {
    let partitions: Vec<_> = PARTITIONS
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "mustKeep": must_keep_tokens[*p as usize],
                "ceiling": input * u64::from(policy.limits(*p).ceiling_bp) / BP,
            })
        })
        .collect();
    let mut largest: Vec<(u64, &str, Partition, KeepReason)> = entries
        .iter()
        .zip(candidates)
        .filter_map(|(e, c)| match e.decision {
            Some(Decision::Keep(reason)) => Some((e.tokens, c.item.id(), e.partition, reason)),
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
