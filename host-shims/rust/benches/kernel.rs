//! Kernel benchmarks: the same workloads natively (the kernel crate linked in)
//! and through the component under wasmtime. Prints Markdown tables;
//! `--write PATH` replaces each `<!-- NAME:begin -->` … `<!-- NAME:end -->`
//! section of that file with the table of the same name.
//!
//! Run with `make bench`.

mod common;

use common::{ms, percentiles};
use ctxkernel_host::{Kernel as Component, MemoryStore};
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts heap bytes so native runs can report their peak.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const NOW: &str = "2026-06-01T12:00:00Z";

fn words(n: usize, i: usize) -> String {
    const EN: [&str; 12] = ["the", "planner", "keeps", "tool", "results", "with", "their", "calls", "under", "a", "token", "budget"];
    const ZH: [&str; 8] = ["上下文", "预算", "工具", "结果", "保留", "会话", "记忆", "压缩"];
    (0..n)
        .map(|k| if i % 3 == 0 { ZH[(i + k) % ZH.len()] } else { EN[(i * 7 + k) % EN.len()] })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` items shaped like a long agent session: messages in two languages,
/// parallel tool calls with results, task state and a few memories.
fn session_items(n: usize) -> Vec<Value> {
    let mut items = Vec::with_capacity(n);
    let mut i = 0;
    while items.len() < n {
        let seq = items.len() + 1;
        let base = |kind: &str, text: String| {
            json!({"schemaVersion": 1, "itemId": format!("b{seq}"), "kind": kind, "scope": "session",
                "sourceRef": {"kind": "session", "id": "bench", "seq": seq}, "provenance": {"origin": "user"},
                "trust": "user", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 0, "pinned": false,
                "createdAt": NOW, "content": text})
        };
        let mut item = match i % 10 {
            0 | 2 | 5 | 8 => {
                let mut m = base("message", words(15 + (i * 13) % 90, i));
                m["role"] = json!("user");
                m
            }
            3 => {
                let mut m = base("message", format!("calling two tools {}", words(10, i)));
                m["role"] = json!("assistant");
                m["toolCalls"] = json!([{"callId": format!("c{i}a"), "name": "grep"}, {"callId": format!("c{i}b"), "name": "read_file"}]);
                m
            }
            4 | 6 => {
                let call = if i % 10 == 4 { format!("c{}a", i - 1) } else { format!("c{}b", i - 3) };
                let mut r = base("tool-evidence", words(60 + (i * 31) % 300, i));
                r["toolResult"] = json!({"callId": call, "outcome": "success"});
                r
            }
            7 => {
                let mut t = base("task-state", format!("step {i}: {}", words(12, i)));
                t["task"] = json!({"taskId": format!("t{}", i % 7), "status": if i % 20 == 7 { "in-progress" } else { "done" }});
                t
            }
            _ => {
                let mut m = base("message", words(20 + (i * 7) % 120, i));
                m["role"] = json!("assistant");
                m
            }
        };
        if i % 10 == 6 && items.len() + 1 > n {
            item = base("message", words(5, i));
            item["role"] = json!("user");
        }
        items.push(item);
        i += 1;
    }
    items
}

fn plan_request(items: Option<&[Value]>, window: u64) -> String {
    let mut request = json!({"schemaVersion": 1, "now": NOW, "sink": "model:bench",
        "model": {"profile": format!("bench-{}k", window >> 10), "window": window, "reservedOutput": 4096, "safetyMargin": 1024}});
    match items {
        Some(items) => request["items"] = json!(items),
        None => request["sessionId"] = json!("bench"),
    }
    request.to_string()
}

fn append_requests(items: &[Value]) -> Vec<String> {
    items
        .chunks(1000)
        .enumerate()
        .map(|(k, chunk)| {
            json!({"schemaVersion": 1, "sessionId": "bench", "expectedHead": {"seq": k * 1000}, "items": chunk, "now": NOW})
                .to_string()
        })
        .collect()
}

struct Stats {
    p50_ms: f64,
    p95_ms: f64,
    peak_bytes: usize,
}

fn measure(iterations: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..3 {
        f();
    }
    let times: Vec<f64> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    percentiles(times)
}

fn native(command: ctxkernel::Command, setup: &[String], request: &str, iterations: usize) -> Stats {
    let mut store = ctxkernel::store::MemStore::default();
    let mut kernel = ctxkernel::Kernel::default();
    for s in setup {
        kernel.call(&mut store, ctxkernel::Command::AppendEvents, s).unwrap();
    }
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let (p50_ms, p95_ms) = measure(iterations, || {
        kernel.call(&mut store, command, request).unwrap();
    });
    Stats { p50_ms, p95_ms, peak_bytes: PEAK.load(Ordering::Relaxed) - base }
}

fn component(command: &str, setup: &[String], request: &str, iterations: usize, runtime: &ctxkernel_host::Runtime) -> Stats {
    let mut kernel = Component::with_runtime(runtime.clone(), MemoryStore::new());
    for s in setup {
        kernel.call("append-events", s).unwrap();
    }
    let (p50_ms, p95_ms) = measure(iterations, || {
        kernel.call(command, request).unwrap();
    });
    Stats { p50_ms, p95_ms, peak_bytes: kernel.peak_memory_bytes() }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

type Row = (String, usize, Stats, Stats);

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str("| workload | request | native p50 | native p95 | native peak | component p50 | component p95 | component peak | component/native (p95) |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (name, bytes, n, c) in rows {
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {:.2}× |\n",
            if *bytes == 0 { "—".to_string() } else { format!("{:.1} KiB", *bytes as f64 / 1024.0) },
            ms(n.p50_ms), ms(n.p95_ms), mib(n.peak_bytes), ms(c.p50_ms), ms(c.p95_ms), mib(c.peak_bytes), c.p95_ms / n.p95_ms
        ));
    }
    out
}

fn planner_section(runtime: &ctxkernel_host::Runtime) -> String {
    let mut rows = Vec::new();
    let info = r#"{"schemaVersion":1}"#;
    let n = native(ctxkernel::Command::Info, &[], info, 2000);
    let c = component("info", &[], info, 2000, runtime);
    rows.push(("trivial call (`info`)".to_string(), 0usize, n, c));
    for (size, window) in [(1_000usize, 32_768u64), (10_000, 32_768), (10_000, 131_072)] {
        let items = session_items(size);
        let iterations = if size > 5_000 { 100 } else { 300 };
        let label = format!("{}k window", window >> 10);
        let request = plan_request(Some(&items), window);
        let n = native(ctxkernel::Command::PlanContext, &[], &request, iterations);
        let c = component("plan-context", &[], &request, iterations, runtime);
        rows.push((format!("plan {size} inline items, {label}"), request.len(), n, c));

        let setup = append_requests(&items);
        let request = plan_request(None, window);
        let n = native(ctxkernel::Command::PlanContext, &setup, &request, iterations);
        let c = component("plan-context", &setup, &request, iterations, runtime);
        rows.push((format!("plan a stored {size}-event session, {label}"), request.len(), n, c));
    }
    table(&rows)
}

/// Times `run` on a fresh store prepared by `setup` each time (setup untimed).
fn fresh<S>(iterations: usize, mut setup: impl FnMut() -> S, mut run: impl FnMut(&mut S)) -> Stats {
    let mut times = Vec::with_capacity(iterations);
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    for _ in 0..iterations {
        let mut state = setup();
        let start = Instant::now();
        run(&mut state);
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let (p50_ms, p95_ms) = percentiles(times);
    Stats { p50_ms, p95_ms, peak_bytes: PEAK.load(Ordering::Relaxed).saturating_sub(base) }
}

fn compaction_section(runtime: &ctxkernel_host::Runtime) -> String {
    let mut rows = Vec::new();
    for messages in [100usize, 1_000] {
        let setup = append_requests(&session_items(messages));
        let request = json!({"schemaVersion": 1, "sessionId": "bench", "now": NOW, "strategy": "local", "sink": "model:bench",
            "force": true, "model": {"profile": "bench-32k", "window": 32768, "reservedOutput": 4096, "safetyMargin": 1024}})
        .to_string();
        let iterations = if messages > 500 { 30 } else { 100 };
        let n = fresh(
            iterations,
            || {
                let mut store = ctxkernel::store::MemStore::default();
                let mut kernel = ctxkernel::Kernel::default();
                for s in &setup {
                    kernel.call(&mut store, ctxkernel::Command::AppendEvents, s).unwrap();
                }
                (store, kernel)
            },
            |(store, kernel)| {
                let r = kernel.call(store, ctxkernel::Command::CompactContext, &request).unwrap();
                assert!(r.contains("\"committed\""), "{}", &r[..200.min(r.len())]);
            },
        );
        let mut peak = 0;
        let c = fresh(
            iterations,
            || {
                let mut kernel = Component::with_runtime(runtime.clone(), MemoryStore::new());
                for s in &setup {
                    kernel.call("append-events", s).unwrap();
                }
                kernel
            },
            |kernel| {
                kernel.call("compact-context", &request).unwrap();
                peak = peak.max(kernel.peak_memory_bytes());
            },
        );
        rows.push((format!("compact {messages} messages (local strategy)"), request.len(), n, Stats { peak_bytes: peak, ..c }));
    }
    let mut out = table(&rows);

    out.push_str("\n| content | sha256 inside the component (p50) | externalize through the component (p50) | ratio | component peak |\n");
    out.push_str("|---:|---:|---:|---:|---:|\n");
    for size in [1usize << 20, 10 << 20, 100 << 20] {
        let bytes: Vec<u8> = (0..size as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let put = json!({"schemaVersion": 1, "allowedSinks": ["*"], "sensitivity": "internal", "now": NOW}).to_string();
        let iterations = if size > 50 << 20 { 5 } else { 20 };
        let mut peak = 0;
        let externalize = fresh(iterations, || Component::with_runtime(runtime.clone(), MemoryStore::new()), |kernel| {
            kernel.put_content(&put, &bytes).unwrap();
            peak = peak.max(kernel.peak_memory_bytes());
        });
        // The same bytes again: the kernel hashes them once, finds them stored and writes nothing.
        let mut stored = Component::with_runtime(runtime.clone(), MemoryStore::new());
        stored.put_content(&put, &bytes).unwrap();
        let hash = fresh(iterations, || (), |_| {
            stored.put_content(&put, &bytes).unwrap();
        });
        out.push_str(&format!(
            "| {} MiB | {} | {} | {:.2}× | {} |\n",
            size >> 20,
            ms(hash.p50_ms),
            ms(externalize.p50_ms),
            externalize.p50_ms / hash.p50_ms,
            mib(peak)
        ));
    }
    out
}

/// One host's timing of a command: warm-up calls (a fifth of the iterations,
/// at least three), then the timed calls, on a fresh in-memory kernel — the
/// protocol every host's bench script follows.
fn rust_host(command: &str, request: &str, iterations: usize, runtime: &ctxkernel_host::Runtime) -> (f64, f64) {
    let mut kernel = Component::with_runtime(runtime.clone(), MemoryStore::new());
    for _ in 0..(iterations / 5).max(3) {
        kernel.call(command, request).unwrap();
    }
    let times = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            kernel.call(command, request).unwrap();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    percentiles(times)
}

/// Runs another host's bench script (built by `make node python jvm`).
fn other_host(program: &str, args: &[&str], command: &str, file: &std::path::Path, iterations: usize) -> (f64, f64) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = std::process::Command::new(program)
        .args(args)
        .args([command, &file.display().to_string(), &iterations.to_string()])
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(output.status.success(), "{program} failed: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let timing: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{program} printed {line:?}: {e}"));
    (timing["p50Ms"].as_f64().unwrap(), timing["p95Ms"].as_f64().unwrap())
}

fn hosts_section(runtime: &ctxkernel_host::Runtime) -> String {
    let dir = std::env::temp_dir().join(format!("ctxk-bench-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let info = dir.join("info.json");
    std::fs::write(&info, r#"{"schemaVersion":1}"#).unwrap();
    let plan = dir.join("plan-10k.json");
    std::fs::write(&plan, plan_request(Some(&session_items(10_000)), 32_768)).unwrap();
    let classpath = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../jvm/target/classpath.txt")).unwrap_or_default();
    let java_classpath = format!("host-shims/jvm/target/classes:{}", classpath.trim());
    let hosts: [(&str, &str, Vec<&str>, f64); 3] = [
        ("Node (jco)", "node", vec!["host-shims/node/scripts/bench.js"], 2.0),
        ("Python (wasmtime-py)", "build/py/bin/python", vec!["-m", "ctxkernel_sdk.bench"], 2.0),
        ("JVM (Chicory compiler)", "java", vec!["-cp", &java_classpath, "dev.ctxkernel.Bench"], 4.0),
    ];
    let (trivial_iterations, plan_iterations) = (2000, 30);
    let rust_info = rust_host("info", r#"{"schemaVersion":1}"#, trivial_iterations, runtime);
    let rust_plan = rust_host("plan-context", &std::fs::read_to_string(&plan).unwrap(), plan_iterations, runtime);
    let mut out = format!(
        "Every host runs the same component bytes. Trivial call: `info`, {trivial_iterations} calls. Plan: \
         {:.1} MiB `plan-context` request with 10 000 inline items under a 32k window, {plan_iterations} calls. \
         Each after warm-up calls, on a fresh in-memory store.\n\n\
         | host | trivial call p50 | p95 | plan 10k p50 | p95 | plan 10k / Rust (p95) | goal |\n\
         |---|---:|---:|---:|---:|---:|---:|\n\
         | Rust (wasmtime) | {} | {} | {} | {} | 1.00× | — |\n",
        std::fs::metadata(&plan).unwrap().len() as f64 / (1 << 20) as f64,
        ms(rust_info.0), ms(rust_info.1), ms(rust_plan.0), ms(rust_plan.1)
    );
    for (name, program, args, goal) in &hosts {
        let trivial = other_host(program, args, "info", &info, trivial_iterations);
        let planned = other_host(program, args, "plan-context", &plan, plan_iterations);
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {:.2}× | ≤ {goal:.0}× |\n",
            ms(trivial.0), ms(trivial.1), ms(planned.0), ms(planned.1), planned.1 / rust_plan.1
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Seconds from the process start until `info` and then `plan-context` are
/// answered, for one run of a host's cold-start program (its bench script's
/// `cold` mode, which prints each command's name once it is answered).
fn cold_run(program: &str, args: &[&str], cache: &std::path::Path) -> [f64; 2] {
    use std::io::BufRead;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let start = Instant::now();
    let mut child = std::process::Command::new(program)
        .args(args)
        .current_dir(&root)
        .env("CTXKERNEL_CACHE_DIR", cache)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut at = [0.0; 2];
    for (seen, command) in at.iter_mut().zip(["info", "plan-context"]) {
        assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some(command), "{program} did not answer {command}");
        *seen = start.elapsed().as_secs_f64();
    }
    assert!(child.wait().unwrap().success(), "{program} failed");
    at
}

/// The same for `ctxk`, one process per command, each timed to its exit.
fn cold_run_ctxk(info: &std::path::Path, plan: &std::path::Path, store: &std::path::Path, cache: &std::path::Path) -> [f64; 2] {
    let run = |command: &str, request: &std::path::Path| {
        let start = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_ctxk"))
            .args(["--store", &store.display().to_string(), "call", command, &request.display().to_string()])
            .env("CTXKERNEL_CACHE_DIR", cache)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "ctxk call {command} failed");
        start.elapsed().as_secs_f64()
    };
    [run("info", info), run("plan-context", plan)]
}

fn coldstart_section() -> String {
    // A new private directory: the caches in it choose the code the hosts run.
    let temporary = tempfile::tempdir().unwrap();
    let dir = temporary.path().to_path_buf();
    let (info, plan) = (dir.join("info.json"), dir.join("plan-1k.json"));
    std::fs::write(&info, r#"{"schemaVersion":1}"#).unwrap();
    std::fs::write(&plan, plan_request(Some(&session_items(1_000)), 32_768)).unwrap();
    let (info_arg, plan_arg) = (info.display().to_string(), plan.display().to_string());
    let classpath = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../jvm/target/classpath.txt")).unwrap_or_default();
    let java_classpath = format!("host-shims/jvm/target/classes:{}", classpath.trim());
    let hosts: [(&str, &str, Vec<&str>, f64); 3] = [
        ("Node (jco)", "node", vec!["host-shims/node/scripts/bench.js", "cold", &info_arg, &plan_arg], 0.15),
        ("Python (wasmtime-py)", "build/py/bin/python", vec!["-m", "ctxkernel_sdk.bench", "cold", &info_arg, &plan_arg], 0.5),
        ("JVM (Chicory, compiled at build time)", "java", vec!["-cp", &java_classpath, "dev.ctxkernel.Bench", "cold", &info_arg, &plan_arg], 2.0),
    ];
    const RUNS: usize = 7;
    let s = |x: f64| format!("{x:.3} s");
    let mut out = format!(
        "Process start → `info` answered, and → a first `plan-context` of 1 000 inline items ({:.0} KiB) under a 32k \
         window, in a new process each run: the first run with an empty cache of compiled components (Rust and Python; \
         the JVM's classes are compiled when its jar is built, and Node compiles as it goes), then {RUNS} runs (median \
         and slowest). Node, Python and the JVM run their bench script's `cold` mode on an \
         in-memory store; Rust is `ctxk call` on a new SQLite store, one process per command.\n\n\
         | host | first run → info | → info p50 | max | → plan p50 | max | goal (→ plan) |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
        std::fs::metadata(&plan).unwrap().len() as f64 / 1024.0
    );
    let mut row = |name: &str, goal: f64, run: &mut dyn FnMut(usize, &std::path::Path) -> [f64; 2]| {
        let cache = dir.join(format!("cache-{}", name.split(' ').next().unwrap()));
        let first = run(0, &cache);
        let warm: Vec<[f64; 2]> = (1..=RUNS).map(|k| run(k, &cache)).collect();
        let stats = |i: usize| {
            let mut times: Vec<f64> = warm.iter().map(|t| t[i]).collect();
            times.sort_by(f64::total_cmp);
            (times[times.len() / 2], times[times.len() - 1])
        };
        let ((info50, info_max), (plan50, plan_max)) = (stats(0), stats(1));
        out.push_str(&format!("| {name} | {} | {} | {} | {} | {} | ≤ {goal} s |\n", s(first[0]), s(info50), s(info_max), s(plan50), s(plan_max)));
    };
    row("Rust (ctxk)", 0.1, &mut |k, cache| cold_run_ctxk(&info, &plan, &dir.join(format!("rust-{k}.sqlite")), cache));
    for (name, program, args, goal) in &hosts {
        row(name, *goal, &mut |_, cache| cold_run(program, args, cache));
    }
    out
}

/// A transcript of about `n` messages in `format`: user turns, answers,
/// parallel calls and their results, the same conversation in each format.
fn transcript(format: &str, n: usize) -> Value {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    // Exchanges of five Chat messages (four Anthropic ones, six Responses
    // items) while another fits; it ends on an answer, never inside a call's results.
    while out.len() + 5 <= n {
        let ids = [format!("call_{i}a"), format!("call_{i}b")];
        let (ask, results, answer) = (words(15 + (i * 13) % 90, i), [words(60 + (i * 31) % 300, i), words(60 + (i * 17) % 300, i + 1)], words(20 + (i * 7) % 120, i));
        let arguments = |k: usize| format!("{{\"pattern\": \"{}\"}}", words(2, i + k));
        match format {
            "openai-chat" => {
                out.push(json!({"role": "user", "content": ask}));
                let calls: Vec<Value> = (0..2).map(|k| json!({"id": ids[k], "type": "function", "function": {"name": "grep", "arguments": arguments(k)}})).collect();
                out.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
                out.extend((0..2).map(|k| json!({"role": "tool", "tool_call_id": ids[k], "content": results[k]})));
                out.push(json!({"role": "assistant", "content": answer}));
            }
            "openai-responses" => {
                out.push(json!({"role": "user", "content": [{"type": "input_text", "text": ask}]}));
                out.extend((0..2).map(|k| json!({"type": "function_call", "id": format!("fc_{i}{k}"), "call_id": ids[k], "name": "grep", "arguments": arguments(k)})));
                out.extend((0..2).map(|k| json!({"type": "function_call_output", "call_id": ids[k], "output": results[k]})));
                out.push(json!({"type": "message", "role": "assistant", "id": format!("msg_{i}"), "status": "completed",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}]}));
            }
            _ => {
                out.push(json!({"role": "user", "content": ask}));
                let uses: Vec<Value> = (0..2).map(|k| json!({"type": "tool_use", "id": ids[k], "name": "grep", "input": {"pattern": words(2, i + k)}})).collect();
                out.push(json!({"role": "assistant", "content": uses}));
                let answers: Vec<Value> = (0..2).map(|k| json!({"type": "tool_result", "tool_use_id": ids[k], "content": results[k]})).collect();
                out.push(json!({"role": "user", "content": answers}));
                out.push(json!({"role": "assistant", "content": [{"type": "text", "text": answer}]}));
            }
        }
        i += 1;
    }
    match format {
        "openai-chat" => json!({"messages": out, "tools": [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]}),
        "openai-responses" => json!({"input": out, "tools": [{"type": "function", "name": "grep", "parameters": {"type": "object"}}]}),
        _ => json!({"messages": out, "tools": [{"name": "grep", "input_schema": {"type": "object"}}]}),
    }
}

fn import_request(format: &str, transcript: &Value) -> String {
    json!({"schemaVersion": 1, "sessionId": "bench", "expectedHead": {"seq": 0}, "format": format, "now": NOW,
        "sensitivity": "internal", "allowedSinks": ["model:*"], "transcript": transcript})
    .to_string()
}

/// The same request with `expectedHead` at `seq`.
fn at_head(request: &str, seq: u64) -> String {
    request.replacen(r#""expectedHead":{"seq":0}"#, &format!(r#""expectedHead":{{"seq":{seq}}}"#), 1)
}

/// One call on a fresh store and kernel, 20 times, natively and through the
/// component (its peak: the instance's linear memory).
fn on_fresh(runtime: &ctxkernel_host::Runtime, command: ctxkernel::Command, request: &str) -> (Stats, Stats) {
    let n = fresh(20, || (ctxkernel::store::MemStore::default(), ctxkernel::Kernel::default()), |(store, kernel)| {
        kernel.call(store, command, request).unwrap();
    });
    let mut peak = 0;
    let c = fresh(20, || Component::with_runtime(runtime.clone(), MemoryStore::new()), |kernel| {
        kernel.call(command.name(), request).unwrap();
        peak = peak.max(kernel.peak_memory_bytes());
    });
    (n, Stats { peak_bytes: peak, ..c })
}

fn transcripts_section(runtime: &ctxkernel_host::Runtime) -> String {
    let mut rows = Vec::new();
    for format in ["openai-chat", "openai-responses", "anthropic-messages"] {
        let whole = transcript(format, 2_000);
        let import = import_request(format, &whole);
        let (n, c) = on_fresh(runtime, ctxkernel::Command::ImportMessages, &import);
        rows.push((format!("import a 2 000-message `{format}` transcript"), import.len(), n, c));

        // The same items through `append-events`, as a host converting the messages itself would send them.
        let mut store = ctxkernel::store::MemStore::default();
        let mut kernel = ctxkernel::Kernel::default();
        kernel.call(&mut store, ctxkernel::Command::ImportMessages, &import).unwrap();
        let read = json!({"schemaVersion": 1, "sessionId": "bench", "limit": 10_000}).to_string();
        let events: Value = serde_json::from_str(&kernel.call(&mut store, ctxkernel::Command::ReadEvents, &read).unwrap()).unwrap();
        let items: Vec<Value> = events["events"].as_array().unwrap().iter().map(|e| {
            let mut item = e["item"].clone();
            for derived in ["itemId", "digest", "tokenEstimate"] {
                item.as_object_mut().unwrap().remove(derived);
            }
            item
        }).collect();
        let append = json!({"schemaVersion": 1, "sessionId": "bench", "expectedHead": {"seq": 0}, "now": NOW, "items": items}).to_string();
        let (n, c) = on_fresh(runtime, ctxkernel::Command::AppendEvents, &append);
        rows.push((format!("append-events of the same items (`{format}`)"), append.len(), n, c));

        // The same history again, as a host re-sending it each turn: nothing is appended.
        let mut store = ctxkernel::store::MemStore::default();
        let mut native_kernel = ctxkernel::Kernel::default();
        native_kernel.call(&mut store, ctxkernel::Command::ImportMessages, &import).unwrap();
        let (p50_ms, p95_ms) = measure(50, || {
            native_kernel.call(&mut store, ctxkernel::Command::ImportMessages, &import).unwrap();
        });
        let n = Stats { p50_ms, p95_ms, peak_bytes: 0 };
        let mut component_kernel = Component::with_runtime(runtime.clone(), MemoryStore::new());
        component_kernel.call("import-messages", &import).unwrap();
        let (p50_ms, p95_ms) = measure(50, || {
            component_kernel.call("import-messages", &import).unwrap();
        });
        let c = Stats { p50_ms, p95_ms, peak_bytes: component_kernel.peak_memory_bytes() };
        rows.push((format!("re-import the unchanged `{format}` history"), import.len(), n, c));

        // A turn later: the history grown by one exchange, after the host re-sent it once.
        let (shorter, longer) = (transcript(format, 1_995), whole);
        let before = import_request(format, &shorter);
        let first = ctxkernel::Kernel::default().call(&mut ctxkernel::store::MemStore::default(), ctxkernel::Command::ImportMessages, &before).unwrap();
        let seq = serde_json::from_str::<Value>(&first).unwrap()["head"]["seq"].as_u64().unwrap();
        let grown = at_head(&import_request(format, &longer), seq);
        let n = fresh(20, || {
            let (mut store, mut kernel) = (ctxkernel::store::MemStore::default(), ctxkernel::Kernel::default());
            kernel.call(&mut store, ctxkernel::Command::ImportMessages, &before).unwrap();
            kernel.call(&mut store, ctxkernel::Command::ImportMessages, &at_head(&before, seq)).unwrap();
            (store, kernel)
        }, |(store, kernel)| {
            kernel.call(store, ctxkernel::Command::ImportMessages, &grown).unwrap();
        });
        // The peaks include setting the session up: the history imported, then re-sent.
        let mut peak = 0;
        let c = fresh(20, || {
            let mut kernel = Component::with_runtime(runtime.clone(), MemoryStore::new());
            kernel.call("import-messages", &before).unwrap();
            kernel.call("import-messages", &at_head(&before, seq)).unwrap();
            kernel
        }, |kernel| {
            kernel.call("import-messages", &grown).unwrap();
            peak = peak.max(kernel.peak_memory_bytes());
        });
        rows.push((format!("re-import the `{format}` history grown by one exchange"), grown.len(), n, Stats { peak_bytes: peak, ..c }));
    }

    table(&rows)
}

/// How many runs the rendering section makes, and rounds in each.
const RUNS: usize = 5;
const ROUNDS: usize = 40;

/// `render-context` of a stored 10 000-event session beside `plan-context`
/// of the same session, in turns: each round plans and renders every format
/// once, in an order that rotates, so each render is set against a plan
/// timed under the same load on the machine. Each of [`RUNS`] runs gives a
/// ratio of each render's p95 to the plan's; the table has their range, and
/// the timings of all runs together.
fn rendering_section(runtime: &ctxkernel_host::Runtime) -> String {
    let items = session_items(10_000);
    let mut setup = append_requests(&items);
    setup.push(
        json!({"schemaVersion": 1, "sessionId": "bench", "expectedHead": {"seq": items.len()}, "now": NOW, "items": [{"schemaVersion": 1,
            "itemId": "tools", "kind": "tool-schema", "scope": "session", "sourceRef": {"kind": "host", "id": "bench"}, "provenance": {"origin": "host"},
            "trust": "host", "sensitivity": "internal", "allowedSinks": ["model:*"], "priority": 10, "pinned": true, "createdAt": NOW,
            "tool": {"name": "grep", "inputSchema": {"type": "object"}}}]})
        .to_string(),
    );
    let formats = ["openai-chat", "openai-responses", "anthropic-messages"];
    let mut out = String::from("| workload | native p50 | native p95 | component p50 | component p95 | component p95 ÷ the plan's, per run |\n|---|---:|---:|---:|---:|---:|\n");
    for window in [32_768u64, 131_072] {
        let plan = plan_request(None, window);
        let mut workloads = vec![("plan-context", ctxkernel::Command::PlanContext, plan.clone())];
        for format in formats {
            workloads.push(("render-context", ctxkernel::Command::RenderContext, format!(r#"{{"format":"{format}","plan":{plan},"schemaVersion":1}}"#)));
        }
        let (mut store, mut native) = (ctxkernel::store::MemStore::default(), ctxkernel::Kernel::default());
        let mut component = Component::with_runtime(runtime.clone(), MemoryStore::new());
        for s in &setup {
            native.call(&mut store, ctxkernel::Command::AppendEvents, s).unwrap();
            component.call("append-events", s).unwrap();
        }
        // times[side][workload][run]: milliseconds.
        let mut times = vec![vec![vec![Vec::with_capacity(ROUNDS); RUNS]; workloads.len()]; 2];
        for round in 0..RUNS * ROUNDS + 3 {
            for k in 0..workloads.len() {
                let w = (round + k) % workloads.len();
                let (name, command, request) = &workloads[w];
                let start = Instant::now();
                native.call(&mut store, *command, request).unwrap();
                let n = start.elapsed().as_secs_f64() * 1e3;
                let start = Instant::now();
                component.call(name, request).unwrap();
                let c = start.elapsed().as_secs_f64() * 1e3;
                // The first rounds warm both up.
                if round >= 3 {
                    let run = (round - 3) / ROUNDS;
                    times[0][w][run].push(n);
                    times[1][w][run].push(c);
                }
            }
        }
        let p95 = |side: usize, w: usize, run: usize| percentiles(times[side][w][run].clone()).1;
        for (w, _) in workloads.iter().enumerate() {
            let all = |side: usize| percentiles(times[side][w].concat());
            let ((n50, n95), (c50, c95)) = (all(0), all(1));
            let label = match w {
                0 => format!("plan alone, {}k window", window >> 10),
                _ => format!("render `{}`, {}k window", formats[w - 1], window >> 10),
            };
            let ratios = match w {
                0 => "—".to_string(),
                _ => {
                    let r: Vec<f64> = (0..RUNS).map(|run| p95(1, w, run) / p95(1, 0, run)).collect();
                    let (lo, hi) = r.iter().fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
                    format!("{lo:.2}–{hi:.2}× ({})", r.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", "))
                }
            };
            out.push_str(&format!("| {label} | {} | {} | {} | {} | {ratios} |\n", ms(n50), ms(n95), ms(c50), ms(c95)));
        }
    }
    out
}

fn main() {
    let runtime = ctxkernel_host::Runtime::new().unwrap();
    common::run_sections(&[
        ("planner", &|| planner_section(&runtime)),
        ("compaction", &|| compaction_section(&runtime)),
        ("hosts", &|| hosts_section(&runtime)),
        ("coldstart", &coldstart_section),
        ("transcripts", &|| transcripts_section(&runtime)),
        ("rendering", &|| rendering_section(&runtime)),
    ]);
}
