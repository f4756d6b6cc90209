//! OpenAI Responses: `instructions` and `input` items — messages,
//! `function_call` and `custom_tool_call` with their outputs, and
//! `reasoning`. An item of another type (`compaction`, a hosted tool's
//! call) is an assistant turn of its own holding it whole, as is a content
//! part of another type in its message.
//!
//! A `reasoning` item belongs to the item after it: it is read into that
//! item's turn, so planning keeps or drops both together. A run of call
//! items (parallel calls) is one assistant turn.

use super::turns::{attach, check_pairing, data_url, merge, object, opaque, unread, Body, Format, Reading, Speaker, Turn};
use crate::contracts::{Carrier, Part, PartKind, Role, ToolCall, ToolDefinition, ToolOutcome, DETAILS};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const TRANSCRIPT: &[&str] = &["input", "instructions", "tools"];
/// `ResponseCreateParams` besides the transcript.
const CONFIG: &[&str] = &[
    "background", "conversation", "include", "max_output_tokens", "max_tool_calls", "metadata", "model", "parallel_tool_calls",
    "previous_response_id", "prompt", "prompt_cache_key", "reasoning", "safety_identifier", "service_tier", "store", "stream",
    "stream_options", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
];
const REQUIRED: &[&str] = &["input", "model"];
const FORMAT: Format = Format::OpenaiResponses;

/// Reads a body; `strict` adds the rules the API enforces on a request.
pub fn read(mut r: Reading, body: &Value, strict: bool, known: &BTreeSet<String>) -> Reading {
    let Some(top) = r.object(body, "$") else { return r };
    r.top(top, strict, TRANSCRIPT, CONFIG, REQUIRED);
    if let Some(instructions) = top.get("instructions").filter(|s| !s.is_null()) {
        match instructions {
            Value::String(text) => {
                let mut turn = Turn::new(Speaker::System, "instructions");
                turn.text = r.text(text);
                turn.preamble = true;
                r.turns.push(turn);
            }
            _ => r.fail("instructions", "wrong-type", "instructions must be a string"),
        }
    }
    match r.field(top, "$", "input") {
        Some(Value::String(text)) => {
            let mut turn = Turn::new(Speaker::User, "input");
            turn.text = r.text(text);
            r.turns.push(turn);
        }
        Some(Value::Array(items)) => {
            let mut group = Group::default();
            r.open_conversation();
            let skipped = r.gap.elements.clone();
            for (i, item) in items.iter().enumerate().filter(|(i, _)| !skipped.contains(i)) {
                let at = format!("input[{i}]");
                if let Some(object) = r.object(item, &at) {
                    read_item(&mut r, &mut group, object, &at);
                }
                // Between turns: no reasoning waiting, no turn open for calls to join.
                if group.reasoning.is_empty() && group.open.is_none() {
                    r.rest(i);
                }
            }
            group.close(&mut r);
            group.refuse_reasoning(&mut r);
            output_kinds(&mut r, items);
            if strict {
                strict_rules(&mut r, items);
            }
        }
        Some(_) => r.fail("input", "wrong-type", "input must be a string or an array of items"),
        None => {}
    }
    check_pairing(&mut r, known);
    tools(&mut r, top, strict);
    r
}

/// The `tools` of a request: function tools (`{"type": "function", "name", …}`),
/// custom ones (`{"type": "custom", "name", "format", …}`), and hosted ones
/// (`web_search`, `mcp`, …) kept whole.
fn tools(r: &mut Reading, top: &Map<String, Value>, strict: bool) {
    r.request_tools(top, strict, Some(FORMAT), |r, at, kind, t| {
        if kind == "custom" {
            r.only(t, at, &["type", "name", "description", "format"]);
            return r.custom_tool(at, t, false);
        }
        r.only(t, at, &["type", "name", "description", "parameters", "strict"]);
        let (name, description) = (r.string(t, at, "name"), r.optional_string(t, at, "description"));
        r.tool(at, name, description, t.get("parameters").filter(|p| !p.is_null()))
    });
}

