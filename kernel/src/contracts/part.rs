//! The parts of a provider message the kernel keeps losslessly: text with
//! cache hints, images and documents (bytes in the content store), Anthropic
//! thinking blocks with their signatures, OpenAI Responses reasoning items.
//!
//! An item's `content` is the text a reader sees (its text parts joined by
//! newlines); `parts` say how a provider wants the message back.

use crate::error::{KernelError, Result};
use crate::tokens;
use super::{check_id, ContentRef, Role};

label! {
pub enum PartKind {
    Text,
    Image,
    /// A PDF or a plain-text document.
    Document,
    /// Anthropic `thinking`: the text and the signature that must go back verbatim.
    Thinking,
    /// Anthropic `redacted_thinking`: opaque `data`, verbatim.
    RedactedThinking,
    /// OpenAI Responses `reasoning`: its `rs_` id, summary texts and
    /// `encryptedContent`; it travels with the item that follows it.
    Reasoning,
    /// A block or item of a type the kernel does not read (a provider's
    /// `compaction`, a server tool's call and result): whole in
    /// `providerFields`, sent back only to its own format.
    Opaque,
}
}

label! {
/// The transcript formats the kernel reads and writes.
pub enum Format {
    /// OpenAI Chat Completions: `messages` with `tool_calls` and `tool` messages.
    OpenaiChat,
    /// OpenAI Responses: `input` items (messages, `function_call`,
    /// `function_call_output`, `reasoning`).
    OpenaiResponses,
    /// Anthropic Messages: `system` and `messages` with content blocks.
    AnthropicMessages,
    /// The kernel's own: one object per turn, in the context item's terms.
    Neutral,
}
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenaiChat => "openai-chat",
            Format::OpenaiResponses => "openai-responses",
            Format::AnthropicMessages => "anthropic-messages",
            Format::Neutral => "neutral",
        }
    }

    /// The body's field holding the conversation.
    pub fn conversation(self) -> &'static str {
        match self {
            Format::OpenaiChat | Format::AnthropicMessages => "messages",
            Format::OpenaiResponses => "input",
            Format::Neutral => "turns",
        }
    }

    /// Whether the kernel reads blocks, parts or items of this `type` in
    /// this format: an opaque part never holds one.
    pub fn reads(self, kind: &str) -> bool {
        let read: &[&str] = match self {
            Format::AnthropicMessages => &["text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"],
            Format::OpenaiChat => &["text", "image_url", "file"],
            Format::OpenaiResponses => {
                &[
                    "message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "reasoning", "input_text",
                    "output_text", "input_image", "input_file",
                ]
            }
            Format::Neutral => &[],
        };
        read.contains(&kind)
    }

    /// The provider's own fields the kernel keeps on what `on` names in
    /// this format: what its readers carry and its writers send back, and
    /// nothing else (a field a block does not have would make the provider
    /// refuse the request).
    pub fn kept(self, on: Carrier) -> &'static [&'static str] {
        use Carrier::*;
        match (self, on) {
            (Format::AnthropicMessages, Turn(None)) => &["toolset_name"],
            (Format::AnthropicMessages, Call) => &["caller", "toolset_name"],
            (Format::AnthropicMessages, Part(PartKind::Text, _)) => &["citations"],
            (Format::AnthropicMessages, Part(PartKind::Image, _)) => &["transformations"],
            (Format::AnthropicMessages, Part(PartKind::Document, _)) => &["citations", "context"],
            (Format::OpenaiChat, Turn(Some(Role::Assistant))) => &["annotations", "audio", "function_call", "name", "refusal"],
            (Format::OpenaiChat, Turn(Some(_))) => &["name"],
            (Format::OpenaiChat, Part(PartKind::Text | PartKind::Image | PartKind::Document, _)) => &["prompt_cache_breakpoint"],
            (Format::OpenaiResponses, Turn(Some(_))) => &["phase", "status"],
            (Format::OpenaiResponses, Turn(None)) => &["caller", "id", "name", "namespace", "status"],
            (Format::OpenaiResponses, Call) => &["async", "caller", "namespace", "status"],
            (Format::OpenaiResponses, Part(PartKind::Text, true)) => &["annotations", "logprobs"],
            (Format::OpenaiResponses, Part(PartKind::Text | PartKind::Image | PartKind::Document, false)) => &["prompt_cache_breakpoint"],
            (Format::OpenaiResponses, Part(PartKind::Reasoning, _)) => &["content", "status"],
            _ => &[],
        }
    }
}

