//! `ctxk`: the ctxkernel command line, over an embedded SQLite store.

mod parity;
mod report;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ctxkernel_host::{Kernel, KernelError, SqliteStore};
use serde_json::{json, Value};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ctxk", version, about = "The ctxkernel Context/Memory Kernel, from the command line")]
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

enum Failure {
    Kernel(KernelError),
    Host(anyhow::Error),
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
    let store = SqliteStore::open(&cli.store).with_context(|| format!("cannot open store {}", cli.store.display()))?;
    let mut kernel = Kernel::new(store)?;
    match &cli.command {
        Command::PutContent { file, mime_type, allowed_sinks, sensitivity, now } => {
            let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let request = json!({"schemaVersion": 1, "mimeType": mime_type, "allowedSinks": allowed_sinks,
                "sensitivity": sensitivity, "now": now});
            let mut request = request;
            if mime_type.is_none() {
                request.as_object_mut().expect("an object").remove("mimeType");
            }
            println!("{}", kernel.put_content(&request.to_string(), &bytes)?);
            return Ok(());
        }
        Command::GetContent { object_id, sink, out } => {
            let request = json!({"schemaVersion": 1, "objectId": object_id, "sink": sink});
            let bytes = kernel.get_content(&request.to_string())?;
            match out {
                Some(path) => std::fs::write(path, &bytes).with_context(|| format!("cannot write {}", path.display()))?,
                None => std::io::Write::write_all(&mut std::io::stdout(), &bytes).context("cannot write stdout")?,
            }
            return Ok(());
        }
        _ => {}
    }
    let (command, request) = match &cli.command {
        Command::Info => ("info", json!({"schemaVersion": 1}).to_string()),
        Command::Plan { file, .. } => ("plan-context", read_request(file.as_ref())?),
        Command::Append { file } => ("append-events", read_request(file.as_ref())?),
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
        Command::Call { command, file } => (command.as_str(), read_request(file.as_ref())?),
        Command::PutContent { .. } | Command::GetContent { .. } | Command::Parity { .. } => unreachable!("handled above"),
    };
    let response = kernel.call(command, &request)?;
    if cli.json || matches!(cli.command, Command::Call { .. }) {
        println!("{response}");
        return Ok(());
    }
    let value: Value = serde_json::from_str(&response).context("the kernel answered invalid JSON")?;
    let text = match &cli.command {
        Command::Info => report::info(&value),
        Command::Plan { all, .. } => report::plan(&value, *all),
        Command::Append { .. } => report::appended(&value),
        Command::Events { .. } => report::events(&value),
        Command::Compact { .. } | Command::Continue { .. } | Command::Reconcile { .. } => report::compaction(&value),
        Command::KernelEvents { .. } => report::kernel_events(&value),
        Command::Call { .. } | Command::PutContent { .. } | Command::GetContent { .. } | Command::Parity { .. } => {
            unreachable!("handled above")
        }
    };
    print!("{text}");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Kernel(error)) => {
            if cli.json {
                let body = json!({"error": {"code": error.code.as_str(), "message": error.message, "detail": error.detail}});
                println!("{body}");
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
    }
}
