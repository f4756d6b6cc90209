#![no_main]

use ctxkernel_fuzz_harness::{fuzz, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzz(Target::Edges, data));
