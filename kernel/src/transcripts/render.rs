//! `render-context`: a plan's kept items as a request body for one format.
//!
//! Rendering decides, in this order:
//! 1. placement — what speaks with authority: instructions are trusted
//!    (`host` or `verified`) system policy, system and developer messages,
//!    and trusted task state, memory, rules and skills; anything less
//!    trusted goes in as a user turn, data rather than instruction
//! 2. pairing — each call is followed by its results; the latest settled
//!    result wins; a call without one gets a synthetic result that says so,
//!    or is held back (the policy's `unsettledCalls`); results whose call
//!    is not rendered are dropped
//! 3. the format — parts it cannot carry (signed thinking, encrypted
//!    reasoning crossing providers) dropped, error outcomes said in text
//!    where it has no flag, ids it would refuse rewritten, Anthropic's first
//!    turn made a user turn, and calls said in text for Anthropic when the
//!    plan keeps no tool definition
//! 4. the check — the body is read back under the format's request rules;
//!    the kernel never answers a body that breaks one.
//!
//! Every change to what the plan kept is a note in the response.

use super::anthropic;
use super::turns::{Body, Format, Speaker, Turn};
use crate::canonical;
use crate::content::{self, GetContentRequest};
use crate::contracts::{ItemKind, Part, PartKind, ProviderFields, Role, ToolCall, ToolDefinition, ToolOutcome, Trust};
use crate::error::{KernelError, Result};
use crate::planner::{BudgetSummary, ContextPlan, PlanBinding, PlanRequest, Shrunk};
use crate::store::Db;
use base64::Engine;
use serde_json::value::RawValue;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

label! {
/// The role instructions take in the OpenAI formats.
#[derive(Default)]
pub enum InstructionRole {
    #[default]
    System,
    Developer,
}
}

label! {
/// What Anthropic gets when the kept conversation starts with the assistant.
#[derive(Default)]
pub enum LeadingAssistant {
    /// A short user turn saying that earlier conversation is left out.
    #[default]
    Placeholder,
    /// The leading assistant turns (and their results) are left out.
    Drop,
}
}

label! {
/// Where a compaction summary goes.
#[derive(Default)]
pub enum SummaryPlacement {
    /// A user turn: data about the conversation.
    #[default]
    User,
    /// With the instructions, when the summary is trusted (`verified` or better).
    System,
}
}

label! {
/// A call still running, or whose outcome is unknown.
#[derive(Default)]
pub enum UnsettledCalls {
    /// A result in the provider's shape that says the outcome is not known.
    #[default]
    Synthesize,
    /// The call is left out of the request until it settles.
    Hold,
}
}

contract! {
#[derive(Default)]
pub struct RenderPolicy {
    #[serde(default)]
    pub instructions: InstructionRole,
    #[serde(default)]
    pub leading_assistant: LeadingAssistant,
    /// The provider's model name for the body; the plan's model profile unless said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub summary: SummaryPlacement,
    #[serde(default)]
    pub unsettled_calls: UnsettledCalls,
}
}

contract! {
pub struct RenderRequest {
    pub format: Format,
    /// The `plan-context` request: rendering plans exactly as it does.
    pub plan: PlanRequest,
    #[serde(default)]
    pub policy: RenderPolicy,
    pub schema_version: u32,
}
}

contract! {
/// Something rendering changed in what the plan kept, and why.
pub struct RenderNote {
    /// `dropped-part`, `dropped-turn`, `dropped-result`, `shrunk-result`,
    /// `synthesized-result`, `held-back`, `rewrote-id`, `error-in-text`,
    /// `inserted-turn`, `demoted`, `call-as-text`, `dropped-tool`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    pub reason: String,
    /// For `shrunk-result`: what the placeholder stands for. Its digest is
    /// the handle `read-events` (`contentDigest`) serves the result back by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<Shrunk>,
}
}

// `contract!`'s derives but `PartialEq`: the body is held as its text.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenderResponse {
    pub binding: PlanBinding,
    /// The request body: pass it to the provider's client as it is. A
    /// call's arguments are in it as they were written.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Map<String, serde_json::Value>"))]
    pub body: Box<RawValue>,
    pub budget: BudgetSummary,
    pub format: Format,
    pub notes: Vec<RenderNote>,
    /// The digest of the plan rendered: `plan-context`'s for the same request.
    pub plan_digest: String,
    pub plan_id: String,
    pub schema_version: u32,
}

