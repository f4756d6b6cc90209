//! What every benchmark binary shares: percentiles, the machine line, and
//! writing result tables into marked sections of `docs/BENCHMARKS.md`.

/// (p50, p95) of timings in milliseconds.
pub fn percentiles(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    (at(0.50), at(0.95))
}

pub fn ms(x: f64) -> String {
    format!("{x:.3} ms")
}

pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("Machine: {cpu}, {cores} cores; release builds, the component under wasmtime (Cranelift).\n\n")
}

/// Runs the sections named by `--only` (all by default), prints them, and
/// with `--write PATH` replaces each `<!-- NAME:begin -->` … `<!-- NAME:end -->`
/// section of that file with the output of the same name.
pub fn run_sections(sections: &[(&str, &dyn Fn() -> String)]) {
    let args: Vec<String> = std::env::args().collect();
    let write = args.iter().position(|a| a == "--write").map(|i| args[i + 1].clone());
    let only = args.iter().position(|a| a == "--only").map(|i| args[i + 1].clone());
    let mut doc = write.as_ref().map(|path| std::fs::read_to_string(path).unwrap_or_default());
    for (name, section) in sections {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let out = format!("{}{}", machine(), section());
        println!("## {name}\n\n{out}");
        if let Some(doc) = &mut doc {
            let (begin, end) = (format!("<!-- {name}:begin -->\n"), format!("<!-- {name}:end -->"));
            let (Some(a), Some(b)) = (doc.find(&begin), doc.find(&end)) else {
                panic!("the document has no `{begin}` … `{end}` section");
            };
            *doc = format!("{}{begin}{out}{}", &doc[..a], &doc[b..]);
        }
    }
    if let (Some(path), Some(doc)) = (write, doc) {
        std::fs::write(&path, doc).unwrap();
        eprintln!("updated {path}");
    }
}