/// What carries a provider's own fields: a turn (by its role; none for a
/// tool's result), a tool call, or a part of a kind (in an assistant turn or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    Turn(Option<Role>),
    Call,
    Part(PartKind, bool),
}

contract! {
/// What a provider sent that the kernel keeps without reading it: a block
/// or item of a type the kernel does not know (an `opaque` part, kept
/// whole), or the fields of a known one it does not use (a text's
/// citations, a call's status). Sent back as they came, and only in
/// requests of `format`; counted by size and screened for secrets like any text.
pub struct ProviderFields {
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Map<String, serde_json::Value>"))]
    pub fields: serde_json::Map<String, serde_json::Value>,
    pub format: Format,
}
}

impl ProviderFields {
    /// Checks the fields of a known block, call or turn: each one its
    /// format keeps on it.
    pub fn validate(&self, at: &str, on: Carrier) -> Result<()> {
        self.check_format(at)?;
        let kept = self.format.kept(on);
        match self.fields.keys().find(|k| !kept.contains(&k.as_str())) {
            Some(name) => Err(Self::refuse(
                &format!("{at}.fields.{name}"),
                &format!("{} keeps no such field here (it keeps: {})", self.format.name(), if kept.is_empty() { "none".into() } else { kept.join(", ") }),
            )),
            None => Ok(()),
        }
    }

    /// Checks an opaque part's block: a `type` the kernel does not read.
    pub fn validate_opaque(&self, at: &str) -> Result<()> {
        self.check_format(at)?;
        match self.fields.get("type").and_then(serde_json::Value::as_str) {
            None => Err(Self::refuse(&format!("{at}.fields.type"), "an opaque part is a block with a string `type`")),
            Some(kind) if self.format.reads(kind) => {
                Err(Self::refuse(&format!("{at}.fields.type"), &format!("the kernel reads `{kind}` blocks: give it as what it is, not opaque")))
            }
            Some(_) => Ok(()),
        }
    }

    /// Checks a provider's own tool: a format that has them, a `type` of
    /// its own (not a function or custom tool, which the kernel reads as
    /// what they are), and a name a provider accepts.
    pub fn validate_tool(&self, at: &str) -> Result<()> {
        self.check_format(at)?;
        if self.format == Format::OpenaiChat {
            return Err(Self::refuse(&format!("{at}.format"), "OpenAI Chat has no tools of its own"));
        }
        if self.format == Format::AnthropicMessages && self.fields.contains_key("input_schema") {
            return Err(Self::refuse(&format!("{at}.fields.input_schema"), "a tool with an input_schema is a custom tool: give it as one"));
        }
        match self.fields.get("type").and_then(serde_json::Value::as_str) {
            None | Some("") => return Err(Self::refuse(&format!("{at}.fields.type"), "a provider's own tool has a string `type`")),
            Some("function" | "custom") => {
                return Err(Self::refuse(&format!("{at}.fields.type"), "the kernel reads function and custom tools: give it as what it is"))
            }
            Some(_) => {}
        }
        let key = Self::name_key(&self.fields);
        match self.tool_name() {
            Some(name) if super::tool_name_ok(name) => Ok(()),
            Some(_) => Err(Self::refuse(&format!("{at}.fields.{key}"), "a tool's name is 1 to 64 of a-z, A-Z, 0-9, `_` and `-`")),
            None => Err(Self::refuse(&format!("{at}.fields.{key}"), "a provider's own tool is named by a string `name`, `server_label` or `type`")),
        }
    }

