//! The command table: the one entry point every host calls.
//!
//! A call decodes its request (rejecting oversized, malformed, mistyped or
//! unknown-version envelopes before anything else), opens the store, runs one
//! module, and encodes the response as canonical JSON. A failed call has
//! written nothing the host keeps: the host rolls its transaction back.

use crate::canonical;
use crate::compaction::{self, CompactRequest, ContinueRequest, ReconcileRequest};
use crate::content;
use crate::contracts::{check_id, check_version, check_version_of, SCHEMA_VERSION};
use crate::error::{ErrorCode, KernelError, Result};
use crate::events;
use crate::memory;
use crate::memory::consolidation::{self, ConsolidateRequest};
use crate::planner::{self, PlanInputs, PlanPolicy, PlanRequest};
use crate::recall;
use crate::session::{self, LogTables, ReadEventsRequest, SessionLog};
use crate::store::{Db, Store};
use crate::transcripts;
use crate::wire;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Largest request envelope accepted, in bytes.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;
/// Sessions whose parsed events one kernel instance keeps in memory.
const CACHED_SESSIONS: usize = 8;

/// Every exported command, named as in the WIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Command {
    Info,
    PlanContext,
    AppendEvents,
    ReadEvents,
    CompactContext,
    ContinueOperation,
    Reconcile,
    PutContent,
    GetContent,
    ReadKernelEvents,
    ProposeMemory,
    ConsolidateMemory,
    DecideMemory,
    DeleteMemory,
    PurgeMemory,
    ReadMemory,
    RecallMemory,
    ResidentSnapshot,
    ImportMessages,
    RenderContext,
    ValidateRequest,
    VerifyStore,
}

impl Command {
    pub const ALL: [Command; 22] = [
        Command::Info,
        Command::PlanContext,
        Command::AppendEvents,
        Command::ReadEvents,
        Command::CompactContext,
        Command::ContinueOperation,
        Command::Reconcile,
        Command::PutContent,
        Command::GetContent,
        Command::ReadKernelEvents,
        Command::ProposeMemory,
        Command::ConsolidateMemory,
        Command::DecideMemory,
        Command::DeleteMemory,
        Command::PurgeMemory,
        Command::ReadMemory,
        Command::RecallMemory,
        Command::ResidentSnapshot,
        Command::ImportMessages,
        Command::RenderContext,
        Command::ValidateRequest,
        Command::VerifyStore,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Command::Info => "info",
            Command::PlanContext => "plan-context",
            Command::AppendEvents => "append-events",
            Command::ReadEvents => "read-events",
            Command::CompactContext => "compact-context",
            Command::ContinueOperation => "continue-operation",
            Command::Reconcile => "reconcile",
            Command::PutContent => "put-content",
            Command::GetContent => "get-content",
            Command::ReadKernelEvents => "read-kernel-events",
            Command::ProposeMemory => "propose-memory",
            Command::ConsolidateMemory => "consolidate-memory",
            Command::DecideMemory => "decide-memory",
            Command::DeleteMemory => "delete-memory",
            Command::PurgeMemory => "purge-memory",
            Command::ReadMemory => "read-memory",
            Command::RecallMemory => "recall-memory",
            Command::ResidentSnapshot => "resident-snapshot",
            Command::ImportMessages => "import-messages",
            Command::RenderContext => "render-context",
            Command::ValidateRequest => "validate-request",
            Command::VerifyStore => "verify-store",
        }
    }

    pub fn from_name(name: &str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| c.name() == name)
    }
}

contract! {
pub struct InfoRequest {
    pub schema_version: u32,
}
}

contract! {
pub struct InfoResponse {
    pub commands: Vec<String>,
    pub default_policy: PlanPolicy,
    pub kernel: KernelIdentity,
    pub limits: Limits,
    pub schema_version: u32,
    pub schema_versions: Vec<u32>,
    pub store: StoreInfo,
}
}

contract! {
pub struct KernelIdentity {
    pub name: String,
    pub version: String,
}
}

contract! {
pub struct StoreInfo {
    pub memory_revision: u64,
    /// Store-wide revision: grows by one with every call that writes.
    pub revision: u64,
}
}

contract! {
pub struct Limits {
    pub max_append_items: u64,
    pub max_event_bytes: u64,
    pub max_read_events: u64,
    pub max_request_bytes: u64,
    pub max_window: u64,
}
}

/// A session's parsed, chain-verified events, valid while its head is unchanged.
struct CachedSession {
    log: SessionLog,
    used: u64,
}

/// One kernel instance: the command table plus caches that are never
/// authority (each is checked against the store at the start of a call).
#[derive(Default)]
pub struct Kernel {
    clock: u64,
    index: recall::Postings,
    seen_revision: Option<u64>,
    sessions: BTreeMap<String, CachedSession>,
}

