//! ctxkernel for Rust hosts: the one component, run by wasmtime, over a
//! store this host supplies.
//!
//! ```no_run
//! use ctxkernel_host::{Kernel, SqliteStore};
//! let mut kernel = Kernel::new(SqliteStore::open("store.sqlite")?)?;
//! let info = kernel.call("info", r#"{"schemaVersion":1}"#)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every call runs inside one store transaction: committed when the kernel
//! answers `ok`, rolled back when it answers an error or traps. A trap also
//! discards the instance; the next call gets a fresh one over the same store.

mod store;

pub use store::{HostStore, MemoryStore, SqliteStore};

pub mod bindings {
    wasmtime::component::bindgen!({ path: "../../wit", world: "ctxkernel" });
}

pub use bindings::ctxkernel::kernel::store::{Entry, PutError};
use bindings::ctxkernel::kernel::{store as port, types};
use serde_json::Value;
use std::fmt;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The component artifact this library was built with.
pub const COMPONENT: &[u8] = include_bytes!(env!("CTXK_COMPONENT_PATH"));

/// The kernel's commands, as named in the WIT.
pub const COMMANDS: [&str; 4] = ["info", "plan-context", "append-events", "read-events"];

/// The kernel's error codes, as named in the WIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidRequest,
    UnsupportedSchema,
    ContextOverBudget,
    Degraded,
    Stale,
    ReconciliationRequired,
    ContentUnavailable,
    DigestMismatch,
    ScopeDenied,
    Partial,
    NotFound,
    Conflict,
    IllegalTransition,
    LimitExceeded,
    StorageFailure,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid-request",
            ErrorCode::UnsupportedSchema => "unsupported-schema",
            ErrorCode::ContextOverBudget => "context-over-budget",
            ErrorCode::Degraded => "degraded",
            ErrorCode::Stale => "stale",
            ErrorCode::ReconciliationRequired => "reconciliation-required",
            ErrorCode::ContentUnavailable => "content-unavailable",
            ErrorCode::DigestMismatch => "digest-mismatch",
            ErrorCode::ScopeDenied => "scope-denied",
            ErrorCode::Partial => "partial",
            ErrorCode::NotFound => "not-found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::IllegalTransition => "illegal-transition",
            ErrorCode::LimitExceeded => "limit-exceeded",
            ErrorCode::StorageFailure => "storage-failure",
            ErrorCode::Internal => "internal",
        }
    }
}

impl From<types::ErrorCode> for ErrorCode {
    fn from(code: types::ErrorCode) -> Self {
        use types::ErrorCode as W;
        match code {
            W::InvalidRequest => ErrorCode::InvalidRequest,
            W::UnsupportedSchema => ErrorCode::UnsupportedSchema,
            W::ContextOverBudget => ErrorCode::ContextOverBudget,
            W::Degraded => ErrorCode::Degraded,
            W::Stale => ErrorCode::Stale,
            W::ReconciliationRequired => ErrorCode::ReconciliationRequired,
            W::ContentUnavailable => ErrorCode::ContentUnavailable,
            W::DigestMismatch => ErrorCode::DigestMismatch,
            W::ScopeDenied => ErrorCode::ScopeDenied,
            W::Partial => ErrorCode::Partial,
            W::NotFound => ErrorCode::NotFound,
            W::Conflict => ErrorCode::Conflict,
            W::IllegalTransition => ErrorCode::IllegalTransition,
            W::LimitExceeded => ErrorCode::LimitExceeded,
            W::StorageFailure => ErrorCode::StorageFailure,
            W::Internal => ErrorCode::Internal,
        }
    }
}

/// The one error every call returns: the kernel's code, message and detail.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelError {
    pub code: ErrorCode,
    pub message: String,
    /// A JSON object with machine-readable context.
    pub detail: Value,
}

