//! OpenAI Chat Completions: `messages` with roles `system`, `developer`,
//! `user`, `assistant` (with `tool_calls` of function and custom tools)
//! and `tool`. Content parts of types the kernel does not read
//! (`input_audio`, an answer's `refusal`) are kept whole as opaque parts.

use super::turns::{attach, check_pairing, data_url, merge, object, opaque, unread, Body, Format, Reading, Speaker, Turn};
use crate::contracts::{Carrier, Part, PartKind, Role, ToolCall, ToolDefinition, ToolOutcome, DETAILS};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

const TRANSCRIPT: &[&str] = &["messages", "tools"];
/// `CompletionCreateParams` besides the transcript.
const CONFIG: &[&str] = &[
    "audio", "frequency_penalty", "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "model", "n",
    "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier",
    "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "top_logprobs", "top_p", "user",
    "verbosity", "web_search_options",
];
const REQUIRED: &[&str] = &["messages", "model"];
const FORMAT: Format = Format::OpenaiChat;

/// Reads a body; `strict` reads it as a request and adds the rules the API enforces on one.
pub fn read(mut r: Reading, body: &Value, strict: bool, known: &BTreeSet<String>) -> Reading {
    let Some(top) = r.object(body, "$") else { return r };
    r.top(top, strict, TRANSCRIPT, CONFIG, REQUIRED);
    let Some(messages) = r.field(top, "$", "messages") else { return r };
    let Some(messages) = r.array(messages, "messages") else { return r };
    r.open_conversation();
    let skipped = r.gap.elements.clone();
    for (i, message) in messages.iter().enumerate().filter(|(i, _)| !skipped.contains(i)) {
        let at = format!("messages[{i}]");
        if let Some(m) = r.object(message, &at) {
            read_message(&mut r, m, &at);
        }
        r.rest(i);
    }
    check_pairing(&mut r, known);
    tools(&mut r, top, strict);
    if strict {
        strict_rules(&mut r, messages);
    }
    r
}

fn read_message(r: &mut Reading, m: &Map<String, Value>, at: &str) {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
    let speaker = match role {
        "system" => Speaker::System,
        "developer" => Speaker::Developer,
        "user" => Speaker::User,
        "assistant" => Speaker::Assistant,
        "tool" => Speaker::Tool,
        _ => return r.fail(format!("{at}.role"), "wrong-role", "role must be system, developer, user, assistant or tool"),
    };
    let mut turn = Turn::new(speaker, at);
    // What an SDK's parsed answer holds besides content and calls goes back with it.
    turn.provider_fields = match speaker {
        Speaker::Assistant => r.carry(m, at, FORMAT, Carrier::Turn(Some(Role::Assistant)), &["role", "content", "tool_calls"]),
        Speaker::Tool => r.carry(m, at, FORMAT, Carrier::Turn(None), &["role", "content", "tool_call_id"]),
        // A user's, a system's or a developer's message keep the same fields.
        _ => r.carry(m, at, FORMAT, Carrier::Turn(Some(Role::User)), &["role", "content"]),
    };
    match m.get("content") {
        Some(Value::String(text)) => turn.text = r.text(text),
        None | Some(Value::Null) if speaker == Speaker::Assistant => {}
        Some(Value::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                let at = format!("{at}.content[{k}]");
                if let Some(p) = r.object(part, &at) {
                    read_part(r, &mut turn, p, &at);
                }
            }
            turn.join_text();
        }
        _ => r.fail(format!("{at}.content"), "wrong-type", "content must be a string or an array of parts"),
    }
    if speaker == Speaker::Assistant {
        if let Some(calls) = m.get("tool_calls").filter(|v| !v.is_null()) {
            read_calls(r, &mut turn, calls, at);
        }
        if turn.calls.is_empty() && m.get("content").is_none_or(Value::is_null) && !turn.answered_otherwise() {
            r.fail(format!("{at}.content"), "missing-field", "an assistant message without tool_calls, a refusal or audio needs content");
        }
    }
    if speaker == Speaker::Tool {
        turn.result = r.id(m, at, "tool_call_id").map(|id| (id, ToolOutcome::Success));
    }
    r.turns.push(turn);
}

