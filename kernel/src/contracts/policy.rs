//! Who may see what: sensitivity, scopes, sinks and retention.

use crate::error::{KernelError, Result};
use super::check_id;

label! {
/// Sensitivity, least strict first. Derivation never lowers it.
pub enum Sensitivity {
    Public,
    Internal,
    Personal,
    Secret,
    Restricted,
}
}

impl Sensitivity {
    pub fn name(self) -> &'static str {
        match self {
            Sensitivity::Public => "public",
            Sensitivity::Internal => "internal",
            Sensitivity::Personal => "personal",
            Sensitivity::Secret => "secret",
            Sensitivity::Restricted => "restricted",
        }
    }
}

label! {
/// Visibility scope, narrowest first.
pub enum Scope {
    Turn,
    Session,
    Agent,
    Project,
    User,
    Global,
}
}

/// Checks that a scope names its instance: every scope but `global` needs
/// its `scopeId` (`project` alone would name every project at once), and
/// `global` has none. `what` is the scope field's name, e.g. `scopes[2].scope`.
pub fn check_scope(what: &str, scope: Scope, scope_id: Option<&str>) -> Result<()> {
    scope_named(what, scope, scope_id, check_id)
}

/// [`check_scope`] for a deletion or a purge: the scope id's shape only, so
/// a scope stored before identifiers were screened can still be forgotten.
pub fn check_scope_to_forget(what: &str, scope: Scope, scope_id: Option<&str>) -> Result<()> {
    scope_named(what, scope, scope_id, super::check_id_shape)
}

fn scope_named(what: &str, scope: Scope, scope_id: Option<&str>, check_id: fn(&str, &str) -> Result<()>) -> Result<()> {
    let id_field = match what.strip_suffix("scope") {
        Some(prefix) => format!("{prefix}scopeId"),
        None => format!("{what}Id"),
    };
    match (scope, scope_id) {
        (Scope::Global, None) => Ok(()),
        (Scope::Global, Some(_)) => Err(KernelError::invalid(format!("{id_field} must be absent for the `global` scope"))),
        (_, None) => Err(KernelError::invalid(format!(
            "{id_field} is required: {what} `{}` names a kind of scope, and its id says which one",
            scope.name()
        ))
        .with_detail(serde_json::json!({"field": id_field}))),
        (_, Some(id)) => check_id(&id_field, id),
    }
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Turn => "turn",
            Scope::Session => "session",
            Scope::Agent => "agent",
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Global => "global",
        }
    }
}

label! {
pub enum RetentionMode {
    /// Ends with the turn.
    Turn,
    /// Ends with the session; may be archived or promoted.
    Session,
    /// Expires `ttlSeconds` after creation.
    Ttl,
    /// Kept until deleted.
    Durable,
}
}

contract! {
pub struct RetentionPolicy {
    pub mode: RetentionMode,
    /// How long a deleted record waits before it may be purged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_after_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}
}

impl RetentionPolicy {
    pub fn validate(&self) -> Result<()> {
        match (self.mode, self.ttl_seconds) {
            (RetentionMode::Ttl, None | Some(0)) => {
                Err(KernelError::invalid("retentionPolicy mode `ttl` needs ttlSeconds > 0"))
            }
            (RetentionMode::Ttl, Some(_)) | (_, None) => Ok(()),
            (_, Some(_)) => Err(KernelError::invalid("retentionPolicy.ttlSeconds is only for mode `ttl`")),
        }
    }
}

/// True when `sink` is one of `allowed`: exact, `*`, or a `prefix:*` pattern.
pub fn sink_allowed(allowed: &[String], sink: &str) -> bool {
    allowed.iter().any(|pattern| sink_matches(pattern, sink))
}

fn sink_matches(pattern: &str, sink: &str) -> bool {
    pattern == sink || pattern_prefix(pattern).is_some_and(|prefix| sink.starts_with(prefix))
}

/// What a sink pattern requires of a sink's start: `*` nothing, `model:*`
/// `model:`; anything else names one sink.
fn pattern_prefix(pattern: &str) -> Option<&str> {
    match pattern.strip_suffix('*') {
        Some(prefix) if prefix.is_empty() || prefix.ends_with(':') => Some(prefix),
        _ => None,
    }
}

/// Whether something of this sensitivity and these allowed sinks may reach
/// `sink`: a secret only through a sink it names exactly, never through a
/// pattern (`*`, `model:*`), which would admit sinks nobody named for it.
pub fn sink_admits(sensitivity: Sensitivity, allowed: &[String], sink: &str) -> bool {
    if sensitivity >= Sensitivity::Secret {
        allowed.iter().any(|name| name == sink)
    } else {
        sink_allowed(allowed, sink)
    }
}

/// Who may receive something: its sensitivity and the sinks it allows.
/// Every derivation (a summary, an archive, a merged memory) takes the
/// [`narrow`](SinkPolicy::narrow)est policy of its inputs, so no derived
/// thing reaches a sink one of its inputs could not.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SinkPolicy {
    pub sensitivity: Sensitivity,
    /// Sorted, without repeats; a secret's holds only exact names (the
    /// patterns it was given admit nothing for it).
    pub sinks: Vec<String>,
}

