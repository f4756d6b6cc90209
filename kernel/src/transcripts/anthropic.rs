//! Anthropic Messages: `system` (a string or text blocks) and `messages`
//! whose content is a string or blocks (`text`, `image`, `document`,
//! `tool_use`, `tool_result`, `thinking`, `redacted_thinking`). Blocks of
//! other types (`compaction`, a server tool's call and result) are kept
//! whole as opaque parts, in their place.
//!
//! A user message's `tool_result` blocks become tool turns ahead of the
//! rest of that message; an assistant message is one turn whose `tool_use`
//! blocks are its calls, after its other blocks.

use super::turns::{check_pairing, merge, object, opaque, text_part, unread, Body, Format, Reading, Speaker, Turn};
use crate::contracts::{CacheControl, Carrier, Part, PartKind, ToolCall, ToolDefinition, ToolOutcome};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const TRANSCRIPT: &[&str] = &["messages", "system", "tools"];
/// `MessageCreateParams` besides the transcript.
const CONFIG: &[&str] = &[
    "max_tokens", "metadata", "model", "service_tier", "stop_sequences", "stream", "temperature", "thinking", "tool_choice", "top_k", "top_p",
];
const REQUIRED: &[&str] = &["max_tokens", "messages", "model"];
const FORMAT: Format = Format::AnthropicMessages;

/// Reads a body; `strict` reads it as a request and adds the rules the
/// Messages API enforces on one.
pub fn read(mut r: Reading, body: &Value, strict: bool, known: &BTreeSet<String>) -> Reading {
    let Some(top) = r.object(body, "$") else { return r };
    r.top(top, strict, TRANSCRIPT, CONFIG, REQUIRED);
    if let Some(system) = top.get("system").filter(|s| !s.is_null()) {
        read_system(&mut r, system);
    }
    let Some(messages) = r.field(top, "$", "messages") else { return r };
    let Some(messages) = r.array(messages, "messages") else { return r };
    r.open_conversation();
    let skipped = r.gap.elements.clone();
    for (i, message) in messages.iter().enumerate().filter(|(i, _)| !skipped.contains(i)) {
        read_message(&mut r, message, &format!("messages[{i}]"));
        r.rest(i);
    }
    check_pairing(&mut r, known);
    tools(&mut r, top, strict);
    if strict {
        strict_rules(&mut r, messages);
    }
    r
}

fn read_system(r: &mut Reading, system: &Value) {
    let mut turn = Turn::new(Speaker::System, "system");
    turn.preamble = true;
    match system {
        Value::String(text) => turn.text = r.text(text),
        Value::Array(blocks) => {
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("system[{k}]");
                let Some(b) = r.object(block, &at) else { continue };
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    r.fail(format!("{at}.type"), "unknown-block-type", "system blocks are `text` blocks");
                    continue;
                }
                let fields = r.carry(b, &at, FORMAT, Carrier::Part(PartKind::Text, false), &["type", "text", "cache_control"]);
                let cache = r.cache_control(b, &at);
                if let Some(text) = r.text_field(b, &at, "text") {
                    turn.parts.push(Part { provider_fields: fields, ..text_part(text, cache) });
                }
            }
            turn.join_text();
        }
        _ => r.fail("system", "wrong-type", "must be a string or an array of text blocks"),
    }
    r.turns.push(turn);
}

fn read_message(r: &mut Reading, message: &Value, at: &str) {
    let Some(m) = r.object(message, at) else { return };
    r.only(m, at, &["role", "content"]);
    let speaker = match m.get("role").and_then(Value::as_str) {
        Some("user") => Speaker::User,
        Some("assistant") => Speaker::Assistant,
        _ => return r.fail(format!("{at}.role"), "wrong-role", "role must be `user` or `assistant`"),
    };
    let mut turn = Turn::new(speaker, at);
    match r.field(m, at, "content") {
        Some(Value::String(text)) => turn.text = r.text(text),
        Some(Value::Array(blocks)) => {
            let mut results = 0;
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("{at}.content[{k}]");
                if let Some(b) = r.object(block, &at) {
                    results += usize::from(read_block(r, &mut turn, b, &at));
                }
            }
            turn.join_text();
            if results > 0 && turn.parts.is_empty() {
                // Only tool results: they are the message's turns.
                return;
            }
        }
        Some(_) => r.fail(format!("{at}.content"), "wrong-type", "content must be a string or an array of blocks"),
        None => {}
    }
    r.turns.push(turn);
}

