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
    ProviderFields, Role, Scope, Sensitivity, SinkPolicy, SourceKind, SourceRef, ToolCall, ToolDefinition, ToolOutcome, ToolResult, Trust,
};
use crate::error::{ErrorCode, KernelError, Result};
use crate::session::{self, Appended, AppendEventsRequest, SessionLog};
use crate::store::Db;
use base64::Engine;
use serde_json::json;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeSet;

fn session_scope() -> Scope {
    Scope::Session
}

fn verified() -> Trust {
    Trust::Verified
}

fn user() -> Trust {
    Trust::User
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

label! {
/// What an import does with a block or item of a type the kernel does not read.
#[derive(Default)]
pub enum OpaqueParts {
    /// Keeps it whole, as an `opaque` part sent back only to its format.
    #[default]
    Keep,
    /// Refuses the transcript, naming where it is.
    Refuse,
}
}

// `contract!`'s derives but `PartialEq`: the transcript is held as its text.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportRequest {
    /// Sinks every imported item (and stored part) may go to.
    pub allowed_sinks: Vec<String>,
    /// The head the host built on; checked only when something is appended.
    pub expected_head: ExpectedHead,
    pub format: Format,
    /// On a whole history that differs from the session's: the new session
    /// to start instead, holding the session's events before the first turn
    /// that differs, then the transcript from there on; the session is left
    /// as it is (an edited message starts a branch). It must have no events.
    /// Unused when nothing differs; the source's compactions are not copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_to: Option<String>,
    /// Whether the transcript is the whole conversation (`whole`, the
    /// default) or only its new turns (`new`).
    #[serde(default)]
    pub history: History,
    pub now: Timestamp,
    /// Blocks of types the kernel does not read: kept (`keep`, the default) or refused.
    #[serde(default)]
    pub opaque_parts: OpaqueParts,
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
    pub transcript: Box<RawValue>,
    /// The trust user turns get: `user` unless said; `external` or
    /// `untrusted` for a conversation someone else had (a forwarded
    /// transcript), whose words then ground no user authority.
    #[serde(default = "user")]
    pub user_trust: Trust,
}

contract! {
/// A part of an appended item the host may want to know of.
pub struct ImportedPart {
    /// A stored part's content digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub item_id: String,
    /// Where the part is in the item's `parts`.
    pub part: u32,
    /// An opaque part's block type (`compaction`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub block_type: Option<String>,
}
}

contract! {
/// Where a fork branched: a session and the last of its events the fork holds.
pub struct ForkPoint {
    pub seq: u64,
    pub session_id: String,
}
}