impl SinkPolicy {
    pub fn new(sensitivity: Sensitivity, sinks: &[String]) -> SinkPolicy {
        let secret = sensitivity >= Sensitivity::Secret;
        let mut sinks: Vec<String> = sinks.iter().filter(|s| !(secret && pattern_prefix(s).is_some())).cloned().collect();
        sinks.sort();
        sinks.dedup();
        SinkPolicy { sensitivity, sinks }
    }

    pub fn admits(&self, sink: &str) -> bool {
        sink_admits(self.sensitivity, &self.sinks, sink)
    }

    /// The strictest sensitivity of the two, and the sinks both admit: each
    /// name or pattern of one list whose every sink the other list admits.
    /// (Prefix patterns are nested or disjoint, so this is exactly the overlap.)
    pub fn narrow(&self, other: &SinkPolicy) -> SinkPolicy {
        fn covered(pattern: &str, list: &[String]) -> bool {
            match pattern_prefix(pattern) {
                None => sink_allowed(list, pattern),
                Some(prefix) => list.iter().any(|q| pattern_prefix(q).is_some_and(|q| prefix.starts_with(q))),
            }
        }
        let both: Vec<String> = self
            .sinks
            .iter()
            .filter(|p| covered(p, &other.sinks))
            .chain(other.sinks.iter().filter(|q| covered(q, &self.sinks)))
            .cloned()
            .collect();
        SinkPolicy::new(self.sensitivity.max(other.sensitivity), &both)
    }
}

/// Checks the sink a request names: one concrete sink, never a pattern.
pub fn check_sink(sink: &str) -> Result<()> {
    check_id("sink", sink)?;
    if sink.contains('*') {
        return Err(KernelError::invalid(format!(
            "sink `{sink}` is a pattern; a request names the one sink its output goes to"
        )));
    }
    Ok(())
}

/// The distinct (sensitivity, allowed sinks) pairs of many records, each with
/// a dense id. Records mostly share a few, so a call decides each pair once
/// ([`SinkPolicies::admitted`]) instead of reading every record's own list.
#[derive(Debug, Clone, Default)]
pub struct SinkPolicies {
    policies: Vec<(Sensitivity, Vec<String>)>,
    /// Only looked up, never iterated: hashing order cannot leak.
    ids: rustc_hash::FxHashMap<String, u32>,
}

impl SinkPolicies {
    /// The id of this pair, added when new.
    pub fn id(&mut self, sensitivity: Sensitivity, sinks: &[String]) -> u32 {
        // Sinks have no control characters: NUL separates them.
        let key = format!("{}\0{}", sensitivity as u8, sinks.join("\0"));
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.policies.len() as u32;
        self.policies.push((sensitivity, sinks.to_vec()));
        self.ids.insert(key, id);
        id
    }

    /// By id: may that pair's records reach `sink`?
    pub fn admitted(&self, sink: &str) -> Vec<bool> {
        self.policies.iter().map(|(sensitivity, sinks)| sink_admits(*sensitivity, sinks, sink)).collect()
    }
}

pub(crate) fn check_sinks(what: &str, sinks: &[String]) -> Result<()> {
    sinks.iter().try_for_each(|s| check_id(what, s))
}
