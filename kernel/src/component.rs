//! The WIT glue: exports the command table, imports the host's store.

use crate::commands::{Command, Kernel};
use std::cell::RefCell;

wit_bindgen::generate!({ path: "../wit", world: "ctxkernel" });

use ctxkernel::kernel::store as host;
use ctxkernel::kernel::types::{ErrorCode, KernelError};
use exports::ctxkernel::kernel::kernel::Guest;

thread_local! {
    // One kernel per component instance; its caches live as long as the instance.
    static KERNEL: RefCell<Kernel> = RefCell::new(Kernel::default());
}

struct HostStore;

impl crate::store::Store for HostStore {
    fn get(&mut self, key: &str) -> Result<Option<crate::store::Entry>, String> {
        Ok(host::get(key)?.map(entry))
    }

    fn scan(&mut self, prefix: &str, start_after: &str, limit: u32) -> Result<Vec<crate::store::Entry>, String> {
        Ok(host::scan(prefix, start_after, limit)?.into_iter().map(entry).collect())
    }

    fn put(&mut self, key: &str, value: &[u8], expected: Option<u64>) -> Result<u64, crate::store::PutError> {
        host::put(key, value, expected).map_err(put_error)
    }

    fn remove(&mut self, key: &str, expected: Option<u64>) -> Result<(), crate::store::PutError> {
        host::remove(key, expected).map_err(put_error)
    }
}

fn entry(e: host::Entry) -> crate::store::Entry {
    crate::store::Entry { key: e.key, revision: e.revision, value: e.value }
}

fn put_error(e: host::PutError) -> crate::store::PutError {
    match e {
        host::PutError::Conflict(current) => crate::store::PutError::Conflict(current),
        host::PutError::Failure(message) => crate::store::PutError::Failure(message),
    }
}

fn run(command: Command, request: String) -> Result<String, KernelError> {
    KERNEL.with_borrow_mut(|kernel| kernel.call(&mut HostStore, command, &request)).map_err(lower)
}

fn lower(e: crate::error::KernelError) -> KernelError {
    KernelError {
        code: code(e.code),
        message: e.message,
        detail: crate::canonical::to_string(&e.detail).unwrap_or_else(|_| "{}".into()),
    }
}

fn code(code: crate::error::ErrorCode) -> ErrorCode {
    use crate::error::ErrorCode as C;
    match code {
        C::InvalidRequest => ErrorCode::InvalidRequest,
        C::UnsupportedSchema => ErrorCode::UnsupportedSchema,
        C::ContextOverBudget => ErrorCode::ContextOverBudget,
        C::Degraded => ErrorCode::Degraded,
        C::Stale => ErrorCode::Stale,
        C::ReconciliationRequired => ErrorCode::ReconciliationRequired,
        C::ContentUnavailable => ErrorCode::ContentUnavailable,
        C::DigestMismatch => ErrorCode::DigestMismatch,
        C::ScopeDenied => ErrorCode::ScopeDenied,
        C::Partial => ErrorCode::Partial,
        C::NotFound => ErrorCode::NotFound,
        C::Conflict => ErrorCode::Conflict,
        C::IllegalTransition => ErrorCode::IllegalTransition,
        C::LimitExceeded => ErrorCode::LimitExceeded,
        C::StorageFailure => ErrorCode::StorageFailure,
        C::Internal => ErrorCode::Internal,
    }
}

struct Component;

impl Guest for Component {
    fn info(request: String) -> Result<String, KernelError> {
        run(Command::Info, request)
    }

    fn plan_context(request: String) -> Result<String, KernelError> {
        run(Command::PlanContext, request)
    }

    fn append_events(request: String) -> Result<String, KernelError> {
        run(Command::AppendEvents, request)
    }

    fn read_events(request: String) -> Result<String, KernelError> {
        run(Command::ReadEvents, request)
    }

    fn compact_context(request: String) -> Result<String, KernelError> {
        run(Command::CompactContext, request)
    }

    fn continue_operation(request: String) -> Result<String, KernelError> {
        run(Command::ContinueOperation, request)
    }

    fn reconcile(request: String) -> Result<String, KernelError> {
        run(Command::Reconcile, request)
    }

    fn put_content(request: String, content: Vec<u8>) -> Result<String, KernelError> {
        KERNEL.with_borrow_mut(|kernel| kernel.put_content(&mut HostStore, &request, &content)).map_err(lower)
    }

    fn get_content(request: String) -> Result<Vec<u8>, KernelError> {
        KERNEL.with_borrow_mut(|kernel| kernel.get_content(&mut HostStore, &request)).map_err(lower)
    }

    fn read_kernel_events(request: String) -> Result<String, KernelError> {
        run(Command::ReadKernelEvents, request)
    }

    fn propose_memory(request: String) -> Result<String, KernelError> {
        run(Command::ProposeMemory, request)
    }

    fn consolidate_memory(request: String) -> Result<String, KernelError> {
        run(Command::ConsolidateMemory, request)
    }

    fn decide_memory(request: String) -> Result<String, KernelError> {
        run(Command::DecideMemory, request)
    }

    fn delete_memory(request: String) -> Result<String, KernelError> {
        run(Command::DeleteMemory, request)
    }

    fn purge_memory(request: String) -> Result<String, KernelError> {
        run(Command::PurgeMemory, request)
    }

    fn read_memory(request: String) -> Result<String, KernelError> {
        run(Command::ReadMemory, request)
    }

    fn recall_memory(request: String) -> Result<String, KernelError> {
        run(Command::RecallMemory, request)
    }

    fn resident_snapshot(request: String) -> Result<String, KernelError> {
        run(Command::ResidentSnapshot, request)
    }

    fn import_messages(request: String) -> Result<String, KernelError> {
        run(Command::ImportMessages, request)
    }

    fn render_context(request: String) -> Result<String, KernelError> {
        run(Command::RenderContext, request)
    }

    fn validate_request(request: String) -> Result<String, KernelError> {
        run(Command::ValidateRequest, request)
    }

    fn verify_store(request: String) -> Result<String, KernelError> {
        run(Command::VerifyStore, request)
    }
}

export!(Component);
