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