/// The assistant turn being read: reasoning waiting for the item it
/// belongs to, and the open turn (an assistant message, or a run of
/// function calls) that following function calls join.
#[derive(Default)]
struct Group {
    reasoning: Vec<(String, Part)>,
    open: Option<Turn>,
}

impl Group {
    fn close(&mut self, r: &mut Reading) {
        if let Some(turn) = self.open.take() {
            r.turns.push(turn);
        }
    }

    /// The reasoning read so far, for the item that follows it.
    fn take_reasoning(&mut self) -> Vec<Part> {
        self.reasoning.drain(..).map(|(_, p)| p).collect()
    }

    /// Reasoning followed by an item it cannot belong to.
    fn refuse_reasoning(&mut self, r: &mut Reading) {
        for (at, _) in self.reasoning.drain(..) {
            r.fail(at, "reasoning-without-item", "a reasoning item must be followed by the assistant message or function call it belongs to");
        }
    }
}

fn read_item(r: &mut Reading, group: &mut Group, item: &Map<String, Value>, at: &str) {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or(if item.contains_key("role") { "message" } else { "" });
    match kind {
        "reasoning" => {
            group.close(r);
            if let Some(part) = reasoning(r, item, at) {
                group.reasoning.push((at.to_string(), part));
            }
        }
        "function_call" | "custom_tool_call" => {
            if !group.reasoning.is_empty() {
                group.close(r);
            }
            let Some(call) = function_call(r, item, at, kind == "custom_tool_call") else { return };
            match &mut group.open {
                Some(turn) => turn.calls.push(call),
                None => {
                    let mut turn = Turn::new(Speaker::Assistant, at);
                    turn.parts = group.take_reasoning();
                    turn.calls.push(call);
                    group.open = Some(turn);
                }
            }
        }
        "function_call_output" | "custom_tool_call_output" => {
            group.close(r);
            group.refuse_reasoning(r);
            output(r, item, at);
        }
        "message" => {
            group.close(r);
            message(r, group, item, at);
        }
        "" => r.fail(format!("{at}.type"), "missing-field", "an input item says its `type` (or is a message with a `role`)"),
        _ => {
            // A hosted tool's call or a provider's compaction: what reasoning
            // came before it belongs with it.
            group.close(r);
            let Some(part) = opaque(r, item, at, FORMAT) else { return };
            let mut turn = Turn::new(Speaker::Assistant, at);
            turn.parts = group.take_reasoning();
            turn.parts.push(part);
            r.turns.push(turn);
        }
    }
}

fn reasoning(r: &mut Reading, item: &Map<String, Value>, at: &str) -> Option<Part> {
    let fields = r.carry(item, at, FORMAT, Carrier::Part(PartKind::Reasoning, true), &["type", "id", "summary", "encrypted_content"]);
    let id = r.string(item, at, "id")?;
    prefixed(r, &id, "rs_", &format!("{at}.id"));
    let encrypted_content = r.optional_string(item, at, "encrypted_content");
    let mut summary = Vec::new();
    let list = r.field(item, at, "summary")?;
    for (k, s) in r.array(list, &format!("{at}.summary"))?.iter().enumerate() {
        let sat = format!("{at}.summary[{k}]");
        let Some(s) = r.object(s, &sat) else { continue };
        r.only(s, &sat, &["type", "text"]);
        if s.get("type").and_then(Value::as_str) != Some("summary_text") {
            r.fail(format!("{sat}.type"), "unknown-block-type", "summary parts are `summary_text`");
        }
        summary.extend(r.text_field(s, &sat, "text"));
    }
    Some(Part { id: Some(id), encrypted_content, provider_fields: fields, summary, ..Part::empty(PartKind::Reasoning) })
}

