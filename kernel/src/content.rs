//! The content store: bytes addressed by their sha256, for tool output too
//! large to keep in a context and for losslessly archived spans.
//!
//! Content is stored in 1 MiB chunks and hashed once on the way in and once on
//! the way out: a read returns the bytes only when they hash to the object's
//! digest. Reads never return wrong bytes: a missing chunk is
//! `content-unavailable`, a changed one `digest-mismatch`. Each object
//! carries the access policy of its source (sensitivity, allowed sinks); a
//! read names its sink and is refused (`scope-denied`) outside them. Text in
//! which the secret detector finds a credential is stored `secret` whatever
//! it was declared, and a secret object's summary says only its size and type.

use crate::canonical::{self, Timestamp};
use crate::contracts::{check_id, check_sink, check_version, ContentRef, Sensitivity, SinkPolicy};
use crate::error::{ErrorCode, KernelError, Result};
use crate::store::{keys, Db};
use serde_json::json;

/// Bytes per stored chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// The largest object accepted.
pub const MAX_CONTENT_BYTES: u64 = 256 << 20;
/// The `store` identity in every ContentRef this kernel writes.
pub const STORE_ID: &str = "ctxk-content";

contract! {
/// What the store keeps beside an object's chunks.
pub struct BlobMeta {
    pub allowed_sinks: Vec<String>,
    pub byte_length: u64,
    pub chunk_count: u64,
    pub created_at: Timestamp,
    pub digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    pub schema_version: u32,
    pub sensitivity: Sensitivity,
}
}

