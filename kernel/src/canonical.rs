//! Canonical encoding: the one byte form the kernel hashes, stores and returns.
//!
//! Canonical JSON is compact, with object keys in bytewise order, so equal
//! values give equal bytes on every host. Wire structs declare their fields
//! in the bytewise order of their wire names and maps are `BTreeMap`s, so
//! serde writes canonical JSON directly, without building a tree first; the
//! tests re-encode every response through a sorted tree to hold that line.
//! One thing in a response is the provider's own JSON, not the kernel's:
//! a rendered Anthropic body's `tool_use` inputs keep their numbers as the
//! call's arguments spelled them.
//! Digests are `sha256:<64 hex>` over those bytes; ids are prefixes of
//! digests, never random.

use crate::error::{KernelError, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// Serializes a wire value to canonical JSON bytes.
pub fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(unrepresentable)
}

/// Serializes a wire value to a canonical JSON string.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(unrepresentable)
}

/// A wire value's canonical JSON, held as text to pass through unchanged.
pub fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<serde_json::value::RawValue>> {
    serde_json::value::to_raw_value(value).map_err(unrepresentable)
}

/// Appends a wire value's canonical JSON to `out`.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(out, value).map_err(unrepresentable)
}

fn unrepresentable(e: serde_json::Error) -> KernelError {
    KernelError::internal(format!("value is not representable as JSON: {e}"))
}

/// `sha256:<hex>` of raw bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    hex_digest(&Sha256::digest(bytes))
}

/// `sha256:<hex>` of a value's canonical JSON, hashed as it is written.
pub fn digest_value<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // serde writes in small pieces; hash them in blocks.
    let mut writer = std::io::BufWriter::with_capacity(16 << 10, Hashing(Sha256::new()));
    serde_json::to_writer(&mut writer, value).map_err(unrepresentable)?;
    let hashing = writer.into_inner().map_err(|e| KernelError::internal(e.to_string()))?;
    Ok(hex_digest(&hashing.0.finalize()))
}

fn hex_digest(hash: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(7 + 2 * hash.len());
    out.push_str("sha256:");
    for byte in hash {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
    }
    out
}

/// An id derived from a digest: `<prefix>-<first 32 hex digits>`.
pub fn derived_id(prefix: &str, digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("{prefix}-{}", &hex[..32.min(hex.len())])
}

/// True when `s` has the shape of a digest this kernel produces.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// An RFC 3339 instant. Always carried in UTC with `Z`, compared by instant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_nanos: i128,
    text: String,
}

impl Timestamp {
    pub fn parse(text: &str) -> Result<Self> {
        use time::format_description::well_known::Rfc3339;
        let parsed = time::OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|e| KernelError::invalid(format!("`{text}` is not an RFC 3339 timestamp: {e}")))?
            .checked_to_offset(time::UtcOffset::UTC)
            .ok_or_else(|| KernelError::invalid(format!("`{text}` is outside the years 0000–9999 in UTC")))?;
        let text = parsed
            .format(&Rfc3339)
            .map_err(|e| KernelError::invalid(format!("`{text}` cannot be normalized: {e}")))?;
        Ok(Timestamp { unix_nanos: parsed.unix_timestamp_nanos(), text })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn unix_nanos(&self) -> i128 {
        self.unix_nanos
    }

    pub fn unix_millis(&self) -> i64 {
        (self.unix_nanos / 1_000_000) as i64
    }

    /// `seconds` after this instant, in nanoseconds since the epoch; never
    /// overflows (an instant is at most year 9999, `seconds` at most u64).
    pub fn nanos_after(&self, seconds: u64) -> i128 {
        self.unix_nanos + i128::from(seconds) * 1_000_000_000
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "An RFC 3339 instant; returned normalized to UTC (`Z`)."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_serialize_with_keys_in_bytewise_order() {
        // Holds only while serde_json's `preserve_order` feature stays off.
        let value = json!({"b": 1, "a": {"z": [true, null], "B": "x"}, "é": 0.5});
        assert_eq!(to_string(&value).unwrap(), r#"{"a":{"B":"x","z":[true,null]},"b":1,"é":0.5}"#);
    }

    #[test]
    fn strings_are_escaped_once() {
        assert_eq!(to_string(&json!({"k": "a\"b\n"})).unwrap(), r#"{"k":"a\"b\n"}"#);
    }

    #[test]
    fn digest_is_sha256_of_bytes() {
        assert_eq!(
            digest_bytes(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_digest(&digest_bytes(b"")));
        assert!(!is_digest("sha256:XYZ"));
    }

    #[test]
    fn timestamps_normalize_to_utc_and_compare_by_instant() {
        let a = Timestamp::parse("2026-03-01T10:00:00+02:00").unwrap();
        let b = Timestamp::parse("2026-03-01T08:00:00Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "2026-03-01T08:00:00Z");
        assert!(Timestamp::parse("2026-03-01 08:00").is_err());
        assert!(Timestamp::parse("2026-03-01T08:00:00.250Z").unwrap() > b);
    }

    #[test]
    fn instants_past_the_calendar_are_refused_not_wrapped() {
        for text in ["9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59-23:59"] {
            assert_eq!(Timestamp::parse(text).unwrap_err().code, crate::error::ErrorCode::InvalidRequest, "{text}");
        }
        for text in ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59+01:00", "0000-01-01T00:00:00Z", "0000-01-01T00:59:00-00:59"] {
            let t = Timestamp::parse(text).unwrap();
            assert!(t.nanos_after(u64::MAX) > t.unix_nanos(), "{text}");
        }
    }
}
