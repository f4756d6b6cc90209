//! Where a thing came from: source references, provenance, content references.

use crate::canonical;
use crate::error::{KernelError, Result};
use super::check_id;

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
