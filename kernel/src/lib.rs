//! ctxkernel: one Context/Memory Kernel for AI agents.
//!
//! The crate is a pure core: every command is "decode the request → step the
//! state machine of one module → encode the response", with all state in the
//! host-supplied [`store::Store`]. It never reads a clock, randomness, the
//! environment or files; `now` arrives in each request. Built for
//! `wasm32-wasip2` it is the component every host loads (see `component`);
//! built natively it is what the unit and property tests exercise.
//!
//! Layers, lowest first. A module imports only from layers below its own,
//! never from its own layer or above; `tests/layers.rs` reads this list and
//! every `crate::` path in the crate, and fails on an import that goes up.
//!
//! 0. `error` — the typed error every layer returns
//! 1. `text`, `canonical`, `tokens`, `wire` — text as a reader sees it,
//!    canonical JSON and digests, the token estimator, the number contract
//!    of request text
//! 2. `secrets` — the secret detector
//! 3. `contracts` — the v1 data contracts every layer speaks (the context
//!    item, the memory record, sink policy, the session head and compaction
//!    record, the provider protocol); an identifier that carries a secret is
//!    refused where it is checked
//! 4. `store`, `authority` — the storage port and key layout; who may change
//!    a memory, one table for every transition
//! 5. `events`, `content` — the kernel's bodiless event stream; content
//!    addressed by sha256
//! 6. `session` — the append-only event log, and its projection: what a
//!    model sees of a session after its compactions, as planner candidates
//! 7. `planner`, `index` — the context planner (a pure function of a
//!    session's candidates); each memory's recall terms and embedding, kept
//!    in the store, written by the memory layer through `index::add`,
//!    `index::remove` and `index::embed`
//! 8. `compaction`, `memory`, `transcripts` — the compaction state machine;
//!    the governed memory lifecycle (proposals, decisions, deletion,
//!    consolidation); provider transcripts imported into a session, and a
//!    plan rendered as a provider request
//! 9. `recall` — ranked recall and the resident snapshot, over the index and
//!    the memory records
//! 10. `commands` — the command table every host calls, and its caches
//! 11. `component` — the WIT export (wasm32 only)
//!
//! Two cycles were broken this way. Records both sides need sit in
//! `contracts`: the session log holds compaction records, and compaction
//! writes them. The index is written where memories change and read where
//! they are recalled, so its store side is its own layer below memory, and
//! the in-memory search structure (`recall::postings`) above it.

/// A wire type: camelCase fields, unknown fields rejected. Fields are declared
/// in the bytewise order of their wire names, so serde writes canonical JSON
/// directly (see `canonical`).
macro_rules! contract {
    ($item:item) => {
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        $item
    };
}

/// A wire enum: kebab-case names, ordered as declared.
macro_rules! label {
    ($item:item) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(rename_all = "kebab-case")]
        $item
    };
}

pub mod authority;
pub mod canonical;
pub mod commands;
pub mod compaction;
pub mod index;
pub mod content;
pub mod contracts;
pub mod error;
pub mod events;
pub mod memory;
pub mod planner;
pub mod recall;
pub mod secrets;
pub mod session;
pub mod store;
pub mod text;
pub mod tokens;
pub mod transcripts;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod component;

pub use commands::{Command, Kernel};
pub use error::{ErrorCode, KernelError};
