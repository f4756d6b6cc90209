//! Secret detection: whether a text carries a credential that must not be
//! kept.
//!
//! A secret is anything that grants access when read back: API keys and
//! tokens, private keys, passwords (assigned, in a URL, or stated in prose),
//! session cookies, bearer and basic authorization, recovery codes.
//!
//! The rules are gitleaks' default rule set, vendored as data with its licence
//! and release (`gitleaks/`, applied as gitleaks applies it: keyword
//! prefilter, entropy minimum, secret group, global and per-rule allowlists),
//! followed by the kernel's own rules for what a memory text holds and source
//! code seldom does (see `own`). Each finding names its rule; no finding ever
//! carries the secret.
//!
//! The rules read the text as a reader sees it (`view`): characters that
//! render as nothing (zero-width spaces and joiners, bidirectional controls,
//! soft hyphens, …) are removed, the rest is folded to NFKC with the accents
//! of Latin, Greek and Cyrillic letters and marks on Han characters dropped
//! (`é` reads as `e`, `ｇ\u{301}` as `g`), and a space separates a token
//! from a neighbouring character of another script. So a token split by
//! U+200B, written in fullwidth letters, or written straight against Chinese
//! text (`密钥是sk_live_…请保存`) reads as the token between word boundaries,
//! as the rules (written for ASCII text) expect. A text whose token is
//! wrapped onto the next line (after its first 16 characters, after a
//! prefix such as `sk_live_`, or after a key's first part with 16 more
//! characters to come; the next line may be indented or quoted with `>`) is
//! read a second time with the wrap joined, and one whose long token is
//! closed by a sentence mark or emphasis (`npm_…,`, `**npm_…**`) with a
//! space before the mark.
//! Base64 and hex runs that decode to text are read too, and stored bytes in
//! UTF-16 are read as the text they hold (see `encodings`).
//!
//! Public surface: [`detect`] and [`detect_bytes`] and their [`Finding`];
//! [`kind`] and [`split_kind`] (a secret split across two messages);
//! [`rule_statuses`] for the tests that check every rule.

mod encodings;
mod engine;
mod own;
mod rules;
mod words;

pub use engine::Source;
use crate::text::is_invisible;
use std::borrow::Cow;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
pub use rules::GITLEAKS_VERSION;

/// Why a text was judged to carry a secret. Names the rule, never the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// The gitleaks rule id (`github-pat`, `generic-api-key`, …) or the
    /// kernel's own (`kernel-password`, …).
    pub rule: &'static str,
    /// The coarse kind, in a few words: `password`, `API key`, `private key`, …
    pub kind: &'static str,
    pub description: &'static str,
}

/// The first secret found in `text`, if any. The same text gives the same
/// finding on every call and every host: rules run in a fixed order
/// (gitleaks' specific rules, the kernel's, gitleaks' generic ones) and the
/// first rule with a finding names it.
pub fn detect(text: &str) -> Option<Finding> {
    read(text).or_else(|| encodings::decoded(text).iter().find_map(|decoded| read(decoded)))
}

/// Text a provider wrote, as a reason or an error may echo it: its first
/// `chars` characters, or, when it holds a secret (a 401 body repeating the
/// key it refused), only the kind of secret withheld.
pub fn excerpt(text: &str, chars: usize) -> String {
    match kind(text) {
        Some(kind) => format!("withheld: it holds a {kind}"),
        None => text.chars().take(chars).collect(),
    }
}

/// [`detect`] for stored bytes: UTF-8 text, text stored as UTF-16, or what
/// is text in bytes that are neither.
pub fn detect_bytes(bytes: &[u8]) -> Option<Finding> {
    encodings::texts_of(bytes).iter().find_map(|text| detect(text))
}

/// The first finding in `text` as a reader sees it, then with wraps joined,
/// then with its long tokens apart from the sentence marks closing them (a
/// key by its own shape only: the generic rule reads a hash or an id after a
/// word such as `key` as one, `Key commit: 620b07…,`).
fn read(text: &str) -> Option<Finding> {
    let engine = engine::engine();
    let seen = view(text, false);
    if let Some(finding) = engine.detect(seen.as_bytes()) {
        return Some(finding);
    }
    let joined = has_wrap(text).then(|| view(text, true));
    if let Some(finding) = joined.as_ref().and_then(|joined| engine.detect(joined.as_bytes())) {
        return Some(finding);
    }
    // Closed marks apart in the text as seen and as joined: a wrap joins a
    // line's last long token to a key on the next (`…-name` then `npm_…,`).
    std::iter::once(&seen).chain(joined.as_ref()).find_map(|text| match closed(text) {
        Cow::Owned(closed) => engine.detect(closed.as_bytes()).filter(|f| f.rule != "generic-api-key"),
        Cow::Borrowed(_) => None,
    })
}

