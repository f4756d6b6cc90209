//! The recall index in the store: what recall searches of each memory.
//!
//! Each memory's term vector lives in the store (`mem/idx/doc/<id>`),
//! written with the record, and so do each scope's postings per term
//! (`mem/idx/term/<scope>/<term>/<id>`), so a recall on a fresh instance
//! reads only its query's terms. A change log (`mem/log/<revision>/<id>`)
//! lets a kernel instance catch what it holds up incrementally. The index
//! is never authority: a missing or unreadable vector is rebuilt from its
//! record, and postings that lost track of the memory revision are rebuilt
//! from all records.
//!
//! Tokens: English words lowercased, stop words dropped, Snowball-stemmed;
//! code identifiers split at case changes, `_`, `.`, `/` and `::` (the whole
//! identifier is kept too); CJK, kana and hangul as character bigrams.
//!
//! The memory layer keeps it current as records change (`add`, `remove`,
//! `embed`); recall reads it (`recall::postings`). It knows records only as
//! the contract type, so it sits below both.
//!
//! - `tokenize` — a text's terms
//! - `documents` — each memory's stored term vector and embedding, and the change log
//! - `term_postings` — each scope's postings per term and its statistics

mod documents;
mod term_postings;
mod tokenize;

pub use documents::{add, cosine, embed, remove, DocVector, MAX_DIMENSIONS};
pub(crate) use documents::{check_embedding, doc_key, embedding_key, remove_replayed, repost, stored_vector, vector_of, Embedding, IndexMeta, DOCS, EMBEDDINGS, META};
pub use term_postings::{scope_stats, term_prefix, Posting, ScopeStats};
pub(crate) use term_postings::{posting_keys, stats_key, STATS, TERMS};
pub use tokenize::terms;

/// A map only ever looked up by key, never iterated, so its order cannot
/// leak; hashed without randomness (Fx), it spares the index the string
/// comparisons of a tree over 100k terms and ids.
pub(crate) type Lookup<V> = rustc_hash::FxHashMap<String, V>;
