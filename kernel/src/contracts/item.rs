//! The context item: the smallest unit that can enter a model's context,
//! with its kind, role, trust, tool calls and results, and its decoder; and
//! the budget partition an item lands in, which its trust can only lower.

use crate::canonical::{self, Timestamp};
use crate::error::{ErrorCode, KernelError, Result};
use crate::tokens;
use super::{check_id, check_sinks, check_version, decode_fields, put, required, ContentRef, Fields, Part, PartKind, Provenance, Scope, Sensitivity, SinkPolicy, SourceRef};

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
pub enum Role {
    User,
    Assistant,
    /// An instruction in the conversation (a provider's `system` message);
    /// rendered with authority only when its item is trusted host or verified.
    System,
    /// OpenAI's `developer` message: a `system` message by another name.
    Developer,
}
}

contract! {
/// A tool call an assistant message makes.
pub struct ToolCall {
    /// The arguments as the model wrote them: JSON text, kept byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// A prompt-caching breakpoint on the call (Anthropic `cache_control`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<super::CacheControl>,
    /// The provider's call id (`call_…`, `toolu_…`); results answer it.
    pub call_id: String,
    /// A custom tool's input as the model wrote it: free-form text, where a
    /// function call has `arguments` (OpenAI `custom` calls). A call has at
    /// most one of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    pub name: String,
    /// What the provider sent with the call that the kernel does not read
    /// (a Responses call's `status`, an Anthropic call's `caller`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_fields: Option<super::ProviderFields>,
    /// The provider's id of the call item itself (OpenAI Responses `fc_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
}
}

impl ToolDefinition {
    /// What a definition is the same tool as: its provider's own tools and
    /// the tools the kernel reads are apart, even under one name.
    pub fn key(&self) -> (Option<super::Format>, &str) {
        (self.provider_tool.as_ref().map(|f| f.format), &self.name)
    }
}

impl ToolCall {
    /// What the model wrote for the call: its arguments, or a custom tool's input.
    pub fn written(&self) -> Option<&str> {
        self.arguments.as_deref().or(self.input.as_deref())
    }
}

contract! {
/// A tool a model may call, carried by a `tool-schema` item; rendering
/// writes it into the request's `tools` in the target format's shape.
pub struct ToolDefinition {
    /// A prompt-caching breakpoint after this definition (Anthropic `cache_control`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<super::CacheControl>,
    /// Present for a custom tool (OpenAI `custom`): one that takes
    /// free-form text rather than JSON arguments. Its `inputSchema` is then
    /// unused, and Anthropic, which has no such tools, is not sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomTool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the call's arguments: an object.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Map<String, serde_json::Value>"))]
    pub input_schema: serde_json::Value,
    /// 1 to 64 of `a-z A-Z 0-9 _ -`, the names every provider accepts. A
    /// provider's own tool without a name goes by its `server_label`, else
    /// its `type`.
    pub name: String,
    /// A provider's own tool, its definition kept whole as it came: an
    /// Anthropic server or versioned tool (`web_search_20250305`,
    /// `bash_20250124`, `text_editor_20250728`), a Responses hosted tool
    /// (`web_search`, `file_search`, `mcp`, `code_interpreter`). Sent back
    /// only to that provider, and left out elsewhere with a note; the other
    /// fields are then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_tool: Option<super::ProviderFields>,
}
}

contract! {
/// What a custom tool takes.
pub struct CustomTool {
    /// The input's format as the tool was defined with it; none: the
    /// provider's default, free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<CustomFormat>,
}
}

contract! {
/// A custom tool's input format: free text, or text in a grammar.
pub struct CustomFormat {
    /// A `grammar`'s definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// A `grammar`'s syntax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syntax: Option<GrammarSyntax>,
    #[serde(rename = "type")]
    pub kind: CustomFormatKind,
}
}

label! {
pub enum CustomFormatKind {
    Text,
    Grammar,
}
}

label! {
pub enum GrammarSyntax {
    Lark,
    Regex,
}
}