impl Kernel {
    /// Runs one command whose request and response are JSON text.
    /// `put-content` and `get-content` carry bytes: use [`Kernel::put_content`]
    /// and [`Kernel::get_content`].
    pub fn call(&mut self, store: &mut dyn Store, command: Command, request: &str) -> Result<String> {
        // Each command runs in a function of its own: inlined into this
        // dispatch, they made one function too large for the JVM host to compile.
        self.run(store, request, |kernel, db| match command {
            Command::Info => kernel.info(db, request),
            Command::PlanContext => kernel.plan(db, request),
            Command::AppendEvents => step(db, request, session::append),
            Command::ReadEvents => step(db, request, |db, r: ReadEventsRequest| session::read(db, r)),
            Command::CompactContext => kernel.compact(db, request),
            Command::ContinueOperation => kernel.continue_operation(db, request),
            Command::Reconcile => kernel.reconcile(db, request),
            Command::ReadKernelEvents => step(db, request, events::read),
            Command::ProposeMemory => step(db, request, memory::propose),
            Command::ConsolidateMemory => kernel.consolidate(db, request),
            Command::DecideMemory => step(db, request, memory::decide),
            Command::DeleteMemory => step(db, request, memory::delete),
            Command::PurgeMemory => step(db, request, memory::purge),
            Command::ReadMemory => step(db, request, memory::read),
            Command::RecallMemory => step(db, request, |db, r| recall::recall(db, &mut kernel.index, r)),
            Command::ResidentSnapshot => step(db, request, |db, r| recall::resident(db, r)),
            Command::ImportMessages => kernel.import(db, request),
            Command::RenderContext => kernel.render(db, request),
            Command::ValidateRequest => step(db, request, |_, r| transcripts::validate(r)),
            Command::VerifyStore => step(db, request, memory::verify),
            Command::PutContent | Command::GetContent => Err(KernelError::invalid(format!(
                "`{}` carries bytes; call it through its own entry point",
                command.name()
            ))),
        })
    }

    #[inline(never)]
    fn compact(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: CompactRequest = decode(request)?;
        let log = self.session(db, &request.session_id)?;
        encode(&compaction::compact(db, log, request)?)
    }

    #[inline(never)]
    fn continue_operation(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: ContinueRequest = decode(request)?;
        if request.operation_id.starts_with("ext-") {
            check_version("request", request.schema_version)?;
            let session = consolidation::session_of(db, &request.operation_id)?;
            let log = self.session(db, &session)?;
            return encode(&consolidation::resume(db, log, &request.operation_id, &request.now, request.response)?);
        }
        let log = self.operation_session(db, &request.operation_id)?;
        encode(&compaction::resume(db, log, request)?)
    }

    #[inline(never)]
    fn reconcile(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: ReconcileRequest = decode(request)?;
        if request.operation_id.starts_with("del-") {
            check_version("request", request.schema_version)?;
            return encode(&memory::settle_deletion(db, &request.operation_id, &request.replicas)?);
        }
        let log = self.operation_session(db, &request.operation_id)?;
        encode(&compaction::reconcile(db, log, request)?)
    }

    #[inline(never)]
    fn consolidate(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: ConsolidateRequest = decode(request)?;
        let log = self.session(db, &request.session_id)?;
        encode(&consolidation::consolidate(db, log, request)?)
    }

    /// `put-content`: stores `content` and returns its ContentRef.
    pub fn put_content(&mut self, store: &mut dyn Store, request: &str, content: &[u8]) -> Result<String> {
        self.run(store, request, |_, db| encode(&content::put(db, decode(request)?, content)?))
    }

    /// `get-content`: the stored bytes, verified against their digests.
    pub fn get_content(&mut self, store: &mut dyn Store, request: &str) -> Result<Vec<u8>> {
        self.run(store, request, |_, db| content::get(db, decode(request)?))
    }

    /// Opens the store for one call, runs `body`, and closes the call.
    fn run<T>(&mut self, store: &mut dyn Store, request: &str, body: impl FnOnce(&mut Self, &mut Db) -> Result<T>) -> Result<T> {
        if request.len() > MAX_REQUEST_BYTES {
            return Err(KernelError::limit(format!(
                "the request has {} bytes; the ceiling is {MAX_REQUEST_BYTES}",
                request.len()
            )));
        }
        let mut db = Db::open(store)?;
        self.notice(db.revision());
        let output = body(self, &mut db)?;
        let revision = db.finish()?;
        self.seen_revision = Some(revision);
        Ok(output)
    }

