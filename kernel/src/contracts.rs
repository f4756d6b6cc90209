//! Data contracts v1: the objects every host exchanges with
//! the kernel. Each carries `schemaVersion`; an unknown version is
//! `unsupported-schema`. Field names are camelCase on the wire.

use crate::canonical::{self, Timestamp};
use crate::error::{ErrorCode, KernelError, Result};
use crate::tokens;

/// The one schema version this kernel reads and writes.
pub const SCHEMA_VERSION: u32 = 1;
/// Longest id, sink name or other short identifier accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Checks a `schemaVersion` field.
pub fn check_version(what: &str, version: u32) -> Result<()> {
    check_version_of(what, u64::from(version))
}

/// Checks a `schemaVersion` read wider than the field, to name it as sent.
pub fn check_version_of(what: &str, version: u64) -> Result<()> {
    if version == u64::from(SCHEMA_VERSION) {
        Ok(())
    } else {
        Err(KernelError::new(
            ErrorCode::UnsupportedSchema,
            format!("{what} has schemaVersion {version}; this kernel speaks {SCHEMA_VERSION}"),
        ))
    }
}

/// Checks a short identifier: non-empty, at most `MAX_ID_BYTES`, no control characters.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(KernelError::invalid(format!(
            "{what} must be 1..={MAX_ID_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

label! {
/// What an item is; decides its budget partition.
pub enum ItemKind {
    SystemPolicy,
    ToolSchema,
    Skill,
    TaskState,
    Message,
    ToolEvidence,
    Memory,
    ProjectRule,
    ArtifactRef,
}
}

label! {
/// Trust, most trusted first. Derived content takes the lowest trust of its inputs.
pub enum Trust {
    Host,
    Verified,
    User,
    External,
    Untrusted,
}
}

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
pub enum SourceKind {
    /// An event of a session log: `id` is the session id, `seq` the event.
    Session,
    File,
    Tool,
    Memory,
    Content,
    Config,
    Web,
    Import,
    Host,
}
}

contract! {
/// Where an item or memory came from.
pub struct SourceRef {
    pub id: String,
    pub kind: SourceKind,
    /// The source's own sequence number (e.g. the session event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// A half-open range inside the source (bytes or lines, per source kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}
}

contract! {
pub struct Span {
    pub end: u64,
    pub start: u64,
}
}

impl SourceRef {
    pub fn validate(&self) -> Result<()> {
        check_id("sourceRef.id", &self.id)?;
        if let Some(span) = &self.span {
            if span.start > span.end {
                return Err(KernelError::invalid("sourceRef.span.start must not exceed span.end"));
            }
        }
        Ok(())
    }
}

label! {
pub enum Origin {
    User,
    Host,
    Model,
    Tool,
    Import,
    Policy,
    Kernel,
}
}

contract! {
/// Who produced something and how; kept apart from the message role.
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Digests or ids of the inputs this was derived from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_from: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    pub origin: Origin,
}
}

impl Provenance {
    pub fn validate(&self) -> Result<()> {
        for (what, value) in [("provenance.actor", &self.actor), ("provenance.method", &self.method)] {
            if let Some(value) = value {
                check_id(what, value)?;
            }
        }
        self.derived_from.iter().try_for_each(|d| check_id("provenance.derivedFrom[]", d))
    }
}

contract! {
/// A reference to content kept outside the context.
pub struct ContentRef {
    pub byte_length: u64,
    pub digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    pub object_id: String,
    pub recoverable: bool,
    /// Identity of the store holding the bytes.
    pub store: String,
    /// Must say plainly when the text was truncated, expired or needs approval.
    pub summary: String,
}
}