contract! {
/// `put-content`: the bytes travel beside this request.
pub struct PutContentRequest {
    /// Sinks a reader may name; `get-content` refuses others.
    pub allowed_sinks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    pub now: Timestamp,
    pub schema_version: u32,
    pub sensitivity: Sensitivity,
    /// What the context should say instead of the bytes; derived from the
    /// text (head and tail) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}
}

contract! {
pub struct PutContentResponse {
    /// The sinks a reader may name, as stored (a second store of the same
    /// bytes only narrows them).
    pub allowed_sinks: Vec<String>,
    pub content_ref: ContentRef,
    /// False when the same bytes were already stored.
    pub created: bool,
    /// The detector rule that found a credential in the bytes, which made
    /// the object `secret` whatever the request declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_secret: Option<String>,
    pub schema_version: u32,
    /// The sensitivity the object is stored under.
    pub sensitivity: Sensitivity,
}
}

contract! {
/// `get-content`: the bytes come back as the result.
pub struct GetContentRequest {
    pub object_id: String,
    pub schema_version: u32,
    /// Where the bytes are going; must be one of the object's allowed sinks.
    pub sink: String,
}
}

/// How a ContentRef summary shows text it does not carry.
#[derive(Debug, Clone, Copy)]
pub struct Excerpt {
    pub head_chars: usize,
    pub tail_chars: usize,
}

impl Default for Excerpt {
    fn default() -> Self {
        Excerpt { head_chars: 1_500, tail_chars: 500 }
    }
}

/// A summary that says plainly what is left out: the head and tail of the
/// text, or the size and type of binary content or of anything secret.
pub fn summarize(bytes: &[u8], mime_type: Option<&str>, excerpt: Excerpt, sensitivity: Sensitivity) -> String {
    let digest = canonical::digest_bytes(bytes);
    let kind = mime_type.unwrap_or("application/octet-stream");
    if sensitivity >= Sensitivity::Secret {
        return format!("[externalized {kind}: {} bytes, {digest}; {}, not shown]", bytes.len(), sensitivity.name());
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return format!("[externalized {kind}: {} bytes, {digest}; binary, not shown]", bytes.len());
    };
    let chars = text.chars().count();
    if chars <= excerpt.head_chars.saturating_add(excerpt.tail_chars) {
        return format!("[externalized {kind}: {} bytes, {digest}; shown in full]\n{text}", bytes.len());
    }
    let head: String = text.chars().take(excerpt.head_chars).collect();
    let tail: String = text.chars().skip(chars - excerpt.tail_chars).collect();
    let omitted = chars - excerpt.head_chars - excerpt.tail_chars;
    format!(
        "[externalized {kind}: {} bytes, {digest}; TRUNCATED: showing the first {} and last {} of {chars} characters, {omitted} omitted; read the rest with get-content]\n{head}\n[… {omitted} characters omitted …]\n{tail}",
        bytes.len(),
        excerpt.head_chars,
        excerpt.tail_chars,
    )
}

fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

/// The policy `bytes` are stored under: `declared`, made `secret` when the
/// detector finds a credential in them (and the rule that found it).
pub fn screened(bytes: &[u8], declared: SinkPolicy) -> (SinkPolicy, Option<&'static str>) {
    let found = crate::secrets::detect_bytes(bytes).map(|finding| finding.kind);
    match found {
        Some(_) if declared.sensitivity < Sensitivity::Secret => (SinkPolicy::new(Sensitivity::Secret, &declared.sinks), found),
        _ => (declared, found),
    }
}

/// The reference a context keeps for `bytes`, without storing anything.
pub fn reference(bytes: &[u8], mime_type: Option<&str>, summary: String) -> Result<ContentRef> {
    if bytes.len() as u64 > MAX_CONTENT_BYTES {
        return Err(KernelError::limit(format!("content has {} bytes; the ceiling is {MAX_CONTENT_BYTES}", bytes.len())));
    }
    let digest = canonical::digest_bytes(bytes);
    Ok(ContentRef {
        byte_length: bytes.len() as u64,
        object_id: hex_of(&digest).to_string(),
        digest,
        mime_type: mime_type.map(str::to_string),
        recoverable: true,
        store: STORE_ID.into(),
        summary,
    })
}

/// Stores the bytes behind `reference` (idempotently) under `policy`.
/// Returns whether they were new, and the policy they are stored under: a
/// second store of the same bytes only narrows it.
pub fn store(db: &mut Db, reference: &ContentRef, bytes: &[u8], policy: &SinkPolicy, now: &Timestamp) -> Result<(bool, SinkPolicy)> {
    let hex = reference.object_id.as_str();
    let meta_key = keys::blob_meta(hex);
    if let Some((revision, mut meta)) = db.get::<BlobMeta>(&meta_key)? {
        let stored = meta.policy();
        let narrowed = stored.narrow(policy);
        if narrowed != stored {
            meta.allowed_sinks = narrowed.sinks.clone();
            meta.sensitivity = narrowed.sensitivity;
            db.put(&meta_key, &meta, Some(revision))?;
        }
        return Ok((false, narrowed));
    }
    let mut chunk_count = 0;
    for (n, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
        db.put_bytes(&keys::blob_chunk(hex, n as u64), chunk, None)?;
        chunk_count += 1;
    }
    let meta = BlobMeta {
        allowed_sinks: policy.sinks.clone(),
        byte_length: bytes.len() as u64,
        chunk_count,
        created_at: now.clone(),
        digest: reference.digest.clone(),
        mime_type: reference.mime_type.clone(),
        schema_version: 1,
        sensitivity: policy.sensitivity,
    };
    db.put(&meta_key, &meta, Some(0))?;
    Ok((true, policy.clone()))
}

impl BlobMeta {
    pub fn policy(&self) -> SinkPolicy {
        SinkPolicy::new(self.sensitivity, &self.allowed_sinks)
    }
}

pub fn put(db: &mut Db, request: PutContentRequest, bytes: &[u8]) -> Result<PutContentResponse> {
    check_version("request", request.schema_version)?;
    request.allowed_sinks.iter().try_for_each(|s| check_id("allowedSinks[]", s))?;
    if let Some(mime) = &request.mime_type {
        check_id("mimeType", mime)?;
    }
    // The ceiling first: scanning reads the bytes in several forms.
    if bytes.len() as u64 > MAX_CONTENT_BYTES {
        return Err(KernelError::limit(format!("content has {} bytes; the ceiling is {MAX_CONTENT_BYTES}", bytes.len())));
    }
    let (declared, detected) = screened(bytes, SinkPolicy::new(request.sensitivity, &request.allowed_sinks));
    // Bytes stored before keep the narrower of both policies; the summary
    // is written for the policy they will have.
    let digest = canonical::digest_bytes(bytes);
    let policy = match meta(db, hex_of(&digest))? {
        Some(stored) => stored.policy().narrow(&declared),
        None => declared,
    };
    let summary = match request.summary {
        None => summarize(bytes, request.mime_type.as_deref(), Excerpt::default(), policy.sensitivity),
        Some(_) if policy.sensitivity >= Sensitivity::Secret => {
            return Err(KernelError::invalid(format!(
                "summary: the content is {}, and a secret's summary says only its size and type; leave `summary` out",
                policy.sensitivity.name()
            ))
            .with_detail(json!({"field": "summary", "detector": detected})));
        }
        Some(summary) => {
            if let Some(rule) = crate::secrets::kind(&summary) {
                return Err(KernelError::invalid(format!("summary: it contains a secret ({rule}); a summary is shown where the bytes are not"))
                    .with_detail(json!({"field": "summary", "detector": rule})));
            }
            summary
        }
    };
    let content_ref = reference(bytes, request.mime_type.as_deref(), summary)?;
    let (created, stored) = store(db, &content_ref, bytes, &policy, &request.now)?;
    Ok(PutContentResponse {
        allowed_sinks: stored.sinks,
        content_ref,
        created,
        detected_secret: detected.map(str::to_string),
        schema_version: 1,
        sensitivity: stored.sensitivity,
    })
}

fn unavailable(object: &str, why: &str) -> KernelError {
    KernelError::new(ErrorCode::ContentUnavailable, format!("content `{object}` is not recoverable: {why}"))
        .with_detail(json!({"objectId": object}))
}

/// The object's metadata, if the store has it.
pub fn meta(db: &mut Db, object_id: &str) -> Result<Option<BlobMeta>> {
    Ok(db.get::<BlobMeta>(&keys::blob_meta(object_id))?.map(|(_, meta)| meta))
}

pub fn get(db: &mut Db, request: GetContentRequest) -> Result<Vec<u8>> {
    check_version("request", request.schema_version)?;
    check_sink(&request.sink)?;
    let object = request.object_id.as_str();
    if object.len() != 64 || !object.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(KernelError::invalid("objectId must be 64 lowercase hex digits"));
    }
    let meta = meta(db, object)?.ok_or_else(|| unavailable(object, "no such object"))?;
    if !meta.policy().admits(&request.sink) {
        return Err(KernelError::new(
            ErrorCode::ScopeDenied,
            format!("content `{object}` may not go to sink `{}`", request.sink),
        )
        .with_detail(json!({"objectId": object, "sink": request.sink, "allowedSinks": meta.allowed_sinks})));
    }
    let mut out = Vec::with_capacity(meta.byte_length.min(MAX_CONTENT_BYTES) as usize);
    for n in 0..meta.chunk_count {
        let chunk = db.get_bytes(&keys::blob_chunk(object, n))?.ok_or_else(|| unavailable(object, &format!("chunk {n} is missing")))?;
        out.extend_from_slice(&chunk);
    }
    if out.len() as u64 != meta.byte_length || canonical::digest_bytes(&out) != meta.digest {
        return Err(KernelError::new(ErrorCode::DigestMismatch, format!("content `{object}` does not match its digest"))
            .with_detail(json!({"objectId": object})));
    }
    Ok(out)
}