/// Reads one block into `turn`; true when it was a tool result (a turn of its own).
fn read_block(r: &mut Reading, turn: &mut Turn, b: &Map<String, Value>, at: &str) -> bool {
    let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
    let user = turn.speaker == Speaker::User;
    match (kind, user) {
        ("text", _) => {
            let fields = r.carry(b, at, FORMAT, Carrier::Part(PartKind::Text, !user), &["type", "text", "cache_control"]);
            let cache = r.cache_control(b, at);
            if let Some(text) = r.text_field(b, at, "text") {
                turn.parts.push(Part { provider_fields: fields, ..text_part(text, cache) });
            }
        }
        ("image" | "document", true) => {
            if let Some((part, blob)) = media(r, b, at, kind) {
                if let Some(data) = blob {
                    turn.blobs.push((turn.parts.len(), data));
                }
                turn.parts.push(part);
            }
        }
        ("tool_result", true) => {
            tool_result(r, b, at);
            return true;
        }
        ("tool_use", false) => {
            let fields = r.carry(b, at, FORMAT, Carrier::Call, &["type", "id", "name", "input", "cache_control"]);
            let cache = r.cache_control(b, at);
            let (id, name) = (r.id(b, at, "id"), r.id(b, at, "name"));
            let input = r.field(b, at, "input").cloned();
            if input.as_ref().is_some_and(|i| !i.is_object()) {
                r.fail(format!("{at}.input"), "arguments-not-json", "a tool_use input must be a JSON object");
            }
            if let (Some(call_id), Some(name), Some(input @ Value::Object(_))) = (id, name, input) {
                let arguments = crate::canonical::to_string(&input).ok();
                turn.calls.push(ToolCall { arguments, cache_control: cache, call_id, input: None, name, provider_fields: fields, provider_id: None });
            }
        }
        ("thinking", false) => {
            r.only(b, at, &["type", "thinking", "signature"]);
            let (thinking, signature) = (r.string(b, at, "thinking"), r.string(b, at, "signature"));
            if let (Some(text), Some(signature)) = (thinking, signature) {
                turn.parts.push(Part { text: Some(text), signature: Some(signature), ..Part::empty(PartKind::Thinking) });
            }
        }
        ("redacted_thinking", false) => {
            r.only(b, at, &["type", "data"]);
            if let Some(data) = r.string(b, at, "data") {
                turn.parts.push(Part { data: Some(data), ..Part::empty(PartKind::RedactedThinking) });
            }
        }
        _ if !FORMAT.reads(kind) => turn.parts.extend(opaque(r, b, at, FORMAT)),
        _ => r.fail(format!("{at}.type"), "unknown-block-type", format!("a {} message has no `{kind}` blocks", if user { "user" } else { "assistant" })),
    }
    false
}

