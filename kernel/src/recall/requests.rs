//! The recall commands' requests and answers.

use crate::canonical::Timestamp;
use crate::contracts::{AuthorityKind, Scope, SourceRef};
use std::collections::BTreeMap;

contract! {
/// One admitted scope.
pub struct ScopeRef {
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
}
}

contract! {
/// `recall-memory`.
pub struct RecallRequest {
    /// Only these scopes are searched; nothing outside them is ever scored.
    pub scopes: Vec<ScopeRef>,
    #[serde(default = "default_k")]
    pub k: u32,
    /// Token budget of the returned memories' text.
    #[serde(default = "default_budget")]
    pub max_tokens: u32,
    pub now: Timestamp,
    pub query: String,
    /// The query's embedding, from the same model as the memories'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_embedding: Option<Vec<f32>>,
    pub schema_version: u32,
    /// Where the memories go: records not allowed there are never returned.
    pub sink: String,
}
}

fn default_k() -> u32 {
    8
}

fn default_budget() -> u32 {
    2000
}

contract! {
/// An earlier fact this one replaced.
pub struct HistoryEntry {
    pub content: String,
    pub memory_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<Timestamp>,
}
}

contract! {
pub struct Recalled {
    pub authority: Option<AuthorityKind>,
    pub confidence: f64,
    /// Active memories it contradicts (unresolved): the caller sees both.
    pub conflicts: Vec<String>,
    pub content: String,
    pub evidence_refs: Vec<SourceRef>,
    pub history: Vec<HistoryEntry>,
    /// Which channels found it.
    pub matched_by: Vec<String>,
    pub memory_id: String,
    pub rank: u32,
    /// This query's dynamic relevance (fused, adjusted), apart from confidence and importance.
    pub relevance: f64,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    /// What it costs of the budget: its content and the history shown.
    pub tokens: u32,
    /// The text was cut to fit the token budget.
    pub truncated: bool,
}
}

contract! {
pub struct RecallResponse {
    /// Why results may be weaker than they could be (lexical only, rebuilt index).
    pub degraded: Vec<String>,
    pub filtered: BTreeMap<String, u32>,
    pub memories: Vec<Recalled>,
    pub memory_revision: u64,
    pub schema_version: u32,
}
}

contract! {
/// `resident-snapshot`: the bounded block of a scope's memories a host
/// injects into prompts.
pub struct ResidentRequest {
    pub max_tokens: u32,
    pub now: Timestamp,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sink: String,
}
}

contract! {
pub struct ResidentSnapshot {
    /// The memories actually included, in order.
    pub included: Vec<String>,
    pub memory_revision: u64,
    pub schema_version: u32,
    /// The block to inject: marked as data, never instructions.
    pub text: String,
    pub tokens: u32,
    /// A digest of what was included: equal versions, equal text.
    pub version: String,
}
}