contract! {
pub struct ImportResponse {
    /// The items appended, in order; empty when the session already had all of it.
    pub appended: Vec<Appended>,
    /// Binary parts of the appended items, stored once by digest in the content store.
    pub blobs: Vec<ImportedPart>,
    /// Set when the import started `forkTo`: the session it branched from,
    /// and the last of that session's events it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkPoint>,
    pub head: Head,
    /// Parts of the appended items the kernel keeps whole without reading them.
    pub opaque: Vec<ImportedPart>,
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
    if request.user_trust < Trust::User {
        return Err(KernelError::invalid("userTrust: a user's turns are at most `user` trust; `external` or `untrusted` lower them")
            .with_detail(json!({"path": "userTrust"})));
    }
    if let Some(target) = &request.fork_to {
        check_id("forkTo", target)?;
        if *target == request.session_id {
            return Err(KernelError::invalid("forkTo: a fork starts a new session, not the one imported into").with_detail(json!({"path": "forkTo"})));
        }
    }
    let known: BTreeSet<String> =
        log.items.iter().flat_map(|c| c.item.tool_calls.iter().map(|call| call.call_id.clone())).collect();
    let mut reading = super::read_text(request.format, request.transcript.get(), &known)?;
    if reading.turns.len() > MAX_TURNS {
        return Err(KernelError::limit(format!("the transcript has {} turns; the ceiling is {MAX_TURNS}", reading.turns.len())));
    }
    let payloads = decode_blobs(&mut reading);
    if request.opaque_parts == OpaqueParts::Refuse {
        refuse_opaque(&mut reading);
    }
    if !reading.violations.is_empty() {
        return Err(Violation::refuse("the transcript is not valid", &reading.violations));
    }
    let (planned, forked_from) = match plan(log, &request, &request.session_id, scope_id.clone(), &reading, &payloads)? {
        Ok(planned) => (planned, None),
        Err(diverged) => {
            let Some(target) = request.fork_to.as_deref() else { return Err(diverged.conflict()) };
            // A branch of the history the host built on: the session's events
            // before the first turn that differs, then the transcript from there.
            session::check_expected(&request.session_id, &log.head, &request.expected_head)?;
            if session::head(db, target)?.1 != 0 {
                return Err(KernelError::new(ErrorCode::Conflict, format!("forkTo: session `{target}` already has events; a fork starts a new session"))
                    .with_detail(json!({"path": "forkTo"})));
            }
            let prefix = log.at(&Head { digest: String::new(), seq: diverged.cut - 1 });
            // New items of a session's own scope belong to the fork.
            let scope_id = if request.scope == Scope::Session && request.scope_id.is_none() { Some(target.to_string()) } else { scope_id };
            let Ok(mut planned) = plan(&prefix, &request, target, scope_id, &reading, &payloads)? else { return Err(diverged.conflict()) };
            if planned.items.is_empty() && prefix.items.is_empty() {
                return Err(KernelError::new(ErrorCode::Conflict, "forkTo: the branch would hold nothing: the transcript shares no turn with the session and adds none")
                    .with_detail(json!({"path": "forkTo"})));
            }
            // The source's events, not its compactions: the branch is planned from its whole history.
            let copied: Vec<ContextItem> = prefix.items.iter().map(|c| (*c.item).clone()).collect();
            if copied.len() + planned.items.len() > session::MAX_APPEND_ITEMS {
                return Err(KernelError::limit(format!(
                    "forkTo: the branch would start with {} events; the ceiling of one call is {}",
                    copied.len() + planned.items.len(),
                    session::MAX_APPEND_ITEMS
                )));
            }
            planned.copied = copied.len();
            planned.payloads.splice(0..0, copied.iter().map(|_| &NONE));
            planned.items.splice(0..0, copied);
            (planned, Some(ForkPoint { seq: prefix.head.seq, session_id: request.session_id.clone() }))
        }
    };
    let Planned { mut items, payloads: blobs, skipped, copied } = planned;
    let session_id = match &forked_from {
        Some(_) => request.fork_to.clone().unwrap_or_default(),
        None => request.session_id.clone(),
    };
    if items.is_empty() {
        return Ok(ImportResponse {
            appended: Vec::new(),
            blobs: Vec::new(),
            forked_from,
            head: log.head.clone(),
            opaque: Vec::new(),
            schema_version: 1,
            session_id,
            skipped,
        });
    }
    for (item, payloads) in items.iter_mut().zip(blobs) {
        store_parts(db, item, payloads, &request.now)?;
    }
    // Parts worth telling the host of, by item; ids are known once appended.
    let mut noted = Vec::new();
    for (i, item) in items.iter().enumerate().skip(copied) {
        for (k, part) in item.parts.iter().enumerate() {
            let block_type = opaque_type(part).map(str::to_string);
            let digest = part.content_ref.as_ref().map(|r| r.digest.clone());
            if digest.is_some() || block_type.is_some() {
                noted.push((i, k as u32, digest, block_type));
            }
        }
    }
    // A fork is a new session, its head checked against the session it branched from.
    let expected_head = if forked_from.is_some() { ExpectedHead { digest: None, seq: 0 } } else { request.expected_head.clone() };
    let appended =
        session::append(db, AppendEventsRequest { expected_head, items, now: request.now.clone(), schema_version: 1, session_id: session_id.clone() })?;
    let (mut blobs, mut opaque) = (Vec::new(), Vec::new());
    for (i, part, digest, block_type) in noted {
        let item_id = appended.appended[i].item_id.clone();
        match block_type {
            Some(_) => opaque.push(ImportedPart { digest: None, item_id, part, block_type }),
            None => blobs.push(ImportedPart { digest, item_id, part, block_type: None }),
        }
    }
    Ok(ImportResponse { appended: appended.appended, blobs, forked_from, head: appended.head, opaque, schema_version: 1, session_id, skipped })
}

/// What an import appends to a session whose log is `log`.
struct Planned<'p> {
    items: Vec<ContextItem>,
    /// Each item's base64 payloads, decoded (part index, bytes).
    payloads: Vec<&'p Vec<(usize, Vec<u8>)>>,
    /// Turns (and tool definitions) the session already held.
    skipped: u64,
    /// How many leading items a fork copied from its source.
    copied: usize,
}

