//! The provider protocol, sans-IO: the exact request the kernel asks a host's
//! model to answer, and what the host reports back through `continue-operation`.

contract! {
/// The model a provider-backed summary is written by.
pub struct ProviderConfig {
    pub max_tokens: u32,
    pub model: String,
}
}

contract! {
pub struct ProviderMessage {
    pub content: String,
    pub role: String,
}
}

contract! {
/// Exactly what the host's model must be asked.
pub struct ProviderRequest {
    pub max_tokens: u32,
    pub messages: Vec<ProviderMessage>,
    pub model: String,
}
}

contract! {
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}
}

/// What became of the provider call.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ProviderResponse {
    /// The model answered; `text` is the summary.
    Success { text: String, usage: Usage },
    /// The call failed without effect (an HTTP error, a refusal).
    Failed { error: String },
    /// Nobody knows whether the call happened or what it cost.
    Unknown { reason: String },
    /// The host gave up on the operation.
    Cancelled {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}
