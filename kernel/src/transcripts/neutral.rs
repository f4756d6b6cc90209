//! The kernel's neutral form: `{"turns": [...]}`, each turn in the context
//! item's own terms (`role`, `content`, `parts`, `toolCalls`, `toolResult`,
//! `providerId`, `providerFields`). Binary parts arrive already stored
//! (`contentRef`) or by `url`.

use super::turns::{check_pairing, object, Body, Reading, Speaker, Turn};
use crate::contracts::{Carrier, Part, ProviderFields, Role, ToolCall, ToolDefinition, ToolResult};
use serde_json::Value;
use std::collections::BTreeSet;

label! {
pub enum NeutralRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}
}

contract! {
/// One turn of the neutral form.
pub struct NeutralTurn {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_fields: Option<ProviderFields>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    pub role: NeutralRole,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
}
}

/// Reads a neutral transcript; its turns are the items to append.
pub fn read(mut r: Reading, body: &Value, known: &BTreeSet<String>) -> Reading {
    let Some(top) = r.object(body, "$") else { return r };
    r.only(top, "$", &["tools", "turns"]);
    if let Some(tools) = top.get("tools").filter(|t| !t.is_null()) {
        match serde_json::from_value::<Vec<ToolDefinition>>(tools.clone()) {
            Ok(tools) => {
                for (k, tool) in tools.into_iter().enumerate() {
                    let at = format!("tools[{k}]");
                    let (cache, custom, own) = (tool.cache_control.clone(), tool.custom.clone(), tool.provider_tool.clone());
                    if let Some(Err(why)) = custom.as_ref().and_then(|c| c.format.as_ref()).map(crate::contracts::CustomFormat::check) {
                        r.fail(format!("{at}.custom.format"), "wrong-type", why);
                    }
                    if let Some(Err(e)) = own.as_ref().map(|f| f.validate_tool(&format!("{at}.providerTool"))) {
                        r.fail(format!("{at}.providerTool"), "bad-part", e.message);
                    }
                    if let Some(tool) = r.tool(&at, Some(tool.name), tool.description, Some(&tool.input_schema)) {
                        r.push_tool(&at, ToolDefinition { cache_control: cache, custom, provider_tool: own, ..tool });
                    }
                }
            }
            Err(e) => r.fail("tools", "wrong-type", e.to_string()),
        }
    }
    let Some(turns) = r.field(top, "$", "turns") else { return r };
    let Some(turns) = r.array(turns, "turns") else { return r };
    r.open_conversation();
    let skipped = r.gap.elements.clone();
    for (i, value) in turns.iter().enumerate().filter(|(i, _)| !skipped.contains(i)) {
        let at = format!("turns[{i}]");
        let decoded = NeutralTurn::deserialize_from(value);
        match decoded {
            Ok(turn) => read_turn(&mut r, turn, &at),
            Err((path, message)) => r.fail(format!("{at}{path}"), "wrong-type", message),
        }
        r.rest(i);
    }
    check_pairing(&mut r, known);
    r
}

impl NeutralTurn {
    /// Decodes one turn; on failure, the path inside it and serde's message.
    fn deserialize_from(value: &Value) -> Result<NeutralTurn, (String, String)> {
        serde_path_to_error::deserialize::<_, NeutralTurn>(value).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { format!(".{path}") };
            (path, e.inner().to_string())
        })
    }
}

fn read_turn(r: &mut Reading, n: NeutralTurn, at: &str) {
    let speaker = match n.role {
        NeutralRole::System => Speaker::System,
        NeutralRole::Developer => Speaker::Developer,
        NeutralRole::User => Speaker::User,
        NeutralRole::Assistant => Speaker::Assistant,
        NeutralRole::Tool => Speaker::Tool,
    };
    if (speaker == Speaker::Tool) != n.tool_result.is_some() {
        return r.fail(format!("{at}.toolResult"), "wrong-role", "a `tool` turn, and only it, carries a toolResult");
    }
    if speaker != Speaker::Assistant && !n.tool_calls.is_empty() {
        return r.fail(format!("{at}.toolCalls"), "wrong-role", "only assistant turns carry toolCalls");
    }
    for (k, call) in n.tool_calls.iter().enumerate() {
        r.arguments(call.arguments.clone(), &format!("{at}.toolCalls[{k}].arguments"));
        if call.arguments.is_some() && call.input.is_some() {
            r.fail(format!("{at}.toolCalls[{k}].input"), "wrong-type", "a call has a function's arguments or a custom tool's input, not both");
        }
        if let Some(Err(e)) = call.provider_fields.as_ref().map(|f| f.validate(&format!("{at}.toolCalls[{k}].providerFields"), Carrier::Call)) {
            r.fail(format!("{at}.toolCalls[{k}].providerFields"), "bad-part", e.message);
        }
    }
    let role = match n.role {
        NeutralRole::System => Some(Role::System),
        NeutralRole::Developer => Some(Role::Developer),
        NeutralRole::User => Some(Role::User),
        NeutralRole::Assistant => Some(Role::Assistant),
        NeutralRole::Tool => None,
    };
    if let Some(Err(e)) = n.provider_fields.as_ref().map(|f| f.validate(&format!("{at}.providerFields"), Carrier::Turn(role))) {
        r.fail(format!("{at}.providerFields"), "bad-part", e.message);
    }
    for (k, part) in n.parts.iter().enumerate() {
        if let Err(e) = part.validate(&format!("{at}.parts[{k}]")) {
            r.fail(format!("{at}.parts[{k}]"), "bad-part", e.message);
        }
    }
    let mut turn = Turn::new(speaker, at);
    turn.parts = n.parts;
    turn.calls = n.tool_calls;
    turn.provider_fields = n.provider_fields;
    turn.provider_id = n.provider_id;
    turn.result = n.tool_result.map(|t| (t.call_id, t.outcome));
    match n.content {
        Some(text) => turn.text = text,
        None => turn.join_text(),
    }
    r.turns.push(turn);
}

/// Writes turns in the neutral form, with the tools; binary parts stay references.
pub fn write(turns: Vec<Turn>, body: &Body) -> Value {
    let turns: Vec<Value> = turns
        .into_iter()
        .map(|t| {
            let role = match t.speaker {
                Speaker::System => NeutralRole::System,
                Speaker::Developer => NeutralRole::Developer,
                Speaker::User => NeutralRole::User,
                Speaker::Assistant => NeutralRole::Assistant,
                Speaker::Tool => NeutralRole::Tool,
            };
            let turn = NeutralTurn {
                content: t.parts.is_empty().then_some(t.text),
                parts: t.parts,
                provider_fields: t.provider_fields,
                provider_id: t.provider_id,
                role,
                tool_calls: t.calls,
                tool_result: t.result.map(|(call_id, outcome)| ToolResult { call_id, outcome }),
            };
            serde_json::to_value(turn).unwrap_or(Value::Null)
        })
        .collect();
    let mut out = object([("turns", Value::Array(turns))]);
    if !body.tools.is_empty() {
        out["tools"] = serde_json::to_value(&body.tools).unwrap_or(Value::Null);
    }
    out
}
