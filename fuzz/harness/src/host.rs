//! A checking host: runs kernel calls over one in-memory store the way a real
//! host does (a failed call is rolled back), and checks after every call what
//! must hold whatever the input.

use crate::known;
use ctxkernel::store::{keys, MemStore};
use ctxkernel::{Command, ErrorCode, Kernel, KernelError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One call as a host makes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// A JSON command.
    Json(Command, String),
    /// `put-content`: the request and the bytes.
    Put(String, Vec<u8>),
    /// `get-content`.
    Get(String),
}

impl Call {
    pub fn command(&self) -> Command {
        match self {
            Call::Json(command, _) => *command,
            Call::Put(..) => Command::PutContent,
            Call::Get(_) => Command::GetContent,
        }
    }

    pub fn request(&self) -> &str {
        match self {
            Call::Json(_, request) | Call::Put(request, _) | Call::Get(request) => request,
        }
    }
}

/// What a call answered, in a form two runs can be compared by.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Text(String),
    Bytes(Vec<u8>),
    Failed { code: ErrorCode, message: String, detail: Value },
}

impl Outcome {
    /// The response as JSON, when it is a JSON response.
    pub fn json(&self) -> Option<Value> {
        match self {
            Outcome::Text(text) => serde_json::from_str(text).ok(),
            _ => None,
        }
    }

    pub fn is_ok(&self) -> bool {
        !matches!(self, Outcome::Failed { .. })
    }
}

/// Set when `CTXK_FUZZ_TRACE` is: every call and its answer go to stderr.
pub fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("CTXK_FUZZ_TRACE").is_some_and(|v| !v.is_empty() && v != "0"))
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(600) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_string(),
    }
}

/// Runs one call on a kernel and a store, nothing more.
pub fn invoke(kernel: &mut Kernel, store: &mut MemStore, call: &Call) -> Result<Outcome, KernelError> {
    match call {
        Call::Json(command, request) => kernel.call(store, *command, request).map(Outcome::Text),
        Call::Put(request, bytes) => kernel.put_content(store, request, bytes).map(Outcome::Text),
        Call::Get(request) => kernel.get_content(store, request).map(Outcome::Bytes),
    }
}

/// Which checks a host makes besides the ones every call gets.
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// Run each call again on a kernel that has never seen the store (its
    /// caches are never authority, so the answers must agree).
    pub cold: bool,
    /// After a call that wrote, read everything back on a fresh kernel.
    pub read_back: bool,
}

impl Checks {
    pub const ALL: Checks = Checks { cold: true, read_back: true };
    pub const NONE: Checks = Checks { cold: false, read_back: false };
}

/// A host with one kernel instance and one store.
pub struct Host {
    pub kernel: Kernel,
    pub store: MemStore,
    pub checks: Checks,
    /// Every call made and what it answered.
    pub transcript: Vec<(Call, Outcome)>,
    /// The bytes put under each object id, to check `get-content` returns them.
    contents: BTreeMap<String, Vec<u8>>,
    /// The last `now` given, used by the read-back requests.
    pub now: String,
    /// Every call begun, including one that panicked.
    pub begun: Vec<Call>,
}

impl Host {
    pub fn new(checks: Checks) -> Self {
        Host {
            kernel: Kernel::default(),
            store: MemStore::default(),
            checks,
            transcript: Vec::new(),
            contents: BTreeMap::new(),
            now: "2026-06-01T09:00:00Z".into(),
            begun: Vec::new(),
        }
    }

