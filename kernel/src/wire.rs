//! The number contract of request text, applied before any request is decoded.
//!
//! Every integer on the wire lies within ±(2^53−1), so a JavaScript host
//! reads every number the kernel writes exactly, and a request a JavaScript
//! host can write is never refused elsewhere. A number outside that range
//! whose value is integral is refused, naming where it is. An integral value
//! is accepted whatever its spelling: `1.0`, `1e0` and `10e-1` read as `1`,
//! and `-0` as `0` (so the sign of zero never reaches canonical bytes). The
//! decision is made on the decimal text, exactly, never through a float.

use crate::error::{KernelError, Result};
use serde_json::json;
use std::borrow::Cow;

/// The largest integer magnitude on the wire: 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The request with its numbers held to the contract: borrowed when every
/// number is already spelled as it will be read.
pub fn numbers(text: &str) -> Result<Cow<'_, str>> {
    let mut rewritten: Option<String> = None;
    let mut copied = 0;
    let mut numbers = Numbers { bytes: text.as_bytes(), at: 0 };
    while let Some((start, end)) = numbers.next() {
        match read(&text[start..end]) {
            Number::Kept => {}
            Number::Integer(value) => {
                let out = rewritten.get_or_insert_with(|| String::with_capacity(text.len()));
                out.push_str(&text[copied..start]);
                out.push_str(&value);
                copied = end;
            }
            Number::OutOfRange => return Err(out_of_range(text, start, end)),
        }
    }
    Ok(match rewritten {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    })
}

/// The refusal of the number at `start..end`, naming where it is. Out of
/// line: the scan that calls it runs over every byte of a request, and the
/// JVM host compiles it only while it stays under HotSpot's size limit.
#[inline(never)]
fn out_of_range(text: &str, start: usize, end: usize) -> KernelError {
    let path = path_at(text, start);
    KernelError::invalid(format!(
        "at `{path}`: {} is a whole number outside ±{MAX_SAFE_INTEGER} (2^53−1), the range of every whole number on the wire",
        &text[start..end]
    ))
    .with_detail(json!({"path": path}))
}

/// The number tokens outside strings, as byte ranges. Malformed text is
/// passed over: the decoder that follows says what is wrong with it.
struct Numbers<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for Numbers<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let bytes = self.bytes;
        while self.at < bytes.len() {
            match bytes[self.at] {
                b'"' => self.at = string_end(bytes, self.at + 1),
                b'-' | b'0'..=b'9' => {
                    let start = self.at;
                    self.at += 1;
                    while self.at < bytes.len() && matches!(bytes[self.at], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                        self.at += 1;
                    }
                    return Some((start, self.at));
                }
                _ => self.at += 1,
            }
        }
        None
    }
}

/// Where the string opened before `from` ends (just past its closing quote).
fn string_end(bytes: &[u8], mut from: usize) -> usize {
    while let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[from..]) {
        let at = from + found;
        if bytes[at] == b'"' {
            return at + 1;
        }
        from = at + 2;
        if from >= bytes.len() {
            break;
        }
    }
    bytes.len()
}

enum Number {
    /// Read as written.
    Kept,
    /// Integral: read as this integer.
    Integer(String),
    OutOfRange,
}

/// Decides one number token exactly, from its decimal digits.
fn read(token: &str) -> Number {
    let (negative, unsigned) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    // Only JSON's own grammar is read; anything else is the decoder's to refuse.
    let is_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let whole_ok = is_digits(whole) && (whole == "0" || !whole.starts_with('0'));
    let exponent_digits = exponent.map(|e| e.strip_prefix(['+', '-']).unwrap_or(e));
    if !whole_ok || !fraction.is_none_or(is_digits) || !exponent_digits.is_none_or(is_digits) {
        return Number::Kept;
    }
    if exponent.is_none() && fraction.is_none() {
        // Most numbers: a plain integer.
        return match whole.parse::<u64>() {
            Ok(value) if value <= MAX_SAFE_INTEGER => {
                if negative && value == 0 { Number::Integer("0".into()) } else { Number::Kept }
            }
            _ => Number::OutOfRange,
        };
    }
    let fraction = fraction.unwrap_or("");
    // The exponent moves the decimal point; beyond a thousand places the
    // value is far out of range (or far below one) either way.
    let shift: i64 = match exponent {
        None => 0,
        Some(e) => {
            let negative = e.starts_with('-');
            match exponent_digits.unwrap_or("").parse::<i64>() {
                Ok(places) => if negative { -places.min(1000) } else { places.min(1000) },
                Err(_) => if negative { -1000 } else { 1000 },
            }
        }
    };
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let Some(first) = digits.iter().position(|&d| d != b'0') else {
        // Zero, however spelled (and whatever its sign).
        return if token == "0" { Number::Kept } else { Number::Integer("0".into()) };
    };
    let point = whole.len() as i64 + shift;
    let integral = digits.iter().enumerate().all(|(i, &d)| (i as i64) < point || d == b'0');
    if !integral {
        return Number::Kept;
    }
    // The integer's significant digits, then the zeros the exponent adds.
    let width = point - first as i64;
    if width > 16 {
        return Number::OutOfRange;
    }
    let mut value: u64 = 0;
    for i in first as i64..point {
        let digit = digits.get(i as usize).map_or(0, |d| u64::from(d - b'0'));
        value = value * 10 + digit;
    }
    if value > MAX_SAFE_INTEGER {
        return Number::OutOfRange;
    }
    let sign = if negative { "-" } else { "" };
    let spelled = format!("{sign}{value}");
    if spelled == token {
        Number::Kept
    } else {
        Number::Integer(spelled)
    }
}

