//! Replays every fuzz corpus and regression input on the stable toolchain,
//! through the same code the fuzz targets run (`fuzz/corpus/<target>/*`,
//! `fuzz/regressions/<target>/*`).
//!
//! An input that panics fails the test, except the ones listed in
//! [`KNOWN_FAILING`]: each reproduces a finding the kernel has not fixed yet
//! (`docs/FUZZING.md`), and is reported rather than failed. Once the fix
//! lands the input passes, and the report says to take it off the list.

use ctxkernel_fuzz_harness::known::{self, Panic};
use ctxkernel_fuzz_harness::Target;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Inputs (relative to `fuzz/`) that reproduce a recorded finding, and its name.
const KNOWN_FAILING: &[(&str, &str)] = &[];

fn inputs() -> Vec<(Target, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut inputs = Vec::new();
    for dir in ["corpus", "regressions"] {
        // A folder no target reads would be skipped silently.
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(Target::from_name(&name).is_some(), "fuzz/{dir}/{name}: no target of that name");
        }
        for target in Target::ALL {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target.name())) else { continue };
            let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect();
            files.sort();
            inputs.extend(files.into_iter().map(|p| (target, p)));
        }
    }
    inputs
}

fn relative(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    text.rsplit_once("/../").map_or(text.clone(), |(_, rest)| rest.to_string())
}

#[test]
fn every_corpus_and_regression_input_replays() {
    let inputs = inputs();
    assert!(inputs.iter().any(|(t, _)| *t == Target::Commands), "no corpus found under fuzz/");
    for (file, _) in KNOWN_FAILING {
        assert!(inputs.iter().any(|(_, p)| relative(p) == *file), "KNOWN_FAILING names `{file}`, which is not there");
    }
    let mut failures = Vec::new();
    let mut report = Vec::new();
    let (mut passed, mut known_count) = (0, 0);
    for (target, path) in &inputs {
        let name = relative(path);
        let data = std::fs::read(path).unwrap();
        let expected = KNOWN_FAILING.iter().find(|(file, _)| *file == name).map(|(_, finding)| *finding);
        let finding = expected.map(|f| known::FINDINGS.iter().find(|k| k.name == f).unwrap_or_else(|| panic!("{name}: no finding `{f}`")));
        match (known::catch(|| target.run(&data)), finding) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(f)) if f.needs_overflow_checks && !cfg!(debug_assertions) => {
                known_count += 1;
                report.push(format!("{name}: finding `{}` (an overflow: this build wraps instead of panicking)", f.name));
            }
            (Ok(()), Some(f)) => {
                passed += 1;
                report.push(format!("{name}: passes now; finding `{}` looks fixed: take it off KNOWN_FAILING", f.name));
            }
            (Err(panic), Some(f)) if panic.finding().is_some_and(|p| p.name == f.name) => {
                known_count += 1;
                report.push(format!("{name}: known finding `{}`: {}", f.name, short(&panic)));
            }
            (Err(panic), _) => failures.push(format!("{name} ({}): {panic}", target.name())),
        }
    }
    let mut out = std::io::stderr().lock();
    for line in &report {
        let _ = writeln!(out, "fuzz replay: {line}");
    }
    let _ = writeln!(
        out,
        "fuzz replay: {} inputs: {passed} passed, {known_count} reproduce known findings, {} failed",
        inputs.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} fuzz inputs failed:\n{}", failures.len(), failures.join("\n"));
}

fn short(panic: &Panic) -> String {
    let message = panic.message.lines().next().unwrap_or_default();
    format!("{message} at {}", panic.location)
}