/// The items a transcript adds to `log` (of session `session_id`), or where
/// its whole history differs from the log's.
fn plan<'p>(
    log: &SessionLog,
    request: &ImportRequest,
    session_id: &str,
    scope_id: Option<String>,
    reading: &Reading,
    payloads: &'p [Vec<(usize, Vec<u8>)>],
) -> Result<std::result::Result<Planned<'p>, Divergence>> {
    let base = Base { request, session_id, scope_id, next_seq: log.head.seq + 1 };
    let leading = reading.turns.iter().take_while(|t| t.speaker.instructs()).count();
    let mut planned = Planned { items: Vec::new(), payloads: Vec::new(), skipped: 0, copied: 0 };

    let instructions: Vec<ContextItem> = reading.turns[..leading].iter().map(|t| base.instruction(t, request.format)).collect();
    if !instructions.is_empty() && same(&instructions, &current_instructions(log)) {
        planned.skipped += instructions.len() as u64;
    } else {
        for (k, item) in instructions.into_iter().enumerate() {
            planned.payloads.push(&payloads[k]);
            planned.items.push(item);
        }
    }

    for tool in &reading.tools {
        let current = log.items.iter().rev().filter_map(|c| c.item.tool.as_ref()).find(|t| t.name == tool.name);
        if current == Some(tool) {
            planned.skipped += 1;
        } else {
            planned.payloads.push(&NONE);
            planned.items.push(base.tool(tool.clone()));
        }
    }

    let turns = &reading.turns[leading..];
    let held_turns = match request.history {
        History::New => 0,
        History::Whole => match held(log, turns) {
            Ok(held) => held,
            Err(diverged) => return Ok(Err(diverged)),
        },
    };
    planned.skipped += held_turns as u64;
    // Calls and results against this log (a fork's is shorter than the
    // session the transcript was read against): no call id made twice, no
    // result for a call the log and the turns before it never made.
    let mut known: BTreeSet<&str> = log.items.iter().flat_map(|c| c.item.tool_calls.iter().map(|call| call.call_id.as_str())).collect();
    for turn in &turns[held_turns..] {
        let broken = match (turn.calls.iter().find(|c| known.contains(c.call_id.as_str())), &turn.result) {
            (Some(call), _) => Some(("duplicate-call-id", format!("call id `{}` was already used by an earlier call of this session", call.call_id))),
            (None, Some((id, _))) if !known.contains(id.as_str()) => Some(("result-without-call", format!("the result for `{id}` answers no call made before it"))),
            _ => None,
        };
        if let Some((rule, message)) = broken {
            return Err(Violation::refuse("the transcript is not valid", &[Violation { message, path: turn.path.clone(), rule: rule.into() }]));
        }
        known.extend(turn.calls.iter().map(|c| c.call_id.as_str()));
    }
    // Only what follows the held turns becomes items.
    for (k, turn) in turns.iter().enumerate().skip(held_turns) {
        planned.payloads.push(&payloads[leading + k]);
        planned.items.push(base.item(turn));
    }
    Ok(Ok(planned))
}

/// Where a whole history parts from the session's: the first turn that
/// differs (or the last one, when the history is cut short).
struct Divergence {
    why: &'static str,
    path: String,
    turn: usize,
    turns: usize,
    held: usize,
    /// The seq of the session's first turn the transcript does not hold:
    /// a fork keeps the events before it.
    cut: u64,
}

impl Divergence {
    fn conflict(&self) -> KernelError {
        let (why, path, turn, held) = (self.why, &self.path, self.turn, self.held);
        KernelError::new(
            ErrorCode::Conflict,
            format!(
                "the transcript's conversation {why} `{path}` (turn {turn} of {}), while the session holds {held} turns: a whole history starts with \
                 what the session holds; a host sending only new turns says `history: new`, and one that edited the history may start `forkTo`",
                self.turns
            ),
        )
        .with_detail(json!({"path": path, "turn": turn, "held": held}))
    }
}