/// The path (as the decoder names paths: `items[3].tokenEstimate`) of the
/// value that starts at byte `target`. Only called to explain a refusal.
fn path_at(text: &str, target: usize) -> String {
    enum Frame {
        Object(Option<String>),
        Array(usize),
    }
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut at = 0;
    while at < target.min(bytes.len()) {
        match bytes[at] {
            b'"' => {
                let end = string_end(bytes, at + 1);
                // A string in key position names the member that follows.
                let rest = text[end..].trim_start();
                if let (Some(Frame::Object(key)), true) = (stack.last_mut(), rest.starts_with(':')) {
                    *key = Some(serde_json::from_str(&text[at..end]).unwrap_or_else(|_| text[at + 1..end.saturating_sub(1)].to_string()));
                }
                at = end;
                continue;
            }
            b'{' => stack.push(Frame::Object(None)),
            b'[' => stack.push(Frame::Array(0)),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(Frame::Array(n)) = stack.last_mut() {
                    *n += 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object(Some(key)) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object(None) => {}
            Frame::Array(n) => path.push_str(&format!("[{n}]")),
        }
    }
    if path.is_empty() {
        ".".into()
    } else {
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_as(text: &str) -> String {
        numbers(text).unwrap().into_owned()
    }

    #[test]
    fn integral_values_read_alike_whatever_their_spelling() {
        assert_eq!(read_as(r#"{"a":1.0,"b":1e0,"c":10e-1,"d":-0,"e":-0.0,"f":0e5,"g":1E+2,"h":-2.50e1}"#), r#"{"a":1,"b":1,"c":1,"d":0,"e":0,"f":0,"g":100,"h":-25}"#);
    }

    #[test]
    fn fractions_and_plain_integers_are_kept() {
        let text = r#"{"a":0.5,"b":-1.25e-3,"c":12,"d":-7,"e":0,"f":9007199254740991,"g":[1e-400]}"#;
        assert!(matches!(numbers(text).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn numbers_inside_strings_are_text() {
        let text = r#"{"a":"1.0 and -0 and 18446744073709551615","b\"1.0":"\\","c":2.0}"#;
        assert_eq!(read_as(text), r#"{"a":"1.0 and -0 and 18446744073709551615","b\"1.0":"\\","c":2}"#);
    }

    #[test]
    fn integers_past_the_safe_range_are_refused_by_path() {
        for (text, path) in [
            (r#"{"window":9007199254740992}"#, "window"),
            (r#"{"items":[{"a":1},{"tokenEstimate":18446744073709551615}]}"#, "items[1].tokenEstimate"),
            (r#"{"fence":-9007199254740992}"#, "fence"),
            (r#"{"k":{"x":[0,1,1e16]}}"#, "k.x[2]"),
            (r#"{"a":1e308}"#, "a"),
            (r#"{"a":9.007199254740992e15}"#, "a"),
            (r#"[1,2,90071992547409930]"#, "[2]"),
        ] {
            let error = numbers(text).unwrap_err();
            assert_eq!(error.code, crate::error::ErrorCode::InvalidRequest, "{text}");
            assert_eq!(error.detail["path"], path, "{text}: {}", error.message);
        }
        assert!(numbers(r#"{"a":9007199254740991,"b":-9007199254740991,"c":9.007199254740991e15}"#).is_ok());
    }

    #[test]
    fn malformed_numbers_are_left_to_the_decoder() {
        for text in ["{\"a\":1.}", "{\"a\":-}", "{\"a\":1e}", "{\"a\":01}", "[1.2.3]", "{\"a\":1e-99999999999999999999}", "\"unterminated \\"] {
            numbers(text).unwrap();
        }
    }

    #[test]
    fn generated_integral_spellings_read_as_their_value() {
        // Every spelling of n (scaled by a power of ten, with trailing zeros)
        // reads as n; a fraction never does.
        for n in [0u64, 1, 7, 10, 123, 4096, 1 << 32, MAX_SAFE_INTEGER] {
            let scaled = if n == 0 { Vec::new() } else { vec![format!("{n}0e-1"), format!("{n}00E-2")] };
            for spelling in [format!("{n}.0"), format!("{n}.000e0"), format!("{}e{}", n, 0)].into_iter().chain(scaled) {
                let text = format!("[{spelling},-{spelling}]");
                let want = if n == 0 { "[0,0]".to_string() } else { format!("[{n},-{n}]") };
                assert_eq!(read_as(&text), want, "{spelling}");
            }
            let fraction = format!("[{n}.5]");
            assert_eq!(read_as(&fraction), fraction);
        }
    }
}
