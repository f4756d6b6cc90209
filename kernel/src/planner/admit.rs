//! What a plan is asked for: the request, the model profile and the policy,
//! checked before anything is planned; the input budget; inline items
//! normalized into candidates.

use crate::canonical::Timestamp;
use crate::contracts::{check_id, check_sink, check_version, ContextItem, ItemLimits, Partition, PARTITIONS};
use crate::error::{KernelError, Result};
use crate::session::Candidate;
use std::rc::Rc;
use super::BP;
use super::shrink::ToolResults;

/// The largest model window accepted, in tokens.
pub const MAX_WINDOW: u64 = 16_000_000;
/// The largest `maxItemBytes` a policy may set.
pub const MAX_ITEM_BYTES_CEILING: u64 = crate::session::MAX_EVENT_BYTES;
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
    /// A tool exchange that does not fit whole: its largest results shrunk
    /// to placeholders until it fits (`shrink`, the default), or the
    /// exchange dropped. Always in the policy's digest.
    #[serde(default)]
    pub tool_results: ToolResults,
    pub version: String,
}
}

impl Default for PlanPolicy {
    fn default() -> Self {
        let limits = |minimum_bp, ceiling_bp| PartitionLimits { minimum_bp, ceiling_bp, ceiling_tokens: None };
        PlanPolicy {
            version: "ctxk-default-2".into(),
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
            tool_results: ToolResults::Shrink,
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
