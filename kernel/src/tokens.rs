//! A deterministic, script-aware token estimator, used when the host gives no
//! `tokenEstimate`.
//!
//! It walks the text once, classifying runs (Latin words, digits, whitespace,
//! punctuation, CJK, other scripts, emoji) and charging each run what
//! `o200k_base`-style BPE vocabularies typically spend on it, in thousandths
//! of a token. The weights are tuned to over-count slightly: running out of
//! window is worse than leaving a little of it unused. The calibration test
//! checks it against `o200k_base` on a mixed English/Chinese/code corpus.

/// Estimated tokens of `text`; at least 1 for non-empty text.
pub fn estimate(text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    let mut milli: u64 = 0;
    let mut chars = Chars { text, at: 0 };
    while let Some(c) = chars.next() {
        match class(c) {
            Class::Latin => {
                let mut len = 1u64;
                let mut humps = 0u64;
                let mut prev_lower = c.is_lowercase();
                loop {
                    // Most letters are ASCII: count them straight off the bytes.
                    while let Some(&byte) = chars.text.as_bytes().get(chars.at) {
                        let lower = byte.is_ascii_lowercase();
                        if !lower && !byte.is_ascii_uppercase() {
                            break;
                        }
                        humps += u64::from(prev_lower && !lower);
                        prev_lower = lower;
                        len += 1;
                        chars.at += 1;
                    }
                    let Some(n) = chars.next_if(|n| !n.is_ascii() && class(n) == Class::Latin) else { break };
                    if prev_lower && n.is_uppercase() {
                        humps += 1;
                    }
                    prev_lower = n.is_lowercase();
                    len += 1;
                }
                milli += word_cost(len) + humps * 300;
            }
            Class::Digit => {
                let mut len = 1u64;
                while chars.next_if(|n| n.is_ascii_digit()).is_some() {
                    len += 1;
                }
                milli += len.div_ceil(3) * 1000;
            }
            Class::Space => {
                let mut newline = c == '\n';
                let mut len = 1u64;
                while let Some(n) = chars.next_if(|n| class(n) == Class::Space) {
                    newline |= n == '\n';
                    len += 1;
                }
                // One space merges into the next word; runs and newlines cost a token.
                if newline || len > 1 {
                    milli += 1000;
                }
            }
            Class::Punct => milli += 700,
            Class::Cjk => milli += 830,
            Class::OtherLetter => milli += 550,
            Class::Symbol => milli += 2000,
            Class::Joiner => milli += 700,
        }
    }
    (milli.div_ceil(1000) as u32).max(1)
}

/// A char cursor that decodes ASCII, most of what it reads, without the
/// general UTF-8 path.
struct Chars<'a> {
    text: &'a str,
    at: usize,
}

impl Chars<'_> {
    fn peek(&self) -> Option<(char, usize)> {
        let &byte = self.text.as_bytes().get(self.at)?;
        if byte.is_ascii() {
            return Some((char::from(byte), 1));
        }
        self.text[self.at..].chars().next().map(|c| (c, c.len_utf8()))
    }

    fn next_if(&mut self, accept: impl Fn(char) -> bool) -> Option<char> {
        let (c, width) = self.peek().filter(|(c, _)| accept(*c))?;
        self.at += width;
        Some(c)
    }
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let (c, width) = self.peek()?;
        self.at += width;
        Some(c)
    }
}

fn word_cost(len: u64) -> u64 {
    // Common short words are one token; longer words and identifiers split.
    1000 + len.saturating_sub(6) * 300
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Latin,
    Digit,
    Space,
    Punct,
    Cjk,
    OtherLetter,
    Symbol,
    Joiner,
}

#[inline]
fn class(c: char) -> Class {
    match ASCII.get(c as usize) {
        Some(&class) => class,
        None => non_ascii_class(c),
    }
}

