//! Readable renderings of kernel responses for the terminal.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The partitions in allocation order (JSON objects list them alphabetically).
const PARTITIONS: [&str; 7] = ["system", "task", "tools", "conversation", "evidence", "memory", "reserve"];

pub fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// One line of at most `width` characters.
pub fn preview(text: &str, width: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= width {
        flat
    } else {
        format!("{}…", flat.chars().take(width - 1).collect::<String>())
    }
}

pub fn info(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {}", s(&v["kernel"]["name"]), s(&v["kernel"]["version"]));
    let _ = writeln!(out, "schema versions: {}", v["schemaVersions"]);
    let _ = writeln!(out, "commands: {}", v["commands"].as_array().into_iter().flatten().map(s).collect::<Vec<_>>().join(", "));
    let _ = writeln!(out, "store revision {}, memory revision {}", n(&v["store"]["revision"]), n(&v["store"]["memoryRevision"]));
    let policy = &v["defaultPolicy"];
    let _ = writeln!(out, "default policy `{}` (partition minimum / ceiling, % of input budget):", s(&policy["version"]));
    for name in PARTITIONS {
        let limits = &policy["partitions"][name];
        let pct = |k: &str| n(&limits[k]) as f64 / 100.0;
        let _ = writeln!(out, "  {name:<13} {:>5.1}% / {:>5.1}%", pct("minimumBp"), pct("ceilingBp"));
    }
    out
}

pub fn plan(v: &Value, all_dropped: bool) -> String {
    let mut out = String::new();
    let binding = &v["binding"];
    let budget = &v["budget"];
    let session = match binding["sessionId"].as_str() {
        Some(id) => format!("session {id} at seq {}", n(&binding["sessionHead"]["seq"])),
        None => "inline items".into(),
    };
    let _ = writeln!(out, "{} — {session}", s(&v["planId"]));
    let _ = writeln!(
        out,
        "model {} → sink {}, policy {}, memory revision {}",
        s(&binding["modelProfile"]),
        s(&binding["sink"]),
        s(&binding["policyVersion"]),
        n(&binding["memoryRevision"])
    );
    let _ = writeln!(
        out,
        "budget: window {} − output {} − margin {} = input {}; used {}, reserve {}, free {}",
        n(&budget["window"]),
        n(&budget["reservedOutput"]),
        n(&budget["safetyMargin"]),
        n(&budget["input"]),
        n(&budget["used"]),
        n(&budget["reserved"]),
        n(&budget["free"])
    );
    let _ = writeln!(out, "digest {}\n", s(&v["digest"]));
    let _ = writeln!(out, "{:<13} {:>8} {:>8} {:>9} {:>8} {:>5} {:>7}", "partition", "minimum", "ceiling", "must-keep", "used", "kept", "dropped");
    for p in v["partitions"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<13} {:>8} {:>8} {:>9} {:>8} {:>5} {:>7}",
            s(&p["name"]),
            n(&p["minimum"]),
            n(&p["ceiling"]),
            n(&p["mustKeep"]),
            n(&p["used"]),
            n(&p["kept"]),
            n(&p["dropped"])
        );
    }

    let context = v["context"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(out, "\nkept, in prompt order ({} items):", context.len());
    for p in &context {
        let item = &p["item"];
        let seq = p["seq"].as_u64().map_or("-".into(), |q| q.to_string());
        let label = match item["role"].as_str() {
            Some(role) => format!("{}/{role}", s(&item["kind"])),
            None => s(&item["kind"]).to_string(),
        };
        let text = item["content"].as_str().or(item["contentRef"]["summary"].as_str()).unwrap_or("");
        let demoted = if p["demoted"].as_bool() == Some(true) { " (demoted: untrusted)" } else { "" };
        let _ = writeln!(
            out,
            "  {seq:>4} {:<13} {:>6} {:<21} {:<22} {}{demoted}",
            s(&p["partition"]),
            n(&p["tokens"]),
            s(&p["keep"]),
            preview(&label, 22),
            preview(text, 60)
        );
    }

    let dropped = v["dropped"].as_array().cloned().unwrap_or_default();
    let mut by_reason: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for d in &dropped {
        let entry = by_reason.entry(s(&d["reason"])).or_default();
        entry.0 += 1;
        entry.1 += n(&d["tokens"]);
    }
    let _ = writeln!(out, "\ndropped ({} items):", dropped.len());
    for (reason, (count, tokens)) in &by_reason {
        let _ = writeln!(out, "  {reason:<20} {count:>5} items {tokens:>9} tokens");
    }
    if all_dropped {
        for d in &dropped {
            let seq = d["seq"].as_u64().map_or("-".into(), |q| q.to_string());
            let _ = writeln!(
                out,
                "  {seq:>4} {:<13} {:>6} {:<20} {}",
                s(&d["partition"]),
                n(&d["tokens"]),
                s(&d["reason"]),
                s(&d["itemId"])
            );
        }
    }
    let pending = v["pendingToolCalls"].as_array().cloned().unwrap_or_default();
    if !pending.is_empty() {
        let _ = writeln!(out, "\ntool calls without a settled outcome:");
        for call in &pending {
            let _ = writeln!(out, "  {} {} — {}", s(&call["callId"]), s(&call["name"]), s(&call["outcome"]));
        }
    }
    out
}

