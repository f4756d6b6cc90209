//! `commands`: a sequence of plausible calls over one store and one kernel.
//!
//! The input drives a generator that builds requests the way an agent host
//! would — a few sessions, items of every kind, plans, compactions answered by
//! a provider, memories proposed, decided, deleted and recalled, content put
//! and read — reusing the ids earlier responses gave. Every call is checked
//! by [`Host`]; at the end the whole sequence is replayed on a fresh kernel
//! and store, and must answer byte for byte the same.

use crate::host::{Call, Checks, Host, Outcome};
use crate::words::{byte, one_in, pick, text, timestamp, upto};
use arbitrary::Unstructured;
use ctxkernel::store::keys;
use ctxkernel::Command;
use serde_json::{json, Map, Value};

/// Calls one input may make.
const MAX_CALLS: usize = 24;

pub fn run(data: &[u8]) {
    drive(data, &mut Host::new(Checks::ALL));
}

/// The calls an input makes (up to and including one that panics), and the
/// panic, if any.
pub fn calls_of(data: &[u8]) -> (Vec<Call>, Option<crate::known::Panic>) {
    let mut host = Host::new(Checks::ALL);
    let panic = crate::known::catch(|| drive(data, &mut host)).err();
    (host.begun, panic)
}

fn drive(data: &[u8], host: &mut Host) {
    let mut u = Unstructured::new(data);
    let mut gen = Gen::default();
    for _ in 0..MAX_CALLS {
        if u.is_empty() {
            break;
        }
        let call = gen.next(&mut u, host);
        host.now.clone_from(&gen.now_text);
        let outcome = host.call(call);
        gen.learn(&outcome);
    }
    host.check_replay();
}

const SESSIONS: &[&str] = &["s1", "s2", "ü/3"];
const SCOPE_IDS: &[&str] = &["web", "s1", "u1"];
const KINDS: &[&str] = &[
    "system-policy", "tool-schema", "skill", "task-state", "message", "message", "message", "tool-evidence", "tool-evidence",
    "memory", "project-rule", "artifact-ref",
];
const TRUST: &[&str] = &["host", "verified", "user", "external", "untrusted"];
const SENSITIVITY: &[&str] = &["public", "internal", "internal", "personal", "secret", "restricted"];
const SCOPES: &[&str] = &["turn", "session", "agent", "project", "user", "global"];
const ORIGINS: &[&str] = &["user", "host", "model", "tool", "import", "policy", "kernel"];
const SOURCE_KINDS: &[&str] = &["session", "file", "tool", "memory", "content", "config", "web", "import", "host"];
const SINKS: &[&str] = &["model:test", "model:cloud", "model:local", "log", "ui", "x"];
const SINK_PATTERNS: &[&str] = &["model:*", "*", "log", "model:local", "ui", "model:test"];
const CALL_IDS: &[&str] = &["c1", "c2", "c3"];
const OUTCOMES: &[&str] = &["success", "error", "pending", "unknown"];
const CATEGORIES: &[&str] = &["fact", "preference", "procedure", "decision", "x"];
const KEYS: &[&str] = &["release.day", "editor.indent", "staging.rotation", "k"];
const TAGS: &[&str] = &["ops", "style", "team"];
const ACTIONS: &[&str] = &["activate", "reject", "reinforce", "supersede", "archive", "expire", "correct", "promote"];
const AUTHORITIES: &[&str] = &["policy", "management", "user-explicit"];
const STATES: &[&str] = &["candidate", "active", "reinforced", "superseded", "archived", "expired", "deleted", "purged"];
const WINDOWS: &[u64] = &[0, 1, 64, 300, 600, 1024, 1024, 2048, 2048, 4096, 4096, 8192, 8192, 32_768, 131_072, 16_000_000, 16_000_001];

/// 2026-06-01T09:00:00Z.
const EPOCH: i64 = 1_780_304_400;

/// The generator's memory of a run: the clock and the ids responses gave.
#[derive(Default)]
struct Gen {
    clock: i64,
    now_text: String,
    items: u32,
    item_ids: Vec<String>,
    operations: Vec<String>,
    memories: Vec<String>,
    objects: Vec<String>,
    content_refs: Vec<Value>,
    confirmations: Vec<String>,
    revisions: Vec<u64>,
    /// Each memory's scope and scope id, as responses gave them.
    memory_scopes: Vec<(String, Value, Option<Value>)>,
}

