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
mod held;
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

use crate::contracts::{nesting, Part, PartKind, MAX_NESTING};
use crate::error::{KernelError, Result};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use turns::{Body, Gap, Reading, Speaker, Turn};

/// Reads a body of `format` into `reading` (a fresh one, or one that skips a
/// gap); `strict` adds the rules its API enforces on a request. `known` are
/// call ids made before the body (a session's events).
fn read(format: Format, reading: Reading, body: &Value, strict: bool, known: &BTreeSet<String>) -> Reading {
    match format {
        Format::OpenaiChat => openai_chat::read(reading, body, strict, known),
        Format::OpenaiResponses => openai_responses::read(reading, body, strict, known),
        Format::AnthropicMessages => anthropic::read(reading, body, strict, known),
        Format::Neutral => neutral::read(reading, body, known),
    }
}

/// A transcript's text with its conversation (`messages`, `input`,
/// `turns`) split into elements, each still the text it was sent as.
struct Transcript<'t> {
    text: &'t str,
    /// The body's other members, as text.
    members: BTreeMap<String, &'t RawValue>,
    /// The conversation's elements, when the body has the conversation.
    elements: Option<Vec<&'t RawValue>>,
}

impl<'t> Transcript<'t> {
    /// Splits `text` in one pass; `None` when it is no object whose
    /// conversation, if it has one, is an array (the reader says why).
    fn split(format: Format, text: &'t str) -> Option<Transcript<'t>> {
        use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
        struct Split(&'static str);
        impl<'t> Visitor<'t> for Split {
            type Value = (BTreeMap<String, &'t RawValue>, Option<Vec<&'t RawValue>>);
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a transcript object")
            }
            fn visit_map<M: MapAccess<'t>>(self, mut map: M) -> std::result::Result<Self::Value, M::Error> {
                let (mut members, mut elements) = (BTreeMap::new(), None);
                // A member given twice is its last, as a JSON reader takes it.
                while let Some(key) = map.next_key::<String>()? {
                    if key == self.0 {
                        elements = Some(map.next_value_seed(Elements)?);
                    } else {
                        members.insert(key, map.next_value()?);
                    }
                }
                Ok((members, elements))
            }
        }
        struct Elements;
        impl<'t> DeserializeSeed<'t> for Elements {
            type Value = Vec<&'t RawValue>;
            fn deserialize<D: Deserializer<'t>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
                serde::Deserialize::deserialize(d)
            }
        }
        let mut reader = serde_json::Deserializer::from_str(text);
        let (members, elements) = reader.deserialize_map(Split(format.conversation())).ok()?;
        reader.end().ok()?;
        Some(Transcript { text, members, elements })
    }

    /// Where the conversation's first element starts in the text, and where
    /// each ends; none for an empty conversation.
    fn ends(&self) -> Option<(usize, Vec<usize>)> {
        let elements = self.elements.as_ref().filter(|e| !e.is_empty())?;
        let at = |s: &str| s.as_ptr() as usize - self.text.as_ptr() as usize;
        Some((at(elements[0].get()), elements.iter().map(|e| at(e.get()) + e.get().len()).collect()))
    }
}

impl Transcript<'_> {
    /// Reads the transcript, skipping `gap` (elements read before from the
    /// same bytes): [`read`], with each payload the format keeps as text
    /// taken from the text as the provider wrote it.
    fn read(&self, format: Format, known: &BTreeSet<String>, gap: Gap) -> Result<Reading> {
        let skipped = |i: &usize| gap.elements.contains(i);
        let mut body = serde_json::Map::new();
        for (key, raw) in &self.members {
            body.insert(key.clone(), parse(raw.get(), 1, &format!("$.{key}"))?);
        }
        let elements = self.elements.as_deref().unwrap_or_default();
        if self.elements.is_some() {
            let key = format.conversation();
            let element = |(i, e): (usize, &&RawValue)| if skipped(&i) { Ok(Value::Null) } else { parse(e.get(), 2, &format!("{key}[{i}]")) };
            body.insert(key.to_string(), Value::Array(elements.iter().enumerate().map(element).collect::<Result<_>>()?));
        }
        let unread: Vec<&RawValue> = elements.iter().enumerate().filter(|(i, _)| !skipped(i)).map(|(_, e)| *e).collect();
        let mut reading = read(format, Reading::skipping(gap), &Value::Object(body), false, known);
        if format == Format::AnthropicMessages {
            let inputs = anthropic::inputs(&unread);
            for call in reading.turns.iter_mut().flat_map(|t| &mut t.calls) {
                if let Some(input) = inputs.get(&call.call_id) {
                    call.arguments = Some(input.clone());
                }
            }
        }
        Ok(reading)
    }
}

