//! `ctxk demo`: replays a recorded agent session (examples/demo) through the
//! kernel the way an agent host drives it — append each turn, plan the next
//! call, compact when the plan no longer fits, externalize large tool output,
//! remember, extract, recall and forget — and reports what happened.
//!
//! Every kernel call is also written out as a parity fixture, so the other
//! hosts can replay exactly the same calls and show the same digest.

use crate::parity;
use crate::report::{self as render_report, n, preview, s};
use anyhow::{bail, Context as _};
use ctxkernel_host::Kernel;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The kernel, with every call it answers recorded as a fixture step.
struct Recorder<'k> {
    kernel: &'k mut Kernel,
    steps: Vec<Value>,
}

impl Recorder<'_> {
    fn call(&mut self, command: &str, request: Value) -> anyhow::Result<Value> {
        let response = self.kernel.call_json(command, &request).with_context(|| format!("`{command}` failed"))?;
        self.steps.push(json!({"command": command, "request": request}));
        Ok(response)
    }

    fn put_content(&mut self, request: Value, spec: &Value) -> anyhow::Result<Value> {
        let bytes = parity::content(spec)?;
        let response = self.kernel.put_content(&request.to_string(), &bytes).context("`put-content` failed")?;
        self.steps.push(json!({"command": "put-content", "request": request, "content": spec}));
        Ok(serde_json::from_str(&response)?)
    }
}

/// What the report shows, gathered while the session replays.
#[derive(Default)]
struct Report {
    turns: usize,
    items: usize,
    plans: usize,
    compactions: Vec<String>,
    externalized: Vec<String>,
    memories: Vec<String>,
    states: Vec<String>,
    recalls: Vec<String>,
    deletion: Vec<String>,
    final_plan: String,
}

pub struct Outcome {
    pub report: String,
    pub fixture: Value,
}