fn non_ascii_class(c: char) -> Class {
    // Arms are disjoint; the commonest script goes first.
    match c {
        '\u{4e00}'..='\u{9fff}'
        | '\u{3400}'..='\u{4dbf}'
        | '\u{3000}'..='\u{303f}'
        | '\u{3040}'..='\u{30ff}'
        | '\u{ac00}'..='\u{d7af}'
        | '\u{ff00}'..='\u{ffef}'
        | '\u{1100}'..='\u{11ff}'
        | '\u{2e80}'..='\u{2fdf}'
        | '\u{3100}'..='\u{31ff}'
        | '\u{f900}'..='\u{faff}'
        | '\u{20000}'..='\u{3134f}' => Class::Cjk,
        '\u{200d}' | '\u{fe00}'..='\u{fe0f}' | '\u{1f3fb}'..='\u{1f3ff}' => Class::Joiner,
        // Latin-1 and Latin Extended letters mostly merge with their word.
        '\u{00c0}'..='\u{024f}' if c.is_alphabetic() => Class::Latin,
        c if c.is_alphabetic() => Class::OtherLetter,
        c if c.is_whitespace() => Class::Space,
        _ => Class::Symbol,
    }
}

/// `class` of every ASCII char, looked up rather than matched.
const ASCII: [Class; 128] = {
    let mut table = [Class::Symbol; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' => Class::Latin,
            b'0'..=b'9' => Class::Digit,
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => Class::Space,
            b'!'..=b'/' | b':'..=b'@' | b'['..=b'`' | b'{'..=b'~' => Class::Punct,
            _ => Class::Symbol,
        };
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_zero_and_anything_else_at_least_one() {
        assert_eq!(estimate(""), 0);
        assert_eq!(estimate("a"), 1);
        assert_eq!(estimate("。"), 1);
    }

    #[test]
    fn scripts_cost_differently() {
        assert!(estimate("上下文规划器") > estimate("planner"));
        assert!(estimate("internationalizationConfiguration") > estimate("the cat"));
    }
}

/// Tokens charged per PDF page, at most (Anthropic documents 1 500–3 000).
pub const PAGE_TOKENS: u32 = 3_000;

/// Estimated tokens of an image: the larger of Anthropic's (pixels / 750,
/// after scaling to a long edge of 1 568 and 1.15 megapixels) and OpenAI's
/// (85, plus 170 per 512-pixel tile after scaling into 2 048 × 2 048 and the
/// short side to 768; `low` detail is 85). Unknown sizes cost the most either charges.
pub fn image(width: Option<u32>, height: Option<u32>, detail: Option<&str>) -> u32 {
    let (Some(w), Some(h)) = (width, height) else {
        return 1_600;
    };
    let (w, h) = (f64::from(w.max(1)), f64::from(h.max(1)));
    let anthropic = {
        let scale = (1_568.0 / w.max(h)).min((1_150_000.0 / (w * h)).sqrt()).min(1.0);
        ((w * scale).floor().max(1.0) * (h * scale).floor().max(1.0) / 750.0).ceil() as u32
    };
    let openai = if detail == Some("low") {
        85
    } else {
        let fit = (2_048.0 / w.max(h)).min(1.0);
        let (w, h) = (w * fit, h * fit);
        let short = (768.0 / w.min(h)).min(1.0);
        let (w, h) = ((w * short).floor(), (h * short).floor());
        85 + 170 * ((w / 512.0).ceil() * (h / 512.0).ceil()) as u32
    };
    anthropic.max(openai)
}

/// Estimated tokens of a stored document: PDFs by pages (one per started
/// 16 KiB, a rough page size), anything else as text of that many bytes.
pub fn document(byte_length: u64, media_type: Option<&str>) -> u64 {
    if media_type == Some("application/pdf") {
        byte_length.div_ceil(16 << 10).max(1) * u64::from(PAGE_TOKENS)
    } else {
        byte_length.div_ceil(4)
    }
}
