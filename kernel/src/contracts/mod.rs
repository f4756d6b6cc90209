//! Data contracts v1: the objects every host exchanges with
//! the kernel. Each carries `schemaVersion`; an unknown version is
//! `unsupported-schema`. Field names are camelCase on the wire.
//!
//! - `item` — the context item: kinds, roles, trust, tool calls and results,
//!   and the budget partition an item lands in
//! - `part` — the parts of a provider message kept losslessly (images,
//!   documents, thinking, reasoning, cache hints)
//! - `provenance` — where a thing came from and where its content is kept
//! - `policy` — who may see what: sensitivity, scopes, sinks, retention
//! - `memory` — the memory record, its states, a replica's report on a deletion
//! - `session` — the session log's head and the compaction records it holds
//! - `provider` — what the kernel asks a host's model, and the answer

mod item;
mod memory;
mod part;
mod policy;
mod provenance;
mod provider;
mod session;

pub use item::*;
pub use memory::*;
pub use part::*;
pub use policy::*;
pub use provenance::*;
pub use provider::*;
pub use session::*;

use crate::error::{ErrorCode, KernelError, Result};

/// The one schema version this kernel reads and writes.
pub const SCHEMA_VERSION: u32 = 1;
/// Longest id, sink name or other short identifier accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// How deep a provider transcript or request body may nest, arrays and
/// objects: what the kernel keeps of one (a block kept whole, a provider's
/// fields) is stored a few levels further down in its own records, which
/// must read back.
pub const MAX_NESTING: usize = 96;
/// How deep a call's arguments may nest: an Anthropic body holds them as
/// its `input`, five levels down, and stays within [`MAX_NESTING`].
pub const MAX_ARGUMENT_NESTING: usize = MAX_NESTING - 5;

/// Whether `arguments` are JSON text whose numbers a 64-bit float holds,
/// nesting at most [`MAX_ARGUMENT_NESTING`] levels (a provider body holds
/// them as JSON values); the error says which they are not.
pub fn check_arguments(arguments: &str) -> std::result::Result<(), String> {
    let too_deep = || format!("tool-call arguments nest deeper than {MAX_ARGUMENT_NESTING} levels");
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value) if nesting(&value) > MAX_ARGUMENT_NESTING => Err(too_deep()),
        Ok(_) => Ok(()),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Err(too_deep()),
        Err(e) if e.to_string().starts_with("number out of range") => Err("tool-call arguments hold a number past a 64-bit float's range".into()),
        Err(_) => Err("tool-call arguments must be JSON text".into()),
    }
}

/// How many arrays and objects deep a value nests.
pub fn nesting(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

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

/// Checks a short identifier: non-empty, at most `MAX_ID_BYTES`, no control
/// characters, something visible, no direction controls, and no secret.
/// Identifiers are stored, echoed back (recall names a scope id, an audit
/// record its actor) and compared verbatim, so none may carry a credential:
/// that is refused rather than narrowed.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    check_id_shape(what, id)?;
    if let Some(kind) = crate::secrets::kind(id) {
        return Err(KernelError::invalid(format!(
            "{what} looks like it holds a {kind}; identifiers are stored and echoed back, so they may not carry credentials"
        ))
        .with_detail(serde_json::json!({"field": what, "secret": kind})));
    }
    Ok(())
}

/// [`check_id`] without the secret test: what a deletion or a purge names,
/// so that records stored before identifiers were screened can still be
/// forgotten.
pub fn check_id_shape(what: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(KernelError::invalid(format!(
            "{what} must be 1..={MAX_ID_BYTES} bytes without control characters"
        )));
    }
    // Blank however it is spelled: spaces, invisible characters, the braille blank.
    if id.chars().all(|c| c.is_whitespace() || crate::text::is_invisible(c) || c == '\u{2800}') {
        return Err(KernelError::invalid(format!("{what} has no visible character")).with_detail(serde_json::json!({"field": what})));
    }
    // Direction controls make an id read as another (`admin\u{202E}nimda`).
    if id.chars().any(|c| matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')) {
        return Err(KernelError::invalid(format!("{what} holds a bidirectional control character")).with_detail(serde_json::json!({"field": what})));
    }
    Ok(())
}

