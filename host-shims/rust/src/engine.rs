//! Loading the component and crossing into it: wasmtime compiles the one
//! artifact once per `Runtime` (or loads it from the cache of compiled
//! components, `compiled`), and each instance gets the store port as its
//! import and nothing else of note.

use crate::compiled;
use crate::stores::HostStore;
use sha2::Digest;
use bindings::ctxkernel::kernel::store::{Entry, PutError};
use bindings::ctxkernel::kernel::{store as port, types};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub mod bindings {
    wasmtime::component::bindgen!({ path: "../../wit", world: "ctxkernel" });
}

/// The component artifact this library was built with.
pub const COMPONENT: &[u8] = include_bytes!(env!("CTXK_COMPONENT_PATH"));
/// Its sha256 (as `sha256sum build/ctxkernel.wasm` prints it).
pub const COMPONENT_SHA256: &str = env!("CTXK_COMPONENT_SHA256");

pub(crate) struct State {
    pub(crate) store: Box<dyn HostStore>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) memory: MemoryLimiter,
}

/// Enforces `Limits::max_memory_bytes` and remembers the peak.
pub(crate) struct MemoryLimiter {
    max: Option<usize>,
    pub(crate) peak: usize,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.max.is_none_or(|max| desired <= max);
        if allowed {
            self.peak = self.peak.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, _current: usize, _desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(true)
    }
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

/// Bounds on one kernel instance. A call that exceeds one traps: its
/// transaction is rolled back and the instance is replaced.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Wasm fuel (roughly, instructions) one call may spend.
    pub fuel_per_call: Option<u64>,
    /// The most linear memory the instance may grow to, in bytes.
    pub max_memory_bytes: Option<usize>,
}

/// A compiled component, shareable by many kernels in one process.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    pub(crate) component: Component,
    pub(crate) linker: std::sync::Arc<Linker<State>>,
    pub(crate) limits: Limits,
}

impl Runtime {
    /// Compiles the embedded component.
    pub fn new() -> anyhow::Result<Self> {
        Self::with_limits(COMPONENT, Limits::default())
    }

    /// Compiles `bytes` (a ctxkernel component) with the given bounds.
    pub fn with_limits(bytes: &[u8], limits: Limits) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.consume_fuel(limits.fuel_per_call.is_some());
        let engine = Engine::new(&config)?;
        // The embedded component's digest is known from the build.
        let digest = if bytes == COMPONENT { COMPONENT_SHA256.to_owned() } else { format!("{:x}", sha2::Sha256::digest(bytes)) };
        let component = compiled::load(&engine, bytes, &digest, compiled::cache_dir().as_deref())?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        bindings::Ctxkernel::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        Ok(Runtime { engine, component, linker: std::sync::Arc::new(linker), limits })
    }

    /// Changes the fuel each call may spend. Only a runtime compiled with a
    /// fuel limit meters fuel at all.
    pub fn set_fuel_per_call(&mut self, fuel: u64) -> anyhow::Result<()> {
        anyhow::ensure!(self.limits.fuel_per_call.is_some(), "this runtime was compiled without fuel metering");
        self.limits.fuel_per_call = Some(fuel);
        Ok(())
    }

    /// The wasmtime store one instance over `store` runs in.
    pub(crate) fn wasm_store(&self, store: Box<dyn HostStore>) -> Store<State> {
        // No environment, arguments, files, clocks of note or network: the
        // kernel gets nothing from the host but its store. Panic messages go
        // to this process's stderr.
        let wasi = WasiCtx::builder().inherit_stderr().build();
        let memory = MemoryLimiter { max: self.limits.max_memory_bytes, peak: 0 };
        let state = State { store, wasi, table: ResourceTable::new(), memory };
        let mut wasm = Store::new(&self.engine, state);
        wasm.limiter(|state| &mut state.memory);
        wasm
    }

    /// The interfaces the component imports and exports, by name.
    pub fn interfaces(&self) -> (Vec<String>, Vec<String>) {
        let ty = self.component.component_type();
        let imports = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let exports = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        (imports, exports)
    }
}