/// A `function_call` (JSON `arguments`), or a `custom_tool_call` (free-text `input`).
fn function_call(r: &mut Reading, item: &Map<String, Value>, at: &str, custom: bool) -> Option<ToolCall> {
    let (written, prefix) = if custom { ("input", "ctc_") } else { ("arguments", "fc_") };
    let fields = r.carry(item, at, FORMAT, Carrier::Call, &["type", "id", "call_id", "name", written]);
    let provider_id = r.optional_string(item, at, "id");
    if let Some(id) = &provider_id {
        prefixed(r, id, prefix, &format!("{at}.id"));
    }
    let (call_id, name, raw) = (r.id(item, at, "call_id"), r.id(item, at, "name"), r.string(item, at, written));
    let (arguments, input) = if custom { (None, Some(raw?)) } else { (Some(r.arguments(raw, &format!("{at}.arguments"))?), None) };
    Some(ToolCall { arguments, cache_control: None, call_id: call_id?, input, name: name?, provider_fields: fields, provider_id })
}

fn output(r: &mut Reading, item: &Map<String, Value>, at: &str) {
    let mut turn = Turn::new(Speaker::Tool, at);
    turn.provider_fields = r.carry(item, at, FORMAT, Carrier::Turn(None), &["type", "call_id", "output"]);
    match r.field(item, at, "output") {
        Some(Value::String(text)) => turn.text = r.text(text),
        Some(Value::Array(parts)) => {
            content_parts(r, &mut turn, parts, &format!("{at}.output"));
            turn.join_text();
        }
        Some(_) => r.fail(format!("{at}.output"), "wrong-type", "output must be a string or an array of parts"),
        None => {}
    }
    if let Some(id) = r.id(item, at, "call_id") {
        turn.result = Some((id, ToolOutcome::Success));
        r.turns.push(turn);
    }
}

fn message(r: &mut Reading, group: &mut Group, item: &Map<String, Value>, at: &str) {
    let speaker = match item.get("role").and_then(Value::as_str) {
        Some("user") => Speaker::User,
        Some("system") => Speaker::System,
        Some("developer") => Speaker::Developer,
        Some("assistant") => Speaker::Assistant,
        _ => return r.fail(format!("{at}.role"), "wrong-role", "role must be user, system, developer or assistant"),
    };
    let assistant = speaker == Speaker::Assistant;
    if !assistant {
        group.refuse_reasoning(r);
    }
    let mut turn = Turn::new(speaker, at);
    let read: &[&str] = if assistant { &["type", "role", "content", "id"] } else { &["type", "role", "content"] };
    turn.provider_fields = r.carry(item, at, FORMAT, Carrier::Turn(Some(Role::User)), read);
    turn.parts = group.take_reasoning();
    if assistant {
        turn.provider_id = r.optional_string(item, at, "id");
        if let Some(id) = &turn.provider_id {
            prefixed(r, id, "msg_", &format!("{at}.id"));
        }
    }
    match r.field(item, at, "content") {
        Some(Value::String(text)) if turn.parts.is_empty() => turn.text = r.text(text),
        Some(Value::String(text)) => {
            turn.parts.push(Part::text(r.text(text)));
            turn.join_text();
        }
        Some(Value::Array(parts)) => {
            content_parts(r, &mut turn, parts, &format!("{at}.content"));
            turn.join_text();
        }
        Some(_) => r.fail(format!("{at}.content"), "wrong-type", "content must be a string or an array of parts"),
        None => {}
    }
    if assistant {
        group.open = Some(turn);
    } else {
        r.turns.push(turn);
    }
}

