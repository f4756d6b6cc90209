//! The typed API: one method per kernel command, each call inside one store
//! transaction. A trap discards the instance; the next call gets a fresh one.
//!
//! The typed methods fill what a caller leaves out of a request: its
//! `schemaVersion`, and `now` from the kernel's clock (the host's, unless one
//! is given), in the request and in the plan a render request carries.
//! `call` and `call_json` send a request as it is given. Each command is
//! logged through the `log` facade (target `ctxkernel`): its name, outcome
//! code and duration, never a body.

use crate::clock::utc_now;
use crate::engine::bindings::{self, ctxkernel::kernel::types};
use crate::engine::{Runtime, State};
use crate::errors::{ErrorCode, KernelError};
use crate::stores::HostStore;
use serde_json::{json, Value};
use std::time::Instant;
use wasmtime::Store;

/// The kernel's JSON commands, as named in the WIT (`put-content` and
/// `get-content` carry bytes and have their own methods).
pub const COMMANDS: [&str; 20] = [
    "info",
    "plan-context",
    "append-events",
    "read-events",
    "compact-context",
    "continue-operation",
    "reconcile",
    "read-kernel-events",
    "propose-memory",
    "consolidate-memory",
    "decide-memory",
    "delete-memory",
    "purge-memory",
    "read-memory",
    "recall-memory",
    "resident-snapshot",
    "import-messages",
    "render-context",
    "validate-request",
    "verify-store",
];

/// Commands that only read: their transaction takes no write lock.
pub const READ_ONLY: [&str; 11] = [
    "info",
    "read-events",
    "plan-context",
    "get-content",
    "read-kernel-events",
    "read-memory",
    "recall-memory",
    "resident-snapshot",
    "render-context",
    "validate-request",
    "verify-store",
];

/// The commands whose request carries `now` (the others refuse it).
pub const TAKES_NOW: [&str; 15] = [
    "append-events",
    "compact-context",
    "consolidate-memory",
    "continue-operation",
    "decide-memory",
    "delete-memory",
    "import-messages",
    "plan-context",
    "propose-memory",
    "purge-memory",
    "put-content",
    "read-memory",
    "recall-memory",
    "reconcile",
    "resident-snapshot",
];

/// The request a command's request carries, which is filled the same way.
const CARRIED: [(&str, &str, &str); 1] = [("render-context", "plan", "plan-context")];

/// A clock: the current instant as RFC 3339 text.
pub type Clock = Box<dyn FnMut() -> String + Send>;

/// What every host answers when the kernel traps (the trap's own text differs per engine).
pub const TRAPPED: &str = "the kernel trapped; the call was rolled back";