    /// Makes one call and checks it; returns what it answered.
    pub fn call(&mut self, call: Call) -> Outcome {
        self.begun.push(call.clone());
        let before = self.store.clone();
        if trace() {
            eprintln!("> {} {}", call.command().name(), clip(call.request()));
        }
        let result = invoke(&mut self.kernel, &mut self.store, &call);
        if trace() {
            match &result {
                Ok(Outcome::Text(text)) => eprintln!("< {}", clip(text)),
                Ok(Outcome::Bytes(bytes)) => eprintln!("< {} bytes", bytes.len()),
                Ok(failed) => eprintln!("< {failed:?}"),
                Err(e) => eprintln!("< {}: {}", e.code.as_str(), e.message),
            }
        }
        let outcome = check_result(&call, result);
        if !outcome.is_ok() {
            // The host rolls its transaction back.
            self.store = before.clone();
        }
        if self.checks.cold {
            let mut store = before.clone();
            let cold = check_result(&call, invoke(&mut Kernel::default(), &mut store, &call));
            if !cold.is_ok() {
                store = before.clone();
            }
            assert_eq!(
                outcome,
                cold,
                "`{}` answered differently on a kernel that had not seen the store before\nrequest: {}",
                call.command().name(),
                call.request()
            );
            assert!(store.entries == self.store.entries, "`{}` wrote a different store on a fresh kernel", call.command().name());
        }
        self.check_content(&call, &outcome);
        if outcome.is_ok() && self.checks.read_back && before.entries != self.store.entries {
            read_back(&self.store, &before, &self.now);
        }
        self.transcript.push((call, outcome.clone()));
        outcome
    }

    fn check_content(&mut self, call: &Call, outcome: &Outcome) {
        match (call, outcome) {
            (Call::Put(_, bytes), Outcome::Text(text)) => {
                let response: Value = serde_json::from_str(text).expect("checked above");
                let id = response["contentRef"]["objectId"].as_str().expect("put-content answers a contentRef.objectId");
                assert_eq!(response["contentRef"]["byteLength"].as_u64(), Some(bytes.len() as u64), "put-content's byteLength");
                self.contents.insert(id.to_string(), bytes.clone());
            }
            (Call::Get(request), Outcome::Bytes(bytes)) => {
                let request: Value = serde_json::from_str(request).expect("get-content succeeded on JSON");
                if let Some(put) = request["objectId"].as_str().and_then(|id| self.contents.get(id)) {
                    assert!(put == bytes, "get-content returned other bytes than were put");
                }
            }
            _ => {}
        }
    }

    /// Runs the same calls on a fresh kernel and store: every answer and the
    /// final store must be byte for byte the same.
    pub fn check_replay(&self) {
        let mut kernel = Kernel::default();
        let mut store = MemStore::default();
        for (n, (call, outcome)) in self.transcript.iter().enumerate() {
            let before = store.clone();
            let again = match invoke(&mut kernel, &mut store, call) {
                Ok(o) => o,
                Err(e) => {
                    store = before;
                    Outcome::Failed { code: e.code, message: e.message, detail: e.detail }
                }
            };
            assert_eq!(&again, outcome, "call {n} (`{}`) answered differently when replayed", call.command().name());
        }
        assert!(store.entries == self.store.entries, "the replayed calls wrote a different store");
    }
}

/// The checks every call gets: an error is typed with an object `detail`
/// and is not one an in-memory store can only cause by a kernel fault; a
/// response is canonical JSON.
pub fn check_result(call: &Call, result: Result<Outcome, KernelError>) -> Outcome {
    let name = call.command().name();
    match result {
        Ok(Outcome::Text(text)) => {
            let value: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("`{name}` answered text that is not JSON ({e}): {text}"));
            let again = serde_json::to_string(&value).unwrap();
            assert_eq!(again, text, "`{name}` answered JSON that is not canonical");
            Outcome::Text(text)
        }
        Ok(other) => other,
        Err(error) => {
            assert!(error.detail.is_object(), "`{name}`: an error's detail is not a JSON object: {error:?}");
            assert!(!error.message.is_empty(), "`{name}`: an error without a message: {error:?}");
            // The store never fails and nothing else writes to it: these
            // codes mean the kernel wrote something it cannot read back, or
            // broke an invariant of its own.
            if matches!(error.code, ErrorCode::StorageFailure | ErrorCode::Internal) {
                let finding = format!("`{name}` failed with {}: {}\nrequest: {}", error.code.as_str(), error.message, call.request());
                assert!(known::tolerated(&finding), "{finding}");
            }
            Outcome::Failed { code: error.code, message: error.message, detail: error.detail }
        }
    }
}

