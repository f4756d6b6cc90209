//! Call lists: a sequence of kernel calls written out as JSON, checked by
//! [`Host`] like the `commands` target's. A `commands` input means whatever
//! the generator makes of its bytes, which changes with the generator; its
//! regressions are kept as the calls it made instead
//! (`fuzz/regressions/calls/`, written by the `run` example's `--calls`).
//!
//! ```json
//! {"calls": [
//!   {"command": "put-content", "request": {...}, "content": "text"},
//!   {"command": "get-content", "request": "{\"objectId\": ...}", "contentHex": "00ff"}
//! ]}
//! ```
//!
//! A request is a JSON value or the exact request text; `put-content`'s bytes
//! are `content` (UTF-8) or `contentHex`.

use crate::host::{Call, Checks, Host};
use ctxkernel::Command;
use serde_json::{json, Value};

pub fn run(data: &[u8]) {
    let calls = parse(data).unwrap_or_else(|e| panic!("not a call list: {e}"));
    let mut host = Host::new(Checks::ALL);
    for call in calls {
        host.call(call);
    }
    host.check_replay();
}

pub fn parse(data: &[u8]) -> Result<Vec<Call>, String> {
    let list: Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
    let calls = list["calls"].as_array().ok_or("no `calls` array")?;
    calls
        .iter()
        .map(|c| {
            let name = c["command"].as_str().ok_or("a call without a `command`")?;
            let command = Command::from_name(name).ok_or_else(|| format!("no command `{name}`"))?;
            let request = match &c["request"] {
                Value::String(text) => text.clone(),
                value => value.to_string(),
            };
            Ok(match command {
                Command::PutContent => {
                    let bytes = match (c["content"].as_str(), c["contentHex"].as_str()) {
                        (Some(text), _) => text.as_bytes().to_vec(),
                        (None, Some(hex)) => from_hex(hex)?,
                        (None, None) => Vec::new(),
                    };
                    Call::Put(request, bytes)
                }
                Command::GetContent => Call::Get(request),
                command => Call::Json(command, request),
            })
        })
        .collect()
}

/// A call list of `calls`, requests as JSON values where they parse.
pub fn write(calls: &[Call]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|call| {
            // As a value where that gives back the same text, else as text.
            let request = match serde_json::from_str::<Value>(call.request()) {
                Ok(value) if serde_json::to_string(&value).is_ok_and(|text| text == call.request()) => value,
                _ => json!(call.request()),
            };
            let mut c = json!({"command": call.command().name(), "request": request});
            if let Call::Put(_, bytes) = call {
                match std::str::from_utf8(bytes) {
                    Ok(text) => c["content"] = json!(text),
                    Err(_) => c["contentHex"] = json!(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
                }
            }
            c
        })
        .collect();
    let mut text = String::from("{\"calls\": [\n");
    for (n, c) in calls.iter().enumerate() {
        text.push_str("  ");
        text.push_str(&c.to_string());
        text.push_str(if n + 1 < calls.len() { ",\n" } else { "\n" });
    }
    text.push_str("]}\n");
    text
}

fn from_hex(hex: &str) -> Result<Vec<u8>, String> {
    (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| "bad contentHex".to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_list_reads_back_as_written() {
        let calls = vec![
            Call::Json(Command::Info, r#"{"schemaVersion":1}"#.into()),
            Call::Json(Command::Info, r#"{ "schemaVersion": 1 }"#.into()),
            Call::Put(r#"{"allowedSinks":["*"],"now":"2026-06-01T09:00:00Z","schemaVersion":1,"sensitivity":"public"}"#.into(), vec![0, 255, 7]),
            Call::Put(r#"{"schemaVersion":1}"#.into(), b"text".to_vec()),
            Call::Get("not json".into()),
        ];
        assert_eq!(parse(write(&calls).as_bytes()).unwrap(), calls);
    }
}
