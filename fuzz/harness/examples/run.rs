//! Runs fuzz inputs through a target's body on the stable toolchain, the way
//! the replay test does, and says what each one did:
//!
//!     cargo run -p ctxkernel-fuzz-harness --example run -- commands fuzz/regressions/calls/*
//!
//! With `CTXK_FUZZ_TRACE=1` every kernel call and its answer is printed too.
//! `--calls commands FILE` prints the calls a `commands` input makes as a
//! call list (`fuzz/regressions/calls/`), up to the one that panicked.

use ctxkernel_fuzz_harness::{calls, commands, known, Target};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: run [--calls] <decode|commands|edges|calls> FILE...";
    let as_calls = args.first().is_some_and(|a| a == "--calls");
    if as_calls {
        args.remove(0);
    }
    let target = args.first().and_then(|t| Target::from_name(t)).expect(usage);
    let mut failed = false;
    for path in &args[1..] {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        if as_calls {
            assert_eq!(target, Target::Commands, "--calls is for `commands` inputs");
            let (calls, panic) = commands::calls_of(&data);
            print!("{}", calls::write(&calls));
            if let Some(panic) = panic {
                eprintln!("{path}: {panic}");
            }
            continue;
        }
        match known::catch(|| target.run(&data)) {
            Ok(()) => println!("{path}: ok"),
            Err(panic) => {
                failed = true;
                let finding = panic.finding().map_or(String::new(), |f| format!(" [known: {}]", f.name));
                println!("{path}: {panic}{finding}");
            }
        }
    }
    std::process::exit(i32::from(failed));
}
