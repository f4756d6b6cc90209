//! Text as a reader sees it: invisible characters removed and compatibility
//! forms folded, so `ghp_\u{200b}…` and fullwidth `ｇｈｐ＿…` read as `ghp_…`
//! and `ＳＹＳ\u{200b}TEM:` as `SYSTEM:`. The secret rules and the summary
//! checks look at text this way, never at its raw code points.

use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

/// `text` without default-ignorable code points, in NFKC. ASCII text is
/// returned as it is: it has nothing to strip or fold.
pub fn normalize(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    // Stripped before folding (a zero-width space between a letter and its
    // combining mark must not keep them apart) and after (NFKC maps U+3164
    // HANGUL FILLER to U+1160, itself invisible).
    Cow::Owned(text.chars().filter(|c| !is_invisible(*c)).nfkc().filter(|c| !is_invisible(*c)).collect())
}

/// An English word with its British spelling read as the American one, so
/// the two spellings of one word compare equal: `colour`/`color`,
/// `favourite`/`favorite`, `realise`/`realize`, `analyse`/`analyze`,
/// `centre`/`center`, `fibre`/`fiber`, `catalogue`/`catalog`,
/// `defence`/`defense`, `travelled`/`traveled`, `programme`/`program`.
/// Rules of spelling, not a word list, applied in turn (`colourised` is
/// `colorized`): a word spelled the American way folds to itself, so both
/// spellings meet. Lowercase ASCII words of five letters or more only
/// (`your`, `hour` and `four` keep their `our`).
pub fn fold_spelling(word: &str) -> Cow<'_, str> {
    if word.len() < 5 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Cow::Borrowed(word);
    }
    let mut out = word.to_string();
    // -ise/-yse verbs and their forms (realised, organisation, analysing).
    'verbs: for (british, american) in [("is", "iz"), ("ys", "yz")] {
        for ending in ["e", "ed", "es", "ing", "er", "ers", "able", "ation", "ations"] {
            if let Some(stem) = out.strip_suffix(&format!("{british}{ending}")) {
                if stem.len() >= 3 {
                    out = format!("{stem}{american}{ending}");
                    break 'verbs;
                }
            }
        }
    }
    // A British `our` before these endings (colour, favourite, honourable, colourized).
    const AFTER_OUR: &[&str] = &[
        "", "s", "al", "ed", "ing", "ite", "ites", "able", "ably", "er", "ers", "ful", "hood", "hoods", "less", "ist", "ists", "ism",
        "ly", "ize", "ized", "izes", "izing", "ization", "itism",
    ];
    if let Some(at) = out.rfind("our") {
        // Not `scour`, whose `our` is no British spelling.
        if at >= 2 && !out[..at].ends_with("sc") && AFTER_OUR.contains(&&out[at + 3..]) {
            out = format!("{}or{}", &out[..at], &out[at + 3..]);
        }
    }
    // Endings: -tre/-bre, -ogue, -ence, -amme, a doubled l before -ed/-ing/-er.
    const ENDINGS: &[(&str, &str)] = &[
        ("tre", "ter"), ("tres", "ters"), ("tred", "tered"), ("tring", "tering"), ("bre", "ber"), ("bres", "bers"), ("ogue", "og"),
        ("ogues", "ogs"), ("ogued", "oged"), ("oguing", "oging"), ("ence", "ense"),
        ("ences", "enses"), ("amme", "am"), ("ammes", "ams"), ("elled", "eled"), ("elling", "eling"), ("eller", "eler"),
        ("ellers", "elers"), ("alled", "aled"), ("alling", "aling"),
    ];
    if let Some((stem, american)) = ENDINGS.iter().find_map(|(british, american)| out.strip_suffix(british).filter(|s| s.len() >= 2).map(|s| (s.to_string(), american))) {
        out = format!("{stem}{american}");
    }
    if out == word { Cow::Borrowed(word) } else { Cow::Owned(out) }
}

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode
/// 16), which covers the zero-width characters, joiners, bidirectional
/// controls, variation selectors and tag characters, plus the interlinear
/// annotation controls: everything that renders as nothing.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFFB
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::fold_spelling;

    #[test]
    fn british_and_american_spellings_meet() {
        for (british, american) in [
            ("colour", "color"), ("colours", "colors"), ("favourite", "favorite"), ("favourites", "favorites"), ("honourable", "honorable"),
            ("neighbourhood", "neighborhood"), ("behaviour", "behavior"), ("colourised", "colorized"), ("favouritism", "favoritism"),
            ("realise", "realize"), ("realised", "realized"), ("organisation", "organization"), ("organiser", "organizer"),
            ("realisable", "realizable"), ("analyse", "analyze"), ("analysing", "analyzing"), ("centre", "center"), ("centred", "centered"),
            ("centring", "centering"), ("metres", "meters"), ("fibre", "fiber"), ("catalogue", "catalog"), ("catalogued", "cataloged"),
            ("cataloguing", "cataloging"), ("dialogue", "dialog"), ("defence", "defense"), ("licence", "license"), ("travelled", "traveled"),
            ("travelling", "traveling"), ("traveller", "traveler"), ("cancelled", "canceled"), ("signalled", "signaled"),
            ("programme", "program"), ("programmes", "programs"),
        ] {
            assert_eq!(fold_spelling(british), fold_spelling(american), "{british} / {american}");
        }
        // Words with an `our` of their own keep it; so does anything not
        // plain lowercase ASCII.
        for word in ["your", "hour", "four", "tour", "pour", "scour", "scoured", "scouring", "journey", "courage", "source", "tourist", "yourself", "Colour", "cоlour", "naïve"] {
            assert_eq!(fold_spelling(word), word, "{word}");
        }
    }
}