impl ContentRef {
    pub fn validate(&self) -> Result<()> {
        check_id("contentRef.store", &self.store)?;
        check_id("contentRef.objectId", &self.object_id)?;
        if !canonical::is_digest(&self.digest) {
            return Err(KernelError::invalid("contentRef.digest must be `sha256:` and 64 lowercase hex digits"));
        }
        Ok(())
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

fn check_sinks(what: &str, sinks: &[String]) -> Result<()> {
    sinks.iter().try_for_each(|s| check_id(what, s))
}

label! {
pub enum Role {
    User,
    Assistant,
}
}

contract! {
/// A tool call an assistant message makes.
pub struct ToolCall {
    pub call_id: String,
    pub name: String,
}
}

label! {
pub enum ToolOutcome {
    Success,
    Error,
    /// Still running.
    Pending,
    /// The effect may or may not have happened; never guessed.
    Unknown,
}
}

contract! {
/// The result of a tool call, carried by a `tool-evidence` item.
pub struct ToolResult {
    pub call_id: String,
    pub outcome: ToolOutcome,
}
}

label! {
pub enum InteractionKind {
    Approval,
    Question,
    HumanTask,
}
}

label! {
pub enum InteractionState {
    Pending,
    Resolved,
    Cancelled,
    Expired,
}
}

contract! {
/// A pending approval, question or human task, and its binding.
pub struct Interaction {
    #[serde(default)]
    pub binding: Binding,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    pub kind: InteractionKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    pub operation_id: String,
    pub state: InteractionState,
}
}

contract! {
/// What an interaction is bound to.
#[derive(Default)]
pub struct Binding {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}
}

label! {
pub enum TaskStatus {
    Open,
    InProgress,
    Blocked,
    Done,
    Failed,
    Cancelled,
}
}

impl TaskStatus {
    pub fn is_unfinished(self) -> bool {
        matches!(self, TaskStatus::Open | TaskStatus::InProgress | TaskStatus::Blocked)
    }
}

contract! {
/// The state of a task or plan step, carried by a `task-state` item.
pub struct TaskState {
    pub status: TaskStatus,
    pub task_id: String,
}
}

label! {
/// Identity the model must always see; the latest item of each anchor is kept.
pub enum Anchor {
    /// The user's current goal.
    Goal,
    /// Workspace, cwd and worktree identity.
    Workspace,
    /// The permission ceiling of this run.
    PermissionCeiling,
}
}

/// The smallest unit that can enter a model's context.
///
/// `itemId`, `digest` and `tokenEstimate` are derived when absent; a given
/// `digest` is verified against the content.
// Its decoder is written out below rather than derived.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextItem {
    pub allowed_sinks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Anchor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_ref: Option<ContentRef>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<Interaction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    pub kind: ItemKind,
    /// Not dropped by ordinary budgeting or compaction. Says nothing about trust.
    pub pinned: bool,
    pub priority: i32,
    pub provenance: Provenance,
    /// For `message` items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sensitivity: Sensitivity,
    pub source_ref: SourceRef,
    /// Set by the kernel on the summary a compaction writes; never by hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_of: Option<SummaryOf>,
    /// For `task-state` items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_estimate: Option<u32>,
    /// For assistant `message` items that call tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool-evidence` items that answer a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    pub trust: Trust,
}

/// `ContextItem`'s decoder. Derived, it was one function of about 15 KB (every
/// early return drops every field read so far); the JVM host runs this code as
/// bytecode and HotSpot never compiles a method over 8 000 bytes, so items
/// decoded there ran interpreted. Written out, each field is read by one arm
/// of [`ItemFields::read`] and checked by [`ItemFields::finish`], with the
/// derived decoder's messages (`unknown field`, `duplicate field`,
/// `missing field`).
impl<'de> serde::Deserialize<'de> for ContextItem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ContextItem;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("struct ContextItem")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<ContextItem, A::Error> {
                let mut fields = ItemFields::default();
                while let Some(key) = map.next_key()? {
                    fields.read(key, &mut map)?;
                }
                fields.finish()
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ItemKey {
    AllowedSinks,
    Anchor,
    Content,
    ContentRef,
    CreatedAt,
    Digest,
    ExpiresAt,
    Interaction,
    ItemId,
    Kind,
    Pinned,
    Priority,
    Provenance,
    Role,
    SchemaVersion,
    Scope,
    ScopeId,
    Sensitivity,
    SourceRef,
    SummaryOf,
    Task,
    TokenEstimate,
    ToolCalls,
    ToolResult,
    Trust,
}

/// The fields of a `ContextItem` read so far.
#[derive(Default)]
struct ItemFields {
    allowed_sinks: Option<Vec<String>>,
    anchor: Option<Option<Anchor>>,
    content: Option<Option<String>>,
    content_ref: Option<Option<ContentRef>>,
    created_at: Option<Timestamp>,
    digest: Option<Option<String>>,
    expires_at: Option<Option<Timestamp>>,
    interaction: Option<Option<Interaction>>,
    item_id: Option<Option<String>>,
    kind: Option<ItemKind>,
    pinned: Option<bool>,
    priority: Option<i32>,
    provenance: Option<Provenance>,
    role: Option<Option<Role>>,
    schema_version: Option<u32>,
    scope: Option<Scope>,
    scope_id: Option<Option<String>>,
    sensitivity: Option<Sensitivity>,
    source_ref: Option<SourceRef>,
    summary_of: Option<Option<SummaryOf>>,
    task: Option<Option<TaskState>>,
    token_estimate: Option<Option<u32>>,
    tool_calls: Option<Vec<ToolCall>>,
    tool_result: Option<Option<ToolResult>>,
    trust: Option<Trust>,
}

impl ItemFields {
    fn read<'de, A: serde::de::MapAccess<'de>>(&mut self, key: ItemKey, map: &mut A) -> std::result::Result<(), A::Error> {
        fn put<'de, T: serde::Deserialize<'de>, A: serde::de::MapAccess<'de>>(
            slot: &mut Option<T>,
            name: &'static str,
            map: &mut A,
        ) -> std::result::Result<(), A::Error> {
            if slot.is_some() {
                return Err(serde::de::Error::duplicate_field(name));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        match key {
            ItemKey::AllowedSinks => put(&mut self.allowed_sinks, "allowedSinks", map),
            ItemKey::Anchor => put(&mut self.anchor, "anchor", map),
            ItemKey::Content => put(&mut self.content, "content", map),
            ItemKey::ContentRef => put(&mut self.content_ref, "contentRef", map),
            ItemKey::CreatedAt => put(&mut self.created_at, "createdAt", map),
            ItemKey::Digest => put(&mut self.digest, "digest", map),
            ItemKey::ExpiresAt => put(&mut self.expires_at, "expiresAt", map),
            ItemKey::Interaction => put(&mut self.interaction, "interaction", map),
            ItemKey::ItemId => put(&mut self.item_id, "itemId", map),
            ItemKey::Kind => put(&mut self.kind, "kind", map),
            ItemKey::Pinned => put(&mut self.pinned, "pinned", map),
            ItemKey::Priority => put(&mut self.priority, "priority", map),
            ItemKey::Provenance => put(&mut self.provenance, "provenance", map),
            ItemKey::Role => put(&mut self.role, "role", map),
            ItemKey::SchemaVersion => put(&mut self.schema_version, "schemaVersion", map),
            ItemKey::Scope => put(&mut self.scope, "scope", map),
            ItemKey::ScopeId => put(&mut self.scope_id, "scopeId", map),
            ItemKey::Sensitivity => put(&mut self.sensitivity, "sensitivity", map),
            ItemKey::SourceRef => put(&mut self.source_ref, "sourceRef", map),
            ItemKey::SummaryOf => put(&mut self.summary_of, "summaryOf", map),
            ItemKey::Task => put(&mut self.task, "task", map),
            ItemKey::TokenEstimate => put(&mut self.token_estimate, "tokenEstimate", map),
            ItemKey::ToolCalls => put(&mut self.tool_calls, "toolCalls", map),
            ItemKey::ToolResult => put(&mut self.tool_result, "toolResult", map),
            ItemKey::Trust => put(&mut self.trust, "trust", map),
        }
    }

    /// The item, or the first missing required field in declaration order.
    fn finish<E: serde::de::Error>(self) -> std::result::Result<ContextItem, E> {
        fn required<T, E: serde::de::Error>(slot: Option<T>, name: &'static str) -> std::result::Result<T, E> {
            slot.ok_or_else(|| E::missing_field(name))
        }
        Ok(ContextItem {
            allowed_sinks: required(self.allowed_sinks, "allowedSinks")?,
            anchor: self.anchor.flatten(),
            content: self.content.flatten(),
            content_ref: self.content_ref.flatten(),
            created_at: required(self.created_at, "createdAt")?,
            digest: self.digest.flatten(),
            expires_at: self.expires_at.flatten(),
            interaction: self.interaction.flatten(),
            item_id: self.item_id.flatten(),
            kind: required(self.kind, "kind")?,
            pinned: required(self.pinned, "pinned")?,
            priority: required(self.priority, "priority")?,
            provenance: required(self.provenance, "provenance")?,
            role: self.role.flatten(),
            schema_version: required(self.schema_version, "schemaVersion")?,
            scope: required(self.scope, "scope")?,
            scope_id: self.scope_id.flatten(),
            sensitivity: required(self.sensitivity, "sensitivity")?,
            source_ref: required(self.source_ref, "sourceRef")?,
            summary_of: self.summary_of.flatten(),
            task: self.task.flatten(),
            token_estimate: self.token_estimate.flatten(),
            tool_calls: self.tool_calls.unwrap_or_default(),
            tool_result: self.tool_result.flatten(),
            trust: required(self.trust, "trust")?,
        })
    }
}

contract! {
/// What a compaction summary stands for: a span of a session, archived losslessly.
pub struct SummaryOf {
    /// The content object holding the span's raw events (`get-content`).
    pub archive_id: String,
    pub compaction_id: String,
    pub from_seq: u64,
    pub to_seq: u64,
}
}

/// Limits that apply while normalizing items.
#[derive(Debug, Clone, Copy)]
pub struct ItemLimits {
    pub max_item_bytes: u64,
}

impl ContextItem {
    /// The content's digest: of the text, or the referenced object's.
    pub fn content_digest(&self) -> String {
        match (&self.content, &self.content_ref) {
            (Some(text), _) => canonical::digest_bytes(text.as_bytes()),
            (None, Some(reference)) => reference.digest.clone(),
            (None, None) => canonical::digest_bytes(b""),
        }
    }

