//! ctxkernel for Rust hosts: the one component, run by wasmtime, over a
//! store this host supplies.
//!
//! ```no_run
//! use ctxkernel_host::{items, Kernel, SqliteStore};
//! use serde_json::json;
//! let mut kernel = Kernel::new(SqliteStore::open("store.sqlite")?)?;
//! kernel.append_events(&json!({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items::user("Hi")]}))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every call runs inside one store transaction: committed when the kernel
//! answers `ok`, rolled back when it answers an error or traps. A trap also
//! discards the instance; the next call gets a fresh one over the same store.
//! A command that only reads takes no write lock.

mod clock;
mod compiled;
mod engine;
mod errors;
pub mod items;
mod kernel;
mod stores;

pub use engine::{bindings, Limits, Runtime, COMPONENT, COMPONENT_SHA256};
pub use errors::{ErrorCode, KernelError};
pub use clock::utc_now;
pub use kernel::{Clock, Kernel, COMMANDS, READ_ONLY, TAKES_NOW, TRAPPED};
pub use stores::{HostStore, MemoryStore, SqliteStore};

pub use bindings::ctxkernel::kernel::store::{Entry, PutError};
