//! `ctxk` as a user runs it, on the demo session.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ctxk(store: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxk"))
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ctxk-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_demo_session_plans_the_same_everywhere() {
    let dir = temp("demo");
    let digests: Vec<String> = (0..2)
        .map(|i| {
            let store = dir.join(format!("store{i}.sqlite"));
            let append = ctxk(&store, &["append", "examples/demo/session.json"], None);
            assert!(append.status.success(), "{}", stderr(&append));
            let plan = ctxk(&store, &["--json", "plan", "examples/demo/plan-32k.json"], None);
            assert!(plan.status.success(), "{}", stderr(&plan));
            let plan: Value = serde_json::from_str(&stdout(&plan)).unwrap();
            assert_eq!(plan["budget"]["input"], 32768 - 4096 - 1024);
            plan["digest"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(digests[0], digests[1]);

    let readable = ctxk(&dir.join("store0.sqlite"), &["plan", "examples/demo/plan-32k.json"], None);
    let text = stdout(&readable);
    for needle in ["kept, in prompt order", "dropped (", "last-user-request", "pending-interaction", "sink-denied", "demoted"] {
        assert!(text.contains(needle), "the readable plan lacks `{needle}`:\n{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shuffled_copy_of_the_demo_session_plans_to_the_same_digest() {
    let read = |f: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(repo().join("examples/demo").join(f)).unwrap()).unwrap() };
    let session = read("session.json");
    let mut request = read("plan-32k.json");
    request.as_object_mut().unwrap().remove("sessionId");
    let mut items: Vec<Value> = session["items"].as_array().unwrap().clone();
    items.extend(request["items"].as_array().unwrap().iter().cloned());
    let dir = temp("shuffle");
    let mut digests = Vec::new();
    for round in 0..3u64 {
        let mut shuffled = items.clone();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(round + 1);
        for i in (1..shuffled.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            shuffled.swap(i, (seed % (i as u64 + 1)) as usize);
        }
        request["items"] = Value::Array(shuffled);
        let out = ctxk(&dir.join("unused.sqlite"), &["--json", "plan", "-"], Some(&request.to_string()));
        assert!(out.status.success(), "{}", stderr(&out));
        let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
        digests.push(plan["digest"].as_str().unwrap().to_string());
    }
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failures_exit_non_zero_with_the_kernel_code() {
    let dir = temp("errors");
    let store = dir.join("store.sqlite");
    let bad = ctxk(&store, &["plan", "-"], Some("{\"schemaVersion\": 1}"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("invalid-request"), "{}", stderr(&bad));

    let json = ctxk(&store, &["--json", "plan", "-"], Some("{\"schemaVersion\": 3}"));
    assert_eq!(json.status.code(), Some(1));
    let body: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(body["error"]["code"], "unsupported-schema");

    assert!(ctxk(&store, &["append", "examples/demo/session.json"], None).status.success());
    let again = ctxk(&store, &["append", "examples/demo/session.json"], None);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("stale"), "{}", stderr(&again));

    let corrupt = dir.join("corrupt.sqlite");
    std::fs::write(&corrupt, b"this is not a database, it only has a database's name").unwrap();
    let out = ctxk(&corrupt, &["info"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open store"), "{}", stderr(&out));

    let missing = ctxk(&store, &["plan", "does/not/exist.json"], None);
    assert_eq!(missing.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn info_and_events_read_the_store() {
    let dir = temp("info");
    let store = dir.join("store.sqlite");
    assert!(ctxk(&store, &["append", "examples/demo/session.json"], None).status.success());
    let info = stdout(&ctxk(&store, &["info"], None));
    assert!(info.contains("store revision 1"), "{info}");
    let events = ctxk(&store, &["events", "--session", "demo-ledger-fix", "--limit", "5"], None);
    assert!(events.status.success());
    assert!(stdout(&events).contains("more after this page"));
    std::fs::remove_dir_all(&dir).unwrap();
}
