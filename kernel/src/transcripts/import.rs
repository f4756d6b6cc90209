//! `import-messages`: a provider transcript appended to a session, once.
//!
//! A host usually re-sends its whole history each turn (`history: whole`, the
//! default): the session's conversation must then be where the transcript
//! starts, and only what follows it is appended. Each conversational item
//! has an identity (speaker, text, parts by digest, calls, result), compared
//! turn by turn; a transcript that differs from the session's history before
//! its end, or stops short of it (edited or truncated by the host), is a
//! `conflict` naming the first turn that differs, and nothing is appended. A
//! host that sends only its new turns says `history: new`, and every turn is
//! appended, one repeated word for word included. Identities leave out what
//! providers and hosts drop or rewrite between turns: cache hints, message
//! ids, thinking and reasoning.
//!
//! The transcript's leading system text (Anthropic `system`, Responses
//! `instructions`, leading system or developer messages) becomes the
//! session's instructions: `system-policy` items anchored `instructions`,
//! appended only when they differ from the current ones, which they then
//! supersede. Its tool definitions become `tool-schema` items the same way.

use super::turns::{Format, Reading, Speaker, Turn, Violation};
use crate::canonical::{self, Timestamp};
use crate::content::{self, Excerpt};
use crate::contracts::{
    check_id, check_scope, check_sinks, check_version, Anchor, ContextItem, ExpectedHead, Head, ItemKind, Origin, Part, PartKind, Provenance,
    Role, Scope, Sensitivity, SinkPolicy, SourceKind, SourceRef, ToolDefinition, ToolResult, Trust,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::session::{self, Appended, AppendEventsRequest, SessionLog};
use crate::store::Db;
use base64::Engine;
use serde_json::json;
use std::collections::BTreeSet;

fn session_scope() -> Scope {
    Scope::Session
}

fn verified() -> Trust {
    Trust::Verified
}

label! {
/// What an imported transcript holds.
#[derive(Default)]
pub enum History {
    /// The whole conversation so far, as a host re-sends it each turn.
    #[default]
    Whole,
    /// Only the turns that follow what the session holds.
    New,
}
}

contract! {
pub struct ImportRequest {
    /// Sinks every imported item (and stored part) may go to.
    pub allowed_sinks: Vec<String>,
    /// The head the host built on; checked only when something is appended.
    pub expected_head: ExpectedHead,
    pub format: Format,
    /// Whether the transcript is the whole conversation (`whole`, the
    /// default) or only its new turns (`new`).
    #[serde(default)]
    pub history: History,
    pub now: Timestamp,
    pub schema_version: u32,
    /// The imported items' scope; `session` unless said.
    #[serde(default = "session_scope")]
    pub scope: Scope,
    /// The scope's id; for `session`, the session id unless said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sensitivity: Sensitivity,
    pub session_id: String,
    /// The trust tool results get: `verified` unless said (`external` for
    /// tools that read the web, say).
    #[serde(default = "verified")]
    pub tool_trust: Trust,
    /// The transcript in `format`'s own shape: the request fields that hold
    /// the conversation (e.g. `{"system", "messages", "tools"}`), nothing else.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Map<String, serde_json::Value>"))]
    pub transcript: serde_json::Value,
}
}

contract! {
pub struct ImportResponse {
    /// The items appended, in order; empty when the session already had all of it.
    pub appended: Vec<Appended>,
    pub head: Head,
    pub schema_version: u32,
    pub session_id: String,
    /// Turns (and tool definitions) the session already held.
    pub skipped: u64,
}
}

/// Largest transcript a call reads, in turns.
const MAX_TURNS: usize = session::MAX_APPEND_ITEMS;

pub fn import(db: &mut Db, log: &SessionLog, request: ImportRequest) -> Result<ImportResponse> {
    check_version("request", request.schema_version)?;
    check_id("sessionId", &request.session_id)?;
    check_sinks("allowedSinks[]", &request.allowed_sinks)?;
    let scope_id = match (request.scope, &request.scope_id) {
        (Scope::Session, None) => Some(request.session_id.clone()),
        (_, id) => id.clone(),
    };
    check_scope("scope", request.scope, scope_id.as_deref())?;
    let known: BTreeSet<String> =
        log.items.iter().flat_map(|c| c.item.tool_calls.iter().map(|call| call.call_id.clone())).collect();
    let mut reading = super::read(request.format, &request.transcript, false, &known);
    if reading.turns.len() > MAX_TURNS {
        return Err(KernelError::limit(format!("the transcript has {} turns; the ceiling is {MAX_TURNS}", reading.turns.len())));
    }
    let payloads = decode_blobs(&mut reading);
    if !reading.violations.is_empty() {
        return Err(Violation::refuse("the transcript is not valid", &reading.violations));
    }
    let base = Base { request: &request, scope_id, next_seq: log.head.seq + 1 };

    let leading = reading.turns.iter().take_while(|t| t.speaker.instructs()).count();
    let mut items = Vec::new();
    let mut skipped = 0u64;
    let mut blobs = Vec::new();

    let instructions: Vec<ContextItem> = reading.turns[..leading].iter().map(|t| base.instruction(t, request.format)).collect();
    if !instructions.is_empty() && same(&instructions, &current_instructions(log)) {
        skipped += instructions.len() as u64;
    } else {
        for (k, item) in instructions.into_iter().enumerate() {
            blobs.push(&payloads[k]);
            items.push(item);
        }
    }

    for tool in &reading.tools {
        let current = log.items.iter().rev().filter_map(|c| c.item.tool.as_ref()).find(|t| t.name == tool.name);
        if current == Some(tool) {
            skipped += 1;
        } else {
            blobs.push(&NONE);
            items.push(base.tool(tool.clone()));
        }
    }

    let conversation: Vec<ContextItem> = reading.turns[leading..].iter().map(|t| base.item(t)).collect();
    let held_turns = match request.history {
        History::New => 0,
        History::Whole => held(log, &conversation, &reading.turns[leading..])?,
    };
    skipped += held_turns as u64;
    for call in conversation[held_turns..].iter().flat_map(|i| &i.tool_calls) {
        if known.contains(&call.call_id) {
            let path = reading.turns[leading..].iter().find(|t| t.calls.iter().any(|c| c.call_id == call.call_id)).map_or("$", |t| t.path.as_str());
            let violation = Violation {
                message: format!("call id `{}` was already used by an earlier call of this session", call.call_id),
                path: path.to_string(),
                rule: "duplicate-call-id".into(),
            };
            return Err(Violation::refuse("the transcript is not valid", &[violation]));
        }
    }
    for (k, item) in conversation.into_iter().enumerate().skip(held_turns) {
        blobs.push(&payloads[leading + k]);
        items.push(item);
    }

    if items.is_empty() {
        return Ok(ImportResponse { appended: Vec::new(), head: log.head.clone(), schema_version: 1, session_id: request.session_id, skipped });
    }
    for (item, payloads) in items.iter_mut().zip(blobs) {
        store_parts(db, item, payloads, &request.now)?;
    }
    let appended = session::append(
        db,
        AppendEventsRequest {
            expected_head: request.expected_head.clone(),
            items,
            now: request.now.clone(),
            schema_version: 1,
            session_id: request.session_id.clone(),
        },
    )?;
    Ok(ImportResponse { appended: appended.appended, head: appended.head, schema_version: 1, session_id: request.session_id, skipped })
}

static NONE: Vec<(usize, Vec<u8>)> = Vec::new();

/// Decodes every turn's base64 payloads (part index, bytes), reading each
/// image's pixel size; a payload that is not base64 is a violation.
fn decode_blobs(reading: &mut Reading) -> Vec<Vec<(usize, Vec<u8>)>> {
    let mut out = Vec::with_capacity(reading.turns.len());
    let mut broken = Vec::new();
    for turn in &mut reading.turns {
        let mut decoded = Vec::new();
        for (index, data) in std::mem::take(&mut turn.blobs) {
            match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
                Ok(bytes) => {
                    let part = &mut turn.parts[index];
                    if part.kind == PartKind::Image {
                        if let Ok(size) = imagesize::blob_size(&bytes) {
                            part.width = u32::try_from(size.width).ok();
                            part.height = u32::try_from(size.height).ok();
                        }
                    }
                    // Its digest now, so identity sees the bytes; `store_parts` stores them.
                    match content::reference(&bytes, part.media_type.as_deref(), String::new()) {
                        Ok(reference) => part.content_ref = Some(reference),
                        Err(e) => broken.push((turn.path.clone(), "too-large", e.message)),
                    }
                    decoded.push((index, bytes));
                }
                Err(e) => broken.push((turn.path.clone(), "bad-base64", format!("part {index}'s data is not base64: {e}"))),
            }
        }
        out.push(decoded);
    }
    for (path, rule, message) in broken {
        reading.fail(path, rule, message);
    }
    out
}