impl Gen {
    fn next(&mut self, u: &mut Unstructured, host: &Host) -> Call {
        self.tick(u);
        let json = |command, request: Value| Call::Json(command, request.to_string());
        match byte(u) % 20 {
            0 => json(Command::Info, json!({"schemaVersion": 1})),
            1..=4 => json(Command::AppendEvents, self.append(u, host)),
            5 | 6 => json(Command::PlanContext, self.plan(u, host)),
            7 => json(Command::ReadEvents, self.read_events(u, host)),
            8 | 9 => json(Command::CompactContext, self.compact(u, host)),
            10 => json(Command::ContinueOperation, self.answer(u)),
            11 => json(Command::Reconcile, self.reconcile(u)),
            12 => self.content(u),
            13 => json(Command::ReadKernelEvents, self.read_kernel_events(u)),
            14 => json(Command::ProposeMemory, self.propose(u, host)),
            15 => json(Command::ConsolidateMemory, self.consolidate(u, host)),
            16 => json(Command::DecideMemory, self.decide(u)),
            17 => match byte(u) % 3 {
                0 => json(Command::DeleteMemory, self.delete(u)),
                1 => json(Command::PurgeMemory, self.purge(u)),
                _ => json(Command::ReadMemory, self.read_memory(u)),
            },
            18 => json(Command::RecallMemory, self.recall(u)),
            _ => json(Command::ResidentSnapshot, self.resident(u)),
        }
    }

    /// Takes the ids a response gave, for later requests to use.
    fn learn(&mut self, outcome: &Outcome) {
        fn walk(gen: &mut Gen, value: &Value) {
            match value {
                Value::Object(map) => {
                    if let (Some(id), Some(scope)) = (map.get("memoryId").and_then(Value::as_str), map.get("scope")) {
                        if gen.memory_scopes.len() < 32 && !gen.memory_scopes.iter().any(|(m, ..)| m == id) {
                            gen.memory_scopes.push((id.to_string(), scope.clone(), map.get("scopeId").cloned()));
                        }
                    }
                    for (key, v) in map {
                        let pool = match key.as_str() {
                            "itemId" => Some(&mut gen.item_ids),
                            "operationId" | "deletionId" => Some(&mut gen.operations),
                            "memoryId" => Some(&mut gen.memories),
                            "objectId" => Some(&mut gen.objects),
                            "confirmation" => Some(&mut gen.confirmations),
                            _ => None,
                        };
                        if let (Some(pool), Some(s)) = (pool, v.as_str()) {
                            if !pool.iter().any(|p| p == s) && pool.len() < 32 {
                                pool.push(s.to_string());
                            }
                        }
                        if key == "contentRef" && gen.content_refs.len() < 8 {
                            gen.content_refs.push(v.clone());
                        }
                        if key == "revision" {
                            if let Some(r) = v.as_u64() {
                                if gen.revisions.len() < 16 {
                                    gen.revisions.push(r);
                                }
                            }
                        }
                        walk(gen, v);
                    }
                }
                Value::Array(values) => values.iter().for_each(|v| walk(gen, v)),
                _ => {}
            }
        }
        if let Some(value) = outcome.json() {
            walk(self, &value);
        }
    }

    /// Moves the clock: mostly forward, sometimes far, now and then back.
    fn tick(&mut self, u: &mut Unstructured) {
        self.clock += match byte(u) % 16 {
            0 => -3600,
            1..=5 => 1,
            6..=9 => 60,
            10..=12 => 3600,
            13 | 14 => 86_400,
            _ => 86_400 * 400,
        };
        self.now_text = self.at(u, 0);
    }

    /// A timestamp `delta` seconds from now, in one of RFC 3339's spellings.
    fn at(&self, u: &mut Unstructured, delta: i64) -> String {
        let seconds = EPOCH + self.clock + delta;
        match byte(u) % 8 {
            0 => timestamp(seconds, Some(250), 0),
            1 => timestamp(seconds, None, 120),
            2 => timestamp(seconds, None, -330),
            3 => timestamp(seconds, Some(999), 23 * 60 + 59),
            _ => timestamp(seconds, None, 0),
        }
    }

