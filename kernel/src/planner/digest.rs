//! The plan bound to what it depends on, assembled, and digested; and its
//! canonical JSON, written directly for the parts a long session makes large.

use crate::canonical;
use crate::contracts::{Head, Partition, PARTITIONS};
use crate::error::{KernelError, Result};
use crate::tokens;
use super::admit::{PlanPolicy, PlanRequest};
use super::budget::Budget;
use super::output::{BudgetSummary, ContextPlan, Dropped, DroppedRef, PartitionUsage, PendingToolCall, PlanBinding, PlannedItem, Recovery};

impl Recovery {
    /// The recovery block with its tokens (framing included) counted. The
    /// dropped digest is filled in last; its length is fixed, so the count holds.
    #[inline(never)]
    pub(super) fn new(session: Option<&(String, Head)>, memory_revision: u64, policy: &PlanPolicy) -> Result<Recovery> {
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

/// Assembles the plan, binds it and takes its digest.
#[inline(never)]
pub(super) fn finish(
    request: &PlanRequest,
    budget: &Budget,
    session: Option<(String, Head)>,
    recovery: Recovery,
    context: Vec<PlannedItem>,
    dropped: Dropped,
    pending_tool_calls: Vec<PendingToolCall>,
) -> Result<ContextPlan> {
    let partitions = usage(budget, &context, &dropped);
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

/// Each partition's account: its bounds, what it used and kept, what it dropped.
#[inline(never)]
fn usage(budget: &Budget, context: &[PlannedItem], dropped: &Dropped) -> Vec<PartitionUsage> {
    let mut kept = [0u32; 7];
    let mut not_kept = [0u32; 7];
    for item in context {
        kept[item.partition as usize] += 1;
    }
    for item in dropped.iter() {
        not_kept[item.partition as usize] += 1;
    }
    PARTITIONS
        .map(|p| PartitionUsage {
            name: p,
            minimum: budget.minimum(p),
            ceiling: budget.ceiling(p),
            must_keep: budget.must_keep[p as usize],
            used: budget.used[p as usize],
            kept: kept[p as usize],
            dropped: not_kept[p as usize],
        })
        .to_vec()
}

/// What a plan's digest is taken over: canonical JSON of every decision, the
/// kept items by their own digests rather than their bodies, the dropped ones
/// through `recovery.droppedDigest` —
/// `{"binding","budget","context":[[itemId,seq,digest,partition,tokens,keep,demoted],…],"now","partitions","pendingToolCalls","recovery"}`.
/// The kept items' tuples are written here, the rest by serde (see `to_json`).
#[inline(never)]
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