/// An opaque part's block type.
fn opaque_type(part: &Part) -> Option<&str> {
    part.provider_fields.as_ref().filter(|_| part.kind == PartKind::Opaque).and_then(|f| f.fields.get("type")).and_then(|t| t.as_str())
}

/// Each opaque part, refused where its turn starts.
fn refuse_opaque(reading: &mut Reading) {
    let mut found = Vec::new();
    for turn in &reading.turns {
        for part in turn.parts.iter().filter(|p| p.kind == PartKind::Opaque) {
            let kind = opaque_type(part).unwrap_or("");
            found.push((turn.path.clone(), format!("a `{kind}` block, which the kernel does not read (opaqueParts: refuse)")));
        }
    }
    for (path, message) in found {
        reading.fail(path, "opaque-part", message);
    }
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
    /// The session the items go to.
    session_id: &'a str,
    scope_id: Option<String>,
    /// The seq the first appended item gets: the instructions' group.
    next_seq: u64,
}

impl Base<'_> {
    fn item(&self, turn: &Turn) -> ContextItem {
        // A hosted tool's output the kernel does not read (`computer_call_output`)
        // is the tool's words: it has the trust tool results get.
        let tool_output = turn.parts.iter().any(|p| p.kind == PartKind::Opaque && opaque_type(p).is_some_and(|t| t.ends_with("_output")));
        let (kind, role, trust, origin) = match turn.speaker {
            Speaker::User => (ItemKind::Message, Some(Role::User), self.request.user_trust, Origin::User),
            Speaker::Assistant if tool_output => (ItemKind::Message, Some(Role::Assistant), self.request.tool_trust, Origin::Tool),
            Speaker::Assistant => (ItemKind::Message, Some(Role::Assistant), Trust::Verified, Origin::Model),
            Speaker::Tool => (ItemKind::ToolEvidence, None, self.request.tool_trust, Origin::Tool),
            Speaker::System => (ItemKind::Message, Some(Role::System), Trust::Host, Origin::Import),
            Speaker::Developer => (ItemKind::Message, Some(Role::Developer), Trust::Host, Origin::Import),
        };
        let mut item = self.empty(kind, trust, origin, None);
        item.role = role;
        item.content = turn.parts.is_empty().then(|| turn.text.clone());
        item.parts = turn.parts.clone();
        item.provider_fields = turn.provider_fields.clone();
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
        item.provider_fields = turn.provider_fields.clone();
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
            provider_fields: None,
            provider_id: None,
            role: None,
            schema_version: 1,
            scope: r.scope,
            scope_id: self.scope_id.clone(),
            sensitivity: r.sensitivity,
            source_ref: SourceRef { id: self.session_id.to_string(), kind: SourceKind::Import, seq, span: None },
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

/// What makes two conversational turns the same, read alike from a stored
/// item and from a transcript's turn (as the item it would become).
struct Identity<'a> {
    speaker: &'static str,
    text: Cow<'a, str>,
    parts: &'a [Part],
    calls: &'a [ToolCall],
    result: Option<(&'a str, ToolOutcome)>,
    fields: Option<&'a ProviderFields>,
}

impl<'a> Identity<'a> {
    /// A stored item's; none for what is no conversational turn.
    fn of_item(item: &'a ContextItem) -> Option<Self> {
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
            (Some(text), _) => Cow::Borrowed(text.as_str()),
            (None, Some(reference)) => Cow::Borrowed(reference.digest.as_str()),
            (None, None) => Cow::Owned(item.parts_text()),
        };
        let result = item.tool_result.as_ref().map(|r| (r.call_id.as_str(), r.outcome));
        Some(Identity { speaker, text, parts: &item.parts, calls: &item.tool_calls, result, fields: item.provider_fields.as_ref() })
    }

    fn of_turn(turn: &'a Turn) -> Self {
        let text = match turn.parts.is_empty() {
            true => Cow::Borrowed(turn.text.as_str()),
            false => Cow::Owned(crate::contracts::text_of(&turn.parts)),
        };
        let result = turn.result.as_ref().map(|(id, outcome)| (id.as_str(), *outcome));
        Identity { speaker: turn.speaker.name(), text, parts: &turn.parts, calls: &turn.calls, result, fields: turn.provider_fields.as_ref() }
    }

    fn digest(&self) -> Option<String> {
        // Text alone is the same turn however it is split into parts (`"hi"`,
        // `[{"type": "text", "text": "hi"}]` once a host marks it for caching).
        let parts = parts_identity(self.parts);
        let parts = if parts.iter().all(|(kind, _, url, digest)| *kind == "text" && url.is_none() && digest.is_none()) { Vec::new() } else { parts };
        let calls: Vec<(&str, &str, Option<String>)> =
            self.calls.iter().map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_deref().map(arguments_identity))).collect();
        // An answer given without content says it in the provider's own fields.
        let answer = self.fields.map(|f| (f.fields.get("refusal"), f.fields.get("audio"))).filter(|(r, a)| r.is_some() || a.is_some());
        canonical::digest_value(&(self.speaker, &self.text, parts, calls, self.result, answer)).ok()
    }
}

