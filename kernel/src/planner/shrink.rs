//! Shrinking: a tool exchange too large for what is left of the budget is
//! kept with its largest results shown as placeholders, each naming the
//! result's tokens and the sha256 of its content, rather than dropped. The
//! call keeps its pair, so the model still sees what it asked and that an
//! answer came; the result itself stays in the session log (its event is
//! the planned item's `seq`). Results shrink largest first, only while the
//! exchange does not fit and only those larger than their placeholder; an
//! exchange that does not fit even so is dropped whole.

use super::output::Shrunk;
use crate::contracts::ContextItem;
use crate::session::Candidate;
use crate::tokens;

label! {
/// What the budget does with a tool exchange that does not fit whole.
#[derive(Default)]
pub enum ToolResults {
    /// Its largest results become placeholders until it fits.
    #[default]
    Shrink,
    /// The exchange is dropped whole.
    Drop,
}
}

/// The placeholder shown for a result of `tokens` tokens whose content hashes to `digest`.
fn placeholder(tokens: u64, digest: &str) -> String {
    format!("[tool result left out to fit the context window: {tokens} tokens, content {digest}]")
}

/// The digest of `c`'s content: the one its session log keeps, else computed.
fn digest_of(c: &Candidate) -> String {
    c.item.digest.clone().unwrap_or_else(|| c.item.content_digest())
}

/// The estimate of `c` shrunk from `tokens`: its placeholder and the
/// provider fields it keeps, as `ContextItem::estimate` counts them.
fn estimate(c: &Candidate, tokens: u64, digest: &str) -> u64 {
    let carried = c.item.provider_fields.as_ref().map_or(0, |f| u64::from(tokens::estimate(&f.text())));
    u64::from(tokens::estimate(&placeholder(tokens, digest))) + carried
}

/// `c` (a result of `tokens` tokens, framing included) as its placeholder —
/// the same item, call, outcome, sensitivity and sinks, its content the
/// placeholder alone — and what the placeholder stands for. Written out
/// field by field so the result's content is never copied.
pub(super) fn shrunk(c: &Candidate, tokens: u64) -> (ContextItem, Shrunk) {
    let digest = digest_of(c);
    let estimate = estimate(c, tokens, &digest);
    let text = placeholder(tokens, &digest);
    let item = &*c.item;
    let shown = ContextItem {
        digest: Some(crate::canonical::digest_bytes(text.as_bytes())),
        content: Some(text),
        content_ref: None,
        parts: Vec::new(),
        token_estimate: Some(u32::try_from(estimate).unwrap_or(u32::MAX)),
        allowed_sinks: item.allowed_sinks.clone(),
        anchor: item.anchor,
        created_at: item.created_at.clone(),
        expires_at: item.expires_at.clone(),
        interaction: item.interaction.clone(),
        item_id: item.item_id.clone(),
        kind: item.kind,
        pinned: item.pinned,
        priority: item.priority,
        provenance: item.provenance.clone(),
        provider_fields: item.provider_fields.clone(),
        provider_id: item.provider_id.clone(),
        role: item.role,
        schema_version: item.schema_version,
        scope: item.scope,
        scope_id: item.scope_id.clone(),
        sensitivity: item.sensitivity,
        source_ref: item.source_ref.clone(),
        summary_of: item.summary_of.clone(),
        task: item.task.clone(),
        tool: item.tool.clone(),
        // A result's own calls are never paired (the planner reads it as a result): none stand.
        tool_calls: Vec::new(),
        tool_result: item.tool_result.clone(),
        trust: item.trust,
    };
    (shown, Shrunk { digest, tokens })
}

/// What `c` costs shrunk, framing included, when that is less than `tokens`.
/// Counted without building the placeholder item: most exchanges tried are
/// not kept.
pub(super) fn shrunk_tokens(c: &Candidate, tokens: u64, overhead: u64) -> Option<u64> {
    let cost = estimate(c, tokens, &digest_of(c)) + overhead;
    (cost < tokens).then_some(cost)
}