    /// A provider's own tool's name: its `name`, else its `server_label`
    /// (an MCP server), else its `type`; `None` when that is not a string.
    pub fn tool_name(&self) -> Option<&str> {
        self.fields.get(Self::name_key(&self.fields))?.as_str()
    }

    fn name_key(fields: &serde_json::Map<String, serde_json::Value>) -> &'static str {
        ["name", "server_label", "type"].into_iter().find(|k| fields.contains_key(*k)).unwrap_or("name")
    }

    fn check_format(&self, at: &str) -> Result<()> {
        if self.format == Format::Neutral {
            return Err(Self::refuse(&format!("{at}.format"), "provider fields belong to a provider's format, not `neutral`"));
        }
        if self.fields.is_empty() {
            return Err(Self::refuse(&format!("{at}.fields"), "empty; leave providerFields out instead"));
        }
        Ok(())
    }

    fn refuse(path: &str, message: &str) -> KernelError {
        KernelError::invalid(format!("{path}: {message}")).with_detail(serde_json::json!({"path": path}))
    }

    /// The fields as JSON text: what is counted and screened.
    pub fn text(&self) -> String {
        serde_json::to_string(&self.fields).unwrap_or_default()
    }
}

contract! {
/// A provider's prompt-caching hint (Anthropic `cache_control`).
pub struct CacheControl {
    /// `5m` or `1h`; absent means the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}
}

contract! {
/// One part of a message. Which fields a part has depends on its `kind`.
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    /// An image's or document's bytes, stored once by sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_ref: Option<ContentRef>,
    /// A redacted thinking block's opaque payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// An image's detail level for OpenAI: `low`, `high` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// An image's pixel size, read from its bytes when they are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// A reasoning item's provider id (`rs_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub kind: PartKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// What the provider sent with the part that the kernel does not read;
    /// for an `opaque` part, the whole block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_fields: Option<ProviderFields>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// A reasoning item's summary texts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<String>,
    /// A text part's text, or a thinking block's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// An image or document the provider fetches itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
}
}