/// Replays `demo` (agent-session.json); `progress` gets one line now and then.
pub fn run(kernel: &mut Kernel, demo: &Value, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Outcome> {
    let mut k = Recorder { kernel, steps: Vec::new() };
    let mut report = Report::default();
    let provider = &demo["provider"];
    let mut summaries = provider["summaries"].as_array().context("provider.summaries")?.iter();
    let memory = &demo["memory"];
    let (project, agent) = (s(&memory["project"]), s(&memory["agent"]));
    let plan_every = demo["planEvery"].as_u64().unwrap_or(5) as usize;

    for session in demo["sessions"].as_array().context("sessions")? {
        let id = s(&session["sessionId"]);
        let turns = session["turns"].as_array().context("turns")?;
        let mut head = 0u64;
        for (t, turn) in turns.iter().enumerate() {
            let now = turn["now"].clone();
            report.turns += 1;

            head = append_turn(&mut k, &mut report, id, head, turn)?;

            if let Some(remember) = turn.get("remember") {
                remember_fact(&mut k, &mut report, id, project, head, remember, &now)?;
            }
            if turn.get("consolidate").is_some() {
                consolidate(&mut k, &mut report, id, agent, &memory["reviewer"], provider, &now)?;
            }
            for query in turn["recall"].as_array().into_iter().flatten() {
                recall(&mut k, &mut report, s(query), project, agent, &demo["sink"], &now)?;
            }
            if let Some(forget) = turn.get("forget") {
                forget_memory(&mut k, &mut report, id, agent, forget, &now)?;
            }

            let last = t + 1 == turns.len();
            if (t + 1) % plan_every == 0 || last {
                let planned = plan(&mut k, demo, id, &now)?;
                report.plans += 1;
                let over = planned["dropped"].as_array().into_iter().flatten().any(|d| {
                    matches!(s(&d["reason"]), "budget-exhausted" | "partition-ceiling" | "history-cutoff")
                });
                if over {
                    head = compact(&mut k, &mut report, demo, id, &planned, &mut summaries, &now)?.unwrap_or(head);
                }
                if last {
                    report.final_plan.push_str(&format!("session {id}:\n{}", kept_and_why(&plan(&mut k, demo, id, &now)?)));
                }
                progress(&format!(
                    "{id}: turn {}/{} · {} events · {} of {} input tokens planned · {} compactions",
                    t + 1,
                    turns.len(),
                    head,
                    n(&planned["budget"]["used"]),
                    n(&planned["budget"]["input"]),
                    report.compactions.len()
                ));
            }
        }
    }
    // Where every memory ended up: superseded ones stay readable for the audit trail.
    let now = demo["sessions"].as_array().and_then(|s| s.last()).and_then(|s| s["turns"].as_array()?.last()).map(|t| t["now"].clone());
    for (scope, id) in [("project", project), ("agent", agent)] {
        let read = k.call(
            "read-memory",
            json!({"schemaVersion": 1, "scope": scope, "scopeId": id, "now": now,
                   "states": ["candidate", "active", "reinforced", "superseded", "archived", "expired"]}),
        )?;
        for view in read["memories"].as_array().into_iter().flatten() {
            let record = &view["record"];
            report.states.push(format!(
                "{} {:<11} {scope}/{id} {:?}{}",
                s(&record["memoryId"]),
                s(&view["effectiveState"]),
                s(&record["content"]),
                record["supersededBy"].as_str().map(|by| format!(" (superseded by {by})")).unwrap_or_default()
            ));
        }
    }
    let fixture = json!({
        "schemaVersion": 1,
        "name": "demo",
        "description": demo["description"],
        "steps": k.steps,
    });
    Ok(Outcome { report: render(&report), fixture })
}

/// Appends one turn's items. The host owns the log: it numbers the items and
/// stores large output by digest before it enters the session.
fn append_turn(k: &mut Recorder, report: &mut Report, id: &str, head: u64, turn: &Value) -> anyhow::Result<u64> {
    let now = &turn["now"];
    let mut items = Vec::new();
    for (i, item) in turn["items"].as_array().context("items")?.iter().enumerate() {
        let mut item = item.clone();
        item["sourceRef"] = json!({"kind": "session", "id": id, "seq": head + i as u64 + 1});
        if let Some(spec) = item.as_object_mut().and_then(|o| o.remove("contentSpec")) {
            let stored = k.put_content(
                json!({"schemaVersion": 1, "mimeType": "text/plain", "allowedSinks": ["model:*", "log"],
                       "sensitivity": "internal", "now": now}),
                &spec,
            )?;
            let reference = &stored["contentRef"];
            report.externalized.push(format!(
                "{} ({:.1} MiB) → {} · {}",
                s(&item["itemId"]),
                n(&reference["byteLength"]) as f64 / (1 << 20) as f64,
                s(&reference["objectId"]),
                s(&reference["digest"])
            ));
            item.as_object_mut().expect("an item").remove("content");
            item["contentRef"] = reference.clone();
        }
        items.push(item);
    }
    if items.is_empty() {
        return Ok(head);
    }
    report.items += items.len();
    let appended = k.call(
        "append-events",
        json!({"schemaVersion": 1, "sessionId": id, "expectedHead": {"seq": head}, "items": items, "now": now}),
    )?;
    Ok(n(&appended["head"]["seq"]))
}

fn plan(k: &mut Recorder, demo: &Value, session: &str, now: &Value) -> anyhow::Result<Value> {
    k.call(
        "plan-context",
        json!({"schemaVersion": 1, "sessionId": session, "model": demo["model"], "sink": demo["sink"],
               "items": demo["context"], "now": now}),
    )
}

/// Asks for a compaction, answering the summarizer with the next recorded
/// response; returns the new head, or None when the kernel found it not needed.
fn compact<'a>(
    k: &mut Recorder,
    report: &mut Report,
    demo: &Value,
    session: &str,
    plan: &Value,
    summaries: &mut impl Iterator<Item = &'a Value>,
    now: &Value,
) -> anyhow::Result<Option<u64>> {
    let mut receipt = k.call(
        "compact-context",
        json!({"schemaVersion": 1, "sessionId": session, "model": demo["model"], "sink": demo["sink"], "strategy": "provider",
               "provider": demo["provider"]["summarizer"], "now": now}),
    )?;
    if s(&receipt["status"]) == "not-needed" {
        return Ok(None);
    }
    if s(&receipt["status"]) == "awaiting-provider" {
        let answer = summaries.next().context("the session needs more summaries than were recorded")?;
        receipt = k.call(
            "continue-operation",
            json!({"schemaVersion": 1, "operationId": receipt["operationId"], "response": answer, "now": now}),
        )?;
    }
    let status = s(&receipt["status"]);
    if !matches!(status, "committed" | "degraded") {
        bail!("compaction ended `{status}`: {}", s(&receipt["reason"]));
    }
    let record = &receipt["compaction"];
    let metrics = &record["metrics"];
    let preserved = record["preserved"].as_array().map_or(0, Vec::len);
    report.compactions.push(format!(
        "{session} at seq {:>4}: {status:<9} {:>6} → {:>6} tokens ({}‰), strategy {}{}; plan before: {} of {} tokens, {} dropped; {} events before the cut kept verbatim",
        n(&record["cutSeq"]),
        n(&metrics["inputTokens"]),
        n(&metrics["outputTokens"]),
        n(&metrics["ratioPermille"]),
        s(&record["strategy"]),
        if record["degraded"] == true { " (the summarizer failed: local summary)" } else { "" },
        n(&plan["budget"]["used"]),
        n(&plan["budget"]["input"]),
        plan["dropped"].as_array().map_or(0, Vec::len),
        preserved
    ));
    Ok(Some(n(&receipt["head"]["seq"])))
}

