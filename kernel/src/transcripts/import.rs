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

use super::held::{self, Divergence};
use super::turns::{Format, Gap, Reading, Speaker, Turn, Violation};
use crate::canonical::Timestamp;
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
use serde_json::value::RawValue;
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
    let text = request.transcript.get();
    let transcript = super::Transcript::split(request.format, text);
    let ends = transcript.as_ref().and_then(super::Transcript::ends);
    let gap = match (&ends, request.history) {
        (Some(ends), History::Whole) => held::gap(log, request.format, request.opaque_parts == OpaqueParts::Refuse, text, ends),
        _ => Gap::default(),
    };
    let skipping = !gap.elements.is_empty();
    let attempt = |gap: Gap| -> Result<(Read, std::result::Result<Planned, Divergence>)> {
        let read = read(&request, transcript.as_ref(), &known, gap)?;
        let planned = plan(log, &request, &request.session_id, scope_id.clone(), &read.reading)?;
        Ok((read, planned))
    };
    let (read, planned) = match attempt(gap) {
        Ok((read, Ok(planned))) => (read, Ok(planned)),
        // A refusal or a fork names what a skipped gap would leave out: read in full.
        _ if skipping => attempt(Gap::default())?,
        other => other?,
    };
    let (planned, forked_from) = match planned {
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
            let Ok(mut planned) = plan(&prefix, &request, target, scope_id, &read.reading)? else { return Err(diverged.conflict()) };
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
            planned.payloads.splice(0..0, copied.iter().map(|_| None));
            planned.items.splice(0..0, copied);
            (planned, Some(ForkPoint { seq: prefix.head.seq, session_id: request.session_id.clone() }))
        }
    };
    // A whole history the session now holds all of: the next one re-sent skips what it shares.
    let remember = |head: &Head| {
        if let (Some(ends), History::Whole, None) = (&ends, request.history, &forked_from) {
            held::remember(log, head, request.format, request.opaque_parts == OpaqueParts::Refuse, text, &read.reading, ends);
        }
    };
    let Planned { mut items, payloads: blobs, skipped, copied } = planned;
    let session_id = match &forked_from {
        Some(_) => request.fork_to.clone().unwrap_or_default(),
        None => request.session_id.clone(),
    };
    if items.is_empty() {
        remember(&log.head);
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
        let payloads = payloads.map_or(&[][..], |k| &read.payloads[k]);
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
    remember(&appended.head);
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

/// A transcript as an import reads it: its turns (a gap's left out) and
/// each turn's base64 payloads, decoded (part index, bytes).
struct Read {
    reading: Reading,
    payloads: Vec<Vec<(usize, Vec<u8>)>>,
}

/// Reads and checks the transcript, skipping `gap`.
fn read(request: &ImportRequest, transcript: Option<&super::Transcript>, known: &BTreeSet<String>, gap: Gap) -> Result<Read> {
    let mut reading = match transcript {
        Some(transcript) => transcript.read(request.format, known, gap)?,
        None => super::read_value(request.format, request.transcript.get(), known)?,
    };
    let turns = reading.turns.len() + reading.gap.turns;
    if turns > MAX_TURNS {
        return Err(KernelError::limit(format!("the transcript has {turns} turns; the ceiling is {MAX_TURNS}")));
    }
    let payloads = decode_blobs(&mut reading);
    if request.opaque_parts == OpaqueParts::Refuse {
        refuse_opaque(&mut reading);
    }
    if !reading.violations.is_empty() {
        return Err(Violation::refuse("the transcript is not valid", &reading.violations));
    }
    Ok(Read { reading, payloads })
}

/// What an import appends to a session whose log is `log`.
struct Planned {
    items: Vec<ContextItem>,
    /// Each item's turn in the reading, for its decoded payloads.
    payloads: Vec<Option<usize>>,
    /// Turns (and tool definitions) the session already held.
    skipped: u64,
    /// How many leading items a fork copied from its source.
    copied: usize,
}

/// The items a transcript adds to `log` (of session `session_id`), or where
/// its whole history differs from the log's.
fn plan(log: &SessionLog, request: &ImportRequest, session_id: &str, scope_id: Option<String>, reading: &Reading) -> Result<std::result::Result<Planned, Divergence>> {
    let base = Base { request, session_id, scope_id, next_seq: log.head.seq + 1 };
    let mut leading = reading.turns.iter().take_while(|t| t.speaker.instructs()).count();
    // Turns the reading skipped: the session's, after its instructions.
    let hidden = reading.gap.turns;
    if hidden > 0 {
        let at = reading.gap_at();
        if leading < at {
            return Err(KernelError::internal("a skipped gap follows a turn that is no instruction"));
        }
        leading = at;
    }
    let mut planned = Planned { items: Vec::new(), payloads: Vec::new(), skipped: 0, copied: 0 };

    let instructions: Vec<ContextItem> = reading.turns[..leading].iter().map(|t| base.instruction(t, request.format)).collect();
    if !instructions.is_empty() && same(&instructions, &current_instructions(log)) {
        planned.skipped += instructions.len() as u64;
    } else {
        for (k, item) in instructions.into_iter().enumerate() {
            planned.payloads.push(Some(k));
            planned.items.push(item);
        }
    }

    for tool in &reading.tools {
        let current = log.items.iter().rev().filter_map(|c| c.item.tool.as_ref()).find(|t| t.key() == tool.key());
        if current == Some(tool) {
            planned.skipped += 1;
        } else {
            planned.payloads.push(None);
            planned.items.push(base.tool(tool.clone()));
        }
    }

    let turns = &reading.turns[leading..];
    let held_turns = match request.history {
        History::New => 0,
        History::Whole => match held::held(log, turns, hidden) {
            Ok(held) => held,
            Err(diverged) => return Ok(Err(diverged)),
        },
    };
    planned.skipped += held_turns as u64;
    // The turns read that the session does not hold yet.
    let new = held_turns.saturating_sub(hidden);
    // Calls and results against this log (a fork's is shorter than the
    // session the transcript was read against): no call id made twice, no
    // result for a call the log and the turns before it never made.
    let mut known: BTreeSet<&str> = log.items.iter().flat_map(|c| c.item.tool_calls.iter().map(|call| call.call_id.as_str())).collect();
    for turn in &turns[new..] {
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
    for (k, turn) in turns.iter().enumerate().skip(new) {
        planned.payloads.push(Some(leading + k));
        planned.items.push(base.item(turn));
    }
    Ok(Ok(planned))
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
    let ids = |items: &[ContextItem]| items.iter().map(|i| (i.role, held::instruction_identity(i))).collect::<Vec<_>>();
    a.len() == b.len() && ids(a) == ids(b)
}

