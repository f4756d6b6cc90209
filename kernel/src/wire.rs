//! The number contract of request text, applied before any request is decoded.
//!
//! Every integer on the wire lies within ±(2^53−1), so a JavaScript host
//! reads every number the kernel writes exactly, and a request a JavaScript
//! host can write is never refused elsewhere. An integral value is accepted
//! whatever its spelling: `1.0`, `1e0` and `10e-1` read as `1`, and `-0` as
//! `0` (so the sign of zero never reaches canonical bytes). A whole number
//! past that range is refused, naming where it is, except in a float field
//! ([`FLOAT_PATHS`]: an embedding may hold `f32::MAX`, which JavaScript
//! writes with 39 digits); so is a number past a 64-bit float's range,
//! anywhere. A provider's own JSON inside a request ([`RAW_PATHS`]) keeps
//! its numbers as written. The decisions are made on the decimal text,
//! exactly, never through a float, and a refusal spells the number one way,
//! whatever the host wrote.

use crate::error::{KernelError, Result};
use serde_json::json;
use std::borrow::Cow;

/// The largest integer magnitude on the wire: 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Where requests hold floats, array indices written `[]`
/// (`kernel/tests/schemas.rs` holds this list to the schemas): there, a
/// whole number past 2^53 is a float's value. A provider payload holds none,
/// whatever its keys are named.
pub const FLOAT_PATHS: [&str; 4] = ["candidates[].confidence", "candidates[].embedding[]", "candidates[].importance", "queryEmbedding[]"];

/// Where requests hold a provider's own JSON, which the kernel keeps or
/// checks as text and never reads as numbers (an Anthropic `tool_use`
/// block's `input`, in an imported transcript or a body to validate): there,
/// every number is read as written, never respelled or refused for its size.
pub const RAW_PATHS: [&str; 2] = ["body.messages[].content[].input", "transcript.messages[].content[].input"];

/// The request with its numbers held to the contract: borrowed when every
/// number is already spelled as it will be read.
pub fn numbers(text: &str) -> Result<Cow<'_, str>> {
    let mut rewritten: Option<String> = None;
    let mut copied = 0;
    let mut paths: Option<Paths> = None;
    let mut numbers = Numbers { bytes: text.as_bytes(), at: 0 };
    while let Some((start, end)) = numbers.next() {
        let spelled = match read(&text[start..end]) {
            Number::Kept => continue,
            Number::Integer(value) => match as_written(paths.get_or_insert_with(|| Paths::new(text)), start) {
                true => continue,
                false => value,
            },
            Number::Beyond => match beyond(paths.get_or_insert_with(|| Paths::new(text)), start, end) {
                Some(refusal) => return Err(refusal),
                None => continue,
            },
            Number::Infinite => return Err(infinite(paths.get_or_insert_with(|| Paths::new(text)), start)),
        };
        let out = rewritten.get_or_insert_with(|| String::with_capacity(text.len()));
        out.push_str(&text[copied..start]);
        out.push_str(&spelled);
        copied = end;
    }
    Ok(match rewritten {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    })
}

/// The refusal of a whole number past ±(2^53−1) at `start..end`, unless it
/// is the value of a float field. Out of line: the scan that calls it runs
/// over every byte of a request, and the JVM host compiles it only while it
/// stays under HotSpot's size limit.
#[inline(never)]
fn beyond(paths: &mut Paths, start: usize, end: usize) -> Option<KernelError> {
    if as_written(paths, start) {
        return None;
    }
    let (path, _) = paths.at(start);
    if FLOAT_PATHS.contains(&shape(&path).as_str()) {
        return None;
    }
    let number = spelled(&paths.text[start..end]);
    Some(
        KernelError::invalid(format!(
            "at `{path}`: {number} is a whole number outside ±{MAX_SAFE_INTEGER} (2^53−1), the range of every whole number on the wire"
        ))
        .with_detail(json!({"path": path})),
    )
}