/// Image detail levels OpenAI accepts.
pub const DETAILS: [&str; 3] = ["auto", "high", "low"];

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part { kind: PartKind::Text, text: Some(text.into()), ..Part::empty(PartKind::Text) }
    }

    pub fn empty(kind: PartKind) -> Part {
        Part {
            cache_control: None,
            content_ref: None,
            data: None,
            detail: None,
            encrypted_content: None,
            height: None,
            id: None,
            kind,
            media_type: None,
            provider_fields: None,
            signature: None,
            summary: Vec::new(),
            text: None,
            title: None,
            url: None,
            width: None,
        }
    }

    /// Checks that the part has exactly the fields its kind needs.
    pub fn validate(&self, at: &str) -> Result<()> {
        let fail = |message: &str| Err(KernelError::invalid(format!("{at}: {message}")).with_detail(serde_json::json!({"path": at})));
        let has = |present: bool, name: &str, wanted: bool| -> Result<()> {
            match (present, wanted) {
                (true, false) => fail(&format!("a {} part has no `{name}`", self.kind_name())),
                (false, true) => fail(&format!("a {} part needs `{name}`", self.kind_name())),
                _ => Ok(()),
            }
        };
        let k = self.kind;
        let source = self.content_ref.is_some() || self.url.is_some();
        let media = matches!(k, PartKind::Image | PartKind::Document);
        has(self.text.is_some(), "text", matches!(k, PartKind::Text | PartKind::Thinking) || (k == PartKind::Document && !source))?;
        has(self.signature.is_some(), "signature", k == PartKind::Thinking)?;
        has(self.data.is_some(), "data", k == PartKind::RedactedThinking)?;
        has(self.id.is_some(), "id", k == PartKind::Reasoning)?;
        if self.content_ref.is_some() && self.url.is_some() {
            return fail("has both contentRef and url");
        }
        if !media && source {
            return fail(&format!("a {} part has no contentRef or url", self.kind_name()));
        }
        if k == PartKind::Image && !source {
            return fail("an image part needs contentRef or url");
        }
        if !media && (self.media_type.is_some() || self.width.is_some() || self.height.is_some() || self.title.is_some()) {
            return fail(&format!("a {} part has no mediaType, width, height or title", self.kind_name()));
        }
        if k != PartKind::Image && self.detail.is_some() {
            return fail("only image parts have a detail");
        }
        if k != PartKind::Reasoning && (self.encrypted_content.is_some() || !self.summary.is_empty()) {
            return fail("only reasoning parts have encryptedContent or summary");
        }
        if matches!(k, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning | PartKind::Opaque) && self.cache_control.is_some() {
            return fail("thinking, reasoning and opaque parts take no cacheControl");
        }
        match (&self.provider_fields, k) {
            (None, PartKind::Opaque) => return fail("an opaque part needs `providerFields`: the block it keeps"),
            (Some(fields), PartKind::Opaque) => fields.validate_opaque(&format!("{at}.providerFields"))?,
            // A known part's fields depend on the turn it is in: its item checks them.
            (Some(_), _) | (None, _) => {}
        }
        if let Some(detail) = &self.detail {
            if !DETAILS.contains(&detail.as_str()) {
                return fail("detail must be `auto`, `high` or `low`");
            }
        }
        if let Some(ttl) = self.cache_control.as_ref().and_then(|c| c.ttl.as_ref()) {
            if ttl != "5m" && ttl != "1h" {
                return fail("cacheControl.ttl must be `5m` or `1h`");
            }
        }
        if let Some(reference) = &self.content_ref {
            reference.validate()?;
        }
        for (what, value) in [("id", &self.id), ("mediaType", &self.media_type)] {
            if let Some(value) = value {
                check_id(&format!("{at}.{what}"), value)?;
            }
        }
        Ok(())
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            PartKind::Text => "text",
            PartKind::Image => "image",
            PartKind::Document => "document",
            PartKind::Thinking => "thinking",
            PartKind::RedactedThinking => "redacted-thinking",
            PartKind::Reasoning => "reasoning",
            PartKind::Opaque => "opaque",
        }
    }

    /// The tokens a provider charges for this part beyond the item's visible
    /// text (text parts are that text). Conservative: the larger of the
    /// providers' documented costs.
    pub fn extra_tokens(&self) -> u64 {
        let text = |s: &str| u64::from(tokens::estimate(s));
        let carried = self.provider_fields.as_ref().map_or(0, |f| text(&f.text()));
        carried + match self.kind {
            PartKind::Text | PartKind::Opaque => 0,
            PartKind::Thinking => text(self.text.as_deref().unwrap_or("")),
            // Opaque base64: about three bytes of payload per four characters,
            // about four bytes per token.
            PartKind::RedactedThinking => opaque(self.data.as_deref()),
            PartKind::Reasoning => self.summary.iter().map(|s| text(s)).sum::<u64>() + opaque(self.encrypted_content.as_deref()),
            PartKind::Image => u64::from(tokens::image(self.width, self.height, self.detail.as_deref())),
            PartKind::Document => match (&self.content_ref, &self.text) {
                (Some(reference), _) => tokens::document(reference.byte_length, self.media_type.as_deref()),
                (None, Some(body)) => text(body),
                (None, None) => u64::from(tokens::PAGE_TOKENS),
            },
        }
    }
}

/// The text parts joined by newlines: the text view of a message given as parts.
pub fn text_of(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts.iter().filter(|p| p.kind == PartKind::Text).filter_map(|p| p.text.as_deref()).collect();
    texts.join("\n")
}

fn opaque(data: Option<&str>) -> u64 {
    data.map_or(0, |d| (d.len() as u64 * 3).div_ceil(16))
}
