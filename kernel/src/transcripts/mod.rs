//! Provider transcripts: real provider messages in, ready-to-send request
//! bodies out, and the rules each provider enforces on them, in one place.
//!
//! ```text
//! import-messages:  body ──read──► turns ──► items (binary parts stored by sha256)
//!                   ──► only the suffix not imported before ──► append (head CAS)
//! render-context:   plan (the planner, unchanged) ──► turns (placement by trust,
//!                   pending calls, parts a format cannot carry, ids) ──write──►
//!                   body ──read, strict──► refused if it breaks any rule
//! validate-request: body ──read, strict──► violations (path, rule)
//! ```
//!
//! - `turns` — the neutral turn every format reads into and writes from,
//!   violations, and the pairing checks every format shares
//! - `anthropic`, `openai_chat`, `openai_responses`, `neutral` — one file per
//!   format: its elements, its reader (with the request rules it enforces),
//!   its writer
//! - `import` — the `import-messages` command
//! - `render` — the `render-context` command's placement rules
//! - `validate` — the `validate-request` command

mod anthropic;
mod import;
mod neutral;
mod openai_chat;
mod openai_responses;
mod render;
mod turns;
mod validate;

pub use import::{import, ImportRequest, ImportResponse};
pub use render::{render, RenderNote, RenderPolicy, RenderRequest, RenderResponse, PLACEHOLDER};
pub use turns::{Format, Violation};
pub use validate::{validate, ValidateRequest, ValidateResponse};

use crate::contracts::{Part, PartKind};
use crate::error::{KernelError, Result};
use serde_json::Value;
use std::collections::BTreeSet;
use turns::{Body, Reading, Speaker, Turn};

/// Reads a body of `format`; `strict` adds the rules its API enforces on a
/// request. `known` are call ids made before the body (a session's events).
fn read(format: Format, body: &Value, strict: bool, known: &BTreeSet<String>) -> Reading {
    match format {
        Format::OpenaiChat => openai_chat::read(body, strict, known),
        Format::OpenaiResponses => openai_responses::read(body, strict, known),
        Format::AnthropicMessages => anthropic::read(body, strict, known),
        Format::Neutral => neutral::read(body, known),
    }
}

/// Reads a transcript from its text: [`read`], with each payload the format
/// keeps as text taken from `text` as the provider wrote it.
fn read_text(format: Format, text: &str, known: &BTreeSet<String>) -> Result<Reading> {
    let body: Value = serde_json::from_str(text).map_err(|e| KernelError::invalid(format!("transcript: {e}")))?;
    let mut reading = read(format, &body, false, known);
    if format == Format::AnthropicMessages {
        let inputs = anthropic::inputs(text);
        for call in reading.turns.iter_mut().flat_map(|t| &mut t.calls) {
            if let Some(input) = inputs.get(&call.call_id) {
                call.arguments = Some(input.clone());
            }
        }
    }
    Ok(reading)
}

fn write(format: Format, turns: &[Turn], body: &Body) -> Value {
    match format {
        Format::OpenaiChat => openai_chat::write(turns, body),
        Format::OpenaiResponses => openai_responses::write(turns, body),
        Format::AnthropicMessages => anthropic::write(turns, body),
        Format::Neutral => neutral::write(turns, body),
    }
}

/// Whether `format` can carry `part` in a turn of `speaker`.
fn carries(format: Format, speaker: Speaker, part: &Part) -> bool {
    use PartKind::*;
    match (format, speaker, part.kind) {
        (Format::Neutral, _, _) | (_, _, Text) => true,
        (_, _, Opaque) => part.provider_fields.as_ref().is_some_and(|f| f.format == format),
        (Format::AnthropicMessages, Speaker::User | Speaker::Tool, Image | Document) => true,
        (Format::AnthropicMessages, Speaker::Assistant, Thinking | RedactedThinking) => true,
        (Format::OpenaiChat, Speaker::User, Image | Document) => true,
        (Format::OpenaiResponses, Speaker::User | Speaker::Tool, Image | Document) => true,
        (Format::OpenaiResponses, Speaker::Assistant, Reasoning) => true,
        _ => false,
    }
}
