//! Shrinking: a tool exchange too large for what is left of the budget is
//! kept with its results shown as placeholders, each naming the result's
//! size and sha256, rather than dropped. The call keeps its pair, so the
//! model still sees what it asked and that an answer came, and a host can
//! give the result back by its digest. Only results larger than their
//! placeholder shrink; an exchange that does not fit even shrunk is dropped.

use crate::contracts::ContextItem;
use crate::session::Candidate;

label! {
/// What the budget does with a tool exchange that does not fit whole.
#[derive(Default)]
pub enum ToolResults {
    /// Its results become placeholders naming their size and digest.
    #[default]
    Shrink,
    /// The exchange is dropped whole.
    Drop,
}
}

impl ToolResults {
    pub fn is_default(&self) -> bool {
        *self == ToolResults::Shrink
    }
}

/// The placeholder shown for a result of `tokens` tokens whose content hashes to `digest`.
fn placeholder(tokens: u64, digest: &str) -> String {
    format!("[tool result left out to fit the context window: {tokens} tokens, content {digest}]")
}

/// `c` (a result of `tokens` tokens, framing included) as its placeholder:
/// the same item, call and outcome, its content the placeholder alone.
pub(super) fn shrunk(c: &Candidate, tokens: u64) -> ContextItem {
    let mut item = (*c.item).clone();
    let digest = item.digest.take().unwrap_or_else(|| c.item.content_digest());
    item.content = Some(placeholder(tokens, &digest));
    item.content_ref = None;
    item.parts.clear();
    item.token_estimate = Some(item.estimate());
    item.digest = Some(item.content_digest());
    item
}

/// What `c` costs shrunk, framing included, when that is less than `tokens`.
pub(super) fn shrunk_tokens(c: &Candidate, tokens: u64, overhead: u64) -> Option<u64> {
    let cost = u64::from(shrunk(c, tokens).token_estimate.unwrap_or(0)) + overhead;
    (cost < tokens).then_some(cost)
}