impl KernelError {
    fn host(code: ErrorCode, message: impl Into<String>) -> Self {
        KernelError { code, message: message.into(), detail: Value::Object(Default::default()) }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for KernelError {}

struct State {
    store: Box<dyn HostStore>,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl types::Host for State {}

impl port::Host for State {
    fn get(&mut self, key: String) -> Result<Option<Entry>, String> {
        self.store.get(&key)
    }

    fn scan(&mut self, prefix: String, start_after: String, limit: u32) -> Result<Vec<Entry>, String> {
        self.store.scan(&prefix, &start_after, limit)
    }

    fn put(&mut self, key: String, value: Vec<u8>, expected: Option<u64>) -> Result<u64, PutError> {
        self.store.put(&key, &value, expected)
    }

    fn remove(&mut self, key: String, expected: Option<u64>) -> Result<(), PutError> {
        self.store.remove(&key, expected)
    }
}

/// A compiled component, shareable by many kernels in one process.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    component: Component,
    linker: std::sync::Arc<Linker<State>>,
}

impl Runtime {
    /// Compiles the embedded component.
    pub fn new() -> anyhow::Result<Self> {
        Self::from_bytes(COMPONENT)
    }

    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Self> {
        let engine = Engine::default();
        let component = Component::new(&engine, bytes)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        bindings::Ctxkernel::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        Ok(Runtime { engine, component, linker: std::sync::Arc::new(linker) })
    }

    /// The interfaces the component imports and exports, by name.
    pub fn interfaces(&self) -> (Vec<String>, Vec<String>) {
        let ty = self.component.component_type();
        let imports = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let exports = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        (imports, exports)
    }
}

/// One kernel instance over one store.
pub struct Kernel {
    runtime: Runtime,
    instance: Option<(Store<State>, bindings::Ctxkernel)>,
    /// The store while no instance holds it (after a trap).
    idle: Option<Box<dyn HostStore>>,
}

impl Kernel {
    /// A kernel over `store`, compiling the embedded component.
    pub fn new(store: impl HostStore + 'static) -> anyhow::Result<Self> {
        Ok(Self::with_runtime(Runtime::new()?, store))
    }

    /// A kernel over `store` using an already compiled component.
    pub fn with_runtime(runtime: Runtime, store: impl HostStore + 'static) -> Self {
        Kernel { runtime, instance: None, idle: Some(Box::new(store)) }
    }

    fn instance(&mut self) -> Result<&mut (Store<State>, bindings::Ctxkernel), KernelError> {
        if self.instance.is_none() {
            let store = self.idle.take().expect("the store is either idle or in the instance");
            // No environment, arguments, files, clocks of note or network: the
            // kernel gets nothing from the host but its store. Panic messages go
            // to this process's stderr.
            let wasi = WasiCtx::builder().inherit_stderr().build();
            let mut wasm = Store::new(&self.runtime.engine, State { store, wasi, table: ResourceTable::new() });
            match bindings::Ctxkernel::instantiate(&mut wasm, &self.runtime.component, &self.runtime.linker) {
                Ok(bindings) => self.instance = Some((wasm, bindings)),
                Err(e) => {
                    self.idle = Some(wasm.into_data().store);
                    return Err(KernelError::host(ErrorCode::Internal, format!("cannot instantiate the kernel: {e}")));
                }
            }
        }
        Ok(self.instance.as_mut().expect("instantiated above"))
    }

    /// Runs one command (`info`, `plan-context`, …) with a JSON request and
    /// returns the kernel's canonical JSON response.
    pub fn call(&mut self, command: &str, request: &str) -> Result<String, KernelError> {
        let (wasm, bindings) = self.instance()?;
        let exports = bindings.ctxkernel_kernel_kernel();
        wasm.data_mut()
            .store
            .begin()
            .map_err(|e| KernelError::host(ErrorCode::StorageFailure, format!("cannot begin a transaction: {e}")))?;
        let outcome = match command {
            "info" => exports.call_info(&mut *wasm, request),
            "plan-context" => exports.call_plan_context(&mut *wasm, request),
            "append-events" => exports.call_append_events(&mut *wasm, request),
            "read-events" => exports.call_read_events(&mut *wasm, request),
            other => {
                let _ = wasm.data_mut().store.rollback();
                return Err(KernelError::host(ErrorCode::InvalidRequest, format!("no command `{other}`")));
            }
        };
        let store = &mut wasm.data_mut().store;
        match outcome {
            Ok(Ok(response)) => match store.commit() {
                Ok(()) => Ok(response),
                Err(e) => {
                    let _ = store.rollback();
                    Err(KernelError::host(ErrorCode::StorageFailure, format!("commit failed: {e}")))
                }
            },
            Ok(Err(error)) => {
                store.rollback().map_err(|e| KernelError::host(ErrorCode::StorageFailure, e))?;
                let detail = serde_json::from_str(&error.detail).unwrap_or(Value::Object(Default::default()));
                Err(KernelError { code: error.code.into(), message: error.message, detail })
            }
            Err(trap) => {
                let rolled_back = store.rollback();
                let (wasm, _) = self.instance.take().expect("the instance ran the call");
                self.idle = Some(wasm.into_data().store);
                rolled_back.map_err(|e| KernelError::host(ErrorCode::StorageFailure, e))?;
                Err(KernelError::host(ErrorCode::Internal, format!("the kernel trapped; nothing was written: {trap:#}")))
            }
        }
    }

    /// `call` with JSON values.
    pub fn call_json(&mut self, command: &str, request: &Value) -> Result<Value, KernelError> {
        let response = self.call(command, &request.to_string())?;
        serde_json::from_str(&response)
            .map_err(|e| KernelError::host(ErrorCode::Internal, format!("the kernel answered invalid JSON: {e}")))
    }

    pub fn info(&mut self) -> Result<Value, KernelError> {
        self.call_json("info", &serde_json::json!({"schemaVersion": 1}))
    }

    pub fn plan_context(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.call_json("plan-context", request)
    }

    pub fn append_events(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.call_json("append-events", request)
    }

    pub fn read_events(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.call_json("read-events", request)
    }
}