/// Whether the number at `start` lies in a provider payload the kernel
/// keeps as JSON text ([`RAW_PATHS`]). Out of line, like [`beyond`].
#[inline(never)]
fn as_written(paths: &mut Paths, start: usize) -> bool {
    paths.advance(start);
    paths.raw()
}

/// A path with its array indices left out: `a[3].b` is `a[].b`.
fn shape(path: &str) -> String {
    let mut shape = String::with_capacity(path.len());
    let mut index = false;
    for c in path.chars() {
        match c {
            '[' => index = true,
            ']' => index = false,
            _ if index => continue,
            _ => {}
        }
        shape.push(c);
    }
    shape
}

/// The refusal of the number at `start`, past a 64-bit float's range. Out
/// of line, like [`beyond`].
#[inline(never)]
fn infinite(paths: &mut Paths, start: usize) -> KernelError {
    let (path, _) = paths.at(start);
    KernelError::invalid(format!("at `{path}`: a number past the range of a 64-bit float (±1.7976931348623157e+308)"))
        .with_detail(json!({"path": path}))
}

/// The refusal of a number past a 32-bit float's range that a decoder met
/// in a 32-bit float field (an embedding), `at` bytes into `text` (a
/// decoder points just past the value it could not take).
#[inline(never)]
pub fn past_f32_at(text: &str, at: usize) -> Option<KernelError> {
    let (start, end) = Numbers { bytes: text.as_bytes(), at: 0 }.take_while(|(start, _)| *start < at).last()?;
    if end + 1 < at {
        return None;
    }
    let (path, _) = Paths::new(text).at(start);
    Some(
        KernelError::invalid(format!("at `{path}`: {} is past the range of a 32-bit float (±3.4028235e+38)", spelled(&text[start..end])))
            .with_detail(json!({"path": path})),
    )
}

/// A number as a message spells it, whatever spelling a host chose: its
/// exact decimal value, written as JavaScript writes numbers (`1e+308` for
/// `1.0E308` and `10e307`, `9007199254740993` as it is, `0.0001`, `1e-7`).
fn spelled(token: &str) -> String {
    let (sign, unsigned) = token.strip_prefix('-').map_or(("", token), |rest| ("-", rest));
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let shift: i64 = exponent.trim_start_matches('+').parse().unwrap_or(if exponent.starts_with('-') { -100_000 } else { 100_000 });
    let digits = format!("{whole}{fraction}");
    let Some(first) = digits.find(|c: char| c != '0') else { return "0".into() };
    let significant = digits[first..].trim_end_matches('0');
    // The value is 0.<significant> × 10^n; k digits.
    let n = whole.len() as i64 - first as i64 + shift.clamp(-100_000, 100_000);
    let k = significant.len() as i64;
    let body = if k <= n && n <= 21 {
        format!("{significant}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &significant[..n as usize], &significant[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{significant}", "0".repeat(-n as usize))
    } else {
        let rest = if k > 1 { format!(".{}", &significant[1..]) } else { String::new() };
        format!("{}{rest}e{}{}", &significant[..1], if n > 0 { "+" } else { "-" }, (n - 1).abs())
    };
    format!("{sign}{body}")
}

