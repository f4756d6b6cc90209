//! `ctxk parity`: runs parity fixtures (tests/parity) against fresh SQLite
//! stores and writes, per fixture, a transcript of every step and a canonical
//! dump of the final store. Every host has a runner with this exact output.

use anyhow::{bail, Context as _};
use ctxkernel_host::{HostStore, Kernel, KernelError, Runtime, SqliteStore};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Runs each fixture, writing `<name>.transcript.jsonl` and `<name>.dump.jsonl`
/// into `out`. With `read`, instead opens the store files another host wrote
/// there and writes `<name>.read.jsonl`: the kernel's `info` and the dump.
pub fn run(fixtures: &[std::path::PathBuf], out: &Path, read: Option<&Path>) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let runtime = Runtime::new()?;
    for path in fixtures {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path)?).with_context(|| format!("reading {}", path.display()))?;
        let name = fixture["name"].as_str().context("a fixture needs a name")?;
        if let Some(from) = read {
            let file = from.join(format!("{name}.sqlite"));
            let mut kernel = Kernel::with_runtime(runtime.clone(), SqliteStore::open(&file)?);
            let info = result_line(0, kernel.call("info", r#"{"schemaVersion":1}"#));
            std::fs::write(out.join(format!("{name}.read.jsonl")), format!("{info}\n{}", dump(&mut SqliteStore::open(&file)?)?))?;
            continue;
        }
        let store = out.join(format!("{name}.sqlite"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
        }
        let transcript = run_fixture(&fixture, &store, &runtime).with_context(|| format!("fixture {name}"))?;
        std::fs::write(out.join(format!("{name}.transcript.jsonl")), transcript)?;
        std::fs::write(out.join(format!("{name}.dump.jsonl")), dump(&mut SqliteStore::open(&store)?)?)?;
    }
    Ok(())
}

fn run_fixture(fixture: &Value, store: &Path, runtime: &Runtime) -> anyhow::Result<String> {
    let mut instances: BTreeMap<String, Kernel> = BTreeMap::new();
    let mut responses: Vec<Value> = Vec::new();
    let mut saved: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut transcript = String::new();
    for (i, step) in fixture["steps"].as_array().context("a fixture needs steps")?.iter().enumerate() {
        let instance = step["instance"].as_str().unwrap_or("a").to_string();
        // A step whose reference points at nothing is written down as such;
        // the steps after it still run.
        let unresolved = |transcript: &mut String, responses: &mut Vec<Value>, Unresolved(reference): Unresolved| {
            let _ = writeln!(transcript, "{{\"step\":{i},\"unresolved\":{}}}", json_string(&reference));
            responses.push(Value::Null);
        };
        if let Some(action) = step["action"].as_str() {
            let key = match step.get("key").map(|k| resolve(k, &responses)).transpose() {
                Ok(key) => key.and_then(|k| k.as_str().map(str::to_string)),
                Err(e) => {
                    unresolved(&mut transcript, &mut responses, e);
                    continue;
                }
            };
            let mut raw = SqliteStore::open(store)?;
            let key = || -> anyhow::Result<String> { key.clone().context("a key") };
            match action {
                "reload" => {
                    instances.remove(&instance);
                }
                "corrupt" => {
                    let key = key()?;
                    let mut value = raw.get(&key).map_err(anyhow::Error::msg)?.context("nothing to corrupt")?.value;
                    let at = step["offset"].as_u64().unwrap_or(0) as usize % value.len().max(1);
                    value[at] ^= 0x01;
                    put(&mut raw, &key, &value)?;
                }
                "replace" => {
                    let key = key()?;
                    let value = raw.get(&key).map_err(anyhow::Error::msg)?.context("nothing to replace in")?.value;
                    let text = String::from_utf8(value)?;
                    let (find, with) = (step["find"].as_str().unwrap_or(""), step["with"].as_str().unwrap_or(""));
                    put(&mut raw, &key, text.replacen(find, with, 1).as_bytes())?;
                }
                "write" => put(&mut raw, &key()?, step["text"].as_str().unwrap_or("").as_bytes())?,
                "remove" => raw.remove(&key()?, None).map_err(|e| anyhow::anyhow!("{e:?}"))?,
                "snapshot" => {
                    let value = raw.get(&key()?).map_err(anyhow::Error::msg)?.map(|e| e.value).unwrap_or_default();
                    saved.insert(step["as"].as_str().unwrap_or("").to_string(), value);
                }
                "restore" => {
                    let value = saved.get(step["from"].as_str().unwrap_or("")).cloned().unwrap_or_default();
                    put(&mut raw, &key()?, &value)?;
                }
                other => bail!("step {i}: unknown action `{other}`"),
            }
            responses.push(Value::Null);
            let _ = writeln!(transcript, "{{\"step\":{i},\"action\":{}}}", json_string(action));
            continue;
        }
        let command = step["command"].as_str().context("a step needs a command or an action")?;
        let request = match resolve(&step["request"], &responses) {
            Ok(Value::String(text)) => text,
            Ok(other) => other.to_string(),
            Err(e) => {
                unresolved(&mut transcript, &mut responses, e);
                continue;
            }
        };
        if !instances.contains_key(&instance) {
            instances.insert(instance.clone(), Kernel::with_runtime(runtime.clone(), SqliteStore::open(store)?));
        }
        let kernel = instances.get_mut(&instance).expect("inserted above");
        let line = match command {
            "put-content" => result_line(i, kernel.put_content(&request, &content(&step["content"])?)),
            "get-content" => match kernel.get_content(&request) {
                Ok(bytes) => format!("{{\"step\":{i},\"bytes\":{{\"length\":{},\"sha256\":\"{}\"}}}}", bytes.len(), hex_sha256(&bytes)),
                Err(e) => error_line(i, &e),
            },
            _ => result_line(i, kernel.call(command, &request)),
        };
        responses.push(line_response(&line));
        transcript.push_str(&line);
        transcript.push('\n');
    }
    Ok(transcript)
}

fn put(store: &mut SqliteStore, key: &str, value: &[u8]) -> anyhow::Result<()> {
    store.put(key, value, None).map(|_| ()).map_err(|e| anyhow::anyhow!("{e:?}"))
}

/// The ok response of a transcript line, for `$ref`s of later steps.
fn line_response(line: &str) -> Value {
    serde_json::from_str::<Value>(line).ok().and_then(|v| v.get("ok").cloned()).unwrap_or(Value::Null)
}

fn result_line(step: usize, result: Result<String, KernelError>) -> String {
    match result {
        Ok(response) => format!("{{\"step\":{step},\"ok\":{response}}}"),
        Err(e) => error_line(step, &e),
    }
}

/// The kernel's detail goes in verbatim, never parsed and written again.
fn error_line(step: usize, e: &KernelError) -> String {
    format!(
        "{{\"step\":{step},\"error\":{{\"code\":\"{}\",\"detail\":{},\"message\":{}}}}}",
        e.code.as_str(),
        e.detail_json,
        json_string(&e.message)
    )
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn json_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// A `$ref` that points at nothing: no such step, a step that answered with
/// an error or was an action, or no such member.
struct Unresolved(String);

/// Replaces `{"$ref": "N#/pointer"}` (with an optional `"format"` whose every
/// `{}` is filled) by the value at that pointer in step N's response.
fn resolve(value: &Value, responses: &[Value]) -> Result<Value, Unresolved> {
    Ok(match value {
        Value::Object(map) if map.contains_key("$ref") => {
            let reference = map["$ref"].as_str().unwrap_or_default();
            let found = reference
                .split_once('#')
                .filter(|(step, _)| !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|(step, pointer)| responses.get(step.parse::<usize>().ok()?).filter(|r| !r.is_null())?.pointer(pointer))
                .cloned()
                .ok_or_else(|| Unresolved(reference.to_string()))?;
            match map.get("format").and_then(Value::as_str) {
                Some(format) => Value::String(format.replace("{}", found.as_str().unwrap_or(&found.to_string()))),
                None => found,
            }
        }
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| Ok((k.clone(), resolve(v, responses)?))).collect::<Result<_, _>>()?),
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve(v, responses)).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

pub fn content(spec: &Value) -> anyhow::Result<Vec<u8>> {
    if let Some(text) = spec["text"].as_str() {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(repeat) = spec.get("repeat") {
        let text = repeat["text"].as_str().context("repeat.text")?;
        return Ok(text.repeat(repeat["times"].as_u64().context("repeat.times")? as usize).into_bytes());
    }
    bail!("content is {{\"text\"}} or {{\"repeat\": {{\"text\", \"times\"}}}}")
}

/// Every entry in key order: key, revision and the sha256 of the value.
fn dump(store: &mut SqliteStore) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut after = String::new();
    loop {
        let page = store.scan("", &after, 1000).map_err(anyhow::Error::msg)?;
        for entry in &page {
            let _ = writeln!(out, "{{\"key\":{},\"revision\":{},\"sha256\":\"{}\"}}", json_string(&entry.key), entry.revision, hex_sha256(&entry.value));
        }
        match page.last() {
            Some(last) if page.len() == 1000 => after.clone_from(&last.key),
            _ => return Ok(out),
        }
    }
}
