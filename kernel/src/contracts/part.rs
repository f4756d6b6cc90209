//! The parts of a provider message the kernel keeps losslessly: text with
//! cache hints, images and documents (bytes in the content store), Anthropic
//! thinking blocks with their signatures, OpenAI Responses reasoning items.
//!
//! An item's `content` is the text a reader sees (its text parts joined by
//! newlines); `parts` say how a provider wants the message back.

use crate::error::{KernelError, Result};
use crate::tokens;
use super::{check_id, ContentRef};

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
        if matches!(k, PartKind::Thinking | PartKind::RedactedThinking | PartKind::Reasoning) && self.cache_control.is_some() {
            return fail("thinking and reasoning parts take no cacheControl");
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
        }
    }

    /// The tokens a provider charges for this part beyond the item's visible
    /// text (text parts are that text). Conservative: the larger of the
    /// providers' documented costs.
    pub fn extra_tokens(&self) -> u64 {
        let text = |s: &str| u64::from(tokens::estimate(s));
        match self.kind {
            PartKind::Text => 0,
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

fn opaque(data: Option<&str>) -> u64 {
    data.map_or(0, |d| (d.len() as u64 * 3).div_ceil(16))
}