/// Stores an item's binary parts under its policy, screened for secrets;
/// the item's own policy narrows to what its stored parts allow.
fn store_parts(db: &mut Db, item: &mut ContextItem, payloads: &[(usize, Vec<u8>)], now: &Timestamp) -> Result<()> {
    let mut policy = SinkPolicy::new(item.sensitivity, &item.allowed_sinks);
    for (index, bytes) in payloads {
        let part = &mut item.parts[*index];
        let (screened, _) = content::screened(bytes, policy.clone());
        let summary = content::summarize(bytes, part.media_type.as_deref(), Excerpt::default(), screened.sensitivity);
        let reference = content::reference(bytes, part.media_type.as_deref(), summary)?;
        let (_, stored) = content::store(db, &reference, bytes, &screened, now)?;
        policy = policy.narrow(&stored);
        part.content_ref = Some(reference);
    }
    item.sensitivity = policy.sensitivity;
    item.allowed_sinks = policy.sinks;
    Ok(())
}

/// What every imported item shares.
struct Base<'a> {
    request: &'a ImportRequest,
    scope_id: Option<String>,
    /// The seq the first appended item gets: the instructions' group.
    next_seq: u64,
}

impl Base<'_> {
    fn item(&self, turn: &Turn) -> ContextItem {
        let (kind, role, trust, origin) = match turn.speaker {
            Speaker::User => (ItemKind::Message, Some(Role::User), Trust::User, Origin::User),
            Speaker::Assistant => (ItemKind::Message, Some(Role::Assistant), Trust::Verified, Origin::Model),
            Speaker::Tool => (ItemKind::ToolEvidence, None, self.request.tool_trust, Origin::Tool),
            Speaker::System => (ItemKind::Message, Some(Role::System), Trust::Host, Origin::Import),
            Speaker::Developer => (ItemKind::Message, Some(Role::Developer), Trust::Host, Origin::Import),
        };
        let mut item = self.empty(kind, trust, origin, None);
        item.role = role;
        item.content = turn.parts.is_empty().then(|| turn.text.clone());
        item.parts = turn.parts.clone();
        item.provider_id = turn.provider_id.clone();
        item.tool_calls = turn.calls.clone();
        item.tool_result = turn.result.clone().map(|(call_id, outcome)| ToolResult { call_id, outcome });
        item
    }

    /// A leading system turn: the session's instructions. Read from the
    /// body's own field it has no role; from a message, that message's role.
    fn instruction(&self, turn: &Turn, format: Format) -> ContextItem {
        let mut item = self.empty(ItemKind::SystemPolicy, Trust::Host, Origin::Import, Some(self.next_seq));
        item.anchor = Some(Anchor::Instructions);
        item.role = match (turn.preamble, turn.speaker, format) {
            (true, _, _) => None,
            (false, Speaker::Developer, _) => Some(Role::Developer),
            (false, _, _) => Some(Role::System),
        };
        item.content = turn.parts.is_empty().then(|| turn.text.clone());
        item.parts = turn.parts.clone();
        item
    }

    fn tool(&self, tool: ToolDefinition) -> ContextItem {
        let mut item = self.empty(ItemKind::ToolSchema, Trust::Host, Origin::Import, None);
        item.tool = Some(tool);
        item
    }

    fn empty(&self, kind: ItemKind, trust: Trust, origin: Origin, seq: Option<u64>) -> ContextItem {
        let r = self.request;
        ContextItem {
            allowed_sinks: r.allowed_sinks.clone(),
            anchor: None,
            content: None,
            content_ref: None,
            created_at: r.now.clone(),
            digest: None,
            expires_at: None,
            interaction: None,
            item_id: None,
            kind,
            parts: Vec::new(),
            pinned: false,
            priority: 0,
            provenance: Provenance { actor: None, derived_from: Vec::new(), method: Some(r.format.name().into()), origin },
            provider_id: None,
            role: None,
            schema_version: 1,
            scope: r.scope,
            scope_id: self.scope_id.clone(),
            sensitivity: r.sensitivity,
            source_ref: SourceRef { id: r.session_id.clone(), kind: SourceKind::Import, seq, span: None },
            summary_of: None,
            task: None,
            token_estimate: None,
            tool: None,
            tool_calls: Vec::new(),
            tool_result: None,
            trust,
        }
    }
}

