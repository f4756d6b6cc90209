//! A candidate item: an item, its place in the transcript, and the facts the
//! planner reads of it.

use crate::canonical::Timestamp;
use crate::contracts::{partition_of, sink_admits, Anchor, ContextItem, ItemKind, Partition, Role, SinkPolicies, Trust};
use serde_json::value::RawValue;
use std::rc::Rc;

/// A candidate item and its position in the transcript (the session event's
/// sequence number, or the inline item's `sourceRef.seq`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub item: Rc<ContextItem>,
    pub seq: Option<u64>,
    /// The item's canonical JSON, when the session log already made it.
    pub canonical: Option<Rc<RawValue>>,
    pub(crate) facts: ItemFacts,
    /// Where the item sits in its session log's tables, when it is logged.
    logged: Option<LogPlace>,
}

impl Candidate {
    pub fn new(item: Rc<ContextItem>, seq: Option<u64>, canonical: Option<Rc<RawValue>>) -> Self {
        Candidate { facts: ItemFacts::of(&item), item, seq, canonical, logged: None }
    }

    /// The item's id, read from its log's `ids` when it is logged there.
    pub(crate) fn id<'a>(&'a self, log: &'a LogTables) -> &'a str {
        self.logged.and_then(|at| log.ids.get(at.id_start..at.id_end)).unwrap_or_else(|| self.item.id())
    }

    /// Whether the item may go to the sink `admitted` was decided for.
    pub(crate) fn admitted(&self, admitted: &[bool], sink: &str) -> bool {
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
    pub(crate) policies: SinkPolicies,
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

/// What the planner reads of an item, whatever the request: read once, when
/// the candidate is made. A stored session's candidates are cached with their
/// facts, so a plan walks one dense array rather than ten thousand items
/// spread over the heap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ItemFacts {
    pub(crate) partition: Partition,
    /// Claimed a more trusted partition than its trust allows.
    pub(crate) demoted: bool,
    pub(crate) kind: ItemKind,
    pub(crate) priority: i32,
    pub(crate) token_estimate: u32,
    /// `expiresAt`, in nanoseconds since the Unix epoch.
    pub(crate) expires: Option<i128>,
    pub(crate) pinned: bool,
    pub(crate) summary: bool,
    pub(crate) user_request: bool,
    /// Only a trusted item can be an anchor.
    pub(crate) anchor: Option<Anchor>,
    pub(crate) calls_tools: bool,
    pub(crate) answers_call: bool,
    pub(crate) has_task: bool,
    pub(crate) has_interaction: bool,
}

impl ItemFacts {
    pub(crate) fn of(item: &ContextItem) -> ItemFacts {
        let (partition, demoted) = partition_of(item);
        // What an item claims about itself counts only when it is trusted:
        // an external page cannot pin itself, pose as the user's request,
        // or hold a task, approval or anchor open.
        let trusted = item.trust <= Trust::User;
        let summary = item.summary_of.is_some();
        ItemFacts {
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

/// Transcript order: sequence when known, then creation time, then id.
pub(crate) fn chrono(c: &Candidate) -> (u64, &Timestamp, &str) {
    (c.seq.unwrap_or(u64::MAX), &c.item.created_at, c.item.id())
}

pub(crate) fn sink_permits(item: &ContextItem, sink: &str) -> bool {
    sink_admits(item.sensitivity, &item.allowed_sinks, sink)
}