    /// Another host may have written since this instance last looked. Session
    /// caches validate themselves by chain digest; caches without such a check
    /// are dropped here.
    fn notice(&mut self, revision: u64) {
        if self.seen_revision.is_some_and(|seen| seen != revision) {
            self.seen_revision = None;
        }
    }

    #[inline(never)]
    fn info(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: InfoRequest = decode(request)?;
        check_version("request", request.schema_version)?;
        encode(&InfoResponse {
            schema_version: SCHEMA_VERSION,
            kernel: KernelIdentity { name: "ctxkernel".into(), version: env!("CARGO_PKG_VERSION").into() },
            schema_versions: vec![SCHEMA_VERSION],
            commands: Command::ALL.iter().map(|c| c.name().to_string()).collect(),
            store: StoreInfo { revision: db.revision(), memory_revision: db.memory_revision()? },
            default_policy: PlanPolicy::default(),
            limits: Limits {
                max_request_bytes: MAX_REQUEST_BYTES as u64,
                max_event_bytes: session::MAX_EVENT_BYTES,
                max_append_items: session::MAX_APPEND_ITEMS as u64,
                max_read_events: u64::from(session::MAX_READ_EVENTS),
                max_window: planner::MAX_WINDOW,
            },
        })
    }

    #[inline(never)]
    fn plan(&mut self, db: &mut Db, request: &str) -> Result<String> {
        self.plan_of(db, decode(request)?)?.to_json()
    }

    /// Plans a `plan-context` request: the one planner `plan-context` and
    /// `render-context` both answer from.
    fn plan_of(&mut self, db: &mut Db, mut request: PlanRequest) -> Result<planner::ContextPlan> {
        let (policy, input) = planner::admit(&request)?;
        let mut candidates = planner::normalize_inline(std::mem::take(&mut request.items), &policy)?;
        let mut inline_ids = BTreeSet::new();
        for c in &candidates {
            if !inline_ids.insert(c.item.id()) {
                return Err(KernelError::invalid(format!("itemId `{}` appears twice", c.item.id())));
            }
        }
        let no_log = LogTables::default();
        let (session, log) = match &request.session_id {
            Some(id) => {
                for item_id in &inline_ids {
                    if db.get::<Value>(&crate::store::keys::session_item(id, item_id))?.is_some() {
                        return Err(KernelError::invalid(format!("itemId `{item_id}` is also an event of session `{id}`")));
                    }
                }
                let log = self.session(db, id)?;
                candidates.extend(session::project(&log.items, &log.compactions));
                (Some((id.clone(), log.head.clone())), &log.tables)
            }
            None => (None, &no_log),
        };
        let memory_revision = db.memory_revision()?;
        planner::plan(&request, &policy, input, PlanInputs { candidates, log, session, memory_revision })
    }

    #[inline(never)]
    fn render(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: transcripts::RenderRequest = decode(request)?;
        check_version("request", request.schema_version)?;
        let plan = self.plan_of(db, request.plan.clone())?;
        encode(&transcripts::render(db, &plan, &request)?)
    }

    #[inline(never)]
    fn import(&mut self, db: &mut Db, request: &str) -> Result<String> {
        let request: transcripts::ImportRequest = decode(request)?;
        check_id("sessionId", &request.session_id)?;
        let empty;
        let log = if session::head(db, &request.session_id)?.1 == 0 {
            empty = SessionLog::new(&request.session_id)?;
            &empty
        } else {
            self.session(db, &request.session_id)?
        };
        encode(&transcripts::import(db, log, request)?)
    }

    /// A session's log, from the cache when its head still matches,
    /// catching up incrementally when the log grew.
    fn session(&mut self, db: &mut Db, id: &str) -> Result<&SessionLog> {
        check_id("sessionId", id)?;
        let (head, revision) = session::head(db, id)?;
        if revision == 0 {
            return Err(KernelError::new(ErrorCode::NotFound, format!("session `{id}` has no events")));
        }
        self.clock += 1;
        let cached = self.sessions.remove(id).filter(|c| c.log.head.seq <= head.seq);
        let mut log = match cached {
            Some(c) => c.log,
            None => SessionLog::new(id)?,
        };
        log.catch_up(db, id, head)?;
        if self.sessions.len() >= CACHED_SESSIONS {
            let oldest = self.sessions.iter().min_by_key(|(_, c)| c.used).map(|(k, _)| k.clone());
            oldest.map(|k| self.sessions.remove(&k));
        }
        let cached = CachedSession { log, used: self.clock };
        Ok(&self.sessions.entry(id.to_string()).or_insert(cached).log)
    }

