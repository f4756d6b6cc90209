//! EVALUATING and PREPARING: whether the session is over its trigger, where
//! the cut falls, what stays verbatim whatever the cut, which bodies are
//! externalized, and the archives of the compacted span (one per sink policy).

use crate::canonical::{self, Timestamp};
use crate::contracts::{check_id, ContextItem, InteractionState, ItemKind, Role, Sensitivity, SinkPolicy, Strategy, ToolOutcome};
use crate::error::{KernelError, Result};
use crate::planner::{self, ModelProfile};
use crate::session::{self, project, Candidate, SessionLog};
use crate::store::Db;
use std::collections::{BTreeMap, BTreeSet};
use super::BP;
use super::requests::{CompactRequest, CompactionPolicy};

/// Framing tokens per item, as the default planning policy counts them.
const ITEM_OVERHEAD: u64 = 4;

pub(super) fn tokens_of(c: &Candidate) -> u64 {
    u64::from(c.item.token_estimate.unwrap_or(0)) + ITEM_OVERHEAD
}

/// The compaction a request calls for, before any summary is written.
pub(super) struct Prepared {
    /// The model-visible history before.
    pub(super) before: Vec<Candidate>,
    pub(super) cut_seq: u64,
    pub(super) preserved: Vec<u64>,
    /// Summarized items, in transcript order (the previous summary first).
    pub(super) inputs: Vec<Candidate>,
    pub(super) withheld: u32,
    pub(super) span_events: u32,
    /// Raw events after the previous cut up to this one, as archived: one
    /// archive per sink policy, those the request's sink may read first.
    pub(super) archives: Vec<(SinkPolicy, Vec<u8>)>,
    pub(super) externalize: Vec<(Candidate, Vec<u8>)>,
}

impl Prepared {
    pub(super) fn summarizes(&self) -> bool {
        !self.inputs.is_empty()
    }
}

/// Items that stay verbatim whatever the cut: returns positions in `projection`.
pub(super) fn must_preserve(projection: &[Candidate], now: &Timestamp) -> BTreeSet<usize> {
    let mut keep = BTreeSet::new();
    let mut latest_user = None;
    let mut latest_task: BTreeMap<&str, usize> = BTreeMap::new();
    let mut latest_anchor = BTreeMap::new();
    let mut latest_tool: BTreeMap<&str, usize> = BTreeMap::new();
    let mut interactions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in projection.iter().enumerate() {
        let item = &c.item;
        if item.summary_of.is_some() {
            continue;
        }
        if item.pinned || item.kind == ItemKind::SystemPolicy {
            keep.insert(i);
        }
        if item.kind == ItemKind::Message && item.role == Some(Role::User) {
            latest_user = Some(i);
        }
        if let Some(task) = &item.task {
            latest_task.insert(&task.task_id, i);
        }
        if let Some(anchor) = item.anchor {
            latest_anchor.insert(anchor, i);
        }
        // What the model may call: the calls kept after the cut need it.
        if let Some(tool) = &item.tool {
            latest_tool.insert(&tool.name, i);
        }
        if let Some(interaction) = &item.interaction {
            interactions.entry(&interaction.operation_id).or_default().push(i);
        }
    }
    keep.extend(latest_user);
    keep.extend(latest_anchor.values());
    keep.extend(latest_tool.values());
    keep.extend(latest_task.values().filter(|&&i| projection[i].item.task.as_ref().is_some_and(|t| t.status.is_unfinished())));
    for members in interactions.values() {
        let latest = projection[*members.last().expect("grouped")].item.interaction.as_ref().expect("grouped");
        if latest.state == InteractionState::Pending && latest.expires_at.as_ref().is_none_or(|t| t > now) {
            keep.extend(members);
        }
    }
    // Unsettled tool calls stay, with whatever results they have.
    for (call, results) in tool_units(projection) {
        let settled = projection[call].item.tool_calls.iter().all(|tc| {
            results
                .iter()
                .filter_map(|&r| projection[r].item.tool_result.as_ref())
                .filter(|r| r.call_id == tc.call_id)
                .last()
                .is_some_and(|r| !matches!(r.outcome, ToolOutcome::Pending | ToolOutcome::Unknown))
        });
        // A unit is kept whole: unsettled, or with any member that must stay
        // (a pinned call, a result carrying an interaction, …).
        if !settled || keep.contains(&call) || results.iter().any(|r| keep.contains(r)) {
            keep.insert(call);
            keep.extend(results);
        }
    }
    keep
}

/// Each calling item's position with the positions of its results: a
/// result answers the latest call of its id before it, as the planner pairs.
pub(super) fn tool_units(projection: &[Candidate]) -> Vec<(usize, Vec<usize>)> {
    let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, c) in projection.iter().enumerate() {
        if let Some(&o) = c.item.tool_result.as_ref().and_then(|r| owner.get(r.call_id.as_str())) {
            units.entry(o).or_default().push(i);
        }
        if !c.item.tool_calls.is_empty() {
            units.entry(i).or_default();
            for call in &c.item.tool_calls {
                owner.insert(&call.call_id, i);
            }
        }
    }
    units.into_iter().collect()
}

pub(super) fn input_budget(model: &ModelProfile) -> Result<u64> {
    check_id("model.profile", &model.profile)?;
    model
        .reserved_output
        .checked_add(model.safety_margin)
        .and_then(|held| model.window.checked_sub(held))
        .filter(|input| *input > 0 && model.window <= planner::MAX_WINDOW)
        .ok_or_else(|| KernelError::invalid("model leaves no input budget (or exceeds the window ceiling)"))
}