fn read_part(r: &mut Reading, turn: &mut Turn, p: &Map<String, Value>, at: &str) {
    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
    let on = Carrier::Part(
        match kind {
            "image_url" => PartKind::Image,
            "file" => PartKind::Document,
            _ => PartKind::Text,
        },
        turn.speaker == Speaker::Assistant,
    );
    let fields = if FORMAT.reads(kind) { r.carry(p, at, FORMAT, on, &["type", kind]) } else { None };
    match (kind, turn.speaker) {
        ("text", _) => {
            if let Some(text) = r.text_field(p, at, "text") {
                turn.parts.push(Part { provider_fields: fields, ..Part::text(text) });
            }
        }
        ("image_url", Speaker::User) => {
            let Some(image) = r.field(p, at, "image_url").cloned() else { return };
            let at = format!("{at}.image_url");
            let Some(image) = r.object(&image, &at).cloned() else { return };
            r.only(&image, &at, &["url", "detail"]);
            let detail = r.optional_string(&image, &at, "detail");
            if detail.as_deref().is_some_and(|d| !DETAILS.contains(&d)) {
                r.fail(format!("{at}.detail"), "wrong-type", "detail must be auto, high or low");
            }
            let Some(url) = r.string(&image, &at, "url") else { return };
            let mut part = Part { detail, provider_fields: fields, ..Part::empty(PartKind::Image) };
            attach(turn, &mut part, url);
            turn.parts.push(part);
        }
        ("file", Speaker::User) => {
            let Some(file) = r.field(p, at, "file").cloned() else { return };
            let at = format!("{at}.file");
            let Some(file) = r.object(&file, &at).cloned() else { return };
            r.only(&file, &at, &["file_data", "filename"]);
            let title = r.optional_string(&file, &at, "filename");
            let Some(url) = r.string(&file, &at, "file_data") else { return };
            if data_url(&url).is_none() {
                return r.fail(format!("{at}.file_data"), "wrong-type", "file_data must be a base64 data: URL");
            }
            let mut part = Part { provider_fields: fields, title, ..Part::empty(PartKind::Document) };
            attach(turn, &mut part, url);
            turn.parts.push(part);
        }
        _ if !FORMAT.reads(kind) => turn.parts.extend(opaque(r, p, at, FORMAT)),
        _ => r.fail(format!("{at}.type"), "unknown-block-type", format!("the kernel reads no `{kind}` part in a {} message", turn.speaker.name())),
    }
}

fn read_calls(r: &mut Reading, turn: &mut Turn, calls: &Value, at: &str) {
    let at = format!("{at}.tool_calls");
    let Some(calls) = r.array(calls, &at) else { return };
    for (k, call) in calls.iter().enumerate() {
        let at = format!("{at}[{k}]");
        let Some(c) = r.object(call, &at) else { continue };
        // A function's call holds JSON arguments; a custom tool's, free text.
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "function" && kind != "custom" {
            r.fail(format!("{at}.type"), "unknown-block-type", "tool calls are of type `function` or `custom`");
            continue;
        }
        r.only(c, &at, &["id", "type", kind]);
        let id = r.id(c, &at, "id");
        let Some(called) = r.field(c, &at, kind) else { continue };
        let fat = format!("{at}.{kind}");
        let Some(called) = r.object(called, &fat) else { continue };
        let written = if kind == "function" { "arguments" } else { "input" };
        r.only(called, &fat, &["name", written]);
        let name = r.id(called, &fat, "name");
        let raw = r.string(called, &fat, written);
        let (arguments, input) = match kind {
            "function" => (r.arguments(raw, &format!("{fat}.arguments")), None),
            _ => (None, raw),
        };
        if let (Some(call_id), Some(name), true) = (id, name, arguments.is_some() || input.is_some()) {
            turn.calls.push(ToolCall { arguments, cache_control: None, call_id, input, name, provider_fields: None, provider_id: None });
        }
    }
}

/// What the API enforces: every `tool_calls` id answered by `tool` messages
/// before the next other message, and no `tool` message without its call.
fn strict_rules(r: &mut Reading, messages: &[Value]) {
    if messages.is_empty() {
        r.fail("messages", "empty-messages", "a request needs at least one message");
    }
    let mut open: Vec<&str> = Vec::new();
    let mut in_results = false;
    for (i, m) in messages.iter().enumerate() {
        // Named only when a rule is broken: most messages break none.
        let at = || format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            if !in_results || !open.contains(&id) {
                r.fail(at(), "result-without-call", format!("tool message `{id}` does not follow the assistant message that made the call"));
            } else {
                open.retain(|o| *o != id);
            }
            continue;
        }
        for id in open.drain(..) {
            r.fail(at(), "call-without-result", format!("tool call `{id}` is not answered before this message"));
        }
        in_results = false;
        if role == "assistant" {
            let calls = m.get("tool_calls").and_then(Value::as_array).into_iter().flatten();
            open = calls.filter_map(|c| c.get("id").and_then(Value::as_str)).collect();
            in_results = !open.is_empty();
        }
    }
    for id in open {
        r.fail(format!("messages[{}]", messages.len() - 1), "call-without-result", format!("tool call `{id}` is never answered"));
    }
}

