//! Kernel benchmarks: the same workloads natively (the kernel crate linked in)
//! and through the component under wasmtime. Prints a Markdown table;
//! `--write PATH` replaces the section between `<!-- planner:begin -->` and
//! `<!-- planner:end -->` in that file with it.
//!
//! Run with `make bench`.

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
    let mut times: Vec<f64> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    (at(0.50), at(0.95))
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let write = args.iter().position(|a| a == "--write").map(|i| args[i + 1].clone());
    let runtime = ctxkernel_host::Runtime::new().unwrap();
    let mut rows = Vec::new();

    let info = r#"{"schemaVersion":1}"#;
    let n = native(ctxkernel::Command::Info, &[], info, 2000);
    let c = component("info", &[], info, 2000, &runtime);
    rows.push(("trivial call (`info`)".to_string(), 0usize, n, c));

    for (size, window) in [(1_000usize, 32_768u64), (10_000, 32_768), (10_000, 131_072)] {
        let items = session_items(size);
        let iterations = if size > 5_000 { 100 } else { 300 };
        let label = format!("{}k window", window >> 10);
        let request = plan_request(Some(&items), window);
        let n = native(ctxkernel::Command::PlanContext, &[], &request, iterations);
        let c = component("plan-context", &[], &request, iterations, &runtime);
        rows.push((format!("plan {size} inline items, {label}"), request.len(), n, c));

        let setup = append_requests(&items);
        let request = plan_request(None, window);
        let n = native(ctxkernel::Command::PlanContext, &setup, &request, iterations);
        let c = component("plan-context", &setup, &request, iterations, &runtime);
        rows.push((format!("plan a stored {size}-event session, {label}"), request.len(), n, c));
    }

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = String::new();
    out.push_str(&format!("Machine: {cpu}, {cores} cores; release builds, the component under wasmtime (Cranelift).\n\n"));
    out.push_str("| workload | request | native p50 | native p95 | native peak | component p50 | component p95 | component peak | component/native (p95) |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (name, bytes, n, c) in &rows {
        out.push_str(&format!(
            "| {name} | {} | {:.3} ms | {:.3} ms | {} | {:.3} ms | {:.3} ms | {} | {:.2}× |\n",
            if *bytes == 0 { "—".to_string() } else { format!("{:.1} KiB", *bytes as f64 / 1024.0) },
            n.p50_ms, n.p95_ms, mib(n.peak_bytes), c.p50_ms, c.p95_ms, mib(c.peak_bytes), c.p95_ms / n.p95_ms
        ));
    }
    print!("{out}");
    if let Some(path) = write {
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let (begin, end) = ("<!-- planner:begin -->\n", "<!-- planner:end -->");
        let (Some(a), Some(b)) = (doc.find(begin), doc.find(end)) else {
            panic!("{path} has no `{begin}` … `{end}` section to replace");
        };
        let updated = format!("{}{begin}{out}{}", &doc[..a], &doc[b..]);
        std::fs::write(&path, updated).unwrap();
        eprintln!("updated {path}");
    }
}