/// The session's current instructions: the items of the latest import's group.
fn current_instructions(log: &SessionLog) -> Vec<ContextItem> {
    let anchored = |c: &&crate::session::Candidate| c.item.anchor == Some(Anchor::Instructions);
    let Some(latest) = log.items.iter().rev().find(anchored) else { return Vec::new() };
    let group = (&latest.item.source_ref.id, latest.item.source_ref.seq);
    log.items.iter().filter(anchored).filter(|c| (&c.item.source_ref.id, c.item.source_ref.seq) == group).map(|c| (*c.item).clone()).collect()
}

fn same(a: &[ContextItem], b: &[ContextItem]) -> bool {
    let ids = |items: &[ContextItem]| items.iter().map(|i| (i.role, instruction_identity(i))).collect::<Vec<_>>();
    a.len() == b.len() && ids(a) == ids(b)
}

fn instruction_identity(item: &ContextItem) -> Option<String> {
    canonical::digest_value(&(item.content.as_deref().map_or_else(|| item.parts_text(), str::to_string), parts_identity(&item.parts))).ok()
}

/// A conversational item's identity; none for anything else.
pub fn identity(item: &ContextItem) -> Option<String> {
    let speaker = match (item.kind, item.role, &item.tool_result) {
        (ItemKind::Message, Some(role), _) => match role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Developer => "developer",
        },
        (ItemKind::ToolEvidence, _, Some(_)) => "tool",
        _ => return None,
    };
    let text = match (&item.content, &item.content_ref) {
        (Some(text), _) => text.clone(),
        (None, Some(reference)) => reference.digest.clone(),
        (None, None) => item.parts_text(),
    };
    // Text alone is the same turn however it is split into parts (`"hi"`,
    // `[{"type": "text", "text": "hi"}]` once a host marks it for caching).
    let parts = parts_identity(&item.parts);
    let parts = if parts.iter().all(|(kind, _, url, digest)| *kind == "text" && url.is_none() && digest.is_none()) { Vec::new() } else { parts };
    let calls: Vec<(&str, &str, Option<&str>)> =
        item.tool_calls.iter().map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_deref())).collect();
    let result = item.tool_result.as_ref().map(|r| (r.call_id.as_str(), r.outcome));
    canonical::digest_value(&(speaker, text, parts, calls, result)).ok()
}

