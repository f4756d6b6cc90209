//! The estimator against `o200k_base` on a mixed English/Chinese/code corpus:
//! it may over-count (that only leaves a little window unused) but must not
//! under-count by more than 10%, file by file and overall.

use ctxkernel::tokens::estimate;

#[test]
fn estimator_never_undercounts_o200k_by_more_than_ten_percent() {
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/token-corpus");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 8, "the corpus is missing files");
    let (mut estimated, mut actual) = (0u64, 0u64);
    let mut report = String::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let e = u64::from(estimate(&text));
        let a = bpe.encode_ordinary(&text).len() as u64;
        report.push_str(&format!("{:32} o200k {a:6} estimate {e:6} ratio {:.3}\n", path.file_name().unwrap().to_string_lossy(), e as f64 / a as f64));
        assert!(e * 10 >= a * 9, "under-counts {}:\n{report}", path.display());
        estimated += e;
        actual += a;
    }
    println!("{report}total: o200k {actual}, estimate {estimated}");
    assert!(estimated * 10 >= actual * 9, "under-counts the corpus:\n{report}");
    // Useful, not just safe: within a quarter of the real count.
    assert!(estimated * 4 <= actual * 5, "over-counts the corpus by more than 25%:\n{report}");
}

#[test]
fn mixed_paragraphs_hold_the_bound_too() {
    // Concatenations across scripts, as messages in a bilingual coding session are.
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/token-corpus");
    let texts: Vec<String> = ["mixed_zh_en.txt", "rust_code.rs.txt", "chinese_prose.txt", "logs_json_paths.txt"]
        .iter()
        .map(|f| std::fs::read_to_string(format!("{dir}/{f}")).unwrap())
        .collect();
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            let text = format!("{a}\n{b}");
            let (e, o) = (u64::from(estimate(&text)), bpe.encode_ordinary(&text).len() as u64);
            assert!(e * 10 >= o * 9, "estimate {e} vs o200k {o}");
        }
    }
}