/// True when a string of the text escapes half a surrogate pair alone
/// (`"\ud800"`, `"\udc00"`, `"\ud800x"`): no UTF-8 can carry it. Only text
/// holding a `\u` escape is read.
pub fn lone_surrogate(text: &str) -> bool {
    let bytes = text.as_bytes();
    if memchr::memmem::find(bytes, b"\\u").is_none() {
        return false;
    }
    // The code unit a `\uXXXX` escape at `at` writes.
    let unit = |at: usize| -> Option<u32> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| text.get(at + 2..at + 6).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())))
            .flatten()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[at..]) {
        let escape = at + found;
        at = match unit(escape) {
            Some(0xD800..=0xDBFF) if unit(escape + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) => escape + 12,
            Some(0xD800..=0xDFFF) => return true,
            Some(_) => escape + 6,
            // Any other escape, `\\` among them: the escaped character is passed.
            None => escape + 2,
        };
    }
    false
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
    /// Integral, past ±(2^53−1): only a float field takes it.
    Beyond,
    /// Past a 64-bit float's range.
    Infinite,
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
            _ => past_integers(token),
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
        // Only a fraction's exponent can carry it past a float's range.
        return if exponent.is_some() && point - first as i64 > 300 && !matches!(past_integers(token), Number::Beyond) {
            Number::Infinite
        } else {
            Number::Kept
        };
    }
    // The integer's significant digits, then the zeros the exponent adds.
    let width = point - first as i64;
    if width > 16 {
        return past_integers(token);
    }
    let mut value: u64 = 0;
    for i in first as i64..point {
        let digit = digits.get(i as usize).map_or(0, |d| u64::from(d - b'0'));
        value = value * 10 + digit;
    }
    if value > MAX_SAFE_INTEGER {
        return Number::Beyond;
    }
    let sign = if negative { "-" } else { "" };
    let spelled = format!("{sign}{value}");
    if spelled == token {
        Number::Kept
    } else {
        Number::Integer(spelled)
    }
}

/// A number past the integer range: a float, unless past a float's range.
/// Out of line, like [`infinite`].
#[inline(never)]
fn past_integers(token: &str) -> Number {
    match token.parse::<f64>() {
        Ok(value) if value.is_finite() => Number::Beyond,
        _ => Number::Infinite,
    }
}

enum Frame {
    Object(Option<String>),
    Array(usize),
}

/// How far a path goes along each of [`RAW_PATHS`]: the segments it
/// matches (all of them: in or under it), or `None` once it turns off.
/// Kept per frame, so a number's place is known without spelling its path.
type Along = [Option<u8>; RAW_PATHS.len()];

/// The segments of a [`RAW_PATHS`] entry: member names, and `[]` for any index.
fn segments(path: &'static str) -> impl Iterator<Item = &'static str> {
    path.split('.').flat_map(|part| {
        let name = part.trim_end_matches("[]");
        std::iter::once(name).chain(std::iter::repeat_n("[]", (part.len() - name.len()) / 2))
    })
}

/// `along` one step further, into the member or element `frame` is at.
fn step(along: Along, frame: &Frame) -> Along {
    let mut next = along;
    for (k, path) in RAW_PATHS.iter().enumerate() {
        next[k] = along[k].and_then(|matched| {
            let wanted = segments(path).nth(usize::from(matched));
            match (wanted, frame) {
                (None, _) => Some(matched),
                (Some("[]"), Frame::Array(_)) => Some(matched + 1),
                (Some(name), Frame::Object(Some(key))) if name == key => Some(matched + 1),
                _ => None,
            }
        });
    }
    next
}

/// Paths of values in request text (as the decoder names paths:
/// `items[3].tokenEstimate`), read forward once however many are asked for,
/// in order. Only built to explain a refusal or to find a float field.
struct Paths<'a> {
    text: &'a str,
    at: usize,
    /// Each open object or array, and how far the path to it goes along [`RAW_PATHS`].
    stack: Vec<(Frame, Along)>,
}

impl<'a> Paths<'a> {
    fn new(text: &'a str) -> Self {
        Paths { text, at: 0, stack: Vec::new() }
    }

    /// How far the path of the value at the current place goes along [`RAW_PATHS`].
    fn along(&self) -> Along {
        self.stack.last().map_or([Some(0); RAW_PATHS.len()], |(frame, along)| step(*along, frame))
    }

    /// Whether the value at the current place is in or under one of [`RAW_PATHS`].
    fn raw(&self) -> bool {
        let along = self.along();
        RAW_PATHS.iter().enumerate().any(|(k, path)| along[k] == Some(segments(path).count() as u8))
    }