/// The text of the synthetic turn Anthropic gets ahead of a leading assistant turn.
pub const PLACEHOLDER: &str = "(earlier conversation omitted)";

/// A turn and the item it came from.
struct Slot<'p> {
    turn: Turn,
    item: Option<&'p str>,
}

struct Renderer<'a> {
    format: Format,
    policy: &'a RenderPolicy,
    notes: Vec<RenderNote>,
}

impl Renderer<'_> {
    fn note(&mut self, action: &str, item: Option<&str>, reason: &str, detail: Option<String>) {
        self.notes.push(RenderNote { action: action.into(), detail, item_id: item.map(str::to_string), reason: reason.into(), shrunk: None });
    }
}

pub fn render(db: &mut Db, plan: &ContextPlan, request: &RenderRequest) -> Result<RenderResponse> {
    let format = request.format;
    let mut r = Renderer { format, policy: &request.policy, notes: Vec::new() };
    let model = request.policy.model.clone().unwrap_or_else(|| plan.binding.model_profile.clone());
    crate::contracts::check_id("policy.model", &model)?;
    let max_tokens = plan.budget.reserved_output;
    if format == Format::AnthropicMessages && max_tokens == 0 {
        return Err(KernelError::invalid(
            "model.reservedOutput must be at least 1 to render anthropic-messages: it is the request's max_tokens",
        ));
    }
    let (slots, tools) = r.place(plan);
    let slots = r.pair(slots);
    let slots = r.fit(slots);
    // Said of the shrunk results the body holds, not of those pairing left out.
    let shrunk: BTreeMap<&str, _> = plan.context.iter().filter_map(|p| Some((p.item_id.as_str(), p.shrunk.as_ref()?))).collect();
    for id in slots.iter().filter(|s| s.turn.speaker == Speaker::Tool).filter_map(|s| s.item) {
        if let Some(shrunk) = shrunk.get(id) {
            r.notes.push(RenderNote {
                action: "shrunk-result".into(),
                detail: None,
                item_id: Some(id.to_string()),
                reason: "the result did not fit the window whole: a placeholder keeps its call's pair".into(),
                shrunk: Some((*shrunk).clone()),
            });
        }
    }
    if !slots.iter().any(|s| !s.turn.speaker.instructs()) && format != Format::Neutral {
        return Err(KernelError::invalid(format!(
            "the plan keeps no conversation to render: {} needs at least one message",
            format.name()
        )));
    }
    let mut slots = slots;
    let mut tools = tools;
    let foreign = |t: &ToolDefinition| t.provider_tool.as_ref().is_some_and(|own| format != Format::Neutral && own.format != format);
    for tool in tools.iter().filter(|t| foreign(t)) {
        r.note("dropped-tool", None, "a provider's own tool goes only to that provider", Some(tool.name.clone()));
    }
    tools.retain(|t| !foreign(t));
    // One tool a name, as providers require: the later one (a provider's
    // own and a function tool of one name come from different histories).
    let mut names = BTreeSet::new();
    let mut later = Vec::new();
    for tool in tools.into_iter().rev() {
        if names.insert(tool.name.clone()) {
            later.push(tool);
        } else {
            r.note("dropped-tool", None, "a later tool of the same name replaces it", Some(tool.name.clone()));
        }
    }
    later.reverse();
    let mut tools = later;
    if format == Format::AnthropicMessages {
        for tool in tools.iter().filter(|t| t.custom.is_some()) {
            r.note("dropped-tool", None, "Anthropic has no custom (free-form) tools", Some(tool.name.clone()));
        }
        tools.retain(|t| t.custom.is_none());
        r.calls_as_text(&mut slots, tools.is_empty());
    }
    let mut turns: Vec<Turn> = slots.into_iter().map(|s| s.turn).collect();
    let blobs = if format == Format::Neutral { BTreeMap::new() } else { r.load(db, &mut turns, &plan.binding.sink) };
    let body = Body { model, max_tokens, tools, blobs };
    // Anthropic holds arguments as JSON values: they go back as they were written, not as parsed.
    let written = (format == Format::AnthropicMessages).then(|| anthropic::inputs_as_written(&turns));
    let out = super::write(format, turns, &body);
    if format != Format::Neutral {
        let check = super::read(format, super::Reading::for_rules(), &out, true, &BTreeSet::new());
        if !check.violations.is_empty() {
            let first = &check.violations[0];
            return Err(KernelError::internal(format!(
                "rendering made a {} body that breaks `{}` at `{}`: {}",
                format.name(),
                first.rule,
                first.path,
                first.message
            ))
            .with_detail(json!({"violations": check.violations})));
        }
    }
    let body = match written {
        Some(written) => anthropic::with_inputs_as_written(out, &written)?,
        None => canonical::to_raw(&out)?,
    };
    Ok(RenderResponse {
        binding: plan.binding.clone(),
        body,
        budget: plan.budget.clone(),
        format,
        notes: r.notes,
        plan_digest: plan.digest.clone(),
        plan_id: plan.plan_id.clone(),
        schema_version: 1,
    })
}