/// The shortest run of token characters a wrap is joined after, whatever
/// follows: a token wrapped by an editor or a terminal is long, a word ending
/// a line is not (nor a log line's last field, `tokens_out=456`, which keeps
/// a log to one reading).
const WRAPPED_RUN: usize = 16;

/// Most characters between a wrap and the token's next part: more breaks,
/// the indentation of the next line and a reply's `>` quote marks.
const WRAP_GAP: usize = 12;

/// The token characters before a line break, as far as a wrap needs to know.
#[derive(Default)]
struct Run {
    len: usize,
    /// It has a digit, `_` or `-` (`ghp_Qx7`), or only capitals (`AKIA`):
    /// a key's prefix or part, not a word ending a line.
    keyish: bool,
    capitals: bool,
    /// It holds an `=`.
    equals: bool,
    /// A value follows an `=` in it: a whole setting (`max_tokens=4096`),
    /// not part of a key.
    setting: bool,
    last: char,
}

impl Run {
    fn push(&mut self, c: char) {
        let c = fold_fullwidth(c);
        if self.len == 0 {
            *self = Run { capitals: true, ..Run::default() };
        }
        self.len += 1;
        self.keyish |= c.is_ascii_digit() || matches!(c, '_' | '-');
        self.capitals &= c.is_ascii_uppercase();
        self.setting |= self.equals && c != '=';
        self.equals |= c == '=';
        self.last = c;
    }

    /// Whether a break after this run, followed by `after` token characters
    /// (counted up to [`WRAPPED_RUN`]), splits one token: the run is long, or
    /// ends in a prefix's separator or an assignment's `=` (`sk_live_`,
    /// `xoxb-`, `api_key=`), or is a key's part (not a whole setting) and a
    /// long run follows.
    fn wraps(&self, after: usize) -> bool {
        after > 0
            && (self.len >= WRAPPED_RUN
                || (self.len >= 3 && matches!(self.last, '_' | '-' | '='))
                || (self.len >= 4 && (self.keyish || self.capitals) && !self.setting && after >= WRAPPED_RUN))
    }
}

/// Where the token goes on when `first`, the character after it, starts a
/// wrap: the byte offset in `rest` (the text after `first`) of its next
/// character, past at most [`WRAP_GAP`] breaks, spaces and quote marks with
/// a line break among them (spaces may trail the line), and how many token
/// characters follow (up to [`WRAPPED_RUN`]). None when it is no wrap.
fn continuation(first: char, rest: &str) -> Option<(usize, usize)> {
    let gap_char = |c: char, broke: bool| soft_break(c) || matches!(c, ' ' | '\t') || (broke && c == '>');
    let mut broke = soft_break(first);
    if !gap_char(first, broke) {
        return None;
    }
    let mut gap = 1;
    for (at, c) in rest.char_indices() {
        if is_invisible(c) {
            continue;
        }
        if token_char(c) {
            let after = rest[at..].chars().filter(|c| !is_invisible(*c)).take_while(|c| token_char(*c)).take(WRAPPED_RUN).count();
            return broke.then_some((at, after));
        }
        broke |= soft_break(c);
        gap += 1;
        if gap > WRAP_GAP || !gap_char(c, broke) {
            return None;
        }
    }
    None
}

/// Fullwidth forms as the ASCII they fold to.
fn fold_fullwidth(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

/// Characters of a token: what keys, passwords and their encodings are made
/// of, in ASCII or in fullwidth forms (which fold to ASCII).
fn token_char(c: char) -> bool {
    let ascii = fold_fullwidth(c);
    ascii.is_ascii_alphanumeric() || matches!(ascii, '_' | '-' | '+' | '/' | '=')
}

/// Line breaks and the spaces that look like none, which split a token
/// where a reader sees one (`\n`, U+2028, a hair space, a no-break space).
fn soft_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{A0}' | '\u{2000}'..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}')
}

/// Whether `c`, next to an ASCII letter or digit, sits in the same word: a
/// Latin letter (`contraseña`, `hasło`) does; Han, kana, Hangul, Cyrillic and
/// every other script do not.
fn same_word(c: char) -> bool {
    c.is_ascii() || matches!(c, '\u{C0}'..='\u{24F}' | '\u{1E00}'..='\u{1EFF}') && c != '\u{D7}' && c != '\u{F7}'
}