    /// The text a model would see for this item.
    pub fn visible_text(&self) -> &str {
        match (&self.content, &self.content_ref) {
            (Some(text), _) => text,
            (None, Some(reference)) => &reference.summary,
            (None, None) => "",
        }
    }

    pub fn id(&self) -> &str {
        self.item_id.as_deref().unwrap_or("")
    }

    /// Validates the item and fills `itemId`, `digest` and `tokenEstimate`.
    /// `id_salt` makes derived ids unique where identical items can recur
    /// (a session log passes its id and the event's sequence number).
    pub fn normalize(&mut self, limits: ItemLimits, id_salt: &str) -> Result<()> {
        self.prepare(limits, id_salt)?;
        if self.digest.is_none() {
            self.digest = Some(self.content_digest());
        }
        Ok(())
    }

    /// [`normalize`](Self::normalize) without hashing content that declares
    /// no digest (unless its id is derived, which covers the digest): the
    /// planner hashes only the items it keeps.
    pub fn prepare(&mut self, limits: ItemLimits, id_salt: &str) -> Result<()> {
        check_version("context item", self.schema_version)?;
        self.validate(limits)?;
        if let Some(given) = &self.digest {
            let digest = self.content_digest();
            if *given != digest {
                return Err(KernelError::new(
                    ErrorCode::DigestMismatch,
                    format!("item `{}` declares digest {given} but its content hashes to {digest}", self.id()),
                ));
            }
        }
        if self.token_estimate.is_none() {
            self.token_estimate = Some(tokens::estimate(self.visible_text()));
        }
        if self.item_id.is_none() {
            self.digest = Some(self.content_digest());
            let identity = canonical::digest_value(&(id_salt, &*self))?;
            self.item_id = Some(canonical::derived_id("it", &identity));
        }
        Ok(())
    }

