//! The bodies of the fuzz targets, kept apart from libFuzzer so the stable
//! toolchain can replay their corpus and regressions (`tests/replay.rs`).
//!
//! - [`decode`]: one command, its request text as the fuzzer wrote it.
//! - [`commands`]: a sequence of plausible calls over one store and one
//!   kernel, checked after each call ([`host`]).
//! - [`edges`]: a fixed scenario whose timestamps and numbers the input
//!   replaces, for the edges of time and number parsing.
//!
//! A panic in the kernel is a finding. Findings already recorded in
//! [`known::FINDINGS`] are tolerated while fuzzing, so a run goes on to find
//! new ones; set `CTXK_FUZZ_STRICT=1` to treat them as crashes too.

pub mod calls;
pub mod commands;
pub mod decode;
pub mod edges;
pub mod host;
pub mod known;
mod words;

/// The fuzz targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Decode,
    Commands,
    Edges,
    /// Not fuzzed: the call lists `commands` regressions are kept as.
    Calls,
}

impl Target {
    pub const ALL: [Target; 4] = [Target::Decode, Target::Commands, Target::Edges, Target::Calls];

    pub fn name(self) -> &'static str {
        match self {
            Target::Decode => "decode",
            Target::Commands => "commands",
            Target::Edges => "edges",
            Target::Calls => "calls",
        }
    }

    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Runs one input; panics on a finding.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::Decode => decode::run(data),
            Target::Commands => commands::run(data),
            Target::Edges => edges::run(data),
            Target::Calls => calls::run(data),
        }
    }
}

/// The entry point of the libFuzzer targets: runs one input, tolerating the
/// findings already recorded unless `CTXK_FUZZ_STRICT` is set.
pub fn fuzz(target: Target, data: &[u8]) {
    match known::catch(|| known::tolerate(|| target.run(data))) {
        Ok(()) => {}
        Err(panic) if !known::strict() && panic.finding().is_some() => {}
        Err(panic) => {
            eprintln!("{panic}");
            std::process::abort();
        }
    }
}