/// A decoder written out field by field, for records whose derived decoder
/// grows past what the JVM host compiles (HotSpot compiles no method over
/// 8 000 bytes): `read` takes one field, `finish` checks the whole, each with
/// the derived decoder's messages (`unknown field`, `duplicate field`,
/// `missing field`). Like the kernel's writer, it knows records as objects only.
trait Fields<'de>: Default {
    /// The field names as the wire spells them (`#[serde(field_identifier)]`).
    type Key: serde::Deserialize<'de>;
    type Record;
    /// What a decoding error says was expected: `struct ContextItem`.
    const EXPECTING: &'static str;
    fn read<A: serde::de::MapAccess<'de>>(&mut self, key: Self::Key, map: &mut A) -> std::result::Result<(), A::Error>;
    fn finish<E: serde::de::Error>(self) -> std::result::Result<Self::Record, E>;
}

/// Decodes a record through its [`Fields`].
fn decode_fields<'de, F: Fields<'de>, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<F::Record, D::Error> {
    struct Visitor<F>(std::marker::PhantomData<F>);
    impl<'de, F: Fields<'de>> serde::de::Visitor<'de> for Visitor<F> {
        type Value = F::Record;
        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str(F::EXPECTING)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<F::Record, A::Error> {
            let mut fields = F::default();
            while let Some(key) = map.next_key()? {
                fields.read(key, &mut map)?;
            }
            fields.finish()
        }
    }
    deserializer.deserialize_map(Visitor::<F>(std::marker::PhantomData))
}

/// A written-out decoder's step: the next value into its field's slot, or
/// the derived decoder's `duplicate field` error.
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

/// A written-out decoder's required field, or the derived decoder's `missing field` error.
fn required<T, E: serde::de::Error>(slot: Option<T>, name: &'static str) -> std::result::Result<T, E> {
    slot.ok_or_else(|| E::missing_field(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical;
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
    fn the_compaction_record_decoder_answers_as_a_derived_one() {
        let record = json!({
            "artifactRefs": [], "committedAt": "2026-06-01T12:00:00Z", "compactionId": "cmp-1", "cutSeq": 3, "degraded": false,
            "externalized": [], "inputDigest": "d", "inputHead": {"digest": "h", "seq": 3},
            "metrics": {"degraded": false, "durationMs": 0, "externalizedBytes": 0, "externalizedItems": 0, "inputTokens": 9,
                "outputTokens": 4, "ratioPermille": 444, "spanEvents": 3, "strategy": "local", "withheld": 0},
            "modelProfile": "m", "operationId": "op-1", "outputDigest": "o", "policyVersion": "v", "preserved": [1],
            "sessionId": "s1", "startedAt": "2026-06-01T12:00:00Z", "strategy": "local"
        });
        let decoded: CompactionRecord = serde_json::from_value(record.clone()).unwrap();
        assert_eq!(serde_json::to_value(&decoded).unwrap(), record);
        let mut nulls = record.clone();
        nulls["summary"] = serde_json::Value::Null;
        nulls["usage"] = serde_json::Value::Null;
        assert_eq!(serde_json::from_value::<CompactionRecord>(nulls).unwrap(), decoded);

        let error = |text: String| serde_json::from_str::<CompactionRecord>(&text).unwrap_err().to_string();
        let mut unknown = record.clone();
        unknown["extra"] = json!(1);
        assert!(error(unknown.to_string()).starts_with("unknown field `extra`, expected one of `artifactRefs`, `committedAt`"));
        let mut missing = record.clone();
        missing.as_object_mut().unwrap().remove("cutSeq");
        assert!(error(missing.to_string()).starts_with("missing field `cutSeq`"));
        assert!(error(record.to_string().replacen('{', r#"{"cutSeq":1,"#, 1)).starts_with("duplicate field `cutSeq`"));
        // A null optional field still counts as given.
        assert!(error(record.to_string().replacen('{', r#"{"usage":null,"usage":null,"#, 1)).starts_with("duplicate field `usage`"));
    }
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
        item.tool_calls.push(ToolCall { arguments: None, cache_control: None, call_id: "c1".into(), input: None, name: "grep".into(), provider_fields: None, provider_id: None });
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