impl Renderer<'_> {
    /// Each kept item as a turn, in prompt order, and the tool definitions.
    fn place<'p>(&mut self, plan: &'p ContextPlan) -> (Vec<Slot<'p>>, Vec<ToolDefinition>) {
        let mut slots = Vec::with_capacity(plan.context.len());
        let mut tools: Vec<ToolDefinition> = Vec::new();
        for planned in &plan.context {
            let item = &*planned.item;
            let id = planned.item_id.as_str();
            if let Some(tool) = &item.tool {
                // A later definition of a tool replaces the earlier one.
                match tools.iter_mut().find(|t| t.key() == tool.key()) {
                    Some(earlier) => *earlier = tool.clone(),
                    None => tools.push(tool.clone()),
                }
                continue;
            }
            let trusted = item.trust <= Trust::Verified;
            let (text, parts) = match (&item.content, &item.content_ref) {
                (Some(text), _) => (text.clone(), item.parts.clone()),
                // Externalized: its summary stands for the text; binary parts keep their own references.
                (None, Some(reference)) => (reference.summary.clone(), item.parts.iter().filter(|p| p.kind != PartKind::Text).cloned().collect()),
                (None, None) => (String::new(), item.parts.clone()),
            };
            let speaker = match (item.kind, item.role) {
                _ if item.summary_of.is_some() => {
                    let system = self.policy.summary == SummaryPlacement::System;
                    if system && !trusted {
                        self.note("demoted", Some(id), "a summary below verified trust is data, not instruction: rendered as a user turn", None);
                    }
                    if system && trusted { self.instruction_speaker(None) } else { Speaker::User }
                }
                (ItemKind::Message, Some(Role::User)) => Speaker::User,
                (ItemKind::Message, Some(Role::Assistant)) => Speaker::Assistant,
                (ItemKind::Message | ItemKind::SystemPolicy, Some(role @ (Role::System | Role::Developer))) if trusted => self.instruction_speaker(Some(role)),
                (ItemKind::ToolEvidence, _) if item.tool_result.is_some() => Speaker::Tool,
                (ItemKind::SystemPolicy | ItemKind::TaskState | ItemKind::Memory | ItemKind::ProjectRule | ItemKind::Skill | ItemKind::ToolSchema, _)
                    if trusted =>
                {
                    self.instruction_speaker(None)
                }
                (kind, _) => {
                    if matches!(kind, ItemKind::SystemPolicy) || matches!(item.role, Some(Role::System | Role::Developer)) {
                        self.note("demoted", Some(id), "instructions below verified trust are data: rendered as a user turn", None);
                    }
                    Speaker::User
                }
            };
            let mut turn = Turn::new(speaker, id);
            turn.preamble = speaker.instructs() && item.role.is_none();
            turn.text = text;
            turn.parts = parts;
            // A provider's own fields go back only to that provider, on the
            // turn they came with (not on a demoted one); opaque parts are
            // dropped, with a note, where parts a format cannot carry are.
            let native = matches!(
                (item.role, speaker),
                (Some(Role::User), Speaker::User)
                    | (Some(Role::Assistant), Speaker::Assistant)
                    | (Some(Role::System), Speaker::System)
                    | (Some(Role::Developer), Speaker::Developer)
                    | (None, Speaker::Tool)
            );
            let format = self.format;
            let own = |fields: &Option<ProviderFields>| fields.clone().filter(|f| format == Format::Neutral || (native && f.format == format));
            turn.provider_fields = own(&item.provider_fields);
            for part in turn.parts.iter_mut().filter(|p| p.kind != PartKind::Opaque) {
                part.provider_fields = own(&part.provider_fields);
            }
            if speaker == Speaker::Assistant {
                turn.calls = item.tool_calls.clone();
                turn.calls.iter_mut().for_each(|c| c.provider_fields = own(&c.provider_fields));
                turn.provider_id = item.provider_id.clone();
            }
            if speaker == Speaker::Tool {
                turn.result = item.tool_result.as_ref().map(|r| (r.call_id.clone(), r.outcome));
            }
            slots.push(Slot { turn, item: Some(id) });
        }
        (slots, tools)
    }

    fn instruction_speaker(&self, role: Option<Role>) -> Speaker {
        match (role, self.policy.instructions) {
            (Some(Role::Developer), _) | (None, InstructionRole::Developer) => Speaker::Developer,
            _ => Speaker::System,
        }
    }

    /// Each call followed by its results: the latest settled one, else a
    /// synthetic one or the call held back; results whose call is not here dropped.
    fn pair<'p>(&mut self, slots: Vec<Slot<'p>>) -> Vec<Slot<'p>> {
        let calls: BTreeSet<String> = slots.iter().flat_map(|s| s.turn.calls.iter().map(|c| c.call_id.clone())).collect();
        let mut chosen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, s) in slots.iter().enumerate() {
            if let Some((id, outcome)) = &s.turn.result {
                let settled = matches!(outcome, ToolOutcome::Success | ToolOutcome::Error);
                let replace = match chosen.get(id) {
                    None => true,
                    Some(&j) => settled || !matches!(slots[j].turn.result, Some((_, ToolOutcome::Success | ToolOutcome::Error))),
                };
                if replace {
                    chosen.insert(id.clone(), i);
                }
            }
        }
        let mut results: BTreeMap<usize, Slot> = BTreeMap::new();
        let mut rest = Vec::with_capacity(slots.len());
        for (i, s) in slots.into_iter().enumerate() {
            match &s.turn.result {
                Some((id, _)) if !calls.contains(id) => {
                    self.note("dropped-result", s.item, "its call is not in the rendered context", Some(id.clone()));
                }
                Some((id, _)) if chosen.get(id) != Some(&i) => {
                    self.note("dropped-result", s.item, "a later result of the same call replaces it", Some(id.clone()));
                }
                Some(_) => {
                    results.insert(i, s);
                }
                None => rest.push(s),
            }
        }
        let mut by_call: BTreeMap<String, Slot> = results.into_values().map(|s| (s.turn.result.clone().map(|r| r.0).unwrap_or_default(), s)).collect();
        let mut out = Vec::with_capacity(rest.len() + by_call.len());
        for mut s in rest {
            if s.turn.calls.is_empty() {
                out.push(s);
                continue;
            }
            let mut answers = Vec::new();
            let mut kept = Vec::new();
            for call in std::mem::take(&mut s.turn.calls) {
                let result = by_call.remove(&call.call_id);
                let outcome = result.as_ref().and_then(|r| r.turn.result.as_ref().map(|x| x.1));
                let settled = matches!(outcome, Some(ToolOutcome::Success | ToolOutcome::Error));
                if settled {
                    answers.extend(result);
                } else if self.policy.unsettled_calls == UnsettledCalls::Hold {
                    self.note("held-back", s.item, "the call has no settled result yet", Some(call.call_id.clone()));
                    continue;
                } else {
                    let (text, reason) = match outcome {
                        Some(ToolOutcome::Pending) => (
                            "No result yet: this call is still running. Do not assume it succeeded or failed.",
                            "the call is still running",
                        ),
                        Some(_) => (
                            "Outcome unknown: this call may or may not have taken effect. Check its effect before repeating it.",
                            "the call's outcome is unknown",
                        ),
                        None => ("No result was recorded for this call.", "no result for the call is in the rendered context"),
                    };
                    let mut turn = Turn::new(Speaker::Tool, &call.call_id);
                    turn.text = text.to_string();
                    turn.result = Some((call.call_id.clone(), outcome.unwrap_or(ToolOutcome::Unknown)));
                    let item = result.map(|r| r.item).unwrap_or(s.item);
                    self.note("synthesized-result", item.as_deref(), reason, Some(call.call_id.clone()));
                    answers.push(Slot { turn, item });
                }
                kept.push(call);
            }
            s.turn.calls = kept;
            if empty(&s.turn) {
                self.note("dropped-turn", s.item, "every call of the turn is held back", None);
            } else {
                out.push(s);
            }
            out.extend(answers);
        }
        out
    }

    /// What the target format needs of the turns.
    fn fit<'p>(&mut self, slots: Vec<Slot<'p>>) -> Vec<Slot<'p>> {
        let format = self.format;
        let mut ids: BTreeMap<String, String> = BTreeMap::new();
        let mut hosted_calls: BTreeSet<(String, String)> = BTreeSet::new();
        let hosted_outputs: BTreeSet<(String, String)> = slots
            .iter()
            .flat_map(|s| s.turn.parts.iter().filter_map(hosted_pairing))
            .filter(|(output, _, _)| *output)
            .map(|(_, call, id)| (call.to_string(), id.to_string()))
            .collect();
        let mut out: Vec<Slot> = Vec::with_capacity(slots.len());
        for mut s in slots {
            let speaker = s.turn.speaker;
            if format == Format::OpenaiResponses {
                self.pair_hosted(&mut s, &mut hosted_calls, &hosted_outputs);
            }
            let before = s.turn.parts.len();
            let mut dropped = Vec::new();
            s.turn.parts.retain(|p| {
                let keep = super::carries(format, speaker, p) && !(format == Format::AnthropicMessages && p.kind == PartKind::Text && p.text.as_deref() == Some(""));
                if !keep {
                    dropped.push(p.kind_name());
                }
                keep
            });
            let only_reasoning = s.turn.calls.is_empty() && s.turn.text.is_empty() && s.turn.parts.iter().all(|p| p.kind == PartKind::Reasoning);
            if format == Format::OpenaiResponses && only_reasoning {
                // Responses refuses a reasoning item without the message or call it led to.
                for _ in std::mem::take(&mut s.turn.parts) {
                    let why = "reasoning is sent only with the message or call it led to";
                    self.note("dropped-part", s.item, why, Some("reasoning part in an assistant turn".into()));
                }
            }
            for kind in dropped {
                let reason = match kind {
                    "thinking" | "redacted-thinking" => "signed thinking is only valid for Anthropic",
                    "reasoning" => "encrypted reasoning is only valid for OpenAI Responses",
                    "opaque" => "a block the kernel does not read goes back only to the format it came from",
                    "text" => "Anthropic refuses empty text blocks",
                    _ => "the format carries no such part in this turn",
                };
                self.note("dropped-part", s.item, reason, Some(format!("{kind} part in a {} turn", speaker.name())));
            }
            if s.turn.parts.len() != before && s.turn.parts.iter().all(|p| p.kind != PartKind::Text) && !s.turn.text.is_empty() && !s.turn.parts.is_empty() {
                // Keep the text view as a part, so the turn still says what its item said.
                s.turn.parts.insert(0, Part::text(s.turn.text.clone()));
            }
            if s.turn.parts.is_empty() && before > 0 {
                s.turn.join_text();
            }
            if let Some((_, ToolOutcome::Error)) = s.turn.result {
                if matches!(format, Format::OpenaiChat | Format::OpenaiResponses) {
                    say_error(&mut s.turn);
                    self.note("error-in-text", s.item, "the format has no error flag on a tool result: the text says it", None);
                }
            }
            if matches!(s.turn.result, Some((_, ToolOutcome::Pending | ToolOutcome::Unknown))) {
                s.turn.result = s.turn.result.take().map(|(id, _)| (id, ToolOutcome::Success));
            }
            self.rewrite_ids(&mut s, &mut ids);
            let drop_empty = format == Format::AnthropicMessages || speaker == Speaker::Assistant;
            if drop_empty && empty(&s.turn) && speaker != Speaker::Tool {
                self.note("dropped-turn", s.item, "nothing the format can carry is left of it", None);
                continue;
            }
            out.push(s);
        }
        if format == Format::AnthropicMessages {
            self.lead_with_user(&mut out);
        }
        out
    }

    /// Responses items the kernel keeps unread that pair by `call_id` — a
    /// `computer_call` and its output, … — stay paired: an output whose call
    /// is not in the body (a cut fell between them) goes, as the API refuses
    /// it. So does a custom tool's call kept unread (as sessions imported
    /// before the kernel read them hold it) whose output is not in the body.
    fn pair_hosted(&mut self, s: &mut Slot, calls: &mut BTreeSet<(String, String)>, outputs: &BTreeSet<(String, String)>) {
        // Only a turn written as items of its own: what a message holds inside it pairs nothing.
        let t = &s.turn;
        let standalone = t.speaker == Speaker::Assistant && t.provider_id.is_none() && t.calls.is_empty() && t.text.is_empty()
            && t.parts.iter().all(|p| matches!(p.kind, PartKind::Reasoning | PartKind::Opaque));
        if !standalone {
            return;
        }
        let mut orphans = Vec::new();
        let mut unanswered = Vec::new();
        s.turn.parts.retain(|p| match hosted_pairing(p) {
            Some((false, call, id)) if call == "custom_tool_call" && !outputs.contains(&(call.to_string(), id.to_string())) => {
                unanswered.push(id.to_string());
                false
            }
            Some((false, call, id)) => {
                calls.insert((call.to_string(), id.to_string()));
                true
            }
            Some((true, call, id)) if !calls.contains(&(call.to_string(), id.to_string())) => {
                orphans.push(id.to_string());
                false
            }
            _ => true,
        });
        for id in orphans {
            self.note("dropped-result", s.item, "its call is not in the rendered context", Some(id));
        }
        for id in unanswered {
            self.note("dropped-part", s.item, "a custom tool's call goes only with its output, which is not in the rendered context", Some(id));
        }
    }

    /// Anthropic refuses tool blocks in a request without tools, and has no
    /// custom (free-form) tools: the calls it cannot take (every call, when
    /// the plan keeps no definition it can send) and their results are said
    /// in text.
    fn calls_as_text(&mut self, slots: &mut [Slot], all: bool) {
        let why = if all { "the plan keeps no tool definition Anthropic takes, and it refuses tool" } else { "Anthropic has no custom tools, and refuses" };
        let said: BTreeSet<String> =
            slots.iter().flat_map(|s| &s.turn.calls).filter(|c| all || c.input.is_some()).map(|c| c.call_id.clone()).collect();
        if said.is_empty() {
            return;
        }
        for s in slots.iter_mut().filter(|s| s.turn.calls.iter().any(|c| said.contains(&c.call_id)) || s.turn.result.as_ref().is_some_and(|(id, _)| said.contains(id))) {
            let (text, kept): (Vec<ToolCall>, Vec<ToolCall>) = s.turn.calls.drain(..).partition(|c| said.contains(&c.call_id));
            s.turn.calls = kept;
            if !text.is_empty() {
                let lines: Vec<String> = text.iter().map(|c| match &c.input {
                    // Free text, which may hold anything, goes after the bracket that names it.
                    Some(input) => format!("[called tool `{}` (call {}) with this input:]\n{input}", c.name, c.call_id),
                    None => {
                        let arguments = c.arguments.as_deref().filter(|a| !a.trim().is_empty()).unwrap_or("{}");
                        format!("[called tool `{}` (call {}) with {arguments}]", c.name, c.call_id)
                    }
                }).collect();
                add_text(&mut s.turn, lines.join("\n"), false);
                self.note("call-as-text", s.item, &format!("{why} calls without a definition"), None);
            }
            if let Some((id, outcome)) = s.turn.result.take_if(|(id, _)| said.contains(id)) {
                let error = if outcome == ToolOutcome::Error { ", an error" } else { "" };
                s.turn.speaker = Speaker::User;
                add_text(&mut s.turn, format!("[result of call {id}{error}]"), true);
                self.note("call-as-text", s.item, &format!("{why} results without a definition"), None);
            }
        }
    }

    /// Ids the format would refuse, rewritten the same way in calls and results.
    fn rewrite_ids(&mut self, s: &mut Slot, ids: &mut BTreeMap<String, String>) {
        let ok = |id: &str| match self.format {
            Format::AnthropicMessages => anthropic::id_ok(id),
            Format::OpenaiChat => id.len() <= 40,
            Format::OpenaiResponses => id.len() <= 64,
            Format::Neutral => true,
        };
        let mut rewrite = |id: &mut String, notes: &mut Vec<RenderNote>| {
            if ok(id) {
                return;
            }
            let new = ids.entry(id.clone()).or_insert_with(|| {
                let hex = canonical::digest_bytes(id.as_bytes());
                let prefix = if self.format == Format::AnthropicMessages { "toolu_" } else { "call_" };
                format!("{prefix}{}", &hex["sha256:".len()..][..24])
            });
            notes.push(RenderNote {
                action: "rewrote-id".into(),
                detail: Some(format!("`{id}` → `{new}`")),
                item_id: s.item.map(str::to_string),
                reason: format!("{} refuses this call id", self.format.name()),
                shrunk: None,
            });
            *id = new.clone();
        };
        for call in &mut s.turn.calls {
            rewrite(&mut call.call_id, &mut self.notes);
        }
        if let Some((id, _)) = &mut s.turn.result {
            rewrite(id, &mut self.notes);
        }
    }

    /// Anthropic's first message is a user message.
    fn lead_with_user(&mut self, slots: &mut Vec<Slot>) {
        let first = slots.iter().position(|s| !s.turn.speaker.instructs());
        let Some(first) = first.filter(|&i| slots[i].turn.speaker == Speaker::Assistant) else { return };
        match self.policy.leading_assistant {
            LeadingAssistant::Placeholder => {
                let mut turn = Turn::new(Speaker::User, "placeholder");
                turn.text = PLACEHOLDER.into();
                self.note("inserted-turn", None, "Anthropic needs a user message first", Some(PLACEHOLDER.into()));
                slots.insert(first, Slot { turn, item: None });
            }
            LeadingAssistant::Drop => {
                // Up to the first user turn: assistant turns and their results go, instructions stay.
                let end = slots[first..].iter().position(|s| s.turn.speaker == Speaker::User).map_or(slots.len(), |k| first + k);
                let mut k = first;
                for _ in first..end {
                    if slots[k].turn.speaker.instructs() {
                        k += 1;
                    } else {
                        let s = slots.remove(k);
                        self.note("dropped-turn", s.item, "Anthropic needs a user message first", None);
                    }
                }
            }
        }
    }

    /// The base64 of every stored part the body embeds. A part whose bytes
    /// may not go to the plan's sink, or are gone, is dropped; media the
    /// format reads another way is changed to that way (a plain-text
    /// document as text), and media it cannot read at all is dropped.
    fn load(&mut self, db: &mut Db, turns: &mut [Turn], sink: &str) -> BTreeMap<String, String> {
        let mut blobs = BTreeMap::new();
        for turn in turns {
            let mut dropped = Vec::new();
            let mut k = 0;
            while k < turn.parts.len() {
                let fate = self.media(db, &mut turn.parts[k], sink, &mut blobs);
                match fate {
                    Ok(()) => k += 1,
                    Err(why) => dropped.push((turn.parts.remove(k), why)),
                }
            }
            for (part, why) in dropped {
                self.notes.push(RenderNote {
                    action: "dropped-part".into(),
                    detail: Some(why),
                    item_id: Some(turn.path.clone()),
                    reason: format!("the {} part cannot be sent", part.kind_name()),
                    shrunk: None,
                });
            }
            if !turn.parts.is_empty() {
                if turn.parts.iter().all(|p| p.kind != PartKind::Text) && !turn.text.is_empty() {
                    turn.parts.insert(0, Part::text(turn.text.clone()));
                }
                turn.join_text();
            }
        }
        blobs
    }

    /// One image or document part made fit for the format, its bytes loaded
    /// into `blobs`; `Err` says why it cannot be sent.
    fn media(&mut self, db: &mut Db, part: &mut Part, sink: &str, blobs: &mut BTreeMap<String, String>) -> std::result::Result<(), String> {
        if !matches!(part.kind, PartKind::Image | PartKind::Document) {
            return Ok(());
        }
        let media = part.media_type.clone().unwrap_or_default();
        let title = part.title.as_deref().map(|t| format!(" {t}")).unwrap_or_default();
        let bytes = match &part.content_ref {
            None => None,
            // Loaded once, unless its text is wanted (an Anthropic plain-text document).
            Some(reference) if blobs.contains_key(&reference.object_id) && !(self.format == Format::AnthropicMessages && part.kind == PartKind::Document) => None,
            Some(reference) => {
                let request = GetContentRequest { object_id: reference.object_id.clone(), schema_version: 1, sink: sink.to_string() };
                Some(content::get(db, request).map_err(|e| e.message)?)
            }
        };
        match (self.format, part.kind) {
            (Format::AnthropicMessages, PartKind::Image) if part.content_ref.is_some() && !anthropic::IMAGE_TYPES.contains(&media.as_str()) => {
                return Err(format!("Anthropic reads JPEG, PNG, GIF and WebP images, not `{media}`"));
            }
            (Format::AnthropicMessages, PartKind::Document) if part.content_ref.is_some() && media != "application/pdf" => {
                // Anthropic reads plain text from a `text` source, never as base64.
                let text = bytes
                    .filter(|_| media.starts_with("text/"))
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| format!("Anthropic reads PDF and plain-text documents, not `{media}`"))?;
                part.content_ref = None;
                part.media_type = Some("text/plain".into());
                part.text = Some(text);
                return Ok(());
            }
            (Format::AnthropicMessages, PartKind::Document) if part.text.is_some() => part.media_type = Some("text/plain".into()),
            (Format::OpenaiChat | Format::OpenaiResponses, PartKind::Document) if part.content_ref.is_none() => {
                // OpenAI reads files as base64 (Responses also by URL): a text
                // document is said as text, a linked one by its link.
                let text = match (&part.text, &part.url) {
                    (Some(text), _) => format!("[document{title}]\n{text}"),
                    (None, Some(url)) if self.format == Format::OpenaiChat => format!("[document{title} at {url}]"),
                    _ => return Ok(()),
                };
                *part = Part { cache_control: part.cache_control.take(), ..Part::text(text) };
                return Ok(());
            }
            _ => {}
        }
        if let (Some(reference), Some(bytes)) = (&part.content_ref, bytes) {
            blobs.insert(reference.object_id.clone(), base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        Ok(())
    }
}