/// The host's "remember" action: the user's latest message states the fact,
/// so it is activated with user-explicit authority (superseding the slot's
/// older value, if any).
fn remember_fact(k: &mut Recorder, report: &mut Report, session: &str, project: &str, head: u64, fact: &Value, now: &Value) -> anyhow::Result<()> {
    let proposed = k.call(
        "propose-memory",
        json!({"schemaVersion": 1, "now": now, "candidates": [{
            "category": "fact", "content": fact["content"], "key": fact["key"], "scope": "project", "scopeId": project,
            "confidence": 0.9, "importance": 0.8, "provenance": {"origin": "user"},
            "evidenceRefs": [{"kind": "session", "id": session, "seq": head}]}]}),
    )?;
    let id = proposed["receipts"][0]["memory"]["memoryId"].clone();
    let decided = k.call(
        "decide-memory",
        json!({"schemaVersion": 1, "now": now, "memoryId": id, "action": "activate", "scope": "project", "scopeId": project,
               "authority": {"kind": "user-explicit", "sessionId": session}}),
    )?;
    let superseded = decided["superseded"].as_array().map(|v| v.iter().map(s).collect::<Vec<_>>().join(", ")).unwrap_or_default();
    report.memories.push(format!(
        "{} [{} project/{project}, key {}] {:?}{}",
        s(&id),
        s(&decided["memory"]["state"]),
        s(&fact["key"]),
        s(&fact["content"]),
        if superseded.is_empty() { String::new() } else { format!(" — supersedes {superseded}") }
    ));
    Ok(())
}

/// Extraction with the recorded model answer, then a reviewer activates the candidates.
fn consolidate(k: &mut Recorder, report: &mut Report, session: &str, agent: &str, reviewer: &Value, provider: &Value, now: &Value) -> anyhow::Result<()> {
    let mut extracted = k.call(
        "consolidate-memory",
        json!({"schemaVersion": 1, "sessionId": session, "strategy": "provider", "scope": "agent", "scopeId": agent,
               "provider": provider["extractor"], "now": now}),
    )?;
    if s(&extracted["status"]) == "awaiting-provider" {
        extracted = k.call(
            "continue-operation",
            json!({"schemaVersion": 1, "operationId": extracted["operationId"], "response": provider["extraction"], "now": now}),
        )?;
    }
    for receipt in extracted["receipts"].as_array().into_iter().flatten() {
        let memory = &receipt["memory"];
        let decided = k.call(
            "decide-memory",
            json!({"schemaVersion": 1, "now": now, "memoryId": memory["memoryId"], "action": "activate", "scope": "agent",
                   "scopeId": agent, "authority": {"kind": "management", "actor": reviewer}}),
        )?;
        report.memories.push(format!(
            "{} [{} agent/{agent}, {}] {:?} — extracted from {session} event {}, activated by {}",
            s(&memory["memoryId"]),
            s(&decided["memory"]["state"]),
            s(&memory["category"]),
            s(&memory["content"]),
            n(&memory["evidenceRefs"][0]["seq"]),
            s(reviewer)
        ));
    }
    Ok(())
}

