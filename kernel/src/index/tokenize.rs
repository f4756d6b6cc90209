//! A text's terms, in order, with repeats: English words lowercased, stop
//! words dropped, Snowball-stemmed; code identifiers split and kept whole;
//! CJK, kana and hangul as character bigrams.

use std::sync::OnceLock;
use super::Lookup;

fn stop_words() -> &'static rustc_hash::FxHashSet<&'static str> {
    static WORDS: OnceLock<rustc_hash::FxHashSet<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| {
        "a an and are as at be been but by can did do does for from had has have he her his how i if in into is it its \
         me my no not of on or our she so than that the their them then there these they this to was we were what when \
         where which who why will with would you your"
            .split_whitespace()
            .collect()
    })
}

fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' | '\u{f900}'..='\u{faff}' | '\u{20000}'..='\u{3134f}')
}

fn stem(word: &str) -> String {
    static STEMMER: OnceLock<rust_stemmers::Stemmer> = OnceLock::new();
    thread_local! {
        // A memo of a pure function: a vocabulary is far smaller than the
        // words of the records, so re-indexing mostly looks stems up.
        static STEMS: std::cell::RefCell<Lookup<String>> = Default::default();
    }
    STEMS.with_borrow_mut(|stems| {
        if let Some(stemmed) = stems.get(word) {
            return stemmed.clone();
        }
        if stems.len() >= MAX_MEMO_STEMS {
            stems.clear();
        }
        let stemmed =
            STEMMER.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English)).stem(word).into_owned();
        stems.insert(word.to_string(), stemmed.clone());
        stemmed
    })
}

/// Most distinct words whose stems are remembered.
const MAX_MEMO_STEMS: usize = 1 << 16;

/// Splits an identifier at case changes and letter/digit boundaries.
fn split_identifier(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut previous: Option<char> = None;
    let mut chars = word.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(p) = previous {
            let next = chars.peek().map(|&(_, n)| n);
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_alphabetic() != c.is_alphabetic())
                || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase));
            if boundary {
                parts.push(&word[start..i]);
                start = i;
            }
        }
        previous = Some(c);
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

/// The terms of a text, in order, with repeats (for term frequencies).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Words and CJK runs are stretches of the text, open from a byte offset.
    let mut cjk: Option<usize> = None;
    let mut word: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_cjk(c) {
            if let Some(start) = word.take() {
                word_terms(&text[start..i], &mut out);
            }
            cjk.get_or_insert(i);
        } else if c.is_alphanumeric() || (matches!(c, '_' | '.' | '/' | ':' | '-') && word.is_some()) {
            if let Some(start) = cjk.take() {
                cjk_terms(&text[start..i], &mut out);
            }
            word.get_or_insert(i);
        } else {
            if let Some(start) = cjk.take() {
                cjk_terms(&text[start..i], &mut out);
            }
            if let Some(start) = word.take() {
                word_terms(&text[start..i], &mut out);
            }
        }
    }
    if let Some(start) = cjk {
        cjk_terms(&text[start..], &mut out);
    }
    if let Some(start) = word {
        word_terms(&text[start..], &mut out);
    }
    out
}

/// A run of CJK: its overlapping bigrams, or the lone character.
fn cjk_terms(run: &str, out: &mut Vec<String>) {
    let bounds: Vec<usize> = run.char_indices().map(|(i, _)| i).chain([run.len()]).collect();
    if bounds.len() == 2 {
        out.push(run.to_string());
    }
    for w in bounds.windows(3) {
        out.push(run[w[0]..w[2]].to_string());
    }
}

/// A word: a run of letters, digits and the joiners of code identifiers.
fn word_terms(word: &str, out: &mut Vec<String>) {
    let whole = word.trim_matches(|c: char| !c.is_alphanumeric());
    if whole.is_empty() {
        return;
    }
    // Most words are plain English, lowercase or capitalized: one piece,
    // no compound.
    if whole.as_bytes()[0].is_ascii_alphabetic() && whole.bytes().skip(1).all(|b| b.is_ascii_lowercase()) {
        let lower = whole.to_ascii_lowercase();
        if !stop_words().contains(lower.as_str()) {
            out.push(stem(&lower));
        }
        return;
    }
    let pieces: Vec<String> = whole
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .flat_map(split_identifier)
        .map(str::to_lowercase)
        .collect();
    let compound = pieces.len() > 1;
    for piece in &pieces {
        if !stop_words().contains(piece.as_str()) {
            out.push(if piece.chars().all(|c| c.is_ascii_alphabetic()) { stem(piece) } else { piece.clone() });
        }
    }
    if compound {
        out.push(whole.to_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn english_is_stemmed_and_stop_words_dropped() {
        assert_eq!(terms("The deployments are running"), ["deploy", "run"]);
    }

    #[test]
    fn code_identifiers_split_and_stay_whole() {
        let t = terms("parseJsonRequest snake_case kernel.planner.select src/billing/tax.rs");
        for part in ["pars", "json", "request", "parsejsonrequest", "snake", "case", "snake_case", "kernel", "planner", "select", "kernel.planner.select", "bill", "tax", "rs", "src/billing/tax.rs"] {
            assert!(t.iter().any(|x| x == part), "{part} missing from {t:?}");
        }
    }

    #[test]
    fn cjk_becomes_bigrams() {
        assert_eq!(terms("上下文规划"), ["上下", "下文", "文规", "规划"]);
        assert_eq!(terms("用 pnpm"), ["用", "pnpm"]);
    }
}