pub fn appended(v: &Value) -> String {
    let appended = v["appended"].as_array().map_or(0, Vec::len);
    let tokens: u64 = v["appended"].as_array().into_iter().flatten().map(|a| n(&a["tokenEstimate"])).sum();
    // An import also says how much of the transcript the session already held.
    let skipped = v["skipped"].as_u64().map_or(String::new(), |k| format!(" ({k} already held)"));
    let mut out = format!(
        "appended {appended} events ({tokens} tokens){skipped} to {}; head seq {} {}\n",
        s(&v["sessionId"]),
        n(&v["head"]["seq"]),
        s(&v["head"]["digest"])
    );
    if let Some(from) = v.get("forkedFrom") {
        out.push_str(&format!("  a branch of {} after its seq {}\n", s(&from["sessionId"]), n(&from["seq"])));
    }
    for (what, list) in [("binary part stored", &v["blobs"]), ("opaque part kept", &v["opaque"])] {
        for part in list.as_array().into_iter().flatten() {
            let kind = part["type"].as_str().map_or(String::new(), |t| format!(" `{t}`"));
            out.push_str(&format!("  {what}{kind}: {} part {}{}\n", s(&part["itemId"]), n(&part["part"]), part["digest"].as_str().map_or(String::new(), |d| format!(" {d}"))));
        }
    }
    out
}

pub fn render(v: &Value) -> String {
    let mut out = String::new();
    let body = &v["body"];
    let turns = ["messages", "input"].iter().find_map(|k| body[k].as_array()).map_or(0, Vec::len);
    let _ = writeln!(out, "{} — {} for model {}: {turns} turns, {} tools", s(&v["planId"]), s(&v["format"]), s(&body["model"]),
        body["tools"].as_array().map_or(0, Vec::len));
    let budget = &v["budget"];
    let _ = writeln!(out, "budget: input {}; used {}, free {}", n(&budget["input"]), n(&budget["used"]), n(&budget["free"]));
    let _ = writeln!(out, "plan digest {}", s(&v["planDigest"]));
    for note in v["notes"].as_array().into_iter().flatten() {
        let _ = write!(out, "  {:<18} {}", s(&note["action"]), s(&note["reason"]));
        if let Some(item) = note["itemId"].as_str() {
            let _ = write!(out, " ({item})");
        }
        if let Some(detail) = note["detail"].as_str() {
            let _ = write!(out, ": {}", preview(detail, 80));
        }
        out.push('\n');
    }
    out.push_str("`--body` prints the request body alone.\n");
    out
}

pub fn content(v: &Value) -> String {
    let reference = &v["contentRef"];
    let how = if v["created"].as_bool() == Some(true) { "stored" } else { "already stored" };
    format!("{how} {} ({} bytes): {}\n", s(&reference["objectId"]), n(&reference["byteLength"]), preview(s(&reference["summary"]), 70))
}

pub fn events(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "session {} — head seq {}", s(&v["sessionId"]), n(&v["head"]["seq"]));
    for e in v["events"].as_array().into_iter().flatten() {
        let item = &e["item"];
        let text = item["content"].as_str().or(item["contentRef"]["summary"].as_str()).unwrap_or("");
        let _ = writeln!(out, "  {:>4} {:<14} {}", n(&e["seq"]), s(&item["kind"]), preview(text, 70));
    }
    if v["more"].as_bool() == Some(true) {
        let _ = writeln!(out, "  … more after this page");
    }
    out
}