/// One kernel instance over one store.
pub struct Kernel {
    runtime: Runtime,
    clock: Clock,
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
        Kernel { runtime, clock: Box::new(utc_now), instance: None, idle: Some(Box::new(store)) }
    }

    /// The kernel with `clock` giving `now` to requests that leave it out.
    pub fn with_clock(mut self, clock: impl FnMut() -> String + Send + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// `request` with what the caller left out filled in: `schemaVersion`,
    /// and `now` where the command takes it.
    fn filled(&mut self, command: &str, request: &Value) -> Result<Value, KernelError> {
        let Value::Object(fields) = request else {
            return Err(KernelError::host(ErrorCode::InvalidRequest, format!("a {command} request is an object, not {}", kind(request))));
        };
        let mut out = fields.clone();
        // Absent or null is left out: either way the host fills it.
        if out.get("schemaVersion").is_none_or(Value::is_null) {
            out.insert("schemaVersion".into(), json!(1));
        }
        if TAKES_NOW.contains(&command) && out.get("now").is_none_or(Value::is_null) {
            out.insert("now".into(), json!((self.clock)()));
        }
        for (carrier, field, carried) in CARRIED {
            if command == carrier {
                if let Some(inner @ Value::Object(_)) = out.get(field) {
                    let inner = self.filled(carried, &inner.clone())?;
                    out.insert(field.into(), inner);
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// A typed method: the request filled, then sent.
    fn typed(&mut self, command: &str, request: &Value) -> Result<Value, KernelError> {
        let request = self.filled(command, request)?;
        self.call_json(command, &request)
    }

    fn instance(&mut self) -> Result<&mut (Store<State>, bindings::Ctxkernel), KernelError> {
        if self.instance.is_none() {
            let store = self.idle.take().expect("the store is either idle or in the instance");
            let mut wasm = self.runtime.wasm_store(store);
            if let Some(fuel) = self.runtime.limits.fuel_per_call {
                // Instantiation runs the component's initializers, which spend fuel too.
                wasm.set_fuel(fuel).map_err(|e| KernelError::host(ErrorCode::Internal, e.to_string()))?;
            }
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
        if !COMMANDS.contains(&command) {
            return Err(KernelError::host(ErrorCode::InvalidRequest, format!("no command `{command}`")));
        }
        self.transact(command, |exports, wasm| match command {
            "info" => exports.call_info(wasm, request),
            "plan-context" => exports.call_plan_context(wasm, request),
            "append-events" => exports.call_append_events(wasm, request),
            "read-events" => exports.call_read_events(wasm, request),
            "compact-context" => exports.call_compact_context(wasm, request),
            "continue-operation" => exports.call_continue_operation(wasm, request),
            "reconcile" => exports.call_reconcile(wasm, request),
            "read-kernel-events" => exports.call_read_kernel_events(wasm, request),
            "propose-memory" => exports.call_propose_memory(wasm, request),
            "consolidate-memory" => exports.call_consolidate_memory(wasm, request),
            "decide-memory" => exports.call_decide_memory(wasm, request),
            "delete-memory" => exports.call_delete_memory(wasm, request),
            "purge-memory" => exports.call_purge_memory(wasm, request),
            "read-memory" => exports.call_read_memory(wasm, request),
            "recall-memory" => exports.call_recall_memory(wasm, request),
            "resident-snapshot" => exports.call_resident_snapshot(wasm, request),
            "import-messages" => exports.call_import_messages(wasm, request),
            "render-context" => exports.call_render_context(wasm, request),
            "validate-request" => exports.call_validate_request(wasm, request),
            _ => exports.call_verify_store(wasm, request),
        })
    }

    /// `put-content`: stores `content`; returns the JSON with its ContentRef.
    pub fn put_content(&mut self, request: &str, content: &[u8]) -> Result<String, KernelError> {
        self.transact("put-content", |exports, wasm| exports.call_put_content(wasm, request, content))
    }

    /// `get-content`: the stored bytes, verified by the kernel.
    pub fn get_content(&mut self, request: &str) -> Result<Vec<u8>, KernelError> {
        self.transact("get-content", |exports, wasm| exports.call_get_content(wasm, request))
    }

    /// Runs one export inside one store transaction: committed on `ok`,
    /// rolled back on an error, a trap or a panic in the host store.
    fn transact<T>(
        &mut self,
        command: &str,
        invoke: impl FnOnce(&bindings::exports::ctxkernel::kernel::kernel::Guest, &mut Store<State>) -> wasmtime::Result<Result<T, types::KernelError>>,
    ) -> Result<T, KernelError> {
        let started = Instant::now();
        let answer = self.run(command, invoke);
        let outcome = answer.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
        // The kernel's own answers, errors included, are the caller's to act on; a trap or a failing store is the host's.
        let level = match outcome {
            "internal" | "storage-failure" => log::Level::Warn,
            _ => log::Level::Debug,
        };
        log::log!(target: "ctxkernel", level, "{command}: {outcome} in {:.2} ms", started.elapsed().as_secs_f64() * 1000.0);
        answer
    }

    fn run<T>(
        &mut self,
        command: &str,
        invoke: impl FnOnce(&bindings::exports::ctxkernel::kernel::kernel::Guest, &mut Store<State>) -> wasmtime::Result<Result<T, types::KernelError>>,
    ) -> Result<T, KernelError> {
        let fuel = self.runtime.limits.fuel_per_call;
        let (wasm, bindings) = self.instance()?;
        if let Some(fuel) = fuel {
            wasm.set_fuel(fuel).map_err(|e| KernelError::host(ErrorCode::Internal, e.to_string()))?;
        }
        wasm.data_mut()
            .store
            .begin(!READ_ONLY.contains(&command))
            .map_err(|e| KernelError::host(ErrorCode::StorageFailure, format!("cannot begin a transaction: {e}")))?;
        let exports = bindings.ctxkernel_kernel_kernel();
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| invoke(exports, wasm))) {
            Ok(outcome) => outcome,
            Err(panic) => {
                let _ = self.discard();
                std::panic::resume_unwind(panic);
            }
        };
        let (wasm, _) = self.instance.as_mut().expect("the instance ran the call");
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
                Err(KernelError { code: error.code.into(), message: error.message, detail, detail_json: error.detail })
            }
            Err(_trap) => {
                self.discard().map_err(|e| KernelError::host(ErrorCode::StorageFailure, e))?;
                Err(KernelError::host(ErrorCode::Internal, TRAPPED))
            }
        }
    }

    /// Rolls back the open transaction and drops the instance, keeping the store.
    fn discard(&mut self) -> Result<(), String> {
        let (wasm, _) = self.instance.take().expect("an instance is running");
        let mut store = wasm.into_data().store;
        let rolled_back = store.rollback();
        self.idle = Some(store);
        rolled_back
    }

    /// The most linear memory the current instance has used, in bytes.
    pub fn peak_memory_bytes(&self) -> usize {
        self.instance.as_ref().map_or(0, |(wasm, _)| wasm.data().memory.peak)
    }

    /// `call` with JSON values; the request is sent as given.
    pub fn call_json(&mut self, command: &str, request: &Value) -> Result<Value, KernelError> {
        let response = self.call(command, &request.to_string())?;
        serde_json::from_str(&response)
            .map_err(|e| KernelError::host(ErrorCode::Internal, format!("the kernel answered invalid JSON: {e}")))
    }

    pub fn info(&mut self) -> Result<Value, KernelError> {
        self.typed("info", &json!({}))
    }

    pub fn plan_context(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("plan-context", request)
    }

    pub fn append_events(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("append-events", request)
    }

    pub fn read_events(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("read-events", request)
    }

    pub fn compact_context(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("compact-context", request)
    }

    pub fn continue_operation(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("continue-operation", request)
    }

    pub fn reconcile(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("reconcile", request)
    }

    pub fn read_kernel_events(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("read-kernel-events", request)
    }

    pub fn propose_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("propose-memory", request)
    }

    pub fn consolidate_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("consolidate-memory", request)
    }

    pub fn decide_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("decide-memory", request)
    }

    pub fn delete_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("delete-memory", request)
    }

    pub fn purge_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("purge-memory", request)
    }

    pub fn read_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("read-memory", request)
    }

    pub fn recall_memory(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("recall-memory", request)
    }

    pub fn resident_snapshot(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("resident-snapshot", request)
    }

    pub fn import_messages(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("import-messages", request)
    }

    pub fn render_context(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("render-context", request)
    }

    pub fn validate_request(&mut self, request: &Value) -> Result<Value, KernelError> {
        self.typed("validate-request", request)
    }

    /// Every memory entry read against its record; changes nothing.
    pub fn verify_store(&mut self) -> Result<Value, KernelError> {
        self.typed("verify-store", &json!({}))
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