    /// A timestamp between `from` and `from + span` seconds from now.
    fn within(&self, u: &mut Unstructured, from: i64, span: u32) -> String {
        let delta = from + i64::from(upto(u, span));
        self.at(u, delta)
    }

    fn now(&self) -> Value {
        Value::String(self.now_text.clone())
    }

    fn session(&self, u: &mut Unstructured) -> &'static str {
        pick(u, SESSIONS)
    }

    /// A session, mostly one that has events (and its last seq).
    fn live_session(&self, u: &mut Unstructured, host: &Host) -> (&'static str, u64) {
        let head = |s: &str| {
            host.store.entries.get(&keys::session_head(s)).and_then(|(_, bytes)| serde_json::from_slice::<Value>(bytes).ok()).and_then(|h| h["seq"].as_u64())
        };
        let live: Vec<(&'static str, u64)> = SESSIONS.iter().filter_map(|s| head(s).map(|seq| (*s, seq))).collect();
        if live.is_empty() || one_in(u, 8) {
            let s = self.session(u);
            return (s, head(s).unwrap_or(0));
        }
        live[usize::from(byte(u)) % live.len()]
    }

    fn item_id(&mut self, u: &mut Unstructured) -> String {
        if !self.item_ids.is_empty() && one_in(u, 6) {
            let n = usize::from(byte(u)) % self.item_ids.len();
            return self.item_ids[n].clone();
        }
        self.items += 1;
        format!("i{}", self.items)
    }

    fn pool(u: &mut Unstructured, pool: &[String], fallback: &str) -> String {
        if pool.is_empty() || one_in(u, 8) {
            return fallback.to_string();
        }
        pool[usize::from(byte(u)) % pool.len()].clone()
    }

    fn sinks(u: &mut Unstructured) -> Value {
        let n = 1 + upto(u, 2);
        let mut sinks: Vec<&str> = (0..n).map(|_| pick(u, SINK_PATTERNS)).collect();
        if one_in(u, 16) {
            sinks.clear();
        }
        json!(sinks)
    }

    /// One ContextItem, mostly well formed.
    fn item(&mut self, u: &mut Unstructured, session: Option<&str>) -> Value {
        let kind = pick(u, KINDS);
        let mut item = Map::new();
        item.insert("allowedSinks".into(), Self::sinks(u));
        item.insert("createdAt".into(), json!(self.within(u, -120, 120)));
        item.insert("kind".into(), json!(kind));
        item.insert("pinned".into(), json!(one_in(u, 6)));
        item.insert("priority".into(), json!(pick(u, &[0, 0, 0, 1, -1, 5, 100, i32::MAX, i32::MIN])));
        let origin = pick(u, ORIGINS);
        item.insert("provenance".into(), json!({"origin": origin}));
        item.insert("schemaVersion".into(), json!(if one_in(u, 128) { 2 } else { 1 }));
        item.insert("scope".into(), json!(pick(u, SCOPES)));
        item.insert("sensitivity".into(), json!(pick(u, SENSITIVITY)));
        let mut source = json!({"id": session.unwrap_or("f1"), "kind": if session.is_some() { "session" } else { pick(u, SOURCE_KINDS) }});
        if !one_in(u, 4) {
            source["seq"] = json!(upto(u, 40));
        }
        if one_in(u, 8) {
            let start = upto(u, 100);
            source["span"] = json!({"start": start, "end": start + upto(u, 100)});
        }
        item.insert("sourceRef".into(), source);
        item.insert("trust".into(), json!(pick(u, TRUST)));
        // The body: words, a long run of words, a stored object, or nothing.
        match byte(u) % 64 {
            0..=3 if !self.content_refs.is_empty() => {
                let r = self.content_refs[usize::from(byte(u)) % self.content_refs.len()].clone();
                item.insert("contentRef".into(), r);
            }
            4..=7 => {
                let n = 200 + upto(u, 3000);
                item.insert("content".into(), json!(text(u, n)));
            }
            8 => {}
            _ => {
                let n = 1 + upto(u, 40);
                item.insert("content".into(), json!(text(u, n)));
            }
        }
        if !one_in(u, 5) {
            let id = self.item_id(u);
            item.insert("itemId".into(), json!(id));
        }
        if kind == "message" || one_in(u, 64) {
            let role = pick(u, &["user", "user", "assistant", "assistant"]);
            item.insert("role".into(), json!(role));
            if role == "assistant" && one_in(u, 2) {
                let calls: Vec<Value> =
                    (0..1 + upto(u, 2)).map(|_| json!({"callId": pick(u, CALL_IDS), "name": pick(u, &["grep", "read", "run"])})).collect();
                item.insert("toolCalls".into(), json!(calls));
            }
        }
        if kind == "tool-evidence" && !one_in(u, 4) {
            item.insert("toolResult".into(), json!({"callId": pick(u, CALL_IDS), "outcome": pick(u, OUTCOMES)}));
        }
        if kind == "task-state" && !one_in(u, 3) {
            let status = pick(u, &["open", "in-progress", "blocked", "done", "failed", "cancelled"]);
            item.insert("task".into(), json!({"status": status, "taskId": pick(u, &["t1", "t2"])}));
        }
        if one_in(u, 8) {
            item.insert("anchor".into(), json!(pick(u, &["goal", "workspace", "permission-ceiling"])));
        }
        if one_in(u, 10) {
            let mut interaction = json!({
                "kind": pick(u, &["approval", "question", "human-task"]),
                "operationId": pick(u, &["ask-1", "ask-2"]),
                "state": pick(u, &["pending", "resolved", "cancelled", "expired"]),
            });
            if one_in(u, 2) {
                interaction["binding"] = json!({"callId": pick(u, CALL_IDS)});
            }
            if one_in(u, 3) {
                let from = if one_in(u, 8) { -3600 } else { 60 };
                interaction["expiresAt"] = json!(self.within(u, from, 7200));
            }
            item.insert("interaction".into(), interaction);
        }
        if one_in(u, 12) {
            // Mostly after it was created; now and then already past.
            let from = if one_in(u, 8) { -3600 } else { 60 };
            item.insert("expiresAt".into(), json!(self.within(u, from, 7200)));
        }
        if one_in(u, 12) {
            item.insert("scopeId".into(), json!(pick(u, SCOPE_IDS)));
        }
        if one_in(u, 12) {
            item.insert("tokenEstimate".into(), json!(pick(u, &[0, 1, 10, 1000, u32::MAX])));
        }
        if one_in(u, 64) {
            item.insert("digest".into(), json!(format!("sha256:{}", "0".repeat(64))));
        }
        Value::Object(item)
    }

    fn model(u: &mut Unstructured) -> Value {
        let window = pick(u, WINDOWS);
        // What is held back: mostly a small share of the window, now and then all of it or more.
        let (reserved, margin) = match byte(u) % 8 {
            0 => (pick(u, &[0u64, 256, 1024, 4096, 20_000]), pick(u, &[0u64, 64, 256, 1024])),
            _ => (window / pick(u, &[4u64, 8, 16, 1000]), window / pick(u, &[32u64, 64, 1000])),
        };
        json!({"profile": pick(u, &["m-8k", "m-128k"]), "reservedOutput": reserved, "safetyMargin": margin, "window": window})
    }

    fn append(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let session = self.session(u);
        // The head as the host knows it: right, absent, or off by a little.
        let head: Option<Value> = host
            .store
            .entries
            .get(&keys::session_head(session))
            .and_then(|(_, bytes)| serde_json::from_slice(bytes).ok());
        let seq = head.as_ref().and_then(|h| h["seq"].as_u64()).unwrap_or(0);
        let mut expected = json!({"seq": seq});
        match byte(u) % 16 {
            0 => expected["seq"] = json!(seq.saturating_sub(1)),
            1 => expected["seq"] = json!(seq + 1),
            2 => expected["digest"] = json!(format!("sha256:{}", "f".repeat(64))),
            3..=7 => {
                if let Some(digest) = head.as_ref().and_then(|h| h.get("digest")) {
                    expected["digest"] = digest.clone();
                }
            }
            _ => {}
        }
        let n = 1 + upto(u, 5);
        let items: Vec<Value> = (0..n).map(|_| self.item(u, Some(session))).collect();
        json!({"expectedHead": expected, "items": items, "now": self.now(), "schemaVersion": 1, "sessionId": session})
    }

    fn plan(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let mut request = json!({"model": Self::model(u), "now": self.now(), "schemaVersion": 1, "sink": pick(u, SINKS)});
        if !one_in(u, 4) {
            request["sessionId"] = json!(self.live_session(u, host).0);
        }
        if one_in(u, 3) {
            let n = 1 + upto(u, 3);
            let items: Vec<Value> = (0..n).map(|_| self.item(u, None)).collect();
            request["items"] = json!(items);
        }
        if one_in(u, 6) {
            request["policy"] = Self::plan_policy(u, host);
        }
        request
    }

    /// The default plan policy with a few numbers changed.
    fn plan_policy(u: &mut Unstructured, host: &Host) -> Value {
        let _ = host;
        let limits = |u: &mut Unstructured| {
            let ceiling = pick(u, &[0u32, 500, 2_500, 8_000, 10_000, 10_000, 10_001]);
            let minimum = if one_in(u, 8) { pick(u, &[500u32, 2_000, 10_000]) } else { ceiling.min(10_000) / pick(u, &[1u32, 2, 4, 10_000]) };
            let mut l = json!({"ceilingBp": ceiling, "minimumBp": minimum});
            if one_in(u, 4) {
                l["ceilingTokens"] = json!(pick(u, &[0u64, 10, 1000, u64::MAX]));
            }
            l
        };
        json!({
            "itemOverheadTokens": pick(u, &[0u32, 4, 100, u32::MAX]),
            "maxItemBytes": pick(u, &[0u64, 100, 65_536, 16 << 20, (16 << 20) + 1]),
            "maxItems": pick(u, &[0u32, 1, 3, 1000, u32::MAX]),
            "partitions": {
                "conversation": limits(u), "evidence": limits(u), "memory": limits(u), "reserve": limits(u),
                "system": limits(u), "task": limits(u), "tools": limits(u),
            },
            "version": pick(u, &["p-1", "ctxk-default-2"]),
        })
    }

    fn read_events(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let mut request = json!({"schemaVersion": 1, "sessionId": self.live_session(u, host).0});
        if one_in(u, 2) {
            request["afterSeq"] = json!(pick(u, &[0u64, 1, 3, 10, u64::MAX]));
        }
        if one_in(u, 2) {
            request["limit"] = json!(pick(u, &[0u32, 1, 2, 10_000, 10_001]));
        }
        request
    }

    fn compact(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let strategy = pick(u, &["local", "provider"]);
        let (session, seq) = self.live_session(u, host);
        let mut request = json!({
            "model": Self::model(u), "now": self.now(), "schemaVersion": 1, "sessionId": session,
            "sink": pick(u, SINKS), "strategy": strategy,
        });
        if strategy == "provider" && !one_in(u, 8) {
            request["provider"] = json!({"maxTokens": pick(u, &[0u32, 1, 600, 100_000]), "model": "summarizer-1"});
        }
        if one_in(u, 2) {
            request["force"] = json!(true);
        }
        if one_in(u, 4) {
            request["allowDegraded"] = json!(false);
        }
        if one_in(u, 4) {
            request["keepFromSeq"] = json!(if one_in(u, 4) { pick(u, &[0u64, 1, u64::MAX]) } else { 1 + u64::from(upto(u, seq as u32)) });
        }
        if one_in(u, 5) {
            request["expectedHead"] = json!({"seq": if one_in(u, 4) { u64::from(upto(u, 20)) } else { seq }});
        }
        if one_in(u, 4) {
            request["policy"] = json!({
                "externalizeOverBytes": pick(u, &[0u64, 64, 1024, 16 << 10]),
                "headChars": pick(u, &[0u32, 10, 1500]),
                "keepRecentBp": pick(u, &[0u32, 1, 3000, 10_000, 10_001]),
                "summaryMaxTokens": pick(u, &[0u32, 1, 1500]),
                "tailChars": pick(u, &[0u32, 10, 500]),
                "triggerBp": pick(u, &[0u32, 1, 8000, 10_000, 10_001]),
                "version": "ctxk-compaction-1",
            });
        }
        request
    }

    /// A provider's answer to an operation awaiting one.
    fn answer(&mut self, u: &mut Unstructured) -> Value {
        let response = match byte(u) % 6 {
            0 => json!({"outcome": "failed", "error": "rate limited"}),
            1 => json!({"outcome": "unknown", "reason": "timeout"}),
            2 => json!({"outcome": "cancelled"}),
            3 => json!({"outcome": "success", "text": "", "usage": {"inputTokens": 0, "outputTokens": 0}}),
            _ => {
                let n = 1 + upto(u, 60);
                json!({"outcome": "success", "text": text(u, n),
                       "usage": {"inputTokens": pick(u, &[0u64, 100, 5000, u64::MAX]), "outputTokens": pick(u, &[0u64, 20, 600, u64::MAX])}})
            }
        };
        json!({"now": self.now(), "operationId": Self::pool(u, &self.operations, "op-missing"), "response": response, "schemaVersion": 1})
    }

    fn reconcile(&mut self, u: &mut Unstructured) -> Value {
        let mut request = json!({"now": self.now(), "operationId": Self::pool(u, &self.operations, "op-missing"), "schemaVersion": 1});
        if one_in(u, 2) {
            request["resolution"] = json!(pick(u, &["retry", "fallback-local", "abandon"]));
        }
        if one_in(u, 3) {
            request["replicas"] = json!([{"deleted": one_in(u, 2), "replica": pick(u, &["laptop", "phone", "tablet"])}]);
        }
        request
    }

    fn content(&mut self, u: &mut Unstructured) -> Call {
        if one_in(u, 2) || self.objects.is_empty() {
            let len = match byte(u) % 8 {
                0 => 0,
                1 => 70_000 + upto(u, 70_000) as usize,
                _ => upto(u, 300) as usize,
            };
            let seed = byte(u);
            let bytes: Vec<u8> = (0..len).map(|i| seed.wrapping_add((i * 31 % 251) as u8)).collect();
            let mut request = json!({"allowedSinks": Self::sinks(u), "now": self.now(), "schemaVersion": 1, "sensitivity": pick(u, SENSITIVITY)});
            if one_in(u, 3) {
                request["mimeType"] = json!("text/plain");
            }
            if one_in(u, 3) {
                let n = upto(u, 8);
                request["summary"] = json!(text(u, n));
            }
            Call::Put(request.to_string(), bytes)
        } else {
            let object = Self::pool(u, &self.objects, "obj-missing");
            Call::Get(json!({"objectId": object, "schemaVersion": 1, "sink": pick(u, SINKS)}).to_string())
        }
    }

    fn read_kernel_events(&mut self, u: &mut Unstructured) -> Value {
        let mut request = json!({"schemaVersion": 1});
        if one_in(u, 2) {
            request["afterSeq"] = json!(pick(u, &[0u64, 1, 5, u64::MAX]));
        }
        if one_in(u, 2) {
            request["limit"] = json!(pick(u, &[0u32, 1, 3, 10_000, u32::MAX]));
        }
        if one_in(u, 3) {
            request["typePrefix"] = json!(pick(u, &["plan", "compaction", "memory", ""]));
        }
        request
    }

    fn scope(&self, u: &mut Unstructured, request: &mut Value, field: &str, id_field: &str) {
        let scope = pick(u, SCOPES);
        request[field] = json!(scope);
        if (!matches!(scope, "global") || one_in(u, 8)) && !one_in(u, 8) {
            request[id_field] = json!(pick(u, SCOPE_IDS));
        }
    }

    fn authority(u: &mut Unstructured) -> Value {
        let mut authority = json!({"kind": pick(u, AUTHORITIES)});
        if one_in(u, 2) {
            authority["actor"] = json!(pick(u, &["lead@example.org", "u1"]));
        }
        if one_in(u, 2) {
            authority["sessionId"] = json!(pick(u, SESSIONS));
        }
        authority
    }

    fn propose(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let n = 1 + upto(u, 2);
        let mut candidates = Vec::new();
        for _ in 0..n {
            let words = 1 + upto(u, 16);
            let mut c = json!({
                "category": pick(u, CATEGORIES),
                "confidence": pick(u, &[0.0, 0.3, 0.5, 0.7, 0.9, 1.0]),
                "content": text(u, words),
                "evidenceRefs": [],
                "importance": pick(u, &[0.0, 0.2, 0.5, 1.0]),
                "provenance": {"origin": pick(u, ORIGINS)},
            });
            self.scope(u, &mut c, "scope", "scopeId");
            let evidence = if one_in(u, 16) { 0 } else { 1 + upto(u, 1) };
            let refs: Vec<Value> = (0..evidence)
                .map(|_| {
                    if one_in(u, 3) {
                        json!({"id": pick(u, &["notes.md", "cfg"]), "kind": pick(u, &["file", "config", "web"])})
                    } else {
                        // An event of a session, mostly one that exists.
                        let (session, seq) = self.live_session(u, host);
                        let seq = if seq == 0 || one_in(u, 8) { 1 + u64::from(upto(u, 12)) } else { 1 + u64::from(upto(u, seq as u32 - 1)) };
                        json!({"id": session, "kind": "session", "seq": seq})
                    }
                })
                .collect();
            c["evidenceRefs"] = json!(refs);
            if refs.is_empty() || one_in(u, 3) {
                c["allowedSinks"] = Self::sinks(u);
            }
            if one_in(u, 2) {
                c["key"] = json!(pick(u, KEYS));
            }
            if one_in(u, 4) {
                c["sensitivity"] = json!(pick(u, SENSITIVITY));
            }
            if one_in(u, 3) {
                c["tags"] = json!([pick(u, TAGS)]);
            }
            if one_in(u, 4) {
                c["retentionPolicy"] = match byte(u) % 4 {
                    0 => json!({"mode": "ttl", "ttlSeconds": pick(u, &[1u64, 60, 3600, 86_400 * 365])}),
                    1 => json!({"mode": "durable", "purgeAfterSeconds": pick(u, &[0u64, 60, 86_400])}),
                    2 => json!({"mode": "session"}),
                    _ => json!({"mode": "turn"}),
                };
            }
            if one_in(u, 4) {
                let dims = 1 + upto(u, 3) as usize;
                let v: Vec<f32> = (0..dims).map(|_| f32::from(byte(u)) / 64.0 - 2.0).collect();
                c["embedding"] = json!(v);
            }
            if one_in(u, 5) {
                c["validFrom"] = json!(self.within(u, -86_400, 86_400));
            }
            if one_in(u, 5) {
                c["validTo"] = json!(self.within(u, -3600, 172_800));
            }
            if one_in(u, 5) {
                let n = upto(u, 6);
                c["summary"] = json!(text(u, n));
            }
            candidates.push(c);
        }
        let mut request = json!({"candidates": candidates, "now": self.now(), "schemaVersion": 1});
        if one_in(u, 2) {
            request["authority"] = Self::authority(u);
        }
        request
    }

    fn consolidate(&mut self, u: &mut Unstructured, host: &Host) -> Value {
        let strategy = pick(u, &["local", "local", "provider"]);
        let mut request = json!({"now": self.now(), "schemaVersion": 1, "sessionId": self.live_session(u, host).0, "strategy": strategy});
        if strategy == "provider" && !one_in(u, 6) {
            request["provider"] = json!({"maxTokens": pick(u, &[1u32, 600]), "model": "extractor-1"});
        }
        if one_in(u, 3) {
            request["afterSeq"] = json!(upto(u, 20));
        }
        if one_in(u, 3) {
            self.scope(u, &mut request, "scope", "scopeId");
        }
        if one_in(u, 4) {
            request["allowDegraded"] = json!(false);
        }
        request
    }

    fn decide(&mut self, u: &mut Unstructured) -> Value {
        let action = pick(u, ACTIONS);
        let memory = Self::pool(u, &self.memories, "mem-missing");
        let mut request = json!({
            "action": action, "authority": Self::authority(u), "memoryId": memory,
            "now": self.now(), "schemaVersion": 1,
        });
        match self.memory_scopes.iter().find(|(id, ..)| *id == memory) {
            Some((_, scope, scope_id)) if !one_in(u, 8) => {
                request["scope"] = scope.clone();
                if let Some(id) = scope_id {
                    request["scopeId"] = id.clone();
                }
            }
            _ => self.scope(u, &mut request, "scope", "scopeId"),
        }
        if matches!(action, "correct" | "supersede") || one_in(u, 8) {
            let n = 1 + upto(u, 10);
            request["content"] = json!(text(u, n));
        }
        if action == "supersede" || one_in(u, 8) {
            request["by"] = json!(Self::pool(u, &self.memories, "mem-missing"));
        }
        if action == "promote" || one_in(u, 8) {
            self.scope(u, &mut request, "targetScope", "targetScopeId");
        }
        if one_in(u, 4) {
            request["allowGlobal"] = json!(true);
        }
        if one_in(u, 3) && !self.revisions.is_empty() {
            request["expectedRevision"] = json!(self.revisions[usize::from(byte(u)) % self.revisions.len()]);
        }
        request
    }

    fn selector(&self, u: &mut Unstructured) -> Value {
        match byte(u) % 5 {
            0 => json!({"key": pick(u, KEYS)}),
            1 => json!({"category": pick(u, CATEGORIES)}),
            2 => json!({"tag": pick(u, TAGS)}),
            3 => json!({"memoryIds": [Self::pool(u, &self.memories, "mem-missing")]}),
            _ => json!({}),
        }
    }

    fn delete(&mut self, u: &mut Unstructured) -> Value {
        let mut request = json!({
            "authority": Self::authority(u), "fence": pick(u, &[0u64, 1, 4, 100, u64::MAX]), "now": self.now(),
            "requestId": pick(u, &["forget-1", "forget-2"]), "schemaVersion": 1, "selector": self.selector(u),
            "subject": pick(u, &["u1", "u2"]),
        });
        self.scope(u, &mut request, "scope", "scopeId");
        if one_in(u, 2) {
            request["replicas"] = json!(["laptop", "phone"][..1 + usize::from(byte(u) % 2)]);
        }
        request
    }

    fn purge(&mut self, u: &mut Unstructured) -> Value {
        let dry = one_in(u, 2);
        let mut request = json!({"dryRun": dry, "now": self.now(), "schemaVersion": 1});
        self.scope(u, &mut request, "scope", "scopeId");
        if !dry || one_in(u, 4) {
            request["confirmation"] = json!(Self::pool(u, &self.confirmations, "purge-unconfirmed"));
        }
        if one_in(u, 2) {
            request["selector"] = self.selector(u);
        }
        request
    }

    fn read_memory(&mut self, u: &mut Unstructured) -> Value {
        let mut request = json!({"now": self.now(), "schemaVersion": 1});
        self.scope(u, &mut request, "scope", "scopeId");
        if one_in(u, 2) {
            request["includeAudit"] = json!(true);
        }
        if one_in(u, 3) {
            request["key"] = json!(pick(u, KEYS));
        }
        if one_in(u, 3) {
            request["states"] = json!([pick(u, STATES), pick(u, STATES)]);
        }
        if one_in(u, 4) {
            request["atTime"] = json!(self.within(u, -86_400, 86_400));
        }
        request
    }

    fn recall(&mut self, u: &mut Unstructured) -> Value {
        let n = 1 + upto(u, 2);
        let mut scopes = Vec::new();
        for _ in 0..n {
            let mut s = json!({});
            self.scope(u, &mut s, "scope", "scopeId");
            scopes.push(s);
        }
        let words = upto(u, 8);
        let mut request = json!({"now": self.now(), "query": text(u, words), "schemaVersion": 1, "scopes": scopes, "sink": pick(u, SINKS)});
        if one_in(u, 2) {
            request["k"] = json!(pick(u, &[0u32, 1, 5, 100, u32::MAX]));
        }
        if one_in(u, 2) {
            request["maxTokens"] = json!(pick(u, &[0u32, 1, 50, 2000, u32::MAX]));
        }
        if one_in(u, 4) {
            let dims = 1 + upto(u, 3) as usize;
            let v: Vec<f32> = (0..dims).map(|_| f32::from(byte(u)) / 64.0 - 2.0).collect();
            request["queryEmbedding"] = json!(v);
        }
        request
    }

    fn resident(&mut self, u: &mut Unstructured) -> Value {
        let mut request = json!({"maxTokens": pick(u, &[0u32, 1, 60, 2000, u32::MAX]), "now": self.now(), "schemaVersion": 1, "sink": pick(u, SINKS)});
        self.scope(u, &mut request, "scope", "scopeId");
        request
    }
}