/// Reads a transcript [`Transcript::split`] cannot split: the reader says why.
fn read_value(format: Format, text: &str, known: &BTreeSet<String>) -> Result<Reading> {
    Ok(read(format, Reading::default(), &parse(text, 0, "$")?, false, known))
}

/// Parses a value found `depth` levels down a transcript at `path`,
/// refusing one that nests past [`MAX_NESTING`].
fn parse(text: &str, depth: usize, path: &str) -> Result<Value> {
    let too_deep = || {
        KernelError::invalid(format!("transcript: `{path}` nests deeper than the {MAX_NESTING} levels a transcript may hold"))
            .with_detail(serde_json::json!({"path": path}))
    };
    let value = serde_json::from_str(text).map_err(|e| match e.to_string().starts_with("recursion limit exceeded") {
        true => too_deep(),
        false => KernelError::invalid(format!("transcript: {e}")),
    })?;
    match depth + nesting(&value) > MAX_NESTING {
        true => Err(too_deep()),
        false => Ok(value),
    }
}

/// Writes `turns` as a body of `format`, moving their texts into it.
fn write(format: Format, turns: Vec<Turn>, body: &Body) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every value of `body` replaced in turn by each of `with`: one body a replacement.
    fn mutations(body: &Value, with: &[Value]) -> Vec<Value> {
        fn paths(value: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
            out.push(at.clone());
            let children: Vec<(Value, &Value)> = match value {
                Value::Object(o) => o.iter().map(|(k, v)| (json!(k), v)).collect(),
                Value::Array(a) => a.iter().enumerate().map(|(i, v)| (json!(i), v)).collect(),
                _ => Vec::new(),
            };
            for (key, child) in children {
                at.push(key);
                paths(child, at, out);
                at.pop();
            }
        }
        let mut all = Vec::new();
        paths(body, &mut Vec::new(), &mut all);
        let mut out = Vec::new();
        for path in all.iter().filter(|p| !p.is_empty()) {
            for replacement in with {
                let mut body = body.clone();
                let mut at = &mut body;
                for key in path {
                    at = match key {
                        Value::String(k) => &mut at[k.as_str()],
                        _ => &mut at[key.as_u64().unwrap_or(0) as usize],
                    };
                }
                *at = replacement.clone();
                out.push(body);
            }
        }
        out
    }

    /// A reading for the rules alone breaks exactly the rules a full one
    /// does: what it leaves out (the texts) is never what a rule reads.
    #[test]
    fn a_reading_for_the_rules_alone_finds_every_violation_a_full_one_does() {
        let fixtures = [
            (Format::OpenaiChat, include_str!("../../tests/data/transcripts/openai-chat.json")),
            (Format::OpenaiResponses, include_str!("../../tests/data/transcripts/openai-responses.json")),
            (Format::AnthropicMessages, include_str!("../../tests/data/transcripts/anthropic-messages.json")),
        ];
        // Hostile values, and the names of roles and block kinds, so a text
        // lands where a rule reads another kind of block.
        let mut with = vec![json!(""), json!(null), json!(7), json!([]), json!({}), json!("\u{202e}\u{0}ü"), json!([{"type": "text", "text": ""}])];
        with.extend(["user", "assistant", "tool", "system", "text", "tool_use", "tool_result", "function_call", "function_call_output", "message"].map(|k| json!(k)));
        let (mut compared, mut broken) = (0, 0);
        for (format, text) in fixtures {
            let mut fixture: Value = serde_json::from_str(text).unwrap();
            fixture["model"] = json!("m");
            fixture["max_tokens"] = json!(16);
            for body in std::iter::once(fixture.clone()).chain(mutations(&fixture, &with)) {
                let full = read(format, Reading::default(), &body, true, &BTreeSet::new());
                let rules = read(format, Reading::for_rules(), &body, true, &BTreeSet::new());
                assert_eq!(full.violations, rules.violations, "{}: {body}", format.name());
                assert!(rules.turns.iter().all(|t| t.text.is_empty() && t.parts.iter().all(|p| p.kind != PartKind::Text || p.text.as_deref().unwrap_or("").is_empty())));
                compared += 1;
                broken += usize::from(!full.violations.is_empty());
            }
            let full = read(format, Reading::default(), &fixture, true, &BTreeSet::new());
            assert!(full.turns.iter().any(|t| !t.text.is_empty()), "a full reading keeps the texts");
        }
        assert!(compared > 1000 && broken > compared / 2, "{compared} bodies compared, {broken} breaking rules");
    }
}
