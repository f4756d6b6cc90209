//! The typed API: item constructors held to the shared file every host is
//! held to, requests filled by the host, logging, and the README's quick start.

mod common;

use common::NOW;
use ctxkernel_host::{items, ErrorCode, Kernel, MemoryStore, TAKES_NOW};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn read(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
}

/// One case's constructor, then its options set on the item (as a caller would).
fn make(case: &Value) -> Result<Value, ctxkernel_host::KernelError> {
    let args = case["args"].as_array().unwrap();
    let text = |i: usize| args[i].as_str();
    let options = case["options"].as_object().unwrap();
    let mut made = match case["make"].as_str().unwrap() {
        "user" => items::user(text(0).unwrap()),
        "assistant" => match options.get("toolCalls") {
            Some(calls) => items::assistant_with_calls(text(0), calls.as_array().unwrap().clone())?,
            None if text(0).is_none() => items::assistant_with_calls(None, Vec::new())?,
            None => items::assistant(text(0).unwrap()),
        },
        "system" => items::system(text(0).unwrap()),
        "toolResult" => items::tool_result(text(0).unwrap(), text(1).unwrap(), options.get("outcome").and_then(Value::as_str).unwrap_or("success")),
        "taskState" => items::task_state(text(0).unwrap(), text(1).unwrap(), text(2).unwrap()),
        "pinnedRule" => items::pinned_rule(text(0).unwrap()),
        other => panic!("no constructor {other}"),
    };
    for (name, value) in options {
        match name.as_str() {
            "toolCalls" | "outcome" => {} // arguments of their constructors, above
            "source" => made["sourceRef"] = value.clone(),
            _ => made[name] = value.clone(),
        }
    }
    Ok(made)
}

#[test]
fn each_constructor_gives_the_shared_item() {
    let constructors = read("tests/items/constructors.json");
    let makers: BTreeSet<&str> = constructors["cases"].as_array().unwrap().iter().map(|c| c["make"].as_str().unwrap()).collect();
    assert_eq!(makers, BTreeSet::from(["assistant", "pinnedRule", "system", "taskState", "toolResult", "user"]));
    for case in constructors["cases"].as_array().unwrap() {
        assert_eq!(make(case).unwrap(), case["item"], "{} {}", case["make"], case["args"]);
    }
    for case in constructors["refused"].as_array().unwrap() {
        let e = make(case).unwrap_err();
        assert_eq!((e.code.as_str(), &e.detail["field"]), (case["code"].as_str().unwrap(), &case["field"]));
    }
}

#[test]
fn every_constructed_item_is_one_the_kernel_plans_and_appends() {
    let constructors = read("tests/items/constructors.json");
    let cases = constructors["cases"].as_array().unwrap();
    // Named by case, so the plan's answer can be read back per case.
    let made: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let mut item = make(c).unwrap();
            if item.get("itemId").is_none() {
                item["itemId"] = json!(format!("case-{n}"));
            }
            item
        })
        .collect();
    let mut kernel = Kernel::new(MemoryStore::default()).unwrap().with_clock(|| NOW.to_string());
    let model = json!({"profile": "test", "window": 16000, "reservedOutput": 1000, "safetyMargin": 500});
    let plan = kernel.plan_context(&json!({"sink": "model:test", "model": model, "items": made})).unwrap();
    let mut placed = BTreeMap::new();
    for e in plan["context"].as_array().unwrap() {
        placed.insert(e["itemId"].as_str().unwrap().to_string(), json!({"partition": e["partition"]}));
    }
    for d in plan["dropped"].as_array().unwrap() {
        placed.insert(d["itemId"].as_str().unwrap().to_string(), json!({"dropped": d["reason"]}));
    }
    let got: Vec<&Value> = made.iter().map(|i| &placed[i["itemId"].as_str().unwrap()]).collect();
    let want: Vec<&Value> = cases.iter().map(|c| &c["planned"]).collect();
    assert_eq!(got, want);
    let appended = kernel.append_events(&json!({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": made})).unwrap();
    assert_eq!(appended["head"]["seq"], json!(made.len()));
}

#[test]
fn created_at_defaults_to_the_host_clock_to_the_millisecond() {
    let made = items::user("hi")["createdAt"].as_str().unwrap().to_string();
    let shape = made.len() == 24 && made.ends_with('Z') && made.as_bytes()[19] == b'.';
    assert!(shape, "{made}");
    let year: i32 = made[..4].parse().unwrap();
    assert!(year >= 2026, "{made}");
}

#[test]
fn the_host_fills_version_and_now_only_where_the_schema_has_them() {
    let mut takes_now = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("wit/schemas")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(command) = name.strip_suffix(".request.schema.json") {
            if read(&format!("wit/schemas/{name}"))["properties"].get("now").is_some() {
                takes_now.insert(command.to_string());
            }
        }
    }
    assert_eq!(takes_now, TAKES_NOW.iter().map(|c| c.to_string()).collect());
    let ticks = Arc::new(Mutex::new(Vec::<String>::new()));
    let clock = ticks.clone();
    let mut kernel = Kernel::new(MemoryStore::default()).unwrap().with_clock(move || {
        let mut ticks = clock.lock().unwrap();
        let tick = format!("2026-06-01T12:00:{:02}.000Z", ticks.len());
        ticks.push(tick.clone());
        tick
    });
    let request = json!({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items::user("hello")]});
    kernel.append_events(&request).unwrap();
    assert!(request.get("now").is_none(), "the caller's request is not changed");
    assert_eq!(kernel.read_events(&json!({"sessionId": "s1"})).unwrap()["events"][0]["item"]["content"], "hello");
    assert_eq!(ticks.lock().unwrap().len(), 1, "read-events takes no now: none was asked");
    let model = json!({"profile": "test", "window": 16000, "reservedOutput": 1000, "safetyMargin": 500});
    let plan = json!({"sessionId": "s1", "sink": "model:test", "model": model});
    let mut given = plan.clone();
    given["now"] = json!(NOW);
    assert_eq!(kernel.plan_context(&given).unwrap()["now"], NOW);
    assert_eq!(ticks.lock().unwrap().len(), 1, "a given now is kept");
    assert_eq!(kernel.plan_context(&plan).unwrap()["now"], "2026-06-01T12:00:01Z");
    let rendered = kernel.render_context(&json!({"format": "anthropic-messages", "plan": plan})).unwrap();
    assert!(rendered["body"].is_object());
    assert_eq!(ticks.lock().unwrap().len(), 3, "the plan a render request carries is filled");
    let missing = kernel.call_json("plan-context", &plan).unwrap_err();
    assert_eq!(missing.code, ErrorCode::InvalidRequest);
    let mut future = plan.clone();
    future["schemaVersion"] = json!(99);
    assert_eq!(kernel.plan_context(&future).unwrap_err().code, ErrorCode::UnsupportedSchema);
    for bad in [json!(["sessionId"]), json!("text"), json!(7), Value::Null] {
        assert_eq!(kernel.plan_context(&bad).unwrap_err().code, ErrorCode::InvalidRequest, "{bad}");
    }
}