    /// Reads forward to byte `target` (at or past the last one asked for).
    fn advance(&mut self, target: usize) {
        let (text, bytes) = (self.text, self.text.as_bytes());
        while self.at < target.min(bytes.len()) {
            match bytes[self.at] {
                b'"' => {
                    let end = string_end(bytes, self.at + 1);
                    // A string in key position names the member that follows.
                    let rest = text[end..].trim_start();
                    if let (Some((Frame::Object(key), _)), true) = (self.stack.last_mut(), rest.starts_with(':')) {
                        *key = Some(serde_json::from_str(&text[self.at..end]).unwrap_or_else(|_| text[self.at + 1..end.saturating_sub(1)].to_string()));
                    }
                    self.at = end;
                    continue;
                }
                b'{' => self.stack.push((Frame::Object(None), self.along())),
                b'[' => self.stack.push((Frame::Array(0), self.along())),
                b'}' | b']' => {
                    self.stack.pop();
                }
                b',' => {
                    if let Some((Frame::Array(n), _)) = self.stack.last_mut() {
                        *n += 1;
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
    }

    /// The path of the value that starts at byte `target` (at or past the
    /// last one asked for), and the name of the member it is in.
    fn at(&mut self, target: usize) -> (String, Option<String>) {
        self.advance(target);
        let mut path = String::new();
        let mut member = None;
        for (frame, _) in &self.stack {
            match frame {
                Frame::Object(Some(key)) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    member = Some(key.clone());
                }
                Frame::Object(None) => {}
                Frame::Array(n) => path.push_str(&format!("[{n}]")),
            }
        }
        (if path.is_empty() { ".".into() } else { path }, member)
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
    fn a_providers_own_json_keeps_its_numbers_as_written() {
        let input = r#"{"id":18446744073709551617,"ratio":1.0,"n":[1e2,-0]}"#;
        for top in ["transcript", "body"] {
            let text = format!(r#"{{"{top}":{{"messages":[{{"content":[{{"type":"tool_use","input":{input}}}]}}]}},"window":1.0}}"#);
            let read = read_as(&text);
            assert!(read.contains(input), "{read}");
            assert!(read.ends_with(r#""window":1}"#), "{read}");
        }
        // The same members anywhere else are the kernel's numbers.
        for text in [r#"{"transcript":{"messages":[{"input":1.0}]}}"#, r#"{"items":[{"input":1.0}]}"#, r#"{"transcript":{"messages":[{"content":[{"inputs":1.0}]}]}}"#] {
            assert!(!read_as(text).contains("1.0"), "{text}");
        }
        assert!(numbers(r#"{"transcript":{"messages":[{"content":[{"x":18446744073709551617}]}]}}"#).is_err());
        // Members are matched by name, as the decoder reads them, not by a spelled path.
        assert!(!read_as(r#"{"transcript":{"messages":[{"content":[{"input.x":1.0,"input[0]":1.0}]}]}}"#).contains("1.0"));
        assert!(read_as(r#"{"transcript":{"messages":[{"content":[{"\u0069nput":{"a":1.0}}]}]}}"#).contains("1.0"));
        // However deep and however many, each number is placed without spelling its path.
        let deep = format!("{}{}{}", "[".repeat(200_000), "1.0,".repeat(200_000), "]".repeat(200_000)).replace(",]", "]");
        assert_eq!(read_as(&deep).matches('1').count(), 200_000);
        assert!(numbers(r#"{"transcript":{"messages":[{"content":[{"input":{"x":1e400}}]}]}}"#).is_err(), "past a float's range anywhere");
    }

    #[test]
    fn whole_numbers_past_the_safe_range_are_refused_by_path_outside_float_fields() {
        for (text, path, spelled) in [
            (r#"{"window":9007199254740992}"#, "window", "9007199254740992"),
            (r#"{"items":[{"a":1},{"tokenEstimate":18446744073709551615}]}"#, "items[1].tokenEstimate", "18446744073709551615"),
            (r#"{"fence":-9007199254740993}"#, "fence", "-9007199254740993"),
            (r#"{"k":{"x":[0,1,1e16]}}"#, "k.x[2]", "10000000000000000"),
            ("{\n \"a\": 1e+308}", "a", "1e+308"),
            (r#"{"a":1.0E308}"#, "a", "1e+308"),
            (r#"{"a":10e307}"#, "a", "1e+308"),
            (r#"{"a":9.007199254740993e15}"#, "a", "9007199254740993"),
            (r#"{"a":123456789012345678901234}"#, "a", "1.23456789012345678901234e+23"),
            (r#"{"transcript":{"input":{"id":12345678901234567890}}}"#, "transcript.input.id", "12345678901234567890"),
            (r#"{"confidence":{"n":1e20}}"#, "confidence.n", "100000000000000000000"),
            (r#"{"confidence":1e20}"#, "confidence", "100000000000000000000"),
            (r#"{"transcript":{"input":{"confidence":12345678901234567890,"embedding":[1e30]}}}"#, "transcript.input.confidence", "12345678901234567890"),
            (r#"{"body":{"messages":[{"candidates":[{"importance":1e17}]}]}}"#, "body.messages[0].candidates[0].importance", "100000000000000000"),
        ] {
            let error = numbers(text).unwrap_err();
            assert_eq!(error.code, crate::error::ErrorCode::InvalidRequest, "{text}");
            assert_eq!(error.detail["path"], path, "{text}: {}", error.message);
            assert!(error.message.contains(&format!(" {spelled} is a whole number outside")), "{text}: {}", error.message);
        }
        // Float fields take them as written.
        let floats = r#"{"candidates":[{"embedding":[340282346638528860000000000000000000000,1e20],"confidence":1e300,"importance":2e53}],"queryEmbedding":[9007199254740993]}"#;
        assert!(matches!(numbers(floats).unwrap(), Cow::Borrowed(_)));
        assert!(numbers(r#"{"a":9007199254740991,"b":-9007199254740991,"c":9.007199254740991e15}"#).is_ok());
    }

    #[test]
    fn a_lone_surrogate_escape_is_found_wherever_it_stands() {
        for lone in [r#""\ud800""#, r#""\udc00""#, r#""\ud800x""#, r#""\ud800\u0041""#, r#""\udbff\udbff""#, r#"{"k\uDFFF":1}"#, r#""a\\\ud800""#] {
            assert!(lone_surrogate(lone), "{lone}");
        }
        for fine in [r#""\ud83d\ude00""#, r#""\\ud800""#, r#""\u0041\n""#, r#""ud800""#, "\"\\", r#""\ud8""#, r#""\u00e9\uD83D\uDE00""#] {
            assert!(!lone_surrogate(fine), "{fine}");
        }
    }

    #[test]
    fn a_number_is_spelled_one_way() {
        for (spellings, want) in [
            (&["1e308", "1E+308", "1.0e308", "10e307", "0.1e309"][..], "1e+308"),
            (&["123", "1.23e2", "12300e-2"], "123"),
            (&["0.5", "5e-1", "0.50"], "0.5"),
            (&["0.000001", "1e-6"], "0.000001"),
            (&["1e-7", "0.0000001"], "1e-7"),
            (&["-2.5e21", "-25e20"], "-2.5e+21"),
            (&["1e21"], "1e+21"),
            (&["100000000000000000000", "1e20"], "100000000000000000000"),
            (&["0", "-0", "0e5", "0.000"], "0"),
        ] {
            for spelling in spellings {
                assert_eq!(spelled(spelling), want, "{spelling}");
            }
        }
    }

    #[test]
    fn numbers_past_a_float_are_refused_by_path() {
        let long = format!("{{\"weight\":{}}}", "9".repeat(400));
        for (text, path) in [
            (r#"{"weight":1e400}"#, "weight"),
            (r#"{"embedding":[0.5,-1.5e999]}"#, "embedding[1]"),
            (r#"{"a":1e99999999999999999999}"#, "a"),
            (long.as_str(), "weight"),
        ] {
            let error = numbers(text).unwrap_err();
            assert_eq!(error.detail["path"], path, "{text}: {}", error.message);
            assert!(error.message.contains("past the range of a 64-bit float"), "{}", error.message);
        }
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