pub(super) fn prepare(db: &mut Db, log: &SessionLog, request: &CompactRequest, policy: &CompactionPolicy) -> Result<Option<Prepared>> {
    let input = input_budget(&request.model)?;
    let before = project(&log.items, &log.compactions);
    let total: u64 = before.iter().map(tokens_of).sum();
    let previous_cut = log.compactions.iter().rev().find_map(|(_, c)| c.summary.as_ref().map(|_| c.cut_seq)).unwrap_or(0);
    let preserve = must_preserve(&before, &request.now);
    let externalize: Vec<(Candidate, Vec<u8>)> = before
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            c.item.kind == ItemKind::ToolEvidence
                && !preserve.contains(i)
                && c.item.content.as_ref().is_some_and(|t| t.len() as u64 > policy.externalize_over_bytes)
        })
        .map(|(_, c)| (c.clone(), c.item.content.clone().unwrap_or_default().into_bytes()))
        .collect();

    let over = total > input * u64::from(policy.trigger_bp) / BP;
    let mut cut_pos = 0;
    if over || request.force {
        // The recent tail stays verbatim: by the host's `keepFromSeq`, or by tokens.
        let keep_recent = input * u64::from(policy.keep_recent_bp) / BP;
        cut_pos = before.len();
        let mut tail = 0;
        for (i, c) in before.iter().enumerate().rev() {
            let keep = match request.keep_from_seq {
                Some(from) => c.seq.unwrap_or(0) >= from,
                None => tail + tokens_of(c) <= keep_recent,
            };
            if !keep {
                break;
            }
            tail += tokens_of(c);
            cut_pos = i;
        }
        // Never end a span between a call and its results: a unit straddling
        // the cut is kept whole after it. Moving the cut can make another
        // unit straddle it, so repeat until none does.
        let units = tool_units(&before);
        while let Some(call) =
            units.iter().find(|(call, results)| *call < cut_pos && results.iter().any(|&r| r >= cut_pos)).map(|(call, _)| *call)
        {
            cut_pos = call;
        }
    }
    let span: Vec<usize> = (0..cut_pos).collect();
    let new_material = span.iter().any(|&i| !preserve.contains(&i) && before[i].item.summary_of.is_none());
    if !new_material && externalize.is_empty() {
        return Ok(None);
    }
    let provider_sink = match (request.strategy, &request.provider) {
        (Strategy::Provider, Some(provider)) => Some(format!("model:{}", provider.model)),
        _ => None,
    };
    let (inputs, withheld): (Vec<Candidate>, Vec<Candidate>) = if new_material {
        span.iter()
            .filter(|i| !preserve.contains(i))
            .map(|&i| before[i].clone())
            .partition(|c| {
                // A provider summary sends its inputs to that model: each must
                // be allowed to reach it as well as the request's sink.
                session::sink_permits(&c.item, &request.sink)
                    && provider_sink.as_ref().is_none_or(|sink| session::sink_permits(&c.item, sink))
            })
    } else {
        (Vec::new(), Vec::new())
    };
    let cut_seq = if new_material { before[cut_pos - 1].seq.unwrap_or(0).max(previous_cut) } else { previous_cut };
    let preserved: Vec<u64> = if new_material {
        span.iter().filter(|i| preserve.contains(i)).filter_map(|&i| before[i].seq).collect()
    } else {
        log.compactions.iter().rev().find_map(|(_, c)| c.summary.as_ref().map(|_| c.preserved.clone())).unwrap_or_default()
    };
    let archives = if new_material {
        let events = session::load(db, &request.session_id, previous_cut, (cut_seq - previous_cut) as usize)?;
        archives(&events, &log.items, &request.sink)?
    } else {
        Vec::new()
    };
    let span_events = if new_material { (cut_seq - previous_cut) as u32 } else { 0 };
    Ok(Some(Prepared { before, cut_seq, preserved, inputs, withheld: withheld.len() as u32, span_events, archives, externalize }))
}

/// Groups events by who may read them. An item's policy is its own; a
/// compaction's is the narrowest of its summary and of the items it
/// externalized (their excerpts are in it). Events the sink may read share
/// one archive under the narrowest of their policies; every other policy
/// gets an archive of its own.
fn archives(events: &[session::Event], items: &[Candidate], sink: &str) -> Result<Vec<(SinkPolicy, Vec<u8>)>> {
    let of = |item: &ContextItem| SinkPolicy::new(item.sensitivity, &item.allowed_sinks);
    let by_seq: BTreeMap<u64, &ContextItem> = items.iter().filter_map(|c| Some((c.seq?, &*c.item))).collect();
    let mut main: Option<(SinkPolicy, Vec<u8>)> = None;
    let mut others: BTreeMap<SinkPolicy, Vec<u8>> = BTreeMap::new();
    for event in events {
        let policy = match (&event.item, &event.compaction) {
            (Some(item), _) => of(item),
            (None, Some(record)) => record
                .summary
                .iter()
                .map(|s| of(s))
                .chain(record.externalized.iter().filter_map(|e| by_seq.get(&e.seq).map(|i| of(i))))
                .reduce(|a, b| a.narrow(&b))
                .unwrap_or_else(|| SinkPolicy::new(Sensitivity::Internal, &["*".to_string()])),
            (None, None) => return Err(KernelError::storage(format!("event {} holds neither an item nor a compaction", event.seq))),
        };
        let mut line = canonical::to_bytes(event)?;
        line.push(b'\n');
        if policy.admits(sink) {
            let (joined, bytes) = main.get_or_insert_with(|| (policy.clone(), Vec::new()));
            *joined = joined.narrow(&policy);
            bytes.extend(line);
        } else {
            others.entry(policy).or_default().extend(line);
        }
    }
    Ok(main.into_iter().chain(others).collect())
}
