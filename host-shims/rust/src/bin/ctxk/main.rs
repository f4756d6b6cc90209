//! `ctxk`: the ctxkernel command line, over an embedded SQLite store.

mod demo;
mod inspect;
mod parity;
mod report;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ctxkernel_host::{ErrorCode, Kernel, KernelError, SqliteStore};
use serde_json::{json, Value};
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ctxk", version = concat!(env!("CARGO_PKG_VERSION"), " (component sha256 ", env!("CTXK_COMPONENT_SHA256"), ")"), about = "The ctxkernel Context/Memory Kernel, from the command line")]
struct Cli {
    /// The store file (SQLite); created when missing.
    #[arg(long, global = true, env = "CTXK_STORE", default_value = "ctxk.sqlite")]
    store: PathBuf,
    /// Print the kernel's JSON instead of a readable report.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Kernel version, schema versions, store revision and default policy.
    Info,
    /// Plan a model call's context (a `plan-context` request from FILE or stdin).
    Plan {
        /// The request; `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// List every dropped item, not only the counts by reason.
        #[arg(long)]
        all: bool,
    },
    /// Append items to a session log (an `append-events` request).
    Append { file: Option<PathBuf> },
    /// Append a provider transcript to a session: an `import-messages`
    /// request; or, with `--format`, FILE is the transcript itself (the
    /// request fields that hold the conversation, as the provider's SDK wrote
    /// them, passed on byte for byte) appended to `--session` after its head.
    ImportMessages {
        file: Option<PathBuf>,
        /// `openai-chat`, `openai-responses`, `anthropic-messages` or `neutral`.
        #[arg(long, requires = "session")]
        format: Option<String>,
        #[arg(long, requires = "format")]
        session: Option<String>,
        /// `whole` (the history so far, as hosts re-send it) or `new` (only new turns).
        #[arg(long, requires = "format", default_value = "whole")]
        history: String,
        #[arg(long, requires = "format", default_value = "internal")]
        sensitivity: String,
        /// Sinks the imported items may reach (repeatable).
        #[arg(long = "allow", requires = "format", default_value = "model:*")]
        allowed_sinks: Vec<String>,
        /// When the history differs from the session's, start this session
        /// as its branch instead (the session is left as it is).
        #[arg(long, requires = "format")]
        fork_to: Option<String>,
    },
    /// Render a model call's context as a provider request body (a `render-context` request).
    Render {
        file: Option<PathBuf>,
        /// Print only the body, byte for byte as the kernel wrote it.
        #[arg(long)]
        body: bool,
    },
    /// Read a session's events.
    Events {
        #[arg(long)]
        session: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// Compact a session (a `compact-context` request).
    Compact { file: Option<PathBuf> },
    /// Answer an operation waiting for a provider (a `continue-operation` request).
    Continue { file: Option<PathBuf> },
    /// Settle an operation whose outcome is unknown (a `reconcile` request).
    Reconcile { file: Option<PathBuf> },
    /// Store a file's bytes in the content store; prints its ContentRef.
    PutContent {
        file: PathBuf,
        #[arg(long)]
        mime_type: Option<String>,
        /// Sinks allowed to read it back (repeatable).
        #[arg(long = "allow", default_value = "*")]
        allowed_sinks: Vec<String>,
        #[arg(long, default_value = "internal")]
        sensitivity: String,
        #[arg(long, default_value = "1970-01-01T00:00:00Z")]
        now: String,
    },
    /// Write stored content to stdout or a file, verified against its digests.
    GetContent {
        object_id: String,
        #[arg(long, default_value = "cli")]
        sink: String,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Read the kernel's event stream.
    KernelEvents {
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// Recall memories for a query from the given scopes.
    Recall {
        query: String,
        /// A scope to search, as `project:ID`, `user:ID`, `agent:ID`, `session:ID` or `global` (repeatable).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        #[arg(long, default_value_t = 5)]
        k: u32,
        /// Where the memories go; only memories allowed to reach it are returned.
        #[arg(long, default_value = "model:cli")]
        sink: String,
    },
    /// Remember a fact: propose it and activate it under your authority.
    Remember {
        content: String,
        /// The memory's scope, as `project:ID`.
        #[arg(long)]
        scope: String,
        /// A slot: a newer fact with the same key supersedes the older one.
        #[arg(long)]
        key: Option<String>,
        #[arg(long, default_value = "fact")]
        category: String,
        /// Sinks the memory may reach (repeatable).
        #[arg(long = "allow", default_value = "model:*")]
        allowed_sinks: Vec<String>,
        #[command(flatten)]
        authority: AuthorityArgs,
    },
    /// Forget a memory: a fenced deletion with a receipt for every part.
    Forget {
        memory_id: String,
        #[arg(long)]
        scope: String,
        /// A replica that must confirm the deletion (repeatable); pending until `reconcile`.
        #[arg(long = "replica")]
        replicas: Vec<String>,
        #[command(flatten)]
        authority: AuthorityArgs,
    },
    /// Check every memory entry against its record (links to nothing, index
    /// entries of deleted memories, records replayed above their tombstones);
    /// exits 3 when anything is wrong. Changes nothing.
    Verify,
    /// List what the store holds: sessions, memories, tombstones, operations or events.
    Inspect {
        #[arg(value_enum, default_value_t = inspect::What::Sessions)]
        what: inspect::What,
    },
    /// Write every store entry to FILE as JSON lines.
    Export { file: PathBuf },
    /// Load an export into a new store.
    Import { file: PathBuf },
    /// Replay a recorded agent session (examples/demo/agent-session.json) and report.
    Demo {
        file: PathBuf,
        /// Also write every kernel call made, as a parity fixture other hosts can replay.
        #[arg(long)]
        record: Option<PathBuf>,
    },
    /// Run any kernel command with a raw JSON request; prints raw JSON.
    Call { command: String, file: Option<PathBuf> },
    /// Run parity fixtures (tests/parity) into transcripts and store dumps.
    #[command(hide = true)]
    Parity {
        #[arg(long)]
        out: PathBuf,
        /// Read the store files another host wrote here instead of running.
        #[arg(long)]
        read: Option<PathBuf>,
        fixtures: Vec<PathBuf>,
    },
}

/// Who decides: a named manager (`--actor`), or the user of a session whose
/// latest message says so (`--session`).
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct AuthorityArgs {
    #[arg(long)]
    actor: Option<String>,
    #[arg(long)]
    session: Option<String>,
}

impl AuthorityArgs {
    fn to_json(&self) -> Value {
        match (&self.actor, &self.session) {
            (Some(actor), _) => json!({"kind": "management", "actor": actor}),
            (_, session) => json!({"kind": "user-explicit", "sessionId": session}),
        }
    }
}

/// `project:web` → `{"scope": "project", "scopeId": "web"}`; `global` alone.
fn scope(text: &str) -> anyhow::Result<Value> {
    let (name, id) = text.split_once(':').map_or((text, None), |(n, i)| (n, Some(i)));
    if !["global", "project", "user", "agent", "session"].contains(&name) {
        anyhow::bail!("`{text}` is not a scope (project:ID, user:ID, agent:ID, session:ID or global)");
    }
    Ok(match id {
        Some(id) => json!({"scope": name, "scopeId": id}),
        None => json!({"scope": name}),
    })
}

/// The current time for `now`: the host, not the kernel, reads the clock.
fn utc_now() -> anyhow::Result<String> {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0)?;
    Ok(now.format(&time::format_description::well_known::Rfc3339)?)
}

/// Where a transcript file goes: its format, the session, and how it is read.
struct Target<'a> {
    format: &'a str,
    session: &'a str,
    history: &'a str,
    fork_to: Option<&'a str>,
}

/// An `import-messages` request for a transcript file: the session's head
/// read first, the transcript's own bytes passed on unchanged.
fn transcript_request(kernel: &mut Kernel, target: &Target, sensitivity: &str, allowed_sinks: &[String], transcript: String) -> Result<String, Failure> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Request<'a> {
        allowed_sinks: &'a [String],
        expected_head: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        fork_to: Option<&'a str>,
        format: &'a str,
        history: &'a str,
        now: String,
        schema_version: u32,
        sensitivity: &'a str,
        session_id: &'a str,
        transcript: &'a serde_json::value::RawValue,
    }
    let transcript = serde_json::value::RawValue::from_string(transcript).context("the transcript is not JSON")?;
    let session = target.session;
    let expected_head = match kernel.call_json("read-events", &json!({"schemaVersion": 1, "sessionId": session, "limit": 1})) {
        Ok(events) => events["head"].clone(),
        Err(e) if e.code == ErrorCode::NotFound => json!({"seq": 0}),
        Err(e) => return Err(e.into()),
    };
    let (format, history, fork_to) = (target.format, target.history, target.fork_to);
    let request =
        Request { allowed_sinks, expected_head, fork_to, format, history, now: utc_now()?, schema_version: 1, sensitivity, session_id: session, transcript: &transcript };
    Ok(serde_json::to_string(&request).context("the import request")?)
}