/// The log records this thread wrote (tests run on several threads).
struct Captured;

thread_local! {
    static RECORDS: std::cell::RefCell<Vec<(log::Level, String, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl log::Log for Captured {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        RECORDS.with(|r| r.borrow_mut().push((record.level(), record.target().to_string(), record.args().to_string())));
    }
    fn flush(&self) {}
}

#[test]
fn each_command_is_logged_with_its_outcome_and_never_its_body() {
    static LOGGER: Captured = Captured;
    log::set_logger(&LOGGER).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let secret = "sk-live-4f9a-do-not-log";
    let mut kernel = Kernel::new(MemoryStore::default()).unwrap().with_clock(|| NOW.to_string());
    let append = json!({"sessionId": "s1", "expectedHead": {"seq": 0}, "items": [items::user(&format!("my key is {secret}"))]});
    kernel.append_events(&append).unwrap();
    assert_eq!(kernel.append_events(&append).unwrap_err().code, ErrorCode::Stale);
    let records = RECORDS.with(|r| r.borrow().clone());
    let kernel_records: Vec<_> = records.iter().filter(|(_, target, _)| target == "ctxkernel").collect();
    let seen: Vec<(log::Level, &str)> =
        kernel_records.iter().map(|(level, _, message)| (*level, message.split(" in ").next().unwrap())).collect();
    assert_eq!(seen, [(log::Level::Debug, "append-events: ok"), (log::Level::Debug, "append-events: stale")]);
    assert!(records.iter().all(|(_, _, message)| !message.contains(secret)));
}

// The README's Rust quick start, between the two marks, exactly as printed there.
#[test]
fn the_quick_start_plans_a_context() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::env::set_current_dir(dir.path())?;
    // quick start
    use ctxkernel_host::{items, Kernel, SqliteStore};
    use serde_json::json;

    let mut kernel = Kernel::new(SqliteStore::open("agent.sqlite")?)?;
    kernel.append_events(&json!({"sessionId": "s1", "expectedHead": {"seq": 0},
        "items": [items::system("Answer briefly."), items::user("Where do exports run?")]}))?;
    let plan = kernel.plan_context(&json!({"sessionId": "s1", "sink": "model:claude",
        "model": {"profile": "claude", "window": 200_000, "reservedOutput": 8_000, "safetyMargin": 2_000}}))?;
    println!("{}", plan["context"]);
    // end of the quick start
    assert_eq!(plan["context"].as_array().map(Vec::len), Some(2));
    Ok(())
}

#[test]
fn the_readme_prints_the_quick_start_this_file_runs() {
    let this = include_str!("items.rs");
    let start = this.find("    // quick start\n").unwrap() + "    // quick start\n".len();
    let end = this.find("    // end of the quick start").unwrap();
    let here: Vec<&str> = this[start..end].lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("\n## Use it\n").unwrap()..];
    let section = &section[..section[1..].find("\n## ").unwrap()];
    let block = &section[section.find("```rust\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    let printed: Vec<&str> = block.lines().filter(|l| !l.starts_with("// cargo add")).collect();
    assert_eq!(printed, here);
    assert!(block.lines().count() <= 10, "the quick start is {} lines", block.lines().count());
}
