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
//! of Latin letters dropped (`é` reads as `e`, `ｇ\u{301}` as `g`), and a
//! space separates ASCII letters and digits
//! from a neighbouring character of another script. So a token split by
//! U+200B, written in fullwidth letters, or written straight against Chinese
//! text (`密钥是sk_live_…请保存`) reads as the token between word boundaries,
//! as the rules (written for ASCII text) expect. A text whose long token is
//! wrapped onto the next line is read a second time with the wrap joined.
//! Base64 and hex runs that decode to text are read too, and stored bytes in
//! UTF-16 are read as the text they hold (see `encodings`).
//!
//! Public surface: [`detect`] and [`detect_bytes`] and their [`Finding`];
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

/// [`detect`] for stored bytes: UTF-8 text, or text stored as UTF-16.
pub fn detect_bytes(bytes: &[u8]) -> Option<Finding> {
    encodings::text_of(bytes).and_then(|text| detect(&text))
}

/// The first finding in `text` as a reader sees it, then with wraps joined.
fn read(text: &str) -> Option<Finding> {
    let engine = engine::engine();
    let seen = view(text, false);
    engine.detect(seen.as_bytes()).or_else(|| {
        let joined = view(text, true);
        (joined != seen).then(|| engine.detect(joined.as_bytes())).flatten()
    })
}

/// The shortest run of token characters a wrap is joined after: a token
/// wrapped by an editor or a terminal is long, a word ending a line is not
/// (nor a log line's last field, `tokens_out=456`, which keeps a log to one
/// reading). A token wrapped within its first 16 characters is not joined.
const WRAPPED_RUN: usize = 16;

/// Characters of a token: what keys, passwords and their encodings are made of.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=')
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
    let chars: Vec<char> = text.chars().filter(|c| !is_invisible(*c)).collect();
    let mut kept = String::with_capacity(text.len());
    let mut run = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if wrapped && soft_break(c) && run >= WRAPPED_RUN {
            let after = chars[i..].iter().take(3).position(|c| !soft_break(*c)).map(|k| i + k);
            if let Some(next) = after.filter(|&n| token_char(chars[n])) {
                i = next;
                continue;
            }
        }
        run = if token_char(c) { run + 1 } else { 0 };
        kept.push(c);
        i += 1;
    }
    // NFKC, except that marks on an ASCII base go: decomposed, a mark on
    // `g` (or on fullwidth `ｇ`, which decomposes to `g`) is dropped, and
    // what is left is composed again.
    let mut ascii_base = false;
    let unmarked: String = kept
        .nfkd()
        .filter(|&c| {
            if is_combining_mark(c) {
                return !ascii_base;
            }
            ascii_base = c.is_ascii();
            true
        })
        .collect();
    let mut out = String::with_capacity(unmarked.len() + 16);
    let mut last = ' ';
    for c in unmarked.nfc().filter(|c| !is_invisible(*c)) {
        let apart = (last.is_ascii_alphanumeric() && !same_word(c)) || (c.is_ascii_alphanumeric() && !same_word(last));
        if apart {
            out.push(' ');
        }
        out.push(c);
        last = c;
    }
    Cow::Owned(out)
}

/// Whether `text` has a break [`view`] joins (checked on the raw text: the
/// join itself is decided on the text with invisible characters removed).
fn has_wrap(text: &str) -> bool {
    let mut run = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if soft_break(c) && run >= WRAPPED_RUN {
            if chars.peek().is_some_and(|n| token_char(*n) || soft_break(*n) || is_invisible(*n)) {
                return true;
            }
        }
        run = if token_char(c) { run + 1 } else if is_invisible(c) { run } else { 0 };
    }
    false
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
