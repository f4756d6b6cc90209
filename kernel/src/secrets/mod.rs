//! Secret detection: whether a text carries a credential that must not be
//! kept.
//!
//! A secret is anything that grants access when read back: API keys and
//! tokens, private keys, passwords (assigned, in a URL, or stated in prose),
//! session cookies, bearer and basic authorization, recovery codes.
//!
//! The rules are gitleaks' default rule set, vendored as data with its licence
//! and release (`gitleaks/`, applied as gitleaks applies it: keyword
//! prefilter, entropy minimum, secret group, global and per-rule allowlists),
//! followed by the kernel's own rules for what a memory text holds and source
//! code seldom does (see `own`). Each finding names its rule; no finding ever
//! carries the secret.
//!
//! Before scanning, the text is normalized: characters that render as nothing
//! (zero-width spaces and joiners, bidirectional controls, soft hyphens, …)
//! are removed and the rest is folded to NFKC, so a token split by U+200B or
//! written in fullwidth letters reads as the token.
//!
//! Public surface: [`detect`] and its [`Finding`]; [`rule_statuses`] for the
//! tests that check every rule.

mod engine;
mod own;
mod rules;
mod words;

pub use engine::Source;
use crate::text::normalize;
pub use rules::GITLEAKS_VERSION;

/// Why a text was judged to carry a secret. Names the rule, never the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// The gitleaks rule id (`github-pat`, `generic-api-key`, …) or the
    /// kernel's own (`kernel-password`, …).
    pub rule: &'static str,
    /// The coarse kind, in a few words: `password`, `API key`, `private key`, …
    pub kind: &'static str,
    pub description: &'static str,
}

/// The first secret found in `text`, if any. The same text gives the same
/// finding on every call and every host: rules run in a fixed order
/// (gitleaks' specific rules, the kernel's, gitleaks' generic ones) and the
/// first rule with a finding names it.
pub fn detect(text: &str) -> Option<Finding> {
    engine::engine().detect(normalize(text).as_bytes())
}

/// The kind of secret `text` holds, if any: what errors and reasons name.
pub fn kind(text: &str) -> Option<&'static str> {
    detect(text).map(|finding| finding.kind)
}

/// One rule's standing, for the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStatus {
    pub rule: &'static str,
    pub source: Source,
    /// `Ok` when it compiled; otherwise why it is not applied.
    pub status: Result<(), String>,
}

/// Every rule, compiled now, in scan order, then the gitleaks rules that
/// cannot apply to a text, each with its reason.
pub fn rule_statuses() -> Vec<RuleStatus> {
    let engine = engine::engine();
    let mut statuses: Vec<RuleStatus> =
        engine.rules().enumerate().map(|(i, rule)| RuleStatus { rule: rule.id, source: rule.source, status: engine.compile_rule(i) }).collect();
    statuses.push(RuleStatus { rule: "gitleaks global allowlist", source: Source::Gitleaks, status: engine.compile_global() });
    statuses.extend(engine.skipped().iter().map(|(rule, why)| RuleStatus { rule, source: Source::Gitleaks, status: Err(format!("skipped: {why}")) }));
    statuses
}