/// For a kept-unread Responses item that pairs by `call_id`: whether it is
/// the output (`…_call_output`) or the call (`…_call`), the call's type, and
/// the id; as `validate-request` pairs them.
fn hosted_pairing(part: &Part) -> Option<(bool, &str, &str)> {
    let fields = &part.provider_fields.as_ref().filter(|f| part.kind == PartKind::Opaque && f.format == Format::OpenaiResponses)?.fields;
    let (kind, id) = (fields.get("type")?.as_str()?, fields.get("call_id")?.as_str()?);
    match kind.strip_suffix("_output") {
        Some(call) if call.ends_with("_call") => Some((true, call, id)),
        None if kind.ends_with("_call") => Some((false, kind, id)),
        _ => None,
    }
}

/// Nothing left to send: no text, parts or calls.
fn empty(turn: &Turn) -> bool {
    turn.text.is_empty() && turn.parts.is_empty() && turn.calls.is_empty() && !turn.answered_otherwise()
}

/// `text` before or after what the turn says.
fn add_text(turn: &mut Turn, text: String, before: bool) {
    if turn.parts.is_empty() {
        turn.text = match (turn.text.is_empty(), before) {
            (true, _) => text,
            (false, true) => format!("{text}\n{}", turn.text),
            (false, false) => format!("{}\n{text}", turn.text),
        };
        return;
    }
    let part = Part::text(text);
    if before { turn.parts.insert(0, part) } else { turn.parts.push(part) }
    turn.join_text();
}

/// An error outcome said in the result's text.
fn say_error(turn: &mut Turn) {
    if turn.parts.is_empty() {
        turn.text = format!("Error: {}", turn.text);
        return;
    }
    match turn.parts.iter_mut().find(|p| p.kind == PartKind::Text) {
        Some(part) => part.text = Some(format!("Error: {}", part.text.as_deref().unwrap_or(""))),
        None => turn.parts.insert(0, Part::text("Error:")),
    }
    turn.join_text();
}