impl CustomFormat {
    /// Why the format is not one a provider takes: a grammar needs its
    /// definition and syntax, and text has neither.
    pub fn check(&self) -> std::result::Result<(), &'static str> {
        match (self.kind, &self.definition, self.syntax) {
            (CustomFormatKind::Text, None, None) | (CustomFormatKind::Grammar, Some(_), Some(_)) => Ok(()),
            (CustomFormatKind::Text, _, _) => Err("a `text` format has no definition or syntax"),
            (CustomFormatKind::Grammar, _, _) => Err("a `grammar` format needs its definition and syntax"),
        }
    }
}

/// Whether `name` is a tool name every provider accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn tool_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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
    /// The system prompt a transcript carried (`system`, `instructions`, its
    /// leading system messages): on `system-policy` items only. The items
    /// sharing the latest one's `sourceRef.id` are the current instructions;
    /// earlier ones are superseded.
    Instructions,
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
    /// The message as its provider structures it (text with cache hints,
    /// images, documents, thinking, reasoning); `content` is then its text
    /// parts joined by newlines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    /// Not dropped by ordinary budgeting or compaction. Says nothing about trust.
    pub pinned: bool,
    pub priority: i32,
    pub provenance: Provenance,
    /// What the provider sent with the message that the kernel does not
    /// read (a Responses message's `status`, a Chat answer's `refusal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_fields: Option<super::ProviderFields>,
    /// The provider's id of this message (OpenAI Responses `msg_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
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
    /// For `tool-schema` items: the definition; `content` is then its canonical JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolDefinition>,
    /// For assistant `message` items that call tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool-evidence` items that answer a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    pub trust: Trust,
}

/// Every string in a JSON value, member names included: what a provider's
/// own fields say.
fn strings<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            strings(v, out)
        }),
        _ => {}
    }
}

/// How far a secret split between two items is looked for: the last and
/// the first this many characters.
pub const SPLIT_REACH: usize = 256;

/// The last [`SPLIT_REACH`] characters of `text`.
pub fn split_tail(text: &str) -> &str {
    let from = text.char_indices().rev().nth(SPLIT_REACH - 1).map_or(0, |(i, _)| i);
    &text[from..]
}

impl ContextItem {
    /// The checks on tool calls. Out of line (see `validate`).
    #[inline(never)]
    fn validate_calls(&self) -> Result<()> {
        let id = self.item_id.as_deref().unwrap_or("(derived)");
        let fail = |message: &str| Err(KernelError::invalid(format!("item `{id}`: {message}")));
        for (k, call) in self.tool_calls.iter().enumerate() {
            check_id("toolCalls[].callId", &call.call_id)?;
            check_id("toolCalls[].name", &call.name)?;
            if let Some(id) = &call.provider_id {
                check_id("toolCalls[].providerId", id)?;
            }
            if let Some(fields) = &call.provider_fields {
                fields.validate(&format!("toolCalls[{k}].providerFields"), super::Carrier::Call)?;
            }
            if let Some(Err(why)) = call.arguments.as_deref().map(super::check_arguments) {
                return fail(&format!("toolCalls[].arguments: {why}"));
            }
            if call.arguments.is_some() && call.input.is_some() {
                return fail("toolCalls[].input: a call has a function's arguments or a custom tool's input, not both");
            }
            if self.tool_calls[..k].iter().any(|c| c.call_id == call.call_id) {
                return fail("toolCalls[].callId repeats within one item; each call of an item has its own id");
            }
        }
        Ok(())
    }

