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
/// Shortest line of a run wrapped over lines: a hex dump's 16 bytes.
const MIN_WRAPPED_LINE: usize = 32;
/// Most characters between one line of a run and the next.
const WRAP_GAP: usize = 12;
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
    if let Some(text) = utf16(bytes) {
        texts.push(text.into());
    }
    if texts.is_empty() {
        // Neither: read what is text in it (a Latin-1 file, a log with a
        // stray byte), each invalid sequence as U+FFFD.
        texts.push(String::from_utf8_lossy(bytes));
    }
    texts
}

/// What `bytes` read as in UTF-16, when they have a byte-order mark or look
/// like UTF-16 (a zero in most even or most odd bytes).
fn utf16(bytes: &[u8]) -> Option<String> {
    let zeros = |at: usize| bytes.iter().skip(at).step_by(2).filter(|&&b| b == 0).count();
    let half = bytes.len() / 2;
    let (body, little) = match bytes {
        [0xFF, 0xFE, rest @ ..] => (rest, true),
        [0xFE, 0xFF, rest @ ..] => (rest, false),
        _ if half > 0 && bytes.contains(&0) => match (zeros(1) * 5 >= half * 4, zeros(0) * 5 >= half * 4) {
            (true, false) => (bytes, true),
            (false, true) => (bytes, false),
            _ => return None,
        },
        _ => return None,
    };
    let units = body.chunks_exact(2).map(|p| if little { u16::from_le_bytes([p[0], p[1]]) } else { u16::from_be_bytes([p[0], p[1]]) });
    Some(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

/// Characters of a base64 or hex run.
fn encoded_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

/// The texts that base64 and hex runs in `text` decode to, in order. A run
/// wrapped over lines (MIME's 76 columns, PEM's 64, a hex dump's, indented
/// or quoted with `>`) is one run: a line of at least [`MIN_WRAPPED_LINE`]
/// characters, a multiple of 4, joins the next. What a run decodes to is
/// read as UTF-8 or, failing that, as UTF-16 (a PowerShell
/// `-EncodedCommand`, a .NET string's bytes).
pub(super) fn decoded(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut budget = MAX_DECODED;
    let mut i = 0;
    while i < bytes.len() && budget > 0 {
        let mut lines: Vec<&[u8]> = Vec::new();
        loop {
            let run = bytes[i..].iter().take_while(|&&b| encoded_char(b)).count();
            lines.push(&bytes[i..i + run]);
            i += run;
            if run < MIN_WRAPPED_LINE || run % 4 != 0 {
                break;
            }
            // `=` padding ends a run; a line break, indentation and quote marks go on to the next line.
            let gap = bytes[i..].iter().take(WRAP_GAP).take_while(|b| matches!(b, b'\r' | b'\n' | b' ' | b'\t' | b'>')).count();
            if !bytes[i..i + gap].contains(&b'\n') || !bytes.get(i + gap).copied().is_some_and(encoded_char) {
                break;
            }
            i += gap;
        }
        if lines[0].is_empty() {
            i += 1;
            continue;
        }
        // The lines as one run; failing that (the last line was a word after
        // the encoded text, not more of it), all but the last; then each line.
        let text = text_in(&lines.concat())
            .or_else(|| (lines.len() > 2).then(|| text_in(&lines[..lines.len() - 1].concat())).flatten())
            .map(|t| vec![t])
            .unwrap_or_else(|| if lines.len() > 1 { lines.iter().filter_map(|l| text_in(l)).collect() } else { Vec::new() });
        for text in text {
            budget = budget.saturating_sub(text.len());
            out.push(text);
        }
    }
    out
}

/// The text a base64 or hex run decodes to, in UTF-8 or UTF-16, if any.
fn text_in(word: &[u8]) -> Option<String> {
    let hex = word.len() >= MIN_HEX && word.len() % 2 == 0 && word.iter().all(u8::is_ascii_hexdigit);
    let decoded = if hex {
        word.chunks_exact(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("zz"), 16).ok()).collect::<Option<Vec<u8>>>()
    } else if word.len() >= MIN_BASE64 {
        STANDARD_NO_PAD.decode(word).or_else(|_| URL_SAFE_NO_PAD.decode(word)).ok()
    } else {
        None
    }?;
    let utf8 = std::str::from_utf8(&decoded).ok().filter(|t| readable(t)).map(str::to_owned);
    utf8.or_else(|| utf16(&decoded).filter(|t| readable(t)))
}

/// Text a person would write: no control characters but line breaks and tabs.
fn readable(text: &str) -> bool {
    text.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
}
