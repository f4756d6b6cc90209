//! `validate-request`: a host-built request body checked against the rules
//! its provider enforces, the same rules rendering holds itself to.

use super::turns::{Format, Violation};
use crate::contracts::check_version;
use crate::error::Result;
use std::collections::BTreeSet;

contract! {
pub struct ValidateRequest {
    /// The request body, as it would be sent.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Map<String, serde_json::Value>"))]
    pub body: serde_json::Value,
    pub format: Format,
    pub schema_version: u32,
}
}

contract! {
pub struct ValidateResponse {
    pub format: Format,
    pub schema_version: u32,
    pub valid: bool,
    /// Every broken rule, in the order the body was read.
    pub violations: Vec<Violation>,
}
}

pub fn validate(request: ValidateRequest) -> Result<ValidateResponse> {
    check_version("request", request.schema_version)?;
    let reading = super::read(request.format, super::Reading::for_rules(), &request.body, true, &BTreeSet::new());
    Ok(ValidateResponse {
        format: request.format,
        schema_version: 1,
        valid: reading.violations.is_empty(),
        violations: reading.violations,
    })
}