/// Reads back, on a kernel that has never seen the store, whatever the last
/// call changed: every session it touched (its events, and a plan over them,
/// which verifies the chain), every memory record (through the scope it
/// lives in) and the kernel event stream. None may fail for a reason that
/// only a fault of the kernel's own writes can cause.
fn read_back(store: &MemStore, before: &MemStore, now: &str) {
    let changed: Vec<&String> = store
        .entries
        .iter()
        .filter(|(k, v)| before.entries.get(*k) != Some(v))
        .map(|(k, _)| k)
        .chain(before.entries.keys().filter(|k| !store.entries.contains_key(*k)))
        .collect();
    let mut kernel = Kernel::default();
    let mut work = store.clone();
    // Any failure but these may be the request's fault (a plan over budget).
    let mut run = |command: Command, request: Value| -> Result<Value, String> {
        let request = request.to_string();
        match kernel.call(&mut work, command, &request) {
            Ok(text) => Ok(serde_json::from_str(&text).expect("checked JSON")),
            Err(e) => {
                assert!(
                    !matches!(e.code, ErrorCode::StorageFailure | ErrorCode::Internal | ErrorCode::DigestMismatch),
                    "reading back after a write: `{}` failed with {}: {}\nrequest: {request}",
                    command.name(),
                    e.code.as_str(),
                    e.message
                );
                Err(format!("`{}` failed with {}: {}\nrequest: {request}", command.name(), e.code.as_str(), e.message))
            }
        }
    };
    let must = |result: Result<Value, String>| result.unwrap_or_else(|e| panic!("reading back after a write: {e}"));
    must(run(Command::Info, json!({"schemaVersion": 1})));
    // Sessions whose keys changed.
    let mut sessions = Vec::new();
    for key in &changed {
        if let Some(rest) = key.strip_prefix("ses/") {
            let segment = rest.split('/').next().unwrap_or_default();
            if !sessions.contains(&segment) {
                sessions.push(segment);
            }
        }
    }
    for segment in sessions {
        let Some(session) = unsegment(segment) else { continue };
        if !store.entries.contains_key(&keys::session_head(&session)) {
            continue;
        }
        let mut after = 0u64;
        for _ in 0..64 {
            let page = must(run(Command::ReadEvents, json!({"afterSeq": after, "limit": 10000, "schemaVersion": 1, "sessionId": session})));
            let events = page["events"].as_array().expect("read-events answers events");
            after = events.last().and_then(|e| e["seq"].as_u64()).unwrap_or(after);
            if page["more"] != json!(true) {
                break;
            }
        }
        let _ = run(
            Command::PlanContext,
            json!({"model": {"profile": "read-back", "reservedOutput": 0, "safetyMargin": 0, "window": 16_000_000u64},
                   "now": now, "schemaVersion": 1, "sessionId": session, "sink": "model:read-back"}),
        );
    }
    // Memory records, through the scopes they live in.
    if changed.iter().any(|k| k.starts_with("mem/")) {
        let mut scopes = Vec::new();
        for (key, (_, value)) in store.entries.range::<str, _>((std::ops::Bound::Included("mem/rec/"), std::ops::Bound::Unbounded)) {
            if !key.starts_with("mem/rec/") {
                break;
            }
            let record: Value = serde_json::from_slice(value).unwrap_or_else(|e| panic!("`{key}` is not JSON: {e}"));
            let scope = (record["scope"].clone(), record.get("scopeId").cloned());
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        let states = ["candidate", "active", "reinforced", "superseded", "archived", "expired", "deleted", "purged"];
        for (scope, scope_id) in scopes {
            let mut request = json!({"includeAudit": true, "now": now, "schemaVersion": 1, "scope": scope, "states": states});
            if let Some(id) = scope_id {
                request["scopeId"] = id;
            }
            must(run(Command::ReadMemory, request));
        }
    }
    if changed.iter().any(|k| k.starts_with("evt/")) {
        must(run(Command::ReadKernelEvents, json!({"limit": 10000, "schemaVersion": 1})));
    }
}

/// The id a key segment was percent-encoded from.
fn unsegment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_segment_decodes_back_to_its_id() {
        let id = "ü/3 x";
        assert_eq!(super::unsegment(&ctxkernel::store::keys::segment(id)).as_deref(), Some(id));
    }
}