/// Each `tool_use` block's `input` in `messages` (as their text came), by
/// call id, as JSON text every host gives alike: members in bytewise order
/// and strings written one way (a JavaScript host orders integer-like keys
/// first, a Python host may escape what another writes raw), each number as
/// the provider spelled it (a 20-digit id, `1.0`), which a map of floats
/// would change. A message that is no object lends nothing (the reader says why).
pub fn inputs(messages: &[&RawValue]) -> BTreeMap<String, String> {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(default)]
        role: Option<String>,
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        id: Option<String>,
        #[serde(borrow, default)]
        input: Option<&'a RawValue>,
    }
    // Only an assistant message's tool_use blocks, each read on its own: a
    // block of another kind, in another message, or that reads otherwise,
    // lends no call its input.
    let messages = messages.iter().filter_map(|m| serde_json::from_str::<Message>(m.get()).ok());
    let assistant = messages.filter(|m| m.role.as_deref() == Some("assistant")).filter_map(|m| m.content);
    let blocks = assistant.filter_map(|c| serde_json::from_str::<Vec<&RawValue>>(c.get()).ok()).flatten();
    let uses = blocks.filter_map(|b| serde_json::from_str::<Block>(b.get()).ok()).filter(|b| b.kind.as_deref() == Some("tool_use"));
    uses.filter_map(|b| Some((b.id?, ordered(b.input?, 0)?))).collect()
}

/// Nesting past which [`ordered`] gives up: each level reads its own text
/// once more.
const ORDERED_DEPTH: usize = 32;

/// A JSON value's text with members sorted and strings rewritten, numbers
/// as written; none past [`ORDERED_DEPTH`] (the reader's canonical copy stands).
fn ordered(raw: &RawValue, depth: usize) -> Option<String> {
    let text = raw.get();
    match text.as_bytes().first()? {
        b'{' if depth < ORDERED_DEPTH => {
            let members: BTreeMap<String, &RawValue> = serde_json::from_str(text).ok()?;
            let mut out = String::from("{");
            for (k, (key, value)) in members.into_iter().enumerate() {
                out.push_str(if k == 0 { "" } else { "," });
                out.push_str(&serde_json::to_string(&key).ok()?);
                out.push(':');
                out.push_str(&ordered(value, depth + 1)?);
            }
            Some(out + "}")
        }
        b'[' if depth < ORDERED_DEPTH => {
            let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
            let items: Option<Vec<String>> = items.into_iter().map(|item| ordered(item, depth + 1)).collect();
            Some(format!("[{}]", items?.join(",")))
        }
        b'"' => serde_json::to_string(&serde_json::from_str::<String>(text).ok()?).ok(),
        b'{' | b'[' => None,
        _ => Some(text.to_string()),
    }
}

/// A `tool_result` block: a tool turn of its own, ahead of the message's other content.
fn tool_result(r: &mut Reading, b: &Map<String, Value>, at: &str) {
    let mut turn = Turn::new(Speaker::Tool, at);
    turn.provider_fields = r.carry(b, at, FORMAT, Carrier::Turn(None), &["type", "tool_use_id", "content", "is_error", "cache_control"]);
    let error = match b.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(e)) => *e,
        Some(_) => {
            r.fail(format!("{at}.is_error"), "wrong-type", "is_error must be a boolean");
            false
        }
    };
    let cache = r.cache_control(b, at);
    match b.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if cache.is_none() => turn.text = r.text(text),
        Some(Value::String(_)) => r.fail(format!("{at}.content"), "unknown-field", "a cached tool_result keeps its content as blocks"),
        Some(Value::Array(blocks)) => {
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("{at}.content[{k}]");
                let Some(inner) = r.object(block, &at) else { continue };
                match inner.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let fields = r.carry(inner, &at, FORMAT, Carrier::Part(PartKind::Text, false), &["type", "text", "cache_control"]);
                        let cache = r.cache_control(inner, &at);
                        if let Some(text) = r.text_field(inner, &at, "text") {
                            turn.parts.push(Part { provider_fields: fields, ..text_part(text, cache) });
                        }
                    }
                    Some(kind @ ("image" | "document")) => {
                        if let Some((part, blob)) = media(r, inner, &at, kind) {
                            if let Some(data) = blob {
                                turn.blobs.push((turn.parts.len(), data));
                            }
                            turn.parts.push(part);
                        }
                    }
                    Some(kind) if !FORMAT.reads(kind) => turn.parts.extend(opaque(r, inner, &at, FORMAT)),
                    _ => r.fail(format!("{at}.type"), "unknown-block-type", "a tool result holds no tool_use, tool_result or thinking blocks"),
                }
            }
            if blocks.is_empty() {
                r.fail(format!("{at}.content"), "empty-content", "an empty result is the empty string, not an empty array");
            }
        }
        Some(_) => r.fail(format!("{at}.content"), "wrong-type", "content must be a string or an array of blocks"),
    }
    // The block's breakpoint is kept on its last part: the cached prefix ends in the same place.
    if let Some(cache) = cache {
        let opaque_uncached = |p: &Part| p.provider_fields.as_ref().is_some_and(|f| p.kind == PartKind::Opaque && f.fields.get("cache_control").is_none_or(Value::is_null));
        match turn.parts.last_mut() {
            // An opaque block keeps the breakpoint in its own fields, where it goes back.
            Some(last) if opaque_uncached(last) => {
                if let Some(fields) = last.provider_fields.as_mut() {
                    fields.fields.insert("cache_control".into(), cache_json(&cache));
                }
            }
            Some(last) if last.kind != PartKind::Opaque && last.cache_control.is_none() => last.cache_control = Some(cache),
            _ => r.fail(format!("{at}.cache_control"), "unknown-field", "a cached tool_result needs content blocks, the last without its own cache_control"),
        }
    }
    turn.join_text();
    if let Some(id) = r.id(b, at, "tool_use_id") {
        turn.result = Some((id, if error { ToolOutcome::Error } else { ToolOutcome::Success }));
        r.turns.push(turn);
    }
}