/// Arguments as JSON values, so the spacing, member order and number
/// spelling (`1.0`, `1`) a host's JSON writer changes between turns are the
/// same call; text that is not JSON, as it is.
fn arguments_identity(arguments: &str) -> String {
    let value = serde_json::from_str::<serde_json::Value>(arguments).ok().map(integral);
    value.and_then(|v| canonical::to_string(&v).ok()).unwrap_or_else(|| arguments.to_string())
}

/// A value with each integral float (`1.0`, `1e2`, `-0.0`) as its integer.
fn integral(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= crate::wire::MAX_SAFE_INTEGER as f64 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
        Value::Object(members) => Value::Object(members.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

/// The parts a provider sends back unchanged: not thinking or reasoning,
/// which providers and hosts may strip from earlier turns; binary and
/// opaque parts by digest. The provider's own fields are left out: a
/// status, say, changes as a turn completes.
fn parts_identity(parts: &[Part]) -> Vec<(&'static str, Option<&str>, Option<&str>, Option<String>)> {
    let digest = |p: &Part| match (&p.content_ref, &p.provider_fields) {
        (Some(reference), _) => Some(reference.digest.clone()),
        // As a host may send it again: with or without its nulls and cache breakpoint.
        (None, Some(fields)) if p.kind == PartKind::Opaque => canonical::digest_value(&unnulled(&fields.fields)).ok(),
        _ => None,
    };
    parts
        .iter()
        .filter(|p| !matches!(p.kind, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning))
        .map(|p| (p.kind_name(), p.text.as_deref(), p.url.as_deref(), digest(p)))
        .collect()
}

/// A block without its `cache_control` and without null members, at any depth.
fn unnulled(fields: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    fn value(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), value(v))).collect()),
            Value::Array(items) => Value::Array(items.iter().map(value).collect()),
            other => other.clone(),
        }
    }
    let mut block = fields.clone();
    block.remove("cache_control");
    value(&Value::Object(block))
}

/// How many of the transcript's turns the session holds, when the
/// transcript is the whole conversation: all the session imported, which
/// must be where the transcript starts. A turn that differs before the session's
/// end, or a transcript that stops short of it, is a conflict naming the
/// first turn that does not match.
fn held(log: &SessionLog, turns: &[Turn]) -> std::result::Result<usize, Divergence> {
    // What earlier imports appended: the host's own records (an approval
    // asked through `append-events`, a note) are no turn of its transcript.
    // Read once per item: the log keeps them, with their seqs, for the next call.
    let mut memo = log.imported_turns.borrow_mut();
    let (read, had) = &mut *memo;
    let imported = log.items[*read..].iter().filter(|c| c.item.source_ref.kind == SourceKind::Import);
    had.extend(imported.filter_map(|c| Some((c.seq?, Identity::of_item(&c.item)?.digest()?))));
    *read = log.items.len();
    for (turn, (seq, stored)) in had.iter().enumerate() {
        // A turn that differs is named; a history cut short, by its last turn.
        let (why, path) = match turns.get(turn) {
            None => ("ends after", turns.last().map_or("$", |t| t.path.as_str())),
            Some(t) if Identity::of_turn(t).digest().as_ref() != Some(stored) => ("differs from the session's at", t.path.as_str()),
            Some(_) => continue,
        };
        return Err(Divergence { why, path: path.to_string(), turn, turns: turns.len(), held: had.len(), cut: *seq });
    }
    Ok(had.len())
}