/// `text` as the rules read it (see the module docs); with `join`, a break
/// after at least [`WRAPPED_RUN`] token characters and before another token
/// character is removed. ASCII text without such a wrap is returned as it is.
fn view(text: &str, join: bool) -> Cow<'_, str> {
    let wrapped = join && has_wrap(text);
    if text.is_ascii() && !wrapped {
        return Cow::Borrowed(text);
    }
    Cow::Owned(spaced(&unmarked(&visible(text, wrapped))).into_owned())
}

// The steps of `view` stay out of line, each small enough for the JVM host's
// JIT compiler (HotSpot compiles no method over 8 000 bytes): the plan path
// reads identifiers through here.

/// `text` without invisible characters; with `wrapped`, with each wrap joined.
#[inline(never)]
fn visible(text: &str, wrapped: bool) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut run = Run::default();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if is_invisible(c) {
            continue;
        }
        if wrapped && run.len > 0 {
            if let Some((at, _)) = continuation(c, rest).filter(|&(_, after)| run.wraps(after)) {
                rest = &rest[at..];
                continue;
            }
        }
        // A mark on a token character leaves the token whole.
        if token_char(c) {
            run.push(c);
        } else if !is_combining_mark(c) {
            run.len = 0;
        }
        kept.push(c);
    }
    kept
}

/// NFKC, except that marks go where they are accents or noise: decomposed, a
/// mark on `g` (or on fullwidth `ｇ`, which decomposes to `g`), on a Han
/// character or a Cyrillic letter is dropped, and what is left is composed
/// again. Marks that are letters of their script (kana voicing marks,
/// Devanagari vowel signs, Thai, Arabic) stay.
#[inline(never)]
fn unmarked(text: &str) -> String {
    let mut droppable = false;
    let stripped: String = text
        .nfkd()
        .filter(|&c| {
            if is_combining_mark(c) {
                return !droppable;
            }
            droppable = matches!(c, '\0'..='\u{024F}' | '\u{0370}'..='\u{04FF}' | '\u{1E00}'..='\u{1FFF}' | '\u{3000}'..='\u{303F}' | '\u{3400}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}' | '\u{FF00}'..='\u{FFEF}');
            true
        })
        .collect();
    stripped.nfc().filter(|c| !is_invisible(*c)).collect()
}

/// A space between ASCII letters or digits and a character of another
/// script (`…是npm_…，`), and between a key's closing `-` or `_` and a
/// letter of a script without case (`…Kel-を`, `…_स`; not `веб-сервер`,
/// whose cased script joins words with hyphens, nor `://юзер`, a link).
/// Text that needs none is returned as it is.
#[inline(never)]
fn spaced(text: &str) -> Cow<'_, str> {
    let apart = |last: char, c: char| {
        (last.is_ascii_alphanumeric() && !same_word(c))
            || (c.is_ascii_alphanumeric() && !same_word(last))
            || (matches!(last, '-' | '_') && !same_word(c) && !c.is_lowercase() && !c.is_uppercase())
    };
    spaced_where(text, |last, c, _, _| apart(last, c))
}

/// A space between a long token and the sentence mark or emphasis that
/// closes it (`use npm_…, then`, `my key is npm_….`, `**npm_…**`): the
/// rules, written for source code, end most tokens only at a space, a quote
/// or a `;`. A mark followed by more of the token (`SG.…`, `user:pass@`) is
/// left alone, and so is one after a word or a number (`Hello, world.`,
/// `(line 12)`), which holds no key: the text changes only where a reading
/// may find one.
#[inline(never)]
fn closed(text: &str) -> Cow<'_, str> {
    spaced_where(text, |last, c, next, run| {
        run >= WRAPPED_RUN && token_char(last) && matches!(c, ',' | '.' | '!' | '?' | ')' | ']' | '}' | '*' | '~') && !next.is_some_and(|n| token_char(n) || n == '@')
    })
}