fn content_parts(r: &mut Reading, turn: &mut Turn, parts: &[Value], at: &str) {
    for (k, part) in parts.iter().enumerate() {
        let at = format!("{at}[{k}]");
        let Some(p) = r.object(part, &at) else { continue };
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let assistant = turn.speaker == Speaker::Assistant;
        let fields = match kind {
            "output_text" => r.carry(p, &at, FORMAT, Carrier::Part(PartKind::Text, true), &["type", "text"]),
            "input_text" => r.carry(p, &at, FORMAT, Carrier::Part(PartKind::Text, false), &["type", "text"]),
            "input_image" => r.carry(p, &at, FORMAT, Carrier::Part(PartKind::Image, false), &["type", "image_url", "detail"]),
            "input_file" => r.carry(p, &at, FORMAT, Carrier::Part(PartKind::Document, false), &["type", "file_data", "file_url", "filename"]),
            _ => None,
        };
        match (kind, assistant) {
            ("input_text", false) | ("output_text", true) => {
                if let Some(text) = r.text_field(p, &at, "text") {
                    turn.parts.push(Part { provider_fields: fields, ..Part::text(text) });
                }
            }
            ("input_image", false) => {
                let detail = r.optional_string(p, &at, "detail");
                if detail.as_deref().is_some_and(|d| !DETAILS.contains(&d)) {
                    r.fail(format!("{at}.detail"), "wrong-type", "detail must be auto, high or low");
                }
                let Some(url) = r.string(p, &at, "image_url") else { continue };
                let mut part = Part { detail, provider_fields: fields, ..Part::empty(PartKind::Image) };
                attach(turn, &mut part, url);
                turn.parts.push(part);
            }
            ("input_file", false) => {
                let title = r.optional_string(p, &at, "filename");
                // The bytes inline as a data: URL, or a link to them.
                let url = match (p.contains_key("file_data"), p.contains_key("file_url")) {
                    (true, false) => r.string(p, &at, "file_data").filter(|u| {
                        let ok = data_url(u).is_some();
                        if !ok {
                            r.fail(format!("{at}.file_data"), "wrong-type", "file_data must be a base64 data: URL");
                        }
                        ok
                    }),
                    (false, true) => r.string(p, &at, "file_url"),
                    _ => {
                        r.fail(at.clone(), "wrong-type", "an input_file has one of file_data and file_url");
                        None
                    }
                };
                let Some(url) = url else { continue };
                let mut part = Part { provider_fields: fields, title, ..Part::empty(PartKind::Document) };
                attach(turn, &mut part, url);
                turn.parts.push(part);
            }
            // Parts the kernel does not read go back inside their message: an
            // assistant's only inside its output message, named by its `id`.
            _ if !FORMAT.reads(kind) && (!assistant || turn.provider_id.is_some()) => turn.parts.extend(opaque(r, p, &at, FORMAT)),
            _ if !FORMAT.reads(kind) => r.fail(format!("{at}.type"), "unknown-block-type", "an assistant message without an `id` holds only output_text parts"),
            _ => r.fail(format!("{at}.type"), "unknown-block-type", format!("a {} message has no `{kind}` parts", turn.speaker.name())),
        }
    }
}

fn prefixed(r: &mut Reading, id: &str, prefix: &str, at: &str) {
    if !id.starts_with(prefix) {
        r.fail(at, "id-prefix", format!("this id must start with `{prefix}`"));
    }
}

/// An output answers a call of its own kind: a `custom_tool_call_output`
/// a custom tool's call, a `function_call_output` a function's.
fn output_kinds(r: &mut Reading, items: &[Value]) {
    let mut calls: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, item) in items.iter().enumerate() {
        let (Some(kind), Some(id)) = (item.get("type").and_then(Value::as_str), item.get("call_id").and_then(Value::as_str)) else { continue };
        match kind {
            "function_call" | "custom_tool_call" => {
                calls.insert(id, kind);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call = &kind[..kind.len() - "_output".len()];
                if let Some(other) = calls.get(id).filter(|c| **c != call) {
                    r.fail(format!("input[{k}].type"), "result-without-call", format!("a `{kind}` cannot answer the {other} `{id}`"));
                }
            }
            _ => {}
        }
    }
}