/// The image types the Messages API reads as base64.
pub const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// An image or document block: its part, and the base64 payload to store.
fn media(r: &mut Reading, b: &Map<String, Value>, at: &str, kind: &str) -> Option<(Part, Option<String>)> {
    let fields = match kind {
        "image" => r.carry(b, at, FORMAT, Carrier::Part(PartKind::Image, false), &["type", "source", "cache_control"]),
        _ => r.carry(b, at, FORMAT, Carrier::Part(PartKind::Document, false), &["type", "source", "title", "cache_control"]),
    };
    let cache = r.cache_control(b, at);
    let title = r.optional_string(b, at, "title");
    let source = r.field(b, at, "source")?;
    let s = r.object(source, &format!("{at}.source"))?;
    let at = format!("{at}.source");
    let kind = if kind == "image" { PartKind::Image } else { PartKind::Document };
    let mut part = Part { cache_control: cache, provider_fields: fields, title, ..Part::empty(kind) };
    let kind = if kind == PartKind::Image { "image" } else { "document" };
    match s.get("type").and_then(Value::as_str) {
        Some("base64") => {
            r.only(s, &at, &["type", "media_type", "data"]);
            let media = r.id(s, &at, "media_type")?;
            let allowed: &[&str] = if kind == "image" { &IMAGE_TYPES } else { &["application/pdf"] };
            if !allowed.contains(&media.as_str()) {
                r.fail(format!("{at}.media_type"), "wrong-media-type", format!("a base64 {kind} is one of {}", allowed.join(", ")));
            }
            part.media_type = Some(media);
            let data = r.string(s, &at, "data")?;
            Some((part, Some(data)))
        }
        Some("url") => {
            r.only(s, &at, &["type", "url"]);
            part.url = Some(r.string(s, &at, "url")?);
            Some((part, None))
        }
        Some("text") if kind == "document" => {
            r.only(s, &at, &["type", "media_type", "data"]);
            let media = r.id(s, &at, "media_type")?;
            if media != "text/plain" {
                r.fail(format!("{at}.media_type"), "wrong-media-type", "a text document is `text/plain`");
            }
            part.media_type = Some(media);
            part.text = Some(r.string(s, &at, "data")?);
            Some((part, None))
        }
        _ => {
            r.fail(format!("{at}.type"), "unknown-block-type", "a source is `base64`, `url` (or `text` for documents)");
            None
        }
    }
}