/// The `tools` of a request: function tools (`{"type": "function", "function": {…}}`)
/// and custom ones (`{"type": "custom", "custom": {…}}`).
fn tools(r: &mut Reading, top: &Map<String, Value>, strict: bool) {
    r.request_tools(top, strict, None, |r, at, kind, t| {
        r.only(t, at, &["type", kind]);
        let defined = r.field(t, at, kind)?;
        let at = format!("{at}.{kind}");
        let f = r.object(defined, &at)?;
        if kind == "custom" {
            r.only(f, &at, &["name", "description", "format"]);
            return r.custom_tool(&at, f, true);
        }
        r.only(f, &at, &["name", "description", "parameters", "strict"]);
        let (name, description) = (r.string(f, &at, "name"), r.optional_string(f, &at, "description"));
        r.tool(&at, name, description, f.get("parameters").filter(|p| !p.is_null()))
    });
}

/// Writes turns as a Chat Completions request body, each text moved in.
pub fn write(turns: Vec<Turn>, body: &Body) -> Value {
    let messages: Vec<Value> = turns.into_iter().map(|t| message(t, body)).collect();
    let mut out = object([("messages", Value::Array(messages)), ("model", body.model.as_str().into())]);
    if body.max_tokens > 0 {
        out["max_completion_tokens"] = json!(body.max_tokens);
    }
    if !body.tools.is_empty() {
        out["tools"] = Value::Array(body.tools.iter().map(tool).collect());
    }
    out
}

fn message(turn: Turn, body: &Body) -> Value {
    let content = if turn.parts.is_empty() {
        if turn.speaker == Speaker::Assistant && turn.text.is_empty() && (!turn.calls.is_empty() || turn.answered_otherwise()) {
            Value::Null
        } else {
            Value::String(turn.text)
        }
    } else {
        Value::Array(turn.parts.into_iter().map(|p| part(p, body)).collect())
    };
    let mut m = object([("role", turn.speaker.name().into()), ("content", content)]);
    if !turn.calls.is_empty() {
        let calls: Vec<Value> = turn.calls.into_iter().map(call).collect();
        m["tool_calls"] = Value::Array(calls);
    }
    if let Some((id, _)) = turn.result {
        m["tool_call_id"] = Value::String(id);
    }
    merge(&mut m, &turn.provider_fields);
    m
}

/// A function's call (JSON arguments) or a custom tool's (free text).
fn call(c: ToolCall) -> Value {
    let (kind, called) = match c.input {
        Some(input) => ("custom", object([("name", Value::String(c.name)), ("input", Value::String(input))])),
        None => ("function", object([("name", Value::String(c.name)), ("arguments", Value::String(c.arguments.unwrap_or_else(|| "{}".into())))])),
    };
    object([("id", Value::String(c.call_id)), ("type", kind.into()), (kind, called)])
}

fn tool(definition: &ToolDefinition) -> Value {
    if let Some(own) = &definition.provider_tool {
        return Value::Object(own.fields.clone());
    }
    let Some(custom) = &definition.custom else {
        let mut function = json!({"name": definition.name, "parameters": definition.input_schema});
        if let Some(description) = &definition.description {
            function["description"] = json!(description);
        }
        return object([("type", "function".into()), ("function", function)]);
    };
    let mut tool = json!({"name": definition.name});
    if let Some(description) = &definition.description {
        tool["description"] = json!(description);
    }
    // Chat nests a grammar's fields in `grammar`.
    if let Some(format) = &custom.format {
        tool["format"] = match (&format.definition, format.syntax) {
            (Some(definition), Some(syntax)) => json!({"type": format.kind, "grammar": {"definition": definition, "syntax": syntax}}),
            _ => json!({"type": format.kind}),
        };
    }
    object([("type", "custom".into()), ("custom", tool)])
}

/// A part as a content part; rendering leaves only the parts this format carries.
fn part(part: Part, body: &Body) -> Value {
    if let Some(block) = unread(&part) {
        return block;
    }
    let mut block = match part.kind {
        PartKind::Image => {
            let mut image = json!({"url": body.data_url(&part)});
            if let Some(detail) = &part.detail {
                image["detail"] = json!(detail);
            }
            object([("type", "image_url".into()), ("image_url", image)])
        }
        PartKind::Document => {
            let mut file = json!({"file_data": body.data_url(&part)});
            if let Some(title) = &part.title {
                file["filename"] = json!(title);
            }
            object([("type", "file".into()), ("file", file)])
        }
        _ => object([("type", "text".into()), ("text", Value::String(part.text.unwrap_or_default()))]),
    };
    merge(&mut block, &part.provider_fields);
    block
}