    /// The log of the session an operation belongs to.
    fn operation_session(&mut self, db: &mut Db, operation_id: &str) -> Result<&SessionLog> {
        check_id("operationId", operation_id)?;
        let (_, op) = db
            .get::<compaction::Operation>(&crate::store::keys::operation(operation_id))?
            .ok_or_else(|| KernelError::new(ErrorCode::NotFound, format!("no operation `{operation_id}`")))?;
        self.session(db, &op.request.session_id)
    }
}

/// Decodes a request envelope. The version is checked before the shape, so a
/// newer envelope is `unsupported-schema`, not a confusing field error.
// Out of line: inlined into the dispatch, every request type's decoder would
// make one function too large for the JVM host to compile.
#[inline(never)]
pub fn decode<T: DeserializeOwned>(request: &str) -> Result<T> {
    // Escaped (`\ud800`) as a host's JSON writer escapes it, or raw as
    // another host refuses it: one answer, wherever it stands.
    if wire::lone_surrogate(request) {
        return Err(KernelError::invalid("the request is not valid Unicode: it holds a lone surrogate"));
    }
    let request = wire::numbers(request)?;
    // Most requests are well formed: decode without tracking paths, and
    // only decode a failing one again to say where it failed.
    match serde_json::from_str(&request) {
        Ok(value) => Ok(value),
        Err(_) => explain::<T>(&request),
    }
}

/// The typed error for a request that does not decode as a `T`.
#[inline(never)]
fn explain<T: DeserializeOwned>(request: &str) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(request);
    let error = match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Ok(value) => {
            return match deserializer.end() {
                Ok(()) => Ok(value),
                Err(e) => Err(KernelError::invalid(format!("the request is not valid JSON: {e}"))),
            }
        }
        Err(error) if error.inner().to_string().starts_with("recursion limit exceeded") => {
            return Err(KernelError::invalid("the request nests deeper than the decoder's limit of 128 levels"))
        }
        Err(error) if error.inner().to_string().starts_with("number out of range") => {
            return Err(wire::past_f32_at(request, offset(request, error.inner()))
                .unwrap_or_else(|| KernelError::invalid(format!("at `{}`: a number past the range of its field", error.path()))));
        }
        Err(error) if error.inner().is_syntax() || error.inner().is_eof() => {
            // The decoder calls a name field (`format`, `history`, …) given a
            // number, `true` or `null` a syntax error: JSON all the same.
            if serde_json::from_str::<serde::de::IgnoredAny>(request).is_err() {
                return Err(KernelError::invalid(format!("the request is not valid JSON: {}", error.inner())));
            }
            let path = error.path().to_string();
            return Err(KernelError::invalid(format!("at `{path}`: expected one of its names, a string")).with_detail(json!({"path": path})));
        }
        Err(error) => error,
    };
    let message = without_position(error.inner());
    // A duplicated field is wrong whatever its value: its first and last
    // values must not decide between two different answers.
    if !message.starts_with("duplicate field") {
        if let Some(version) = foreign_version(request) {
            check_version_of("the request", version)?;
        }
    }
    let path = error.path().to_string();
    Err(KernelError::invalid(format!("at `{path}`: {message}")).with_detail(json!({"path": path})))
}

/// The byte offset of a decoder's error position (its line and column).
fn offset(request: &str, error: &serde_json::Error) -> usize {
    let line_start = request.split_inclusive('\n').take(error.line().saturating_sub(1)).map(str::len).sum::<usize>();
    line_start + error.column()
}

/// serde's message without " at line L column C": where a value sits in the
/// text depends on how a host serialized it; its path does not.
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).map_or(text.clone(), str::to_string)
}

/// The first `schemaVersion` that is not ours, in the envelope or its items.
/// Everything else is skipped unread, however deep it nests.
fn foreign_version(request: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        #[serde(rename = "schemaVersion")]
        schema_version: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(rename = "schemaVersion")]
        schema_version: Option<u64>,
        #[serde(default)]
        items: Vec<Versioned>,
    }
    let envelope: Envelope = serde_json::from_str(request).ok()?;
    std::iter::once(envelope.schema_version)
        .chain(envelope.items.into_iter().map(|i| i.schema_version))
        .flatten()
        .find(|v| *v != u64::from(SCHEMA_VERSION))
}

/// One command that needs no kernel state: decode, run, encode. Each is
/// its own function (see [`Kernel::call`]).
#[inline(never)]
fn step<Q: DeserializeOwned, A: Serialize>(db: &mut Db, request: &str, command: impl FnOnce(&mut Db, Q) -> Result<A>) -> Result<String> {
    encode(&command(db, decode(request)?)?)
}

#[inline(never)]
fn encode<T: Serialize>(response: &T) -> Result<String> {
    canonical::to_string(response)
}