/// The rules the Messages API enforces on the order of a request's messages.
fn strict_rules(r: &mut Reading, messages: &[Value]) {
    fn kind(b: &Value) -> &str {
        b.get("type").and_then(Value::as_str).unwrap_or("")
    }
    if messages.is_empty() {
        r.fail("messages", "empty-messages", "a request needs at least one message");
    }
    let mut previous_role = "";
    let mut asked: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        // Named only when a rule is broken: most messages break none.
        let at = || format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if i == 0 && role != "user" {
            r.fail(format!("{}.role", at()), "first-message-not-user", "the first message must be a user message");
        }
        if i > 0 && role == previous_role {
            r.fail(format!("{}.role", at()), "roles-not-alternating", format!("two `{role}` messages in a row; merge them"));
        }
        let content: &[Value] = match m.get("content") {
            Some(Value::Array(b)) => b,
            _ => &[],
        };
        let empty = match m.get("content") {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty && !(role == "assistant" && i + 1 == messages.len()) {
            r.fail(format!("{}.content", at()), "empty-content", "a message needs non-empty content");
        }
        for (k, b) in content.iter().enumerate() {
            if kind(b) == "text" && b.get("text").and_then(Value::as_str) == Some("") {
                r.fail(format!("{}.content[{k}].text", at()), "empty-content", "text blocks must be non-empty");
            }
        }
        let results: Vec<(usize, &str)> = content
            .iter()
            .enumerate()
            .filter(|(_, b)| kind(b) == "tool_result")
            .map(|(k, b)| (k, b.get("tool_use_id").and_then(Value::as_str).unwrap_or("")))
            .collect();
        if role == "user" {
            for (k, id) in &results {
                if !asked.contains(id) {
                    r.fail(format!("{}.content[{k}]", at()), "result-without-call", format!("tool_result `{id}` has no tool_use in the previous assistant message"));
                }
            }
            for id in asked.iter().filter(|id| !results.iter().any(|(_, r)| r == *id)) {
                r.fail(at(), "call-without-result", format!("tool_use `{id}` is not answered by a tool_result in the next user message"));
            }
            if let Some(first_other) = content.iter().position(|b| kind(b) != "tool_result") {
                if let Some((k, _)) = results.iter().find(|(k, _)| *k > first_other) {
                    r.fail(format!("{}.content[{k}]", at()), "results-not-first", "tool_result blocks come before any other content in their message");
                }
            }
            asked.clear();
        } else if role == "assistant" {
            for id in &asked {
                r.fail(at(), "call-without-result", format!("tool_use `{id}` is not answered by a tool_result in the next user message"));
            }
            asked = content.iter().filter(|b| kind(b) == "tool_use").filter_map(|b| b.get("id").and_then(Value::as_str)).collect();
            for (k, b) in content.iter().enumerate().filter(|(_, b)| kind(b) == "tool_use") {
                let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                if !id_ok(id) {
                    r.fail(format!("{}.content[{k}].id", at()), "id-pattern", format!("tool_use id `{id}` must match ^[a-zA-Z0-9_-]+$"));
                }
            }
        }
        previous_role = role;
    }
    for id in &asked {
        // A request may end on an assistant turn only as a prefill, whose calls are never answered.
        r.fail(format!("messages[{}]", messages.len() - 1), "call-without-result", format!("tool_use `{id}` is not answered by a tool_result in the next user message"));
    }
}