/// The parts a provider sends back unchanged: not thinking or reasoning,
/// which providers and hosts may strip from earlier turns; binary parts by digest.
fn parts_identity(parts: &[Part]) -> Vec<(&'static str, Option<&str>, Option<&str>, Option<&str>)> {
    parts
        .iter()
        .filter(|p| !matches!(p.kind, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning))
        .map(|p| (p.kind_name(), p.text.as_deref(), p.url.as_deref(), p.content_ref.as_ref().map(|r| r.digest.as_str())))
        .collect()
}

/// How many of the transcript's turns the session holds, when the
/// transcript is the whole conversation: all the session imported, which
/// must be where the transcript starts. A turn that differs before the session's
/// end, or a transcript that stops short of it, is a conflict naming the
/// first turn that does not match.
fn held(log: &SessionLog, conversation: &[ContextItem], turns: &[Turn]) -> Result<usize> {
    // What earlier imports appended: the host's own records (an approval
    // asked through `append-events`, a note) are no turn of its transcript.
    let imported = log.items.iter().filter(|c| c.item.source_ref.kind == SourceKind::Import);
    let had: Vec<String> = imported.filter_map(|c| identity(&c.item)).collect();
    for (turn, stored) in had.iter().enumerate() {
        // A turn that differs is named; a history cut short, by its last turn.
        let (why, path) = match conversation.get(turn) {
            None => ("ends after", turns.last().map_or("$", |t| t.path.as_str())),
            Some(item) if identity(item).as_ref() != Some(stored) => ("differs from the session's at", turns[turn].path.as_str()),
            Some(_) => continue,
        };
        return Err(KernelError::new(
            ErrorCode::Conflict,
            format!(
                "the transcript's conversation {why} `{path}` (turn {turn} of {}), while the session holds {} turns: a whole history starts with \
                 what the session holds; a host sending only new turns says `history: new`",
                conversation.len(),
                had.len()
            ),
        )
        .with_detail(json!({"path": path, "turn": turn, "held": had.len()})));
    }
    Ok(had.len())
}
