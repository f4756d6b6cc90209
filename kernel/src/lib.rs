//! ctxkernel: one Context/Memory Kernel for AI agents.
//!
//! The crate is a pure core: every command is "decode the request → step the
//! state machine of one module → encode the response", with all state in the
//! host-supplied [`store::Store`]. It never reads a clock, randomness, the
//! environment or files; `now` arrives in each request. Built for
//! `wasm32-wasip2` it is the component every host loads (see `component`);
//! built natively it is what the unit and property tests exercise.
//!
//! One module per concept:
//! - [`contracts`] — the v1 data contracts (ContextItem, MemoryRecord, …)
//! - [`canonical`] — canonical JSON, digests, timestamps
//! - [`text`] — text as a reader sees it (invisible characters stripped, NFKC)
//! - [`tokens`] — the token estimator
//! - [`store`] — the storage port and key layout
//! - [`session`] — session event logs
//! - [`planner`] — the context planner
//! - [`compaction`] — the compaction state machine and session projection
//! - [`content`] — content addressed by sha256 (externalized output, archives)
//! - [`events`] — the kernel's bodiless event stream
//! - [`authority`] — who may change a memory: one table for every transition
//! - [`memory`] — the governed memory lifecycle
//! - [`recall`] — recall and the resident snapshot
//! - [`secrets`] — the secret detector
//! - [`wire`] — the number contract of request text
//! - [`commands`] — the command table every host calls

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
pub mod consolidation;
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
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod component;

pub use commands::{Command, Kernel};
pub use error::{ErrorCode, KernelError};