/// The `tools` of a request: each a custom tool (`name`, `input_schema`) or
/// a server or versioned tool (a `type` of its own, kept whole); in a
/// request (`strict`), present when the messages use tools.
fn tools(r: &mut Reading, top: &Map<String, Value>, strict: bool) {
    let uses_tools = r.turns.iter().any(|t| !t.calls.is_empty() || t.result.is_some());
    let tools = match top.get("tools") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return r.fail("$.tools", "wrong-type", "tools must be an array"),
    };
    if strict && uses_tools && tools.is_empty() {
        r.fail("$.tools", "tools-required", "a request whose messages hold tool_use or tool_result blocks must define tools");
    }
    for (k, tool) in tools.iter().enumerate() {
        let at = format!("tools[{k}]");
        let Some(t) = r.object(tool, &at) else { continue };
        let custom = t.contains_key("input_schema") || t.get("type").and_then(Value::as_str).is_none_or(|k| k == "custom");
        if custom {
            r.only(t, &at, &["type", "name", "description", "input_schema", "cache_control"]);
            let (name, description) = (r.string(t, &at, "name"), r.optional_string(t, &at, "description"));
            let schema = r.field(t, &at, "input_schema");
            let cache = r.cache_control(t, &at);
            if let Some(tool) = r.tool(&at, name, description, schema) {
                r.push_tool(&at, ToolDefinition { cache_control: cache, ..tool });
            }
        } else if let Some(tool) = r.provider_tool(&at, t, FORMAT) {
            r.push_tool(&at, tool);
        }
    }
}

/// Writes turns as a Messages request body, each text moved in, merging
/// adjacent turns of one role as the API requires.
pub fn write(turns: Vec<Turn>, body: &Body) -> Value {
    let mut system: Vec<Value> = Vec::new();
    let mut plain_system = 0;
    let mut messages: Vec<Message> = Vec::new();
    for turn in turns {
        match turn.speaker {
            Speaker::System | Speaker::Developer => {
                if turn.parts.is_empty() {
                    plain_system += 1;
                    system.push(text_block(turn.text));
                } else {
                    system.extend(turn.parts.into_iter().filter_map(|p| block(p, body)));
                }
            }
            Speaker::Tool => {
                let (id, outcome) = turn.result.unwrap_or((String::new(), ToolOutcome::Success));
                let content = if turn.parts.is_empty() { Value::String(turn.text) } else { Value::Array(turn.parts.into_iter().filter_map(|p| block(p, body)).collect()) };
                let mut result = object([("type", "tool_result".into()), ("tool_use_id", Value::String(id)), ("content", content)]);
                if outcome == ToolOutcome::Error {
                    result["is_error"] = json!(true);
                }
                merge(&mut result, &turn.provider_fields);
                push(&mut messages, "user", vec![result], None);
            }
            Speaker::User | Speaker::Assistant => {
                let role = if turn.speaker == Speaker::User { "user" } else { "assistant" };
                if turn.parts.is_empty() && turn.calls.is_empty() {
                    push(&mut messages, role, Vec::new(), Some(turn.text));
                    continue;
                }
                let mut content: Vec<Value> = if turn.parts.is_empty() && !turn.text.is_empty() {
                    vec![text_block(turn.text)]
                } else {
                    turn.parts.into_iter().filter_map(|p| block(p, body)).collect()
                };
                content.extend(turn.calls.into_iter().map(tool_use));
                push(&mut messages, role, content, None);
            }
        }
    }
    let messages: Vec<Value> = messages.into_iter().map(Message::into_json).collect();
    let mut out = object([("max_tokens", body.max_tokens.into()), ("messages", Value::Array(messages)), ("model", body.model.as_str().into())]);
    if plain_system == 1 && system.len() == 1 {
        out["system"] = system.pop().and_then(|mut b| b.get_mut("text").map(Value::take)).unwrap_or_default();
    } else if !system.is_empty() {
        out["system"] = Value::Array(system);
    }
    if !body.tools.is_empty() {
        out["tools"] = Value::Array(body.tools.iter().map(tool).collect());
    }
    out
}

/// A message being written: its role, its blocks, and its text alone while
/// it is one plain turn. Once a second turn joins it, its blocks are kept in
/// two runs, `first` (results in a user message, thinking in an
/// assistant's) ahead of the rest, each in the order it came.
struct Message {
    role: &'static str,
    first: Vec<Value>,
    rest: Vec<Value>,
    plain: Option<String>,
    /// Whether a second turn joined: the first turn's blocks keep their own order until one does.
    merged: bool,
}