    // Out of line, `prepare` stays under the size at which the JVM host's
    // JIT compiler gives up on a method (HotSpot compiles none over 8 000 bytes).
    #[inline(never)]
    fn validate(&self, limits: ItemLimits) -> Result<()> {
        let id = self.item_id.as_deref().unwrap_or("(derived)");
        let fail = |message: &str| Err(KernelError::invalid(format!("item `{id}`: {message}")));
        if let Some(item_id) = &self.item_id {
            check_id("itemId", item_id)?;
        }
        if let Some(scope_id) = &self.scope_id {
            check_id("scopeId", scope_id)?;
        }
        self.source_ref.validate()?;
        self.provenance.validate()?;
        check_sinks("allowedSinks[]", &self.allowed_sinks)?;
        let bytes = match (&self.content, &self.content_ref) {
            (Some(_), Some(_)) => return fail("has both content and contentRef"),
            (None, None) => return fail("needs content or contentRef"),
            (Some(text), None) => text.len() as u64,
            (None, Some(reference)) => {
                reference.validate()?;
                reference.summary.len() as u64
            }
        };
        if bytes > limits.max_item_bytes {
            return Err(KernelError::limit(format!(
                "item `{id}` has {bytes} bytes of text; the ceiling is {} (externalize it with a contentRef)",
                limits.max_item_bytes
            ))
            .with_detail(serde_json::json!({"itemId": id, "bytes": bytes, "maxItemBytes": limits.max_item_bytes})));
        }
        if let Some(digest) = &self.digest {
            if !canonical::is_digest(digest) {
                return fail("digest must be `sha256:` and 64 lowercase hex digits");
            }
        }
        if let (Some(expires), created) = (&self.expires_at, &self.created_at) {
            if expires < created {
                return fail("expiresAt is before createdAt");
            }
        }
        match (self.kind, self.role) {
            (ItemKind::Message, None) => return fail("a message needs a role"),
            (ItemKind::Message, _) | (_, None) => {}
            (_, Some(_)) => return fail("only message items have a role"),
        }
        if !self.tool_calls.is_empty() && !(self.kind == ItemKind::Message && self.role == Some(Role::Assistant)) {
            return fail("only assistant messages carry toolCalls");
        }
        for (k, call) in self.tool_calls.iter().enumerate() {
            check_id("toolCalls[].callId", &call.call_id)?;
            check_id("toolCalls[].name", &call.name)?;
            if self.tool_calls[..k].iter().any(|c| c.call_id == call.call_id) {
                return fail("toolCalls[].callId repeats within one item; each call of an item has its own id");
            }
        }
        if let Some(result) = &self.tool_result {
            if self.kind != ItemKind::ToolEvidence {
                return fail("only tool-evidence items carry a toolResult");
            }
            check_id("toolResult.callId", &result.call_id)?;
        }
        if let Some(task) = &self.task {
            if self.kind != ItemKind::TaskState {
                return fail("only task-state items carry a task");
            }
            check_id("task.taskId", &task.task_id)?;
        }
        if let Some(interaction) = &self.interaction {
            check_id("interaction.operationId", &interaction.operation_id)?;
        }
        if self.summary_of.is_some() {
            return fail("summaryOf is written by the kernel's compaction, not by hosts");
        }
        Ok(())
    }
}

label! {
/// Who may move a memory, strongest last: a rule of the deployment, an
/// administrator, the user in their own words.
pub enum AuthorityKind {
    Policy,
    Management,
    UserExplicit,
}
}

impl AuthorityKind {
    pub fn name(self) -> &'static str {
        match self {
            AuthorityKind::Policy => "policy",
            AuthorityKind::Management => "management",
            AuthorityKind::UserExplicit => "user-explicit",
        }
    }
}

label! {
pub enum MemoryState {
    Candidate,
    Active,
    Reinforced,
    Superseded,
    Archived,
    Expired,
    Deleted,
    Purged,
}
}

impl MemoryState {
    pub fn name(self) -> &'static str {
        match self {
            MemoryState::Candidate => "candidate",
            MemoryState::Active => "active",
            MemoryState::Reinforced => "reinforced",
            MemoryState::Superseded => "superseded",
            MemoryState::Archived => "archived",
            MemoryState::Expired => "expired",
            MemoryState::Deleted => "deleted",
            MemoryState::Purged => "purged",
        }
    }
}

contract! {
/// A durable fact under governance. `confidence` (how reliable),
/// `importance` (how useful later) and a query's relevance stay separate.
pub struct MemoryRecord {
    pub access_count: u64,
    pub allowed_sinks: Vec<String>,
    /// The authority that made it active (user-explicit outranks management,
    /// which outranks policy); absent while it is a candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<AuthorityKind>,
    pub category: String,
    pub confidence: f64,
    /// Active records it contradicts that no rule could rank: both stay, and recall reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts_with: Vec<String>,
    pub content: String,
    pub created_at: Timestamp,
    pub digest: String,
    pub evidence_refs: Vec<SourceRef>,
    pub importance: f64,
    /// The slot a fact fills (`user.city`): one true value per slot and scope at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accessed_at: Option<Timestamp>,
    pub memory_id: String,
    pub provenance: Provenance,
    pub retention_policy: RetentionPolicy,
    pub revision: u64,
    pub schema_version: u32,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_id: Option<String>,
    pub sensitivity: Sensitivity,
    pub state: MemoryState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub updated_at: Timestamp,
    /// When the fact became true, and stopped being true (temporal validity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<Timestamp>,
}
}

impl MemoryRecord {
    /// When it stops being current, in nanoseconds since the epoch: its
    /// `validTo`, or the end of its TTL, whichever comes first.
    pub fn ends_at(&self) -> Option<i128> {
        let ttl_end = match (self.retention_policy.mode, self.retention_policy.ttl_seconds) {
            (RetentionMode::Ttl, Some(ttl)) => Some(self.created_at.nanos_after(ttl)),
            _ => None,
        };
        let valid_end = self.valid_to.as_ref().map(Timestamp::unix_nanos);
        match (ttl_end, valid_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn validate(&self) -> Result<()> {
        check_version("memory record", self.schema_version)?;
        check_id("memoryId", &self.memory_id)?;
        check_id("category", &self.category)?;
        if let Some(key) = &self.key {
            check_id("key", key)?;
        }
        if let Some(scope_id) = &self.scope_id {
            check_id("scopeId", scope_id)?;
        }
        if self.content.trim().is_empty() {
            return Err(KernelError::invalid("a memory needs non-empty content"));
        }
        for (what, value) in [("confidence", self.confidence), ("importance", self.importance)] {
            if !(0.0..=1.0).contains(&value) {
                return Err(KernelError::invalid(format!("{what} must be within 0..=1")));
            }
        }
        self.provenance.validate()?;
        self.evidence_refs.iter().try_for_each(SourceRef::validate)?;
        self.tags.iter().try_for_each(|t| check_id("tags[]", t))?;
        check_sinks("allowedSinks[]", &self.allowed_sinks)?;
        self.retention_policy.validate()?;
        if let (Some(from), Some(to)) = (&self.valid_from, &self.valid_to) {
            if to < from {
                return Err(KernelError::invalid("validTo is before validFrom"));
            }
        }
        if !canonical::is_digest(&self.digest) {
            return Err(KernelError::invalid("digest must be `sha256:` and 64 lowercase hex digits"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn message(text: &str) -> ContextItem {
        serde_json::from_value(json!({
            "schemaVersion": 1, "kind": "message", "role": "user", "scope": "session",
            "sourceRef": {"kind": "session", "id": "s1", "seq": 1},
            "provenance": {"origin": "user"}, "trust": "user", "sensitivity": "internal",
            "allowedSinks": ["model:*"], "priority": 0, "pinned": false,
            "createdAt": "2026-01-01T00:00:00Z", "content": text
        }))
        .unwrap()
    }

    const LIMITS: ItemLimits = ItemLimits { max_item_bytes: 1024 };

    #[test]
    fn the_item_decoder_names_what_is_wrong() {
        let item = serde_json::to_value(message("hi")).unwrap();
        let decode = |value: &serde_json::Value| {
            serde_json::from_str::<ContextItem>(&value.to_string()).map_err(|e| e.to_string())
        };
        assert_eq!(decode(&item).unwrap(), message("hi"));
        let mut with_nulls = item.clone();
        with_nulls["anchor"] = json!(null);
        with_nulls["toolResult"] = json!(null);
        assert_eq!(decode(&with_nulls).unwrap(), message("hi"));

        let mut unknown = item.clone();
        unknown["colour"] = json!("red");
        assert!(decode(&unknown).unwrap_err().starts_with("unknown field `colour`, expected one of `allowedSinks`"));
        let mut missing = item.clone();
        missing.as_object_mut().unwrap().remove("trust");
        assert!(decode(&missing).unwrap_err().starts_with("missing field `trust`"));
        let twice = item.to_string().replacen("{", r#"{"kind":"memory","#, 1);
        assert!(serde_json::from_str::<ContextItem>(&twice).unwrap_err().to_string().starts_with("duplicate field `kind`"));
        let mut wrong_type = item.clone();
        wrong_type["priority"] = json!("high");
        assert!(decode(&wrong_type).unwrap_err().starts_with("invalid type: string \"high\", expected i32"));
        assert!(decode(&json!([item])).unwrap_err().starts_with("invalid type: sequence, expected struct ContextItem"));
    }

    #[test]
    fn normalize_derives_id_digest_and_tokens() {
        let mut item = message("hello world");
        item.normalize(LIMITS, "").unwrap();
        assert_eq!(item.digest.as_deref(), Some(canonical::digest_bytes(b"hello world").as_str()));
        assert!(item.item_id.as_deref().unwrap().starts_with("it-"));
        assert!(item.token_estimate.unwrap() >= 2);
        let mut again = message("hello world");
        again.normalize(LIMITS, "").unwrap();
        assert_eq!(item, again, "derivation is deterministic");
        let mut salted = message("hello world");
        salted.normalize(LIMITS, "s1#2").unwrap();
        assert_ne!(item.item_id, salted.item_id);
    }

    #[test]
    fn a_wrong_digest_is_a_mismatch_not_a_repair() {
        let mut item = message("hello");
        item.digest = Some(canonical::digest_bytes(b"other"));
        assert_eq!(item.normalize(LIMITS, "").unwrap_err().code, ErrorCode::DigestMismatch);
    }

    #[test]
    fn oversized_items_hit_the_ceiling() {
        let mut item = message(&"x".repeat(2000));
        assert_eq!(item.normalize(LIMITS, "").unwrap_err().code, ErrorCode::LimitExceeded);
    }

    #[test]
    fn unknown_versions_are_unsupported() {
        let mut item = message("hi");
        item.schema_version = 2;
        assert_eq!(item.normalize(LIMITS, "").unwrap_err().code, ErrorCode::UnsupportedSchema);
    }

    #[test]
    fn structure_must_match_kind() {
        let mut item = message("hi");
        item.tool_calls.push(ToolCall { call_id: "c1".into(), name: "grep".into() });
        assert_eq!(item.normalize(LIMITS, "").unwrap_err().code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn sinks_match_exactly_or_by_prefix_pattern() {
        let allowed = vec!["model:*".to_string(), "log".to_string()];
        assert!(sink_allowed(&allowed, "model:anthropic"));
        assert!(sink_allowed(&allowed, "log"));
        assert!(!sink_allowed(&allowed, "sync"));
        assert!(!sink_allowed(&allowed, "modelx"));
        assert!(sink_allowed(&["*".to_string()], "anything"));
    }

    #[test]
    fn trust_and_sensitivity_order_from_safest() {
        assert!(Trust::Host < Trust::Untrusted);
        assert!(Sensitivity::Public < Sensitivity::Restricted);
        assert!(Scope::Turn < Scope::Global);
    }
}