fn recall(k: &mut Recorder, report: &mut Report, query: &str, project: &str, agent: &str, sink: &Value, now: &Value) -> anyhow::Result<()> {
    let recalled = k.call(
        "recall-memory",
        json!({"schemaVersion": 1, "query": query, "k": 3, "sink": sink, "now": now,
               "scopes": [{"scope": "project", "scopeId": project}, {"scope": "agent", "scopeId": agent}]}),
    )?;
    report.recalls.push(format!("{query:?}\n{}", render_report::recall(&recalled).trim_end()));
    Ok(())
}

/// The user asks to forget: a fenced deletion with a pending replica, then the replica confirms.
fn forget_memory(k: &mut Recorder, report: &mut Report, session: &str, agent: &str, forget: &Value, now: &Value) -> anyhow::Result<()> {
    let live = k.call("read-memory", json!({"schemaVersion": 1, "scope": "agent", "scopeId": agent, "now": now}))?;
    let target = live["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["record"]["content"] == forget["content"])
        .context("the memory to forget is not there")?;
    let id = target["record"]["memoryId"].clone();
    // The memory revision only grows: a fence no older write can pass.
    let fence = k.call("info", json!({"schemaVersion": 1}))?["store"]["memoryRevision"].clone();
    let deletion = k.call(
        "delete-memory",
        json!({"schemaVersion": 1, "now": now, "requestId": format!("forget-{}", s(&id)), "subject": session, "scope": "agent",
               "scopeId": agent, "selector": {"memoryIds": [id]}, "authority": {"kind": "user-explicit", "sessionId": session},
               "fence": fence, "replicas": forget["replicas"]}),
    )?;
    let settled = k.call(
        "reconcile",
        json!({"schemaVersion": 1, "now": now, "operationId": deletion["deletionId"],
               "replicas": forget["replicas"].as_array().into_iter().flatten().map(|r| json!({"replica": r, "deleted": true})).collect::<Vec<_>>()}),
    )?;
    for (label, receipt) in [("requested", &deletion), ("after the replica confirmed", &settled)] {
        report.deletion.push(format!("{label}: {}", render_report::deletion(receipt).trim_end()));
    }
    let after = k.call(
        "recall-memory",
        json!({"schemaVersion": 1, "query": forget["content"], "k": 3, "sink": "model:local", "now": now,
               "scopes": [{"scope": "agent", "scopeId": agent}]}),
    )?;
    report.deletion.push(format!(
        "recall of the forgotten text afterwards: {} results",
        after["memories"].as_array().map_or(0, Vec::len)
    ));
    Ok(())
}

/// The plan's kept items by keep reason, and its must-keep items.
fn kept_and_why(plan: &Value) -> String {
    let mut by_reason: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut must_keep = Vec::new();
    for p in plan["context"].as_array().into_iter().flatten() {
        let reason = s(&p["keep"]);
        let entry = by_reason.entry(reason).or_default();
        entry.0 += 1;
        entry.1 += n(&p["tokens"]);
        if reason != "selected" {
            must_keep.push(format!("    {:<18} {:<24} {}", reason, s(&p["itemId"]), preview(s(&p["item"]["content"]), 70)));
        }
    }
    let mut out = format!(
        "  {} items, {} of {} input tokens; dropped {}\n",
        plan["context"].as_array().map_or(0, Vec::len),
        n(&plan["budget"]["used"]),
        n(&plan["budget"]["input"]),
        plan["dropped"].as_array().map_or(0, Vec::len)
    );
    for (reason, (count, tokens)) in &by_reason {
        let _ = writeln!(out, "  {reason:<18} {count:>4} items {tokens:>6} tokens");
    }
    out.push_str("  kept regardless of budget:\n");
    for line in must_keep {
        let _ = writeln!(out, "{line}");
    }
    out
}

fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== replayed {} turns, {} items, {} plans", r.turns, r.items, r.plans);
    let section = |out: &mut String, title: &str, lines: &[String]| {
        let _ = writeln!(out, "\n== {title}");
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    };
    section(&mut out, "compactions (tokens before → after)", &r.compactions);
    section(&mut out, "large tool output, stored by sha256", &r.externalized);
    let _ = write!(out, "\n== what the last plan of each session kept, and why\n{}", r.final_plan);
    section(&mut out, "memories, as they were decided", &r.memories);
    section(&mut out, "memories at the end (deleted ones are gone, their tombstones remain)", &r.states);
    section(&mut out, "recall in the second session", &r.recalls);
    section(&mut out, "forgetting", &r.deletion);
    out
}