    /// The checks on parts and provider ids. Out of line (see `validate`).
    #[inline(never)]
    fn validate_payload(&self) -> Result<()> {
        let id = self.item_id.as_deref().unwrap_or("(derived)");
        let fail = |message: &str| Err(KernelError::invalid(format!("item `{id}`: {message}")));
        if let Some(provider_id) = &self.provider_id {
            check_id("providerId", provider_id)?;
        }
        if let Some(fields) = &self.provider_fields {
            let role = if self.kind == ItemKind::ToolEvidence { None } else { Some(self.role.unwrap_or(Role::System)) };
            fields.validate("providerFields", super::Carrier::Turn(role))?;
        }
        if let Some(tool) = &self.tool {
            if self.kind != ItemKind::ToolSchema {
                return fail("only tool-schema items carry a tool definition");
            }
            if !tool_name_ok(&tool.name) {
                return fail("tool.name must be 1 to 64 of a-z, A-Z, 0-9, `_` and `-`");
            }
            if !tool.input_schema.is_object() {
                return fail("tool.inputSchema must be a JSON object");
            }
            if let Some(Err(why)) = tool.custom.as_ref().and_then(|c| c.format.as_ref()).map(CustomFormat::check) {
                return fail(&format!("tool.custom.format: {why}"));
            }
            if let Some(fields) = &tool.provider_tool {
                fields.validate_tool("tool.providerTool")?;
                if fields.tool_name() != Some(tool.name.as_str()) {
                    return fail("tool.name must be the provider tool's own: its `name`, else its `server_label`, else its `type`");
                }
                if tool.custom.is_some() || tool.description.is_some() || tool.cache_control.is_some() {
                    return fail("a provider's own tool says everything in its fields: no custom, description or cacheControl beside them");
                }
            }
        }
        if self.parts.is_empty() && self.tool.is_none() {
            return Ok(());
        }
        if !self.parts.is_empty() && self.tool.is_some() {
            return fail("has both parts and a tool definition");
        }
        if self.content_ref.is_some() {
            return fail("has parts or a tool definition, and a contentRef; binary parts carry their own contentRef");
        }
        if self.content != self.derived_content()? {
            return fail("content must be what its parts or tool definition say (leave it out and the kernel writes it)");
        }
        let assistant = self.kind == ItemKind::Message && self.role == Some(Role::Assistant);
        for (k, part) in self.parts.iter().enumerate() {
            part.validate(&format!("parts[{k}]"))?;
            if let Some(fields) = part.provider_fields.as_ref().filter(|_| part.kind != PartKind::Opaque) {
                fields.validate(&format!("parts[{k}].providerFields"), super::Carrier::Part(part.kind, assistant))?;
            }
            if matches!(part.kind, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning) && !assistant {
                return fail("only assistant messages carry thinking or reasoning parts");
            }
        }
        Ok(())
    }
}

/// `ContextItem`'s decoder. Derived, it was one function of about 15 KB (every
/// early return drops every field read so far); the JVM host runs this code as
/// bytecode and HotSpot never compiles a method over 8 000 bytes, so items
/// decoded there ran interpreted. Written out field by field (`Fields`).
impl<'de> serde::Deserialize<'de> for ContextItem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        decode_fields::<ItemFields, D>(deserializer)
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
    Parts,
    Pinned,
    Priority,
    Provenance,
    ProviderFields,
    ProviderId,
    Role,
    SchemaVersion,
    Scope,
    ScopeId,
    Sensitivity,
    SourceRef,
    SummaryOf,
    Task,
    TokenEstimate,
    Tool,
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
    parts: Option<Vec<Part>>,
    pinned: Option<bool>,
    priority: Option<i32>,
    provenance: Option<Provenance>,
    provider_fields: Option<Option<super::ProviderFields>>,
    provider_id: Option<Option<String>>,
    role: Option<Option<Role>>,
    schema_version: Option<u32>,
    scope: Option<Scope>,
    scope_id: Option<Option<String>>,
    sensitivity: Option<Sensitivity>,
    source_ref: Option<SourceRef>,
    summary_of: Option<Option<SummaryOf>>,
    task: Option<Option<TaskState>>,
    token_estimate: Option<Option<u32>>,
    tool: Option<Option<ToolDefinition>>,
    tool_calls: Option<Vec<ToolCall>>,
    tool_result: Option<Option<ToolResult>>,
    trust: Option<Trust>,
}

impl<'de> Fields<'de> for ItemFields {
    type Key = ItemKey;
    type Record = ContextItem;
    const EXPECTING: &'static str = "struct ContextItem";