fn read_request(file: Option<&PathBuf>) -> anyhow::Result<String> {
    match file {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        }
        _ => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
            Ok(text)
        }
    }
}

#[derive(serde::Deserialize)]
struct Rendered<'a> {
    #[serde(borrow)]
    body: &'a serde_json::value::RawValue,
}

enum Failure {
    Kernel(KernelError),
    Host(anyhow::Error),
    /// Whoever read stdout stopped reading: not an error of ours.
    ClosedPipe,
    /// `ctxk verify` found this many problems (the report is printed).
    Problems(u64),
}

impl From<KernelError> for Failure {
    fn from(e: KernelError) -> Self {
        Failure::Kernel(e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Host(e)
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    if let Command::Parity { out, read, fixtures } = &cli.command {
        return Ok(parity::run(fixtures, out, read.as_deref())?);
    }
    // Only commands that write something may create a store; the others need one.
    let creates = matches!(cli.command, Command::Append { .. } | Command::ImportMessages { .. } | Command::Render { .. } | Command::PutContent { .. } | Command::Remember { .. }
        | Command::Demo { .. } | Command::Import { .. } | Command::Call { .. } | Command::Plan { .. });
    if !creates && !cli.store.exists() {
        return Err(anyhow::anyhow!("no store at {} (`ctxk append`, `ctxk import` or `make demo` create one)", cli.store.display()).into());
    }
    if let Command::Import { file } = &cli.command {
        let count = inspect::import(&cli.store, file)?;
        return out(format!("imported {count} entries into {}\n", cli.store.display()).as_bytes());
    }
    let mut store = if matches!(cli.command, Command::Plan { .. } | Command::Render { .. }) && !cli.store.exists() {
        // A plan of inline items needs no store file.
        SqliteStore::in_memory()?
    } else {
        SqliteStore::open(&cli.store).with_context(|| format!("cannot open store {}", cli.store.display()))?
    };
    match &cli.command {
        Command::Inspect { what } => return out(inspect::list(&mut store, *what, cli.json)?.as_bytes()),
        Command::Export { file } => {
            let count = inspect::export(&mut store, file)?;
            eprintln!("exported {count} entries to {}", file.display());
            return Ok(());
        }
        _ => {}
    }
    let mut kernel = Kernel::new(store)?;
    match &cli.command {
        Command::Demo { file, record } => {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            let session: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
            let outcome = demo::run(&mut kernel, &session, &mut |line| eprintln!("  {line}"))?;
            if let Some(path) = record {
                let fixture = serde_json::to_string(&outcome.fixture).context("the recorded fixture")?;
                std::fs::write(path, fixture).with_context(|| format!("cannot write {}", path.display()))?;
            }
            return if cli.json {
                out(format!("{}\n", json!({"report": outcome.report, "calls": outcome.fixture["steps"].as_array().map_or(0, Vec::len)})).as_bytes())
            } else {
                out(outcome.report.as_bytes())
            };
        }
        Command::Remember { content, scope: text, key, category, allowed_sinks, authority } => {
            let target = scope(text)?;
            let now = utc_now()?;
            let mut candidate = json!({"category": category, "content": content, "scope": target["scope"], "allowedSinks": allowed_sinks,
                "confidence": 0.9, "importance": 0.5, "provenance": {"origin": if authority.session.is_some() { "user" } else { "host" }},
                // The evidence: the user's session, or this command line typed by a manager.
                "evidenceRefs": [match &authority.session {
                    Some(id) => json!({"kind": "session", "id": id}),
                    None => json!({"kind": "host", "id": "ctxk"}),
                }]});
            if let Some(id) = target.get("scopeId") {
                candidate["scopeId"] = id.clone();
            }
            if let Some(key) = key {
                candidate["key"] = json!(key);
            }
            let proposed = kernel.call_json("propose-memory", &json!({"schemaVersion": 1, "now": now, "candidates": [candidate]}))?;
            let mut decide = json!({"schemaVersion": 1, "now": now, "action": "activate", "authority": authority.to_json(),
                "memoryId": proposed["receipts"][0]["memory"]["memoryId"], "scope": target["scope"]});
            if let Some(id) = target.get("scopeId") {
                decide["scopeId"] = id.clone();
            }
            let receipt = kernel.call_json("decide-memory", &decide)?;
            return out(if cli.json { format!("{receipt}\n") } else { report::memory_receipt(&receipt) }.as_bytes());
        }
        Command::PutContent { file, mime_type, allowed_sinks, sensitivity, now } => {
            let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let mut request = json!({"schemaVersion": 1, "allowedSinks": allowed_sinks, "sensitivity": sensitivity, "now": now});
            if let Some(mime) = mime_type {
                request["mimeType"] = json!(mime);
            }
            let response = kernel.put_content(&request.to_string(), &bytes)?;
            if cli.json {
                return out(format!("{response}\n").as_bytes());
            }
            let value: Value = serde_json::from_str(&response).context("the kernel answered invalid JSON")?;
            return out(report::content(&value).as_bytes());
        }
        Command::GetContent { object_id, sink, out: file } => {
            let bytes = kernel.get_content(&json!({"schemaVersion": 1, "objectId": object_id, "sink": sink}).to_string())?;
            return match file {
                Some(path) => std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display())).map_err(Failure::from),
                None => out(&bytes),
            };
        }
        _ => {}
    }
    let (command, request) = match &cli.command {
        Command::Info => ("info", json!({"schemaVersion": 1}).to_string()),
        Command::Verify => ("verify-store", json!({"schemaVersion": 1}).to_string()),
        Command::Plan { file, .. } => ("plan-context", read_request(file.as_ref())?),
        Command::Append { file } => ("append-events", read_request(file.as_ref())?),
        Command::ImportMessages { file, format: None, .. } => ("import-messages", read_request(file.as_ref())?),
        Command::ImportMessages { file, format: Some(format), session, history, sensitivity, allowed_sinks, fork_to } => {
            let transcript = read_request(file.as_ref())?;
            let target = Target { format, session: session.as_deref().unwrap_or_default(), history, fork_to: fork_to.as_deref() };
            ("import-messages", transcript_request(&mut kernel, &target, sensitivity, allowed_sinks, transcript)?)
        }
        Command::Render { file, .. } => ("render-context", read_request(file.as_ref())?),
        Command::Events { session, after, limit } => (
            "read-events",
            json!({"schemaVersion": 1, "sessionId": session, "afterSeq": after, "limit": limit}).to_string(),
        ),
        Command::Compact { file } => ("compact-context", read_request(file.as_ref())?),
        Command::Continue { file } => ("continue-operation", read_request(file.as_ref())?),
        Command::Reconcile { file } => ("reconcile", read_request(file.as_ref())?),
        Command::KernelEvents { after, limit } => {
            ("read-kernel-events", json!({"schemaVersion": 1, "afterSeq": after, "limit": limit}).to_string())
        }
        Command::Recall { query, scopes, k, sink } => {
            let scopes = scopes.iter().map(|s| scope(s)).collect::<anyhow::Result<Vec<_>>>()?;
            let request = json!({"schemaVersion": 1, "now": utc_now()?, "query": query, "scopes": scopes, "k": k, "sink": sink});
            ("recall-memory", request.to_string())
        }
        Command::Forget { memory_id, scope: text, replicas, authority } => {
            let target = scope(text)?;
            let revision = kernel.info()?["store"]["memoryRevision"].as_u64().unwrap_or(0);
            let mut request = json!({"schemaVersion": 1, "now": utc_now()?, "requestId": format!("forget-{memory_id}"),
                "subject": authority.actor.clone().or(authority.session.clone()), "scope": target["scope"],
                "selector": {"memoryIds": [memory_id]}, "authority": authority.to_json(), "fence": revision, "replicas": replicas});
            if let Some(id) = target.get("scopeId") {
                request["scopeId"] = id.clone();
            }
            ("delete-memory", request.to_string())
        }
        Command::Call { command, file } => (command.as_str(), read_request(file.as_ref())?),
        Command::PutContent { .. } | Command::GetContent { .. } | Command::Parity { .. } | Command::Inspect { .. }
        | Command::Export { .. } | Command::Import { .. } | Command::Demo { .. } | Command::Remember { .. } => {
            unreachable!("handled above")
        }
    };
    let response = kernel.call(command, &request)?;
    if let Command::Render { body: true, .. } = cli.command {
        // Cut from the kernel's text, not re-serialized: what the provider gets is what the kernel wrote.
        let rendered: Rendered = serde_json::from_str(&response).context("the kernel answered invalid JSON")?;
        return out(format!("{}\n", rendered.body.get()).as_bytes());
    }
    let value: Value = serde_json::from_str(&response).context("the kernel answered invalid JSON")?;
    if let (Command::Verify, Some(count)) = (&cli.command, value["problemCount"].as_u64().filter(|n| *n > 0)) {
        out(if cli.json { format!("{response}\n") } else { report::verify(&value) }.as_bytes())?;
        return Err(Failure::Problems(count));
    }
    if cli.json || matches!(cli.command, Command::Call { .. }) {
        return out(format!("{response}\n").as_bytes());
    }
    let text = match &cli.command {
        Command::Info => report::info(&value),
        Command::Verify => report::verify(&value),
        Command::Plan { all, .. } => report::plan(&value, *all),
        Command::Append { .. } | Command::ImportMessages { .. } => report::appended(&value),
        Command::Render { .. } => report::render(&value),
        Command::Events { .. } => report::events(&value),
        Command::Reconcile { .. } if value.get("deletionId").is_some() => report::deletion(&value),
        Command::Compact { .. } | Command::Continue { .. } | Command::Reconcile { .. } => report::compaction(&value),
        Command::KernelEvents { .. } => report::kernel_events(&value),
        Command::Recall { .. } => report::recall(&value),
        Command::Forget { .. } => report::deletion(&value),
        Command::Call { .. } | Command::PutContent { .. } | Command::GetContent { .. } | Command::Parity { .. }
        | Command::Inspect { .. } | Command::Export { .. } | Command::Import { .. } | Command::Demo { .. }
        | Command::Remember { .. } => unreachable!("handled above"),
    };
    out(text.as_bytes())
}