impl Message {
    /// Blocks that go first in a message of `role` once turns are merged.
    fn leads(role: &str, block: &Value) -> bool {
        let first: &[&str] = if role == "user" { &["tool_result"] } else { &["thinking", "redacted_thinking"] };
        first.contains(&block.get("type").and_then(Value::as_str).unwrap_or(""))
    }

    fn into_json(self) -> Value {
        match self.plain {
            Some(text) => object([("role", self.role.into()), ("content", Value::String(text))]),
            None => {
                let mut content = self.first;
                content.extend(self.rest);
                object([("role", self.role.into()), ("content", Value::Array(content))])
            }
        }
    }
}

/// Appends content (or, for a plain turn, its text alone) to the last
/// message when it has the same role: results go ahead of a user message's
/// other blocks, thinking ahead of an assistant's. Each block is placed
/// once, so a long run of merged turns costs what its blocks do.
fn push(messages: &mut Vec<Message>, role: &'static str, content: Vec<Value>, plain: Option<String>) {
    match messages.last_mut() {
        Some(last) if last.role == role => {
            if let Some(text) = last.plain.take() {
                last.rest = vec![text_block(text)];
            }
            let content = match plain {
                Some(text) if !text.is_empty() => vec![text_block(text)],
                _ => content,
            };
            if !last.merged {
                (last.first, last.rest) = std::mem::take(&mut last.rest).into_iter().partition(|b| Message::leads(role, b));
                last.merged = true;
            }
            for block in content {
                if Message::leads(role, &block) { last.first.push(block) } else { last.rest.push(block) }
            }
        }
        _ => messages.push(Message { role, first: Vec::new(), rest: content, plain, merged: false }),
    }
}

/// Each call's arguments as [`with_inputs_as_written`] puts them back, by
/// call id: taken before the turns are written, which moves them.
pub fn inputs_as_written(turns: &[Turn]) -> BTreeMap<String, String> {
    let calls = turns.iter().flat_map(|t| &t.calls).filter(|c| input_of(c).is_some());
    calls.filter_map(|c| Some((c.call_id.clone(), ordered(serde_json::from_str::<&RawValue>(c.arguments.as_deref()?).ok()?, 0)?))).collect()
}

/// The body's JSON with each `tool_use` block's `input` as its call's
/// arguments were written (`written`, from [`inputs_as_written`]) — members in bytewise order and strings written
/// one way, as [`inputs`] keeps them, numbers as spelled (`1e2`, a 20-digit
/// id) — where `body` holds them as parsed values. A body whose text holds
/// what reads as a marker is written as parsed.
pub fn with_inputs_as_written(mut body: Value, written: &BTreeMap<String, String>) -> crate::error::Result<Box<RawValue>> {
    const MARK: &str = "\"\\u0000input ";
    // Each input the text stands for, taken out for a marker: (text, value).
    let mut inputs = Vec::new();
    for block in tool_uses(&mut body) {
        if let Some(text) = block["id"].as_str().and_then(|id| written.get(id)) {
            let marker = Value::String(format!("\u{0}input {}", inputs.len()));
            inputs.push((text, std::mem::replace(&mut block["input"], marker)));
        }
    }
    if inputs.is_empty() {
        return crate::canonical::to_raw(&body);
    }
    let text = crate::canonical::to_string(&body)?;
    // Each marker once, in order, and nothing else that reads as one.
    let (mut out, mut copied, mut found) = (String::with_capacity(text.len()), 0, 0);
    for (at, _) in text.match_indices(MARK) {
        let rest = &text[at + MARK.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        if found >= inputs.len() || rest[..end] != *found.to_string() {
            break;
        }
        out.push_str(&text[copied..at]);
        out.push_str(inputs[found].0);
        copied = at + MARK.len() + end + 1;
        found += 1;
    }
    if found != inputs.len() || text[copied..].contains(MARK) {
        // The values go back where the markers were, in the same order.
        let mut values = inputs.into_iter().map(|(_, value)| value);
        for block in tool_uses(&mut body).filter(|b| b["input"].as_str().is_some_and(|s| s.starts_with("\u{0}input "))) {
            block["input"] = values.next().unwrap_or_default();
        }
        return crate::canonical::to_raw(&body);
    }
    out.push_str(&text[copied..]);
    // Spliced text: read back, so a body that is not JSON is never answered.
    RawValue::from_string(out).map_err(|e| crate::error::KernelError::internal(format!("a rendered body does not read back: {e}")))
}

fn text_block(text: String) -> Value {
    object([("type", "text".into()), ("text", Value::String(text))])
}

/// A body's `tool_use` blocks, in order.
fn tool_uses(body: &mut Value) -> impl Iterator<Item = &mut Value> {
    let messages = body.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten();
    let blocks = messages.filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut)).flatten();
    blocks.filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
}

