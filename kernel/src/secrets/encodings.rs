//! Secrets under a common encoding: text stored as UTF-16, and base64 or hex
//! runs long enough to hold a credential. A run is read again only when it
//! decodes to text; random bytes (an image, an encrypted payload, a digest)
//! decode to something else and are passed over, so the cost is one walk over
//! the text plus the decoding of what really is encoded text, bounded by
//! [`MAX_DECODED`].

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// Shortest base64 run decoded: 18 bytes, as short as `password=Hunter22!`.
const MIN_BASE64: usize = 24;
/// Shortest hex run decoded: 16 bytes.
const MIN_HEX: usize = 32;
/// Most bytes decoded for one text; a text of encoded text beyond this is
/// read only up to it.
const MAX_DECODED: usize = 4 << 20;

/// The texts `bytes` may hold: itself when it is UTF-8, and what it reads
/// as in UTF-16 when it has a byte-order mark or looks like UTF-16 (a zero
/// in most even or most odd bytes). Both are read when both apply: a UTF-8
/// text padded with `A\0A\0…` is still read as UTF-8.
pub(super) fn texts_of(bytes: &[u8]) -> Vec<std::borrow::Cow<'_, str>> {
    let mut texts: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    if let Ok(text) = std::str::from_utf8(bytes) {
        texts.push(text.into());
    }
    let zeros = |at: usize| bytes.iter().skip(at).step_by(2).filter(|&&b| b == 0).count();
    let half = bytes.len() / 2;
    let utf16 = match bytes {
        [0xFF, 0xFE, rest @ ..] => Some((rest, true)),
        [0xFE, 0xFF, rest @ ..] => Some((rest, false)),
        _ if half > 0 && bytes.contains(&0) => match (zeros(1) * 5 >= half * 4, zeros(0) * 5 >= half * 4) {
            (true, false) => Some((bytes, true)),
            (false, true) => Some((bytes, false)),
            _ => None,
        },
        _ => None,
    };
    if let Some((body, little)) = utf16 {
        let units = body.chunks_exact(2).map(|p| if little { u16::from_le_bytes([p[0], p[1]]) } else { u16::from_be_bytes([p[0], p[1]]) });
        texts.push(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect::<String>().into());
    }
    if texts.is_empty() {
        // Neither: read what is text in it (a Latin-1 file, a log with a
        // stray byte), each invalid sequence as U+FFFD.
        texts.push(String::from_utf8_lossy(bytes));
    }
    texts
}

/// The texts that base64 and hex runs in `text` decode to, in order.
pub(super) fn decoded(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut budget = MAX_DECODED;
    let mut i = 0;
    while i < bytes.len() && budget > 0 {
        let run = bytes[i..].iter().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')).count();
        if run == 0 {
            i += 1;
            continue;
        }
        let word = &bytes[i..i + run];
        i += run;
        let hex = run >= MIN_HEX && run % 2 == 0 && word.iter().all(u8::is_ascii_hexdigit);
        let decoded = if hex {
            word.chunks_exact(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("zz"), 16).ok()).collect::<Option<Vec<u8>>>()
        } else if run >= MIN_BASE64 {
            STANDARD_NO_PAD.decode(word).or_else(|_| URL_SAFE_NO_PAD.decode(word)).ok()
        } else {
            None
        };
        if let Some(text) = decoded.and_then(|d| String::from_utf8(d).ok()).filter(|t| readable(t)) {
            budget = budget.saturating_sub(text.len());
            out.push(text);
        }
    }
    out
}

/// Text a person would write: no control characters but line breaks and tabs.
fn readable(text: &str) -> bool {
    text.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}
