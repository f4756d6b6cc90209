//! The kernel's error codes and the one error type every call returns.

use crate::engine::bindings::ctxkernel::kernel::types;
use serde_json::Value;
use std::fmt;

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
    /// The detail as the kernel wrote it, byte for byte.
    pub detail_json: String,
}

impl KernelError {
    pub(crate) fn host(code: ErrorCode, message: impl Into<String>) -> Self {
        KernelError { code, message: message.into(), detail: Value::Object(Default::default()), detail_json: "{}".into() }
    }

    pub(crate) fn with_detail(code: ErrorCode, message: impl Into<String>, detail: Value) -> Self {
        KernelError { code, message: message.into(), detail_json: detail.to_string(), detail }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for KernelError {}
