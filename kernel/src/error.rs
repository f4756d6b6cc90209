//! The kernel's one error type, mirroring `types.kernel-error` in the WIT.

use serde::Serialize;
use serde_json::{json, Value};
use std::fmt;

/// Every failure a command can report (see `wit/ctxkernel.wit` for meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
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

/// A failed command. `detail` is always a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelError {
    pub code: ErrorCode,
    pub message: String,
    pub detail: Value,
}

pub type Result<T, E = KernelError> = std::result::Result<T, E>;

impl KernelError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        KernelError { code, message: message.into(), detail: json!({}) }
    }

    pub fn with_detail(mut self, detail: Value) -> Self {
        debug_assert!(detail.is_object());
        self.detail = detail;
        self
    }

    /// Names the element of a batch the error is about: `candidates[2]: …`,
    /// and the detail's `field` and `path`, written from inside the
    /// element, become whole (`candidates[2].embedding[0]`); one naming the
    /// request's `authority` stays as it is.
    pub fn at(mut self, element: &str) -> Self {
        self.message = format!("{element}: {}", self.message);
        for key in ["field", "path"] {
            // The request's own `authority` is no part of the element.
            if let Some(Value::String(inner)) = self.detail.get_mut(key).filter(|v| !v.as_str().is_some_and(|p| p.starts_with("authority"))) {
                *inner = match inner.as_str() {
                    "" | "." => element.to_string(),
                    rest if rest.starts_with('[') => format!("{element}{rest}"),
                    rest => format!("{element}.{rest}"),
                };
            }
        }
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::LimitExceeded, message)
    }

    pub fn storage(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::StorageFailure, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for KernelError {}