/// Writes to stdout; a reader that went away (`ctxk … | head`) ends the command quietly.
fn out(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::ClosedPipe),
        other => other.context("cannot write to stdout").map_err(Failure::from),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::ClosedPipe) => ExitCode::SUCCESS,
        Err(Failure::Kernel(error)) => {
            if cli.json {
                // The kernel's detail verbatim; stdout may be gone by now, and the status says it all.
                let message = serde_json::to_string(&error.message).unwrap_or_default();
                let body = format!("{{\"error\":{{\"code\":\"{}\",\"detail\":{},\"message\":{message}}}}}\n", error.code.as_str(), error.detail_json);
                let _ = out(body.as_bytes());
            }
            eprintln!("ctxk: {}: {}", error.code.as_str(), error.message);
            if !cli.json && error.detail.as_object().is_some_and(|d| !d.is_empty()) {
                eprintln!("{}", serde_json::to_string_pretty(&error.detail).unwrap_or_default());
            }
            ExitCode::from(1)
        }
        Err(Failure::Host(error)) => {
            eprintln!("ctxk: {error:#}");
            ExitCode::from(2)
        }
        Err(Failure::Problems(count)) => {
            eprintln!("ctxk: the store has {count} problem{}", if count == 1 { "" } else { "s" });
            ExitCode::from(3)
        }
    }
}