pub fn compaction(v: &Value) -> String {
    let mut out = String::new();
    let states: Vec<&str> = v["states"].as_array().into_iter().flatten().map(s).collect();
    let _ = writeln!(out, "{} — {} ({})", s(&v["operationId"]), s(&v["status"]), states.join(" → "));
    if let Some(reason) = v["reason"].as_str() {
        let _ = writeln!(out, "  {reason}");
    }
    if let Some(request) = v["providerRequest"].as_object() {
        let _ = writeln!(out, "  the provider must be asked: model {}, at most {} tokens, {} messages",
            s(&request["model"]), n(&request["maxTokens"]), request["messages"].as_array().map_or(0, Vec::len));
    }
    let record = &v["compaction"];
    if record.is_object() {
        let m = &record["metrics"];
        let _ = writeln!(
            out,
            "  {} — {} strategy{}: {} → {} tokens ({:.1}%), cut at #{}, {} events summarized, {} preserved, {} externalized ({} bytes), {} withheld",
            s(&record["compactionId"]),
            s(&m["strategy"]),
            if m["degraded"].as_bool() == Some(true) { " (degraded)" } else { "" },
            n(&m["inputTokens"]),
            n(&m["outputTokens"]),
            n(&m["ratioPermille"]) as f64 / 10.0,
            n(&record["cutSeq"]),
            n(&m["spanEvents"]),
            record["preserved"].as_array().map_or(0, Vec::len),
            n(&m["externalizedItems"]),
            n(&m["externalizedBytes"]),
            n(&m["withheld"]),
        );
        for reference in record["artifactRefs"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  artifact {} ({} bytes, {})", s(&reference["objectId"]), n(&reference["byteLength"]), s(&reference["mimeType"]));
        }
    }
    let _ = writeln!(out, "  head seq {} {}", n(&v["head"]["seq"]), s(&v["head"]["digest"]));
    out
}

pub fn kernel_events(v: &Value) -> String {
    let mut out = String::new();
    for e in v["events"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  {:>5} {} {:<42} {}", n(&e["seq"]), s(&e["at"]), s(&e["type"]), e["data"]);
    }
    out
}

pub fn recall(v: &Value) -> String {
    let mut out = String::new();
    let memories = v["memories"].as_array().map(Vec::as_slice).unwrap_or_default();
    if memories.is_empty() {
        out.push_str("nothing recalled\n");
    }
    for m in memories {
        let evidence = &m["evidenceRefs"][0];
        let source = match evidence["id"].as_str() {
            Some(id) => format!("; from {} {id} event {}", s(&evidence["kind"]), n(&evidence["seq"])),
            None => String::new(),
        };
        let _ = writeln!(out, "{}. {}", n(&m["rank"]), preview(s(&m["content"]), 100));
        let _ = writeln!(
            out,
            "   {} · {} {} · {}{source} · matched by {}",
            s(&m["memoryId"]),
            s(&m["scope"]),
            s(&m["scopeId"]),
            s(&m["authority"]),
            m["matchedBy"].as_array().into_iter().flatten().map(s).collect::<Vec<_>>().join("+")
        );
        for h in m["history"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "   was: {} (until {})", preview(s(&h["content"]), 80), s(&h["validTo"]));
        }
    }
    let filtered: Vec<String> =
        v["filtered"].as_object().into_iter().flatten().map(|(reason, count)| format!("{} {reason}", n(count))).collect();
    if !filtered.is_empty() {
        let _ = writeln!(out, "filtered: {}", filtered.join(", "));
    }
    out
}

pub fn memory_receipt(v: &Value) -> String {
    let m = &v["memory"];
    let mut out = format!("{} {} · {} {} · {}\n", s(&m["memoryId"]), s(&m["state"]), s(&m["scope"]), s(&m["scopeId"]), preview(s(&m["content"]), 80));
    for id in v["superseded"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "supersedes {}", s(id));
    }
    for id in v["conflicts"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "conflicts with {} (both kept)", s(id));
    }
    out
}

pub fn verify(v: &Value) -> String {
    let checked: Vec<String> = v["checked"].as_object().into_iter().flatten().map(|(what, count)| format!("{} {what}", n(count))).collect();
    let mut out = if v["ok"] == true {
        format!("store ok · checked {}\n", checked.join(", "))
    } else {
        format!("{} problems · checked {}\n", n(&v["problemCount"]), checked.join(", "))
    };
    for problem in v["problems"].as_array().into_iter().flatten() {
        let memory = problem["memoryId"].as_str().map(|id| format!(" ({id})")).unwrap_or_default();
        let _ = writeln!(out, "  {} {}{memory}: {}", s(&problem["kind"]), s(&problem["key"]), s(&problem["message"]));
    }
    if v["problems"].as_array().map_or(0, Vec::len) as u64 != v["problemCount"].as_u64().unwrap_or(0) {
        let _ = writeln!(out, "  … only the first {} are listed", v["problems"].as_array().map_or(0, Vec::len));
    }
    out
}

pub fn deletion(v: &Value) -> String {
    let mut out = format!("{} {} · {} matched\n", s(&v["deletionId"]), s(&v["status"]), n(&v["matched"]));
    for part in v["receipts"].as_array().into_iter().flatten() {
        let fields: Vec<String> = part
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), String::from)))
            .collect();
        let _ = writeln!(out, "  {}", fields.join(" "));
    }
    out
}