/// `text` with a space before each character that `apart(last, c, next,
/// run)` says starts a new word, `run` counting the token characters
/// before it.
fn spaced_where(text: &str, apart: impl Fn(char, char, Option<char>, usize) -> bool) -> Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let (mut last, mut run) = (' ', 0);
    let mut at = 0;
    while let Some(c) = chars.next() {
        if apart(last, c, chars.peek().copied(), run) {
            break;
        }
        at += c.len_utf8();
        run = if token_char(c) { run + 1 } else { 0 };
        last = c;
    }
    if at == text.len() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..at]);
    let mut chars = text[at..].chars().peekable();
    while let Some(c) = chars.next() {
        if apart(last, c, chars.peek().copied(), run) {
            out.push(' ');
        }
        out.push(c);
        run = if token_char(c) { run + 1 } else { 0 };
        last = c;
    }
    Cow::Owned(out)
}

/// Whether `text` has a break [`view`] joins (decided as `visible` decides it).
fn has_wrap(text: &str) -> bool {
    let mut run = Run::default();
    for (at, c) in text.char_indices() {
        if run.len > 0 && continuation(c, &text[at + c.len_utf8()..]).is_some_and(|(_, after)| run.wraps(after)) {
            return true;
        }
        if token_char(c) {
            run.push(c);
        } else if !is_invisible(c) && !is_combining_mark(c) {
            run.len = 0;
        }
    }
    false
}

/// The kind of secret split between the end of `before` and the start of
/// `after` (two messages). Two readings: the token ending `before` (or, in
/// turn, its parts after each `-`, `_`, `.` or other separator: what comes
/// first may be a key of its own) and the token starting `after` joined into one
/// (`AKIAZ7Q2LM` then `4XW3RT5Y6U`), which counts only when that token alone
/// is a key, as no two honest words are; and, when `before` holds no secret
/// and both edges are token characters, the two texts read as one token
/// wrapped between them, where the words before it may say what it is
/// (`password is`).
pub fn split_kind(before: &str, after: &str) -> Option<&'static str> {
    // The tokens at the edges, as the rules read them: compatibility forms
    // folded, marks and invisible characters gone; a `.` inside a key
    // (`hvs.…`, `SG.…`, a JWT) is part of it.
    let fold = |text: &str| -> String { text.nfkd().filter(|c| !is_combining_mark(*c) && !is_invisible(*c)).collect() };
    let part = |c: &char| token_char(*c) || *c == '.';
    let tail: Vec<char> = fold(before).trim_end().chars().rev().take_while(part).collect();
    let tail: String = tail.into_iter().rev().collect();
    let head: String = fold(after).trim_start().chars().take_while(part).collect();
    if tail.chars().any(token_char) && head.chars().any(token_char) {
        let separator = |c: char| matches!(c, '-' | '_' | '.' | '/' | '+' | '=');
        let starts = std::iter::once(0).chain(tail.char_indices().filter(|(_, c)| separator(*c)).map(|(i, c)| i + c.len_utf8()));
        for start in starts.take(16) {
            let first = &tail[start..];
            if !first.is_empty() && kind(first).is_none() {
                if let Some(found) = kind(&format!("{first}{head}")) {
                    return Some(found);
                }
            }
        }
    }
    // The wrap reading needs token characters at both edges.
    fn edge(mut chars: impl Iterator<Item = char>) -> bool {
        chars.find(|c| !c.is_whitespace() && !is_invisible(*c) && !is_combining_mark(*c)).is_some_and(token_char)
    }
    if !edge(before.chars().rev()) || !edge(after.chars()) {
        return None;
    }
    let found = kind(&format!("{before}\n{after}"))?;
    kind(before).is_none().then_some(found)
}

/// The kind of secret `text` holds, if any: what errors and reasons name.
pub fn kind(text: &str) -> Option<&'static str> {
    detect(text).map(|finding| finding.kind)
}

/// One rule's standing, for the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleStatus {
    pub rule: &'static str,
    pub source: Source,
    /// `Ok` when it compiled; otherwise why it is not applied.
    pub status: Result<(), String>,
}

/// Every rule, compiled now, in scan order, then the gitleaks rules that
/// cannot apply to a text, each with its reason.
pub fn rule_statuses() -> Vec<RuleStatus> {
    let engine = engine::engine();
    let mut statuses: Vec<RuleStatus> =
        engine.rules().enumerate().map(|(i, rule)| RuleStatus { rule: rule.id, source: rule.source, status: engine.compile_rule(i) }).collect();
    statuses.push(RuleStatus { rule: "gitleaks global allowlist", source: Source::Gitleaks, status: engine.compile_global() });
    statuses.extend(engine.skipped().iter().map(|(rule, why)| RuleStatus { rule, source: Source::Gitleaks, status: Err(format!("skipped: {why}")) }));
    statuses
}