/// Whether an id is one Anthropic accepts for a `tool_use`.
pub fn id_ok(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// A call's arguments as a `tool_use` input: an object, or none.
fn input_of(call: &ToolCall) -> Option<Value> {
    call.arguments.as_deref().and_then(|a| serde_json::from_str(a).ok()).filter(Value::is_object)
}

fn tool_use(call: ToolCall) -> Value {
    let input = input_of(&call).unwrap_or_else(|| json!({}));
    let mut block = object([("type", "tool_use".into()), ("id", Value::String(call.call_id)), ("name", Value::String(call.name)), ("input", input)]);
    if let Some(cache) = &call.cache_control {
        block["cache_control"] = cache_json(cache);
    }
    merge(&mut block, &call.provider_fields);
    block
}

fn tool(definition: &ToolDefinition) -> Value {
    if let Some(own) = &definition.provider_tool {
        return Value::Object(own.fields.clone());
    }
    let mut tool = json!({"name": definition.name, "input_schema": definition.input_schema});
    if let Some(description) = &definition.description {
        tool["description"] = json!(description);
    }
    if let Some(cache) = &definition.cache_control {
        tool["cache_control"] = cache_json(cache);
    }
    tool
}

fn cache_json(cache: &CacheControl) -> Value {
    match &cache.ttl {
        Some(ttl) => json!({"type": "ephemeral", "ttl": ttl}),
        None => json!({"type": "ephemeral"}),
    }
}

/// A part as a content block; none for reasoning, which only OpenAI Responses reads.
fn block(part: Part, body: &Body) -> Option<Value> {
    let mut b = match part.kind {
        PartKind::Text => text_block(part.text.unwrap_or_default()),
        PartKind::Thinking => json!({"type": "thinking", "thinking": part.text, "signature": part.signature}),
        PartKind::RedactedThinking => json!({"type": "redacted_thinking", "data": part.data}),
        PartKind::Image | PartKind::Document => {
            let kind = if part.kind == PartKind::Image { "image" } else { "document" };
            let source = match (&part.url, &part.content_ref, &part.text) {
                (Some(url), _, _) => json!({"type": "url", "url": url}),
                (_, Some(reference), _) => json!({"type": "base64", "media_type": part.media_type, "data": body.base64(&reference.object_id)}),
                (_, _, text) => json!({"type": "text", "media_type": part.media_type, "data": text}),
            };
            let mut b = object([("type", kind.into()), ("source", source)]);
            if let Some(title) = &part.title {
                b["title"] = json!(title);
            }
            b
        }
        PartKind::Opaque => return unread(&part),
        PartKind::Reasoning => return None,
    };
    if let Some(cache) = &part.cache_control {
        b["cache_control"] = cache_json(cache);
    }
    merge(&mut b, &part.provider_fields);
    Some(b)
}