    fn read<A: serde::de::MapAccess<'de>>(&mut self, key: ItemKey, map: &mut A) -> std::result::Result<(), A::Error> {
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
            ItemKey::Parts => put(&mut self.parts, "parts", map),
            ItemKey::Pinned => put(&mut self.pinned, "pinned", map),
            ItemKey::Priority => put(&mut self.priority, "priority", map),
            ItemKey::Provenance => put(&mut self.provenance, "provenance", map),
            ItemKey::ProviderFields => put(&mut self.provider_fields, "providerFields", map),
            ItemKey::ProviderId => put(&mut self.provider_id, "providerId", map),
            ItemKey::Role => put(&mut self.role, "role", map),
            ItemKey::SchemaVersion => put(&mut self.schema_version, "schemaVersion", map),
            ItemKey::Scope => put(&mut self.scope, "scope", map),
            ItemKey::ScopeId => put(&mut self.scope_id, "scopeId", map),
            ItemKey::Sensitivity => put(&mut self.sensitivity, "sensitivity", map),
            ItemKey::SourceRef => put(&mut self.source_ref, "sourceRef", map),
            ItemKey::SummaryOf => put(&mut self.summary_of, "summaryOf", map),
            ItemKey::Task => put(&mut self.task, "task", map),
            ItemKey::TokenEstimate => put(&mut self.token_estimate, "tokenEstimate", map),
            ItemKey::Tool => put(&mut self.tool, "tool", map),
            ItemKey::ToolCalls => put(&mut self.tool_calls, "toolCalls", map),
            ItemKey::ToolResult => put(&mut self.tool_result, "toolResult", map),
            ItemKey::Trust => put(&mut self.trust, "trust", map),
        }
    }

    /// The item, or the first missing required field in declaration order.
    fn finish<E: serde::de::Error>(self) -> std::result::Result<ContextItem, E> {
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
            parts: self.parts.unwrap_or_default(),
            pinned: required(self.pinned, "pinned")?,
            priority: required(self.priority, "priority")?,
            provenance: required(self.provenance, "provenance")?,
            provider_fields: self.provider_fields.flatten(),
            provider_id: self.provider_id.flatten(),
            role: self.role.flatten(),
            schema_version: required(self.schema_version, "schemaVersion")?,
            scope: required(self.scope, "scope")?,
            scope_id: self.scope_id.flatten(),
            sensitivity: required(self.sensitivity, "sensitivity")?,
            source_ref: required(self.source_ref, "sourceRef")?,
            summary_of: self.summary_of.flatten(),
            task: self.task.flatten(),
            token_estimate: self.token_estimate.flatten(),
            tool: self.tool.flatten(),
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

    /// Every text the item carries that a reader or a model may see: its
    /// visible text, its parts' texts (thinking, reasoning summaries, titles)
    /// and what its tool calls were given (arguments, a custom tool's input).
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let refs = self.content_ref.iter().chain(self.parts.iter().filter_map(|p| p.content_ref.as_ref())).map(|r| &r.summary);
        let parts = self.parts.iter().flat_map(|p| p.text.iter().chain(&p.title).chain(&p.summary).chain(&p.url));
        let calls = self.tool_calls.iter().filter_map(ToolCall::written);
        let mut carried = Vec::new();
        for fields in self.provider_fields() {
            fields.fields.iter().for_each(|(k, v)| {
                carried.push(k.as_str());
                strings(v, &mut carried)
            });
        }
        std::iter::once(self.visible_text()).chain(refs.chain(parts).map(String::as_str)).chain(calls).chain(carried)
    }

    /// Everything the provider sent that the kernel keeps unread: the
    /// message's, its parts' (opaque blocks whole) and its calls'.
    pub fn provider_fields(&self) -> impl Iterator<Item = &super::ProviderFields> {
        let parts = self.parts.iter().filter_map(|p| p.provider_fields.as_ref());
        let calls = self.tool_calls.iter().filter_map(|c| c.provider_fields.as_ref());
        self.provider_fields.iter().chain(parts).chain(calls)
    }

    /// Narrows the item's policy when any of its texts holds a secret: it
    /// becomes `secret`, readable only by the sinks it names exactly (see
    /// [`SinkPolicy`]). Returns the kind of secret found, if any. Text enters
    /// the store from hosts, providers and tools alike; none is trusted to
    /// have declared its sensitivity.
    pub fn screen(&mut self) -> Option<&'static str> {
        if self.sensitivity >= Sensitivity::Secret {
            return None;
        }
        // Arguments are JSON: `\u0051` is a `Q` to the model that reads them.
        let strings = |arguments: &str| -> Vec<String> {
            fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
                match value {
                    serde_json::Value::String(s) => out.push(s.clone()),
                    serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
                    serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
                        out.push(k.clone());
                        collect(v, out)
                    }),
                    _ => {}
                }
            }
            let mut out = Vec::new();
            if arguments.contains('\\') {
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(arguments) {
                    collect(&value, &mut out);
                }
            }
            out
        };
        let kind = self.texts().find_map(crate::secrets::kind).or_else(|| {
            let decoded: Vec<String> = self.tool_calls.iter().filter_map(|c| c.arguments.as_deref()).flat_map(strings).collect();
            decoded.iter().find_map(|s| crate::secrets::kind(s))
        })?;
        self.narrow();
        Some(kind)
    }

    /// [`screen`](Self::screen) for a secret split between the end of the
    /// text before the item in its session (`before`, at least its last
    /// [`SPLIT_REACH`] characters) and the item's start: "my key is
    /// sk_live_4eC39Hq", then "LyjWDarjtT1zdp7dc". The item holding the
    /// second half is narrowed; the first half alone is no credential, and
    /// a part that is one was narrowed when it came.
    pub fn screen_split(&mut self, before: &str) -> Option<&'static str> {
        if self.sensitivity >= Sensitivity::Secret {
            return None;
        }
        let start: String = self.visible_text().chars().take(SPLIT_REACH).collect();
        let kind = crate::secrets::split_kind(split_tail(before), &start)?;
        self.narrow();
        Some(kind)
    }

    /// `secret`, readable only by the sinks the item names exactly.
    fn narrow(&mut self) {
        self.allowed_sinks = SinkPolicy::new(Sensitivity::Secret, &self.allowed_sinks).sinks;
        self.sensitivity = Sensitivity::Secret;
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
        if self.content.is_none() && self.content_ref.is_none() {
            self.content = self.derived_content()?;
        }
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
            self.token_estimate = Some(self.estimate());
        }
        if self.item_id.is_none() {
            self.digest = Some(self.content_digest());
            let identity = canonical::digest_value(&(id_salt, &*self))?;
            self.item_id = Some(canonical::derived_id("it", &identity));
        }
        Ok(())
    }

    /// What `content` is for an item whose structure says it: the text parts
    /// joined by newlines, or a tool definition's canonical JSON.
    pub fn derived_content(&self) -> Result<Option<String>> {
        match &self.tool {
            Some(tool) => canonical::to_string(tool).map(Some),
            None if !self.parts.is_empty() => Ok(Some(self.parts_text())),
            None => Ok(None),
        }
    }

    /// The text parts joined by newlines.
    pub fn parts_text(&self) -> String {
        super::text_of(&self.parts)
    }

    /// Estimated tokens: the visible text, every part a provider charges
    /// beyond it, and the tool calls' arguments. Saturates, never wraps.
    pub fn estimate(&self) -> u32 {
        let parts: u64 = self.parts.iter().map(Part::extra_tokens).fold(0, u64::saturating_add);
        let calls: u64 = self.tool_calls.iter().filter_map(ToolCall::written).map(|a| u64::from(tokens::estimate(a))).sum();
        // Parts count their own; the message's and calls' are counted here.
        let carried = self.provider_fields.iter().chain(self.tool_calls.iter().filter_map(|c| c.provider_fields.as_ref()));
        let carried: u64 = carried.map(|f| u64::from(tokens::estimate(&f.text()))).sum();
        let total = u64::from(tokens::estimate(self.visible_text())).saturating_add(parts).saturating_add(calls).saturating_add(carried);
        u32::try_from(total).unwrap_or(u32::MAX)
    }

    /// Bytes of text the item carries besides `content`: part payloads and
    /// call arguments (binary parts are in the content store).
    fn payload_bytes(&self) -> u64 {
        let part = |p: &Part| {
            [&p.data, &p.encrypted_content, &p.url].iter().filter_map(|f| f.as_ref()).map(|f| f.len() as u64).sum::<u64>()
                + p.summary.iter().map(|s| s.len() as u64).sum::<u64>()
                + if p.kind == PartKind::Text { 0 } else { p.text.as_ref().map_or(0, |t| t.len() as u64) }
        };
        let parts: u64 = self.parts.iter().map(part).sum();
        let carried: u64 = self.provider_fields().map(|f| f.text().len() as u64).sum();
        parts + carried + self.tool_calls.iter().filter_map(ToolCall::written).map(|a| a.len() as u64).sum::<u64>()
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
        } + self.payload_bytes();
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
            (ItemKind::Message, _) | (_, None) | (ItemKind::SystemPolicy, Some(Role::System | Role::Developer)) => {}
            (ItemKind::SystemPolicy, Some(_)) => return fail("a system-policy item's role, when it has one, is `system` or `developer`"),
            (_, Some(_)) => return fail("only message and system-policy items have a role"),
        }
        if self.anchor == Some(Anchor::Instructions) && self.kind != ItemKind::SystemPolicy {
            return fail("only system-policy items are anchored `instructions`");
        }
        if !self.tool_calls.is_empty() && !(self.kind == ItemKind::Message && self.role == Some(Role::Assistant)) {
            return fail("only assistant messages carry toolCalls");
        }
        self.validate_payload()?;
        self.validate_calls()?;
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
/// The seven budget partitions, in allocation order.
pub enum Partition {
    /// Trusted system and safety policy.
    System,
    /// Current task, pending interactions, goal and workspace identity.
    Task,
    /// Tool and skill schemas.
    Tools,
    /// Recent conversation.
    Conversation,
    /// Tool evidence and artifacts (and anything demoted for its trust).
    Evidence,
    /// Recalled memory and project rules.
    Memory,
    /// Compaction and recovery reserve.
    Reserve,
}
}

