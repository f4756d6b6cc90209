//! Catching a panic, and the findings already recorded (`docs/FUZZING.md`).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

/// A finding the kernel has not fixed yet: a panic recognised by its message
/// and where it was raised.
#[derive(Debug)]
pub struct Finding {
    /// Its name in `docs/FUZZING.md` and in the regression files' names.
    pub name: &'static str,
    /// Part of the panic message.
    pub message: &'static str,
    /// Part of the file the panic was raised in.
    pub location: &'static str,
    /// It is an arithmetic overflow, which panics only in a build with
    /// overflow checks (a debug build, or `cargo fuzz` with `-a`); a release
    /// build wraps silently instead.
    pub needs_overflow_checks: bool,
}

/// Every finding not fixed yet.
pub const FINDINGS: &[Finding] = &[];

/// A caught panic.
#[derive(Debug, Clone)]
pub struct Panic {
    pub message: String,
    pub location: String,
    /// The kernel's frames, innermost first (when a backtrace could be read).
    pub frames: Vec<String>,
}

impl Panic {
    /// The recorded finding this panic is, if any.
    pub fn finding(&self) -> Option<&'static Finding> {
        FINDINGS.iter().find(|f| self.message.contains(f.message) && self.location.contains(f.location))
    }
}

impl fmt::Display for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "panicked at {}: {}", self.location, self.message)?;
        for frame in &self.frames {
            write!(f, "\n    in {frame}")?;
        }
        Ok(())
    }
}

/// Whether recorded findings that the harness detects itself (rather than
/// a kernel panic) are let pass: while fuzzing, unless strict.
pub fn tolerating() -> bool {
    TOLERATING.with(Cell::get)
}

/// Whether a finding the harness itself detects, by its message, is let
/// pass (see [`tolerating`]).
pub fn tolerated(message: &str) -> bool {
    tolerating() && FINDINGS.iter().any(|f| f.location == "host.rs" && message.contains(f.message))
}

/// Runs `body` letting recorded findings pass (see [`tolerating`]).
pub fn tolerate<T>(body: impl FnOnce() -> T) -> T {
    let before = TOLERATING.with(|t| t.replace(!strict()));
    let out = body();
    TOLERATING.with(|t| t.set(before));
    out
}

/// Set when `CTXK_FUZZ_STRICT` is: recorded findings are crashes too.
pub fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("CTXK_FUZZ_STRICT").is_some_and(|v| !v.is_empty() && v != "0"))
}

thread_local! {
    static TOLERATING: Cell<bool> = const { Cell::new(false) };
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<Panic>> = const { RefCell::new(None) };
}

/// Runs `body`, returning the panic it raised, if any. The panic is not
/// printed: the caller decides whether it is news.
pub fn catch(body: impl FnOnce()) -> Result<(), Panic> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                return previous(info);
            }
            let message = if let Some(s) = info.payload().downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "(a panic without a message)".to_string()
            };
            let location = info.location().map_or_else(String::new, |l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            let mut caught = Panic { message, location, frames: Vec::new() };
            // Reading a backtrace is slow: only for a panic that is news.
            if strict() || caught.finding().is_none() {
                caught.frames = kernel_frames(&std::backtrace::Backtrace::force_capture().to_string());
            }
            CAUGHT.with(|c| *c.borrow_mut() = Some(caught));
        }));
    });
    CATCHING.with(|c| c.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(body));
    CATCHING.with(|c| c.set(false));
    match result {
        Ok(()) => Ok(()),
        Err(_) => Err(CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or(Panic {
            message: "(the panic was not seen by the hook)".into(),
            location: String::new(),
            frames: Vec::new(),
        })),
    }
}

/// The frames of a printed backtrace that are in the kernel's sources.
fn kernel_frames(backtrace: &str) -> Vec<String> {
    let lines: Vec<&str> = backtrace.lines().map(str::trim).collect();
    let mut frames = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if let Some(at) = line.strip_prefix("at ") {
            if at.contains("kernel/src/") {
                let function = lines[..n].last().map_or("", |f| f.split_once(": ").map_or(*f, |(_, name)| name));
                frames.push(format!("{function} ({})", at.rsplit_once("kernel/src/").map_or(at, |(_, file)| file)));
            }
        }
    }
    frames
}
