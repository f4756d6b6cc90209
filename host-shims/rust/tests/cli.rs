//! `ctxk` as a user runs it, on the demo session.

use serde_json::{json, Value};
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
    let none = ctxk(&store, &["inspect"], None);
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("no store at"), "{}", stderr(&none));
    assert!(!store.exists(), "a command that only reads does not create a store");

    assert!(ctxk(&store, &["append", "examples/demo/session.json"], None).status.success());
    let bad = ctxk(&store, &["plan", "-"], Some("{\"schemaVersion\": 1}"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("invalid-request"), "{}", stderr(&bad));

    let json = ctxk(&store, &["--json", "plan", "-"], Some("{\"schemaVersion\": 3}"));
    assert_eq!(json.status.code(), Some(1));
    let body: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(body["error"]["code"], "unsupported-schema");

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

/// The demo replays a long session; every subcommand then works on its store.
#[test]
fn every_subcommand_works_on_the_demo_store() {
    let dir = temp("tool");
    let store = dir.join("demo.sqlite");
    let fixture = dir.join("demo.json");
    let demo = ctxk(&store, &["demo", "examples/demo/agent-session.json", "--record", fixture.to_str().unwrap()], None);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let report = stdout(&demo);
    for section in ["== compactions", "degraded", "== large tool output", "pending-interaction", "supersedes", "== recall", "complete · 1 matched"] {
        assert!(report.contains(section), "the report lacks {section:?}:\n{report}");
    }
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    assert!(recorded["steps"].as_array().unwrap().len() > 300);

    let run = |args: &[&str]| {
        let out = ctxk(&store, args, None);
        assert!(out.status.success(), "ctxk {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    assert!(run(&["inspect", "sessions"]).contains("ledger-release"));
    let memories: Value = serde_json::from_str(&run(&["--json", "inspect", "memories"])).unwrap();
    let states: Vec<&str> = memories.as_array().unwrap().iter().map(|m| m["state"].as_str().unwrap()).collect();
    assert!(states.contains(&"superseded") && states.contains(&"active"), "{states:?}");
    assert!(run(&["inspect", "tombstones"]).contains("(1 tombstones)"));
    let operations = run(&["inspect", "operations"]);
    assert!(operations.contains("compaction") && operations.contains("extraction") && operations.contains("deletion"), "{operations}");
    assert!(run(&["inspect", "events"]).contains("memory.superseded"));

    let recalled = run(&["recall", "when do releases go out", "--scope", "project:ledger-service"]);
    assert!(recalled.contains("Thursdays at 15:00") && recalled.contains("was: releases of ledger-service go out on Wednesdays"), "{recalled}");
    let remembered: Value = serde_json::from_str(&run(&[
        "--json", "remember", "the staging database is read-only on Fridays", "--scope", "project:ledger-service",
        "--key", "staging.fridays", "--actor", "lead@ledger.example",
    ]))
    .unwrap();
    assert_eq!(remembered["memory"]["state"], "active");
    let id = remembered["memory"]["memoryId"].as_str().unwrap().to_string();
    let forgotten = run(&["forget", &id, "--scope", "project:ledger-service", "--actor", "lead@ledger.example", "--replica", "backup"]);
    assert!(forgotten.contains("partial") && forgotten.contains("replica:backup"), "{forgotten}");
    let deletion_id = forgotten.split_whitespace().next().unwrap().to_string();
    let settle = format!(r#"{{"schemaVersion":1,"now":"2026-06-01T10:00:00Z","operationId":"{deletion_id}","replicas":[{{"replica":"backup","deleted":true}}]}}"#);
    let settled = ctxk(&store, &["reconcile", "-"], Some(&settle));
    assert!(stdout(&settled).contains("complete"), "{}", stderr(&settled));
    assert!(run(&["recall", "staging database Fridays", "--scope", "project:ledger-service"]).contains("nothing recalled"));

    let model = r#""model":{"profile":"local-32k","window":32768,"reservedOutput":4096,"safetyMargin":1024},"sink":"model:local","now":"2025-12-01T15:00:00Z""#;
    let planned = ctxk(&store, &["plan", "-"], Some(&format!(r#"{{"schemaVersion":1,"sessionId":"ledger-fix",{model}}}"#)));
    assert!(stdout(&planned).contains("pending-interaction"), "{}", stderr(&planned));
    let compacted = ctxk(&store, &["--json", "compact", "-"], Some(&format!(r#"{{"schemaVersion":1,"sessionId":"ledger-fix","strategy":"local",{model}}}"#)));
    let receipt: Value = serde_json::from_str(&stdout(&compacted)).unwrap();
    assert!(["committed", "not-needed"].contains(&receipt["status"].as_str().unwrap()), "{receipt}");
    assert!(run(&["events", "--session", "ledger-release"]).contains("forget"));
    assert!(run(&["kernel-events", "--limit", "5"]).contains("memory.activated"));

    // Export, import into a new file, and the copy answers the same.
    let export = dir.join("demo.jsonl");
    run(&["export", export.to_str().unwrap()]);
    let copy = dir.join("copy.sqlite");
    let imported = ctxk(&copy, &["import", export.to_str().unwrap()], None);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let again = ctxk(&copy, &["import", export.to_str().unwrap()], None);
    assert_eq!(again.status.code(), Some(2), "importing twice is refused");
    let original = run(&["--json", "recall", "when do releases go out", "--scope", "project:ledger-service"]);
    let from_copy = stdout(&ctxk(&copy, &["--json", "recall", "when do releases go out", "--scope", "project:ledger-service"], None));
    let strip = |text: &str| -> Value {
        let mut v: Value = serde_json::from_str(text).unwrap();
        v.as_object_mut().unwrap().remove("memoryRevision");
        v
    };
    assert_eq!(strip(&original)["memories"], strip(&from_copy)["memories"]);

    // The verifier: the kernel's own store is clean; a copy that lost its
    // memory records (a partial restore) names every link left dangling.
    assert!(run(&["verify"]).starts_with("store ok · checked"));
    let text = std::fs::read_to_string(&export).unwrap();
    let kept: Vec<&str> = text.lines().skip(1).filter(|line| !line.contains(r#""key":"mem/rec/"#)).collect();
    let mut header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["entries"] = json!(kept.len());
    let partial = dir.join("partial.jsonl");
    std::fs::write(&partial, format!("{header}\n{}\n", kept.join("\n"))).unwrap();
    let restored = dir.join("restored.sqlite");
    assert!(ctxk(&restored, &["import", partial.to_str().unwrap()], None).status.success());
    let verified = ctxk(&restored, &["verify"], None);
    assert_eq!(verified.status.code(), Some(3), "{}", stderr(&verified));
    assert!(stdout(&verified).contains("dangling-link mem/scope/project/ledger-service/"), "{}", stdout(&verified));
    assert!(stderr(&verified).contains("problems"), "{}", stderr(&verified));
    let report: Value = serde_json::from_str(&stdout(&ctxk(&restored, &["--json", "verify"], None))).unwrap();
    assert_eq!(report["ok"], false);
    assert!(report["problemCount"].as_u64().unwrap() >= 3, "{report}");

    // A missing or damaged store fails with a message and a non-zero status.
    for args in [vec!["inspect", "memories"], vec!["export", "x.jsonl"], vec!["recall", "q", "--scope", "global"]] {
        let missing = ctxk(&dir.join("missing.sqlite"), &args, None);
        assert_eq!(missing.status.code(), Some(2), "{args:?}");
        assert!(stderr(&missing).contains("no store at"), "{}", stderr(&missing));
        let corrupt = dir.join("corrupt.sqlite");
        std::fs::write(&corrupt, b"not a database at all").unwrap();
        let damaged = ctxk(&corrupt, &args, None);
        assert_eq!(damaged.status.code(), Some(2), "{args:?}");
        assert!(stderr(&damaged).contains("cannot open store"), "{}", stderr(&damaged));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn put_content_and_get_content_round_trip() {
    let dir = temp("content");
    let store = dir.join("store.sqlite");
    let file = dir.join("log.txt");
    let bytes: Vec<u8> = (0..(3u32 << 20)).map(|i| b"build log line\n"[(i % 15) as usize]).collect();
    std::fs::write(&file, &bytes).unwrap();
    let put = ctxk(&store, &["--json", "put-content", file.to_str().unwrap(), "--mime-type", "text/plain", "--allow", "cli"], None);
    assert!(put.status.success(), "{}", stderr(&put));
    let response: Value = serde_json::from_str(&stdout(&put)).unwrap();
    assert_eq!(response["contentRef"]["byteLength"], 3u64 << 20);
    let id = response["contentRef"]["objectId"].as_str().unwrap().to_string();
    let again = ctxk(&store, &["put-content", file.to_str().unwrap(), "--allow", "cli"], None);
    assert!(stdout(&again).starts_with(&format!("already stored {id} ({} bytes)", 3u32 << 20)), "{}", stdout(&again));

    let back = ctxk(&store, &["get-content", &id], None);
    assert!(back.status.success(), "{}", stderr(&back));
    assert!(back.stdout == bytes, "the bytes come back on stdout");
    let copy = dir.join("copy.txt");
    assert!(ctxk(&store, &["get-content", &id, "--out", copy.to_str().unwrap()], None).status.success());
    assert!(std::fs::read(&copy).unwrap() == bytes);
    let denied = ctxk(&store, &["get-content", &id, "--sink", "model:x"], None);
    assert_eq!(denied.status.code(), Some(1));
    assert!(stderr(&denied).contains("scope-denied"), "{}", stderr(&denied));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ctxk … | head`: the reader goes away mid-output; ctxk stops quietly.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    let dir = temp("pipe");
    let store = dir.join("store.sqlite");
    let file = dir.join("big.txt");
    std::fs::write(&file, "line\n".repeat(2 << 20)).unwrap();
    let put = ctxk(&store, &["--json", "put-content", file.to_str().unwrap()], None);
    let id = serde_json::from_str::<Value>(&stdout(&put)).unwrap()["contentRef"]["objectId"].as_str().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxk"))
        .args(["--store", store.to_str().unwrap(), "get-content", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    // Dropping the read end closes the pipe while ctxk still has megabytes to write.
    let output = child.wait_with_output().unwrap();
    assert_eq!(&head, b"line\nline\n");
    assert!(output.status.success(), "{:?}: {}", output.status, stderr(&output));
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_transcript_file_imports_as_its_sdk_wrote_it() {
    let dir = temp("import-file");
    let store = dir.join("store.sqlite");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kernel/tests/data/transcripts/anthropic-messages.json");
    let args = ["import-messages", data, "--format", "anthropic-messages", "--session", "sdk"];
    let first = ctxk(&store, &args, None);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stdout(&first).starts_with("appended 8 events"), "{}", stdout(&first));
    assert!(stdout(&first).contains("opaque part kept `compaction`") && stdout(&first).contains("binary part stored"), "{}", stdout(&first));
    // Its head read first, the same file again appends nothing.
    let again = ctxk(&store, &args, None);
    assert!(stdout(&again).starts_with("appended 0 events") && stdout(&again).contains("(8 already held)"), "{}", stdout(&again));
    let events = ctxk(&store, &["--json", "events", "--session", "sdk"], None);
    assert!(stdout(&events).contains("9007199254740993"), "the 16-digit integer the model wrote is kept");
    let wrong = ctxk(&store, &["import-messages", data, "--format", "gemini", "--session", "sdk"], None);
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(stderr(&wrong).contains("format"), "{}", stderr(&wrong));
    let missing = ctxk(&store, &["import-messages", data, "--format", "anthropic-messages"], None);
    assert!(!missing.status.success(), "--format needs --session");
    // An edited copy branches into a new session; the first is left as it was.
    let edited = dir.join("edited.json");
    std::fs::write(&edited, std::fs::read_to_string(data).unwrap().replace("Thanks!", "Thanks, and Osaka?")).unwrap();
    let edited = edited.to_str().unwrap();
    let branch = ctxk(&store, &["import-messages", edited, "--format", "anthropic-messages", "--session", "sdk", "--fork-to", "sdk-2"], None);
    assert!(branch.status.success(), "{}", stderr(&branch));
    assert!(stdout(&branch).contains("to sdk-2") && stdout(&branch).contains("a branch of sdk after its seq 7"), "{}", stdout(&branch));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_provider_transcript_imports_and_renders_its_body_verbatim() {
    let dir = temp("render");
    let store = dir.join("store.sqlite");
    let import = json!({"schemaVersion": 1, "sessionId": "t1", "format": "openai-chat", "now": "2026-06-01T09:00:00Z", "expectedHead": {"seq": 0},
        "allowedSinks": ["model:*"], "sensitivity": "internal",
        "transcript": {"messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Is main green? ☕"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "ci_status", "arguments": "{\"branch\": \"main\", \"n\": 12345678901234567890}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "green"}],
        "tools": [{"type": "function", "function": {"name": "ci_status", "description": "CI status of a branch",
            "parameters": {"type": "object", "properties": {"branch": {"type": "string"}, "n": {"type": "integer"}}}}}]}});
    let imported = ctxk(&store, &["import-messages"], Some(&import.to_string()));
    assert!(imported.status.success(), "{}", stderr(&imported));
    assert!(stdout(&imported).starts_with("appended 5 events"), "{}", stdout(&imported));
    let again = ctxk(&store, &["import-messages"], Some(&import.to_string()));
    assert!(stdout(&again).contains("appended 0 events") && stdout(&again).contains("(5 already held)"), "{}", stdout(&again));

    let render = json!({"schemaVersion": 1, "format": "anthropic-messages", "plan": {"schemaVersion": 1, "sessionId": "t1",
        "now": "2026-06-01T09:05:00Z", "sink": "model:test",
        "model": {"profile": "m-32k", "window": 32768, "reservedOutput": 4096, "safetyMargin": 1024}}});
    let report = ctxk(&store, &["render"], Some(&render.to_string()));
    assert!(report.status.success(), "{}", stderr(&report));
    assert!(stdout(&report).contains("anthropic-messages for model m-32k"), "{}", stdout(&report));
    let full = ctxk(&store, &["--json", "render"], Some(&render.to_string()));
    let body = ctxk(&store, &["render", "--body"], Some(&render.to_string()));
    assert!(body.status.success(), "{}", stderr(&body));
    // The body's exact text: the arguments' 20-digit integer survives.
    let text = stdout(&body);
    assert!(stdout(&full).contains(text.trim_end()), "the body is the kernel's own text");
    assert!(text.contains("12345678901234567890"), "{text}");
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["system"], "Be terse.");
    assert_eq!(parsed["messages"][1]["content"][0]["type"], "tool_use");
}

#[test]
fn processes_starting_together_share_one_whole_compiled_component() {
    let dir = temp("compiled-cache");
    let cache = dir.join("cache");
    let children: Vec<_> = (0..3)
        .map(|k| {
            Command::new(env!("CARGO_BIN_EXE_ctxk"))
                .arg("--store")
                .arg(dir.join(format!("store-{k}.sqlite")))
                .args(["call", "info", "-"])
                .env("CTXKERNEL_CACHE_DIR", &cache)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .map(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(br#"{"schemaVersion":1}"#).unwrap();
            child
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && stdout(&out).contains("\"ctxkernel\""), "{}", stderr(&out));
    }
    let entries: Vec<String> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(entries.len(), 1, "one entry and no temporary file left: {entries:?}");
    assert!(entries[0].starts_with(ctxkernel_host::COMPONENT_SHA256), "{entries:?}");
    // The entry the race left is whole: the next process loads it and says nothing about it.
    let out = Command::new(env!("CARGO_BIN_EXE_ctxk"))
        .arg("--store")
        .arg(dir.join("store-0.sqlite"))
        .arg("info")
        .env("CTXKERNEL_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(out.status.success() && stderr(&out).is_empty(), "{}", stderr(&out));
}