pub const PARTITIONS: [Partition; 7] = [
    Partition::System,
    Partition::Task,
    Partition::Tools,
    Partition::Conversation,
    Partition::Evidence,
    Partition::Memory,
    Partition::Reserve,
];

impl Partition {
    pub fn name(self) -> &'static str {
        match self {
            Partition::System => "system",
            Partition::Task => "task",
            Partition::Tools => "tools",
            Partition::Conversation => "conversation",
            Partition::Evidence => "evidence",
            Partition::Memory => "memory",
            Partition::Reserve => "reserve",
        }
    }
}

/// The partition an item lands in, and whether that is lower than its kind
/// claims. Only evidence holds external or untrusted content, whatever kind,
/// pin or interaction it claims: trust never rises by labelling.
pub(crate) fn partition_of(item: &ContextItem) -> (Partition, bool) {
    let claimed = match item.kind {
        _ if item.summary_of.is_some() => Partition::Conversation,
        ItemKind::SystemPolicy => Partition::System,
        _ if item.interaction.is_some() || item.anchor.is_some() => Partition::Task,
        ItemKind::TaskState => Partition::Task,
        ItemKind::ToolSchema | ItemKind::Skill => Partition::Tools,
        ItemKind::Message => Partition::Conversation,
        ItemKind::ToolEvidence | ItemKind::ArtifactRef => Partition::Evidence,
        ItemKind::Memory | ItemKind::ProjectRule => Partition::Memory,
    };
    if item.trust <= Trust::User || claimed == Partition::Evidence {
        (claimed, false)
    } else {
        (Partition::Evidence, true)
    }
}