/// What the API enforces beyond pairing: every function call has its output.
fn strict_rules(r: &mut Reading, items: &[Value]) {
    if items.is_empty() {
        r.fail("input", "empty-input", "a request needs at least one input item");
    }
    // A function's or a custom tool's call is answered by an output of its own kind.
    let read = |kind: &str| kind == "function_call" || kind == "custom_tool_call";
    let answered: BTreeSet<(&str, &str)> = items
        .iter()
        .filter_map(|i| Some((i.get("type").and_then(Value::as_str)?.strip_suffix("_output")?, i.get("call_id").and_then(Value::as_str)?)))
        .filter(|(call, _)| read(call))
        .collect();
    // Items of hosted tools pair by `call_id` too: an output
    // (`computer_call_output`, `local_shell_call_output`, …) follows its call.
    let mut hosted: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (k, item) in items.iter().enumerate() {
        let (Some(kind), Some(id)) = (item.get("type").and_then(Value::as_str), item.get("call_id").and_then(Value::as_str)) else { continue };
        match kind.strip_suffix("_output") {
            Some(call) if call.ends_with("_call") && !read(call) && !hosted.contains(&(call, id)) => {
                r.fail(format!("input[{k}]"), "result-without-call", format!("`{kind}` `{id}` follows no `{call}` of that call_id"));
            }
            None if kind.ends_with("_call") && !read(kind) => {
                hosted.insert((kind, id));
            }
            _ => {}
        }
    }
    for (k, item) in items.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        if read(kind) {
            let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
            if !answered.contains(&(kind, id)) {
                r.fail(format!("input[{k}]"), "call-without-result", format!("{kind} `{id}` has no {kind}_output"));
            }
        }
    }
}

/// Writes turns as a Responses request body, each text moved in: leading
/// instructions without a role become `instructions`, the rest `input` items.
pub fn write(turns: Vec<Turn>, body: &Body) -> Value {
    let mut out = json!({"model": body.model});
    let mut input = Vec::with_capacity(turns.len());
    // An output is of its call's kind: a custom tool's, or a function's.
    let custom: BTreeSet<String> = turns.iter().flat_map(|t| &t.calls).filter(|c| c.input.is_some()).map(|c| c.call_id.clone()).collect();
    for turn in turns {
        match turn.speaker {
            Speaker::Assistant => assistant(turn, &mut input),
            Speaker::Tool => {
                let id = turn.result.map(|(id, _)| id).unwrap_or_default();
                let output = if turn.parts.is_empty() { Value::String(turn.text) } else { parts(turn.parts, body) };
                let kind = if custom.contains(&id) { "custom_tool_call_output" } else { "function_call_output" };
                let mut item = object([("type", kind.into()), ("call_id", Value::String(id)), ("output", output)]);
                merge(&mut item, &turn.provider_fields);
                input.push(item);
            }
            Speaker::System | Speaker::Developer if turn.preamble && input.is_empty() => {
                let text = match out.get("instructions").and_then(Value::as_str) {
                    Some(before) => format!("{before}\n\n{}", turn.text),
                    None => turn.text,
                };
                out["instructions"] = Value::String(text);
            }
            _ => {
                let content = if turn.parts.is_empty() { Value::String(turn.text) } else { parts(turn.parts, body) };
                let mut item = object([("role", turn.speaker.name().into()), ("content", content)]);
                merge(&mut item, &turn.provider_fields);
                input.push(item);
            }
        }
    }
    out["input"] = Value::Array(input);
    if body.max_tokens > 0 {
        out["max_output_tokens"] = json!(body.max_tokens);
    }
    if !body.tools.is_empty() {
        out["tools"] = Value::Array(body.tools.iter().map(tool).collect());
    }
    out
}

fn tool(definition: &ToolDefinition) -> Value {
    if let Some(hosted) = &definition.provider_tool {
        return Value::Object(hosted.fields.clone());
    }
    let mut tool = match &definition.custom {
        None => json!({"type": "function", "name": definition.name, "parameters": definition.input_schema, "strict": false}),
        Some(custom) => {
            let mut tool = json!({"type": "custom", "name": definition.name});
            if let Some(format) = &custom.format {
                tool["format"] = json!(format);
            }
            tool
        }
    };
    if let Some(description) = &definition.description {
        tool["description"] = json!(description);
    }
    tool
}

