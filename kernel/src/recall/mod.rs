//! Recall: which memories a request should see, in the fixed order of section 10.
//!
//! ```text
//! scope admission ─► sensitivity / allowed-sink filter ─► lexical (BM25) and
//! vector candidates ─► provenance and confidence adjustment ─► conflict /
//! supersession filter ─► diversity and token budget ─► stable top-K + attribution
//! ```
//!
//! The lexical channel is BM25 over the inverted index of `postings`, built
//! from the term vectors the `index` layer keeps in the store; the vector
//! channel is cosine over the embeddings hosts supplied. `rank` fuses the
//! two and weighs in provenance and confidence.
//!
//! - `requests` — the commands' requests and answers
//! - `postings` — the in-memory inverted index, caught up from the store and
//!   loaded by the terms recalls ask for
//! - `rank` — BM25, cosine, reciprocal-rank fusion, adjustment
//! - `select` — each ranked memory checked against its record, clipped to the
//!   budget, with its history and conflicts
//! - `resident` — the bounded snapshot a host injects into prompts

mod postings;
mod rank;
mod requests;
mod resident;
mod select;

pub use postings::Postings;
pub use requests::{HistoryEntry, RecallRequest, RecallResponse, Recalled, ResidentRequest, ResidentSnapshot, ScopeRef};
pub use resident::resident;

use crate::contracts::{check_scope, check_sink, check_version};
use crate::error::{ErrorCode, KernelError, Result};
use crate::index::check_embedding;
use crate::store::Db;
use std::collections::{BTreeMap, BTreeSet};

/// Most results one recall returns.
pub const MAX_K: u32 = 200;

/// `recall-memory`: admit the request, rank what the channels find in the
/// admitted scopes, then let each record have the last word.
pub fn recall(db: &mut Db, index: &mut Postings, request: RecallRequest) -> Result<RecallResponse> {
    admit(&request)?;
    let mut degraded = Vec::new();
    if index.catch_up(db)? {
        degraded.push("index: rebuilt from the records".to_string());
    }
    let scopes: BTreeSet<_> = request.scopes.iter().map(|s| (s.scope, s.scope_id.clone())).collect();
    let terms: BTreeSet<String> = crate::index::terms(&request.query).into_iter().collect();
    index.hold(db, &scopes, &terms, request.query_embedding.is_some())?;
    let mut filtered: BTreeMap<String, u32> = BTreeMap::new();
    let ranked = rank::rank(index, &request, &scopes, &terms, &mut filtered, &mut degraded);
    let memories = select::select(db, &request, ranked, &mut filtered)?;
    Ok(RecallResponse { degraded, filtered, memories, memory_revision: index.revision, schema_version: 1 })
}

/// Checks the request: its version and sink, at least one well-formed
/// admitted scope, `k`, and the size of the query and its embedding.
fn admit(request: &RecallRequest) -> Result<()> {
    check_version("request", request.schema_version)?;
    check_sink(&request.sink)?;
    if request.scopes.is_empty() {
        return Err(KernelError::new(ErrorCode::ScopeDenied, "recall needs at least one admitted scope"));
    }
    for (i, s) in request.scopes.iter().enumerate() {
        check_scope(&format!("scopes[{i}].scope"), s.scope, s.scope_id.as_deref())?;
    }
    if request.k == 0 || request.k > MAX_K {
        return Err(KernelError::limit(format!("k must be within 1..={MAX_K}")));
    }
    if request.query.len() > 16 << 10 {
        return Err(KernelError::limit("a recall query is at most 16 KiB"));
    }
    if let Some(vector) = &request.query_embedding {
        check_embedding("queryEmbedding", vector)?;
    }
    Ok(())
}
