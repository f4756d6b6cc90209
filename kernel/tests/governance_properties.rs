//! Governance invariants over generated inputs (docs/SECURITY.md): no
//! derivation widens who may read something, no request sees a scope it did
//! not admit, and every transition is checked against the authority table.
//! proptest prints the shrunk failing input; keep each as a named test in
//! `governance.rs`.

mod common;

use common::*;
use ctxkernel::authority::{self, Act, Grounding, Subject, UserMessage};
use ctxkernel::contracts::{AuthorityKind, Origin, Sensitivity, SinkPolicy, Trust};
use ctxkernel::store::MemStore;
use ctxkernel::{Command, Kernel};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const SINKS: &[&str] = &["model:a", "model:b", "model:local", "vault", "audit", "public-log"];
const LISTS: &[&[&str]] = &[&["*"], &["model:*"], &["model:a"], &["model:a", "vault"], &["vault"], &[], &["model:*", "audit"], &["audit"]];
const SENSITIVITIES: [Sensitivity; 5] =
    [Sensitivity::Public, Sensitivity::Internal, Sensitivity::Personal, Sensitivity::Secret, Sensitivity::Restricted];

fn policy() -> impl Strategy<Value = SinkPolicy> {
    (0..SENSITIVITIES.len(), 0..LISTS.len()).prop_map(|(s, l)| {
        let sinks: Vec<String> = LISTS[l].iter().map(|s| s.to_string()).collect();
        SinkPolicy::new(SENSITIVITIES[s], &sinks)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Narrowing is the exact overlap: it admits a sink only when both
    /// policies do, never lowers sensitivity, and loses nothing both admit
    /// (a secret's patterns admit nothing, so they are dropped).
    #[test]
    fn narrowing_never_widens(a in policy(), b in policy()) {
        let n = a.narrow(&b);
        prop_assert!(n.sensitivity >= a.sensitivity && n.sensitivity >= b.sensitivity);
        for sink in SINKS {
            prop_assert_eq!(n.admits(sink), a.admits(sink) && b.admits(sink) && (n.sensitivity < Sensitivity::Secret || n.sinks.iter().any(|s| s == sink)),
                "{:?} ∧ {:?} on {}", a, b, sink);
        }
        prop_assert_eq!(&a.narrow(&b), &b.narrow(&a));
    }

    /// A compaction's archives and summary are readable only where every
    /// event they hold was.
    #[test]
    fn compaction_never_widens_a_policy(policies in prop::collection::vec(policy(), 4..14)) {
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        for (i, p) in policies.iter().enumerate() {
            conv.push("tool-evidence", &format!("output {i} {}", words(150)), json!({"trust": "verified", "provenance": {"origin": "tool"},
                "sensitivity": p.sensitivity.name(), "allowedSinks": p.sinks}));
        }
        conv.user("and now?");
        call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
        let receipt = call(&mut store, Command::CompactContext, &json!({"schemaVersion": 1, "sessionId": "s", "now": NOW, "strategy": "local",
            "sink": "model:a", "force": true, "keepFromSeq": conv.items.len(),
            "model": {"profile": "m", "window": 16000, "reservedOutput": 1000, "safetyMargin": 0}})).unwrap();
        let record = &receipt["compaction"];
        let policy_of = |seq: u64| &policies[seq as usize - 1];
        for archive in record["artifactRefs"].as_array().into_iter().flatten() {
            for sink in SINKS {
                let read = Kernel::default().get_content(&mut store, &json!({"schemaVersion": 1, "objectId": archive["objectId"], "sink": sink}).to_string());
                let Ok(bytes) = read else { continue };
                for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let event: Value = serde_json::from_slice(line).unwrap();
                    let seq = event["seq"].as_u64().unwrap();
                    prop_assert!(policy_of(seq).admits(sink), "{} read event {} ({:?})", sink, seq, policy_of(seq));
                }
            }
        }
        if let Some(summary) = record["summary"].as_object() {
            let sensitivity: Sensitivity = serde_json::from_value(summary["sensitivity"].clone()).unwrap();
            let sinks: Vec<String> = serde_json::from_value(summary["allowedSinks"].clone()).unwrap();
            let summary_policy = SinkPolicy::new(sensitivity, &sinks);
            let preserved: BTreeSet<u64> = record["preserved"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap()).collect();
            for seq in 1..=record["cutSeq"].as_u64().unwrap() {
                let p = policy_of(seq.min(policies.len() as u64));
                if seq as usize > policies.len() || preserved.contains(&seq) || !p.admits("model:a") {
                    continue;
                }
                prop_assert!(sensitivity >= p.sensitivity);
                for sink in SINKS {
                    prop_assert!(!summary_policy.admits(sink) || p.admits(sink), "the summary reaches {} which event {} does not", sink, seq);
                }
            }
        }
    }

    /// Recall, read and the resident snapshot return nothing from a scope
    /// the request did not admit: not as a result, not in history, not as a
    /// conflict.
    #[test]
    fn no_request_sees_a_scope_it_did_not_admit(
        memories in prop::collection::vec((0usize..4, 0usize..3, any::<bool>()), 2..12),
        admitted in prop::collection::btree_set(0usize..4, 1..3),
        promote in prop::collection::vec((0usize..12, 0usize..4), 0..4),
    ) {
        const SCOPES: [(&str, &str); 4] = [("project", "alpha"), ("project", "beta"), ("user", "u1"), ("agent", "-")];
        const FACTS: [&str; 3] = ["the deploy window is Tuesday", "the deploy window is Wednesday", "the deploy window is Friday"];
        let mut store = MemStore::default();
        let mut conv = Conv::new();
        conv.user("facts about deploys");
        call(&mut store, Command::AppendEvents, &json!({"schemaVersion": 1, "sessionId": "s", "expectedHead": {"seq": 0}, "items": conv.items, "now": NOW})).unwrap();
        let admin = json!({"kind": "management", "actor": "ops"});
        let mut ids = Vec::new();
        for (scope, fact, keyed) in &memories {
            let (s, id) = SCOPES[*scope];
            let mut c = json!({"scope": s, "scopeId": id, "category": "fact", "content": FACTS[*fact], "confidence": 0.7, "importance": 0.5,
                "provenance": {"origin": "user"}, "evidenceRefs": [{"kind": "session", "id": "s", "seq": 1}]});
            if *keyed {
                c["key"] = json!("deploy.window");
            }
            let r = call(&mut store, Command::ProposeMemory, &json!({"schemaVersion": 1, "now": NOW, "candidates": [c], "authority": admin})).unwrap();
            ids.push((r["receipts"][0]["memory"]["memoryId"].clone(), *scope));
        }
        for (which, to) in promote {
            let Some((id, from)) = ids.get(which).cloned() else { continue };
            let (s, sid) = SCOPES[from];
            let (ts, tid) = SCOPES[to];
            let _ = call(&mut store, Command::DecideMemory, &json!({"schemaVersion": 1, "now": NOW, "memoryId": id, "action": "promote",
                "authority": admin, "scope": s, "scopeId": sid, "targetScope": ts, "targetScopeId": tid}));
        }
        let read_all = |store: &mut MemStore| -> Vec<(String, String, Option<String>)> {
            let mut out = Vec::new();
            for (s, id) in SCOPES {
                let r = call(store, Command::ReadMemory, &json!({"schemaVersion": 1, "now": NOW, "scope": s, "scopeId": id,
                    "states": ["active", "reinforced", "superseded", "candidate", "archived", "expired"]})).unwrap();
                for m in r["memories"].as_array().unwrap() {
                    out.push((m["record"]["memoryId"].as_str().unwrap().to_string(), s.to_string(), Some(id.to_string())));
                }
            }
            out
        };
        let everything = read_all(&mut store);
        let scopes: Vec<Value> = admitted.iter().map(|i| json!({"scope": SCOPES[*i].0, "scopeId": SCOPES[*i].1})).collect();
        let allowed: BTreeSet<String> = everything
            .iter()
            .filter(|(_, s, id)| admitted.iter().any(|i| SCOPES[*i].0 == s && Some(SCOPES[*i].1.to_string()) == *id))
            .map(|(m, _, _)| m.clone())
            .collect();
        let recalled = call(&mut store, Command::RecallMemory, &json!({"schemaVersion": 1, "now": NOW, "query": "deploy window",
            "scopes": scopes, "sink": "model:a", "k": 50})).unwrap();
        for m in recalled["memories"].as_array().unwrap() {
            prop_assert!(allowed.contains(m["memoryId"].as_str().unwrap()));
            for h in m["history"].as_array().unwrap() {
                prop_assert!(allowed.contains(h["memoryId"].as_str().unwrap()), "history {} crossed scopes", h);
            }
            for c in m["conflicts"].as_array().unwrap() {
                prop_assert!(allowed.contains(c.as_str().unwrap()), "conflict {} crossed scopes", c);
            }
        }
        for i in &admitted {
            let (s, id) = SCOPES[*i];
            let snapshot = call(&mut store, Command::ResidentSnapshot, &json!({"schemaVersion": 1, "now": NOW, "scope": s, "scopeId": id,
                "sink": "model:a", "maxTokens": 2000})).unwrap();
            for m in snapshot["included"].as_array().unwrap() {
                prop_assert!(everything.iter().any(|(x, xs, xid)| x == m.as_str().unwrap() && xs == s && xid.as_deref() == Some(id)));
            }
        }
    }

    /// The authority table, decided for every combination.
    #[test]
    fn every_transition_is_checked_against_the_table(
        act in 0usize..10, kind in 0usize..3, actor in any::<bool>(), origin in 0usize..7, trust in 0usize..5,
        said in any::<bool>(), message in any::<bool>(),
    ) {
        let acts = [Act::Activate, Act::Correct, Act::Reinforce, Act::Expire, Act::Archive, Act::Reject, Act::Supersede, Act::Promote, Act::Delete, Act::Purge];
        let kinds = [AuthorityKind::Policy, AuthorityKind::Management, AuthorityKind::UserExplicit];
        let origins = [Origin::User, Origin::Host, Origin::Model, Origin::Tool, Origin::Import, Origin::Policy, Origin::Kernel];
        let trusts = [Trust::Host, Trust::Verified, Trust::User, Trust::External, Trust::Untrusted];
        let (act, kind, origin, trust) = (acts[act], kinds[kind], origins[origin], trusts[trust]);
        let subject = Subject { origin, evidence_trust: Some(trust) };
        let user = UserMessage { text: if said { "Remember that releases go out on Tuesdays.".into() } else { "Do not say that releases go out on Tuesdays".into() } };
        let claim = "releases go out on Tuesdays";
        let grounding = match act {
            Act::Activate | Act::Correct => Grounding::Said(claim),
            Act::Delete => Grounding::Forget,
            Act::Purge => Grounding::Never,
            _ => Grounding::Said(claim),
        };
        let result = authority::check(act, kind, actor.then_some("ops"), &subject, grounding, message.then_some(&user));
        let expected = match kind {
            AuthorityKind::Management => actor,
            AuthorityKind::Policy => match act {
                Act::Reinforce | Act::Expire | Act::Archive | Act::Delete => true,
                Act::Activate => !matches!(origin, Origin::Model | Origin::Tool) && trust < Trust::External,
                _ => false,
            },
            AuthorityKind::UserExplicit => message && act != Act::Purge && act != Act::Delete && said,
        };
        prop_assert_eq!(result.is_ok(), expected, "{:?} by {:?}", act, kind);
    }
}