/// An assistant turn: its reasoning, its message, then its calls; or, for
/// a turn of an item the kernel does not read, its reasoning and the item.
fn assistant(turn: Turn, input: &mut Vec<Value>) {
    let standalone = turn.provider_id.is_none() && turn.calls.is_empty() && turn.text.is_empty()
        && turn.parts.iter().all(|p| matches!(p.kind, PartKind::Reasoning | PartKind::Opaque));
    let mut content = Vec::new();
    for p in turn.parts {
        match p.kind {
            PartKind::Reasoning => {
                let summary: Vec<Value> = p.summary.into_iter().map(|s| object([("type", "summary_text".into()), ("text", Value::String(s))])).collect();
                let mut item = object([("type", "reasoning".into()), ("id", json!(p.id)), ("summary", Value::Array(summary))]);
                if let Some(encrypted) = p.encrypted_content {
                    item["encrypted_content"] = Value::String(encrypted);
                }
                merge(&mut item, &p.provider_fields);
                input.push(item);
            }
            PartKind::Text => {
                let mut text = object([("type", "output_text".into()), ("text", p.text.map_or(Value::Null, Value::String))]);
                merge(&mut text, &p.provider_fields);
                text.as_object_mut().map(|t| t.entry("annotations").or_insert(json!([])));
                content.push(text);
            }
            _ => content.extend(unread(&p)),
        }
    }
    let standalone = standalone && !content.is_empty();
    match turn.provider_id {
        _ if standalone => input.extend(content),
        Some(id) => {
            let content = match content.is_empty() {
                true => vec![object([("type", "output_text".into()), ("text", Value::String(turn.text)), ("annotations", json!([]))])],
                false => content,
            };
            let mut item = object([("type", "message".into()), ("role", "assistant".into()), ("id", Value::String(id)), ("content", Value::Array(content))]);
            merge(&mut item, &turn.provider_fields);
            item.as_object_mut().map(|i| i.entry("status").or_insert(json!("completed")));
            input.push(item);
        }
        None if !turn.text.is_empty() || turn.calls.is_empty() => {
            let mut item = object([("role", "assistant".into()), ("content", Value::String(turn.text))]);
            merge(&mut item, &turn.provider_fields);
            input.push(item);
        }
        None => {}
    }
    for call in turn.calls {
        let (mut item, prefix) = match call.input {
            Some(text) => (object([("type", "custom_tool_call".into()), ("call_id", Value::String(call.call_id)), ("name", Value::String(call.name)), ("input", Value::String(text))]), "ctc_"),
            None => {
                let arguments = Value::String(call.arguments.unwrap_or_else(|| "{}".into()));
                (object([("type", "function_call".into()), ("call_id", Value::String(call.call_id)), ("name", Value::String(call.name)), ("arguments", arguments)]), "fc_")
            }
        };
        if let Some(id) = call.provider_id.filter(|id| id.starts_with(prefix)) {
            item["id"] = Value::String(id);
        }
        merge(&mut item, &call.provider_fields);
        input.push(item);
    }
}

fn parts(parts: Vec<Part>, body: &Body) -> Value {
    let parts: Vec<Value> = parts
        .into_iter()
        .filter_map(|p| {
            let mut part = match p.kind {
                PartKind::Opaque => return unread(&p),
                PartKind::Text => object([("type", "input_text".into()), ("text", p.text.map_or(Value::Null, Value::String))]),
                PartKind::Image => json!({"type": "input_image", "image_url": body.data_url(&p), "detail": p.detail.as_deref().unwrap_or("auto")}),
                PartKind::Document => {
                    let mut file = match &p.url {
                        Some(url) => json!({"type": "input_file", "file_url": url}),
                        None => json!({"type": "input_file", "file_data": body.data_url(&p)}),
                    };
                    if let Some(title) = &p.title {
                        file["filename"] = json!(title);
                    }
                    file
                }
                _ => return None,
            };
            merge(&mut part, &p.provider_fields);
            Some(part)
        })
        .collect();
    Value::Array(parts)
}
