//! Runs fuzz inputs through a target's body on the stable toolchain, the way
//! the replay test does, and says what each one did:
//!
//!     cargo run -p ctxkernel-fuzz-harness --example run -- commands fuzz/regressions/commands/*
//!
//! With `CTXK_FUZZ_TRACE=1` every kernel call and its answer is printed too.

use ctxkernel_fuzz_harness::{known, Target};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: run <decode|commands|edges> FILE...";
    let target = args.next().and_then(|t| Target::from_name(&t)).expect(usage);
    let mut failed = false;
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
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
