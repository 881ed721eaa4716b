//! openai-whisper's `remove_symbols_and_diacritics`: NFKD, then marks, symbols and punctuation
//! become spaces, except nonspacing marks (diacritics), which are dropped, a few letters NFKD
//! leaves whole, which are spelled out (œ → oe, ß → ss, ł → l …), and the characters in `keep`.

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// Letters without a decomposition, and what they become.
const ADDITIONAL_DIACRITICS: [(char, &str); 16] = [
    ('œ', "oe"),
    ('Œ', "OE"),
    ('ø', "o"),
    ('Ø', "O"),
    ('æ', "ae"),
    ('Æ', "AE"),
    ('ß', "ss"),
    ('ẞ', "SS"),
    ('đ', "d"),
    ('Đ', "D"),
    ('ð', "d"),
    ('Ð', "D"),
    ('þ', "th"),
    ('Þ', "th"),
    ('ł', "l"),
    ('Ł', "L"),
];

pub fn remove_symbols_and_diacritics(s: &str, keep: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (c, _) in s.nfkd() {
        if keep.contains(c) {
            out.push(c);
        } else if let Some((_, spelled)) = ADDITIONAL_DIACRITICS.iter().find(|(d, _)| *d == c) {
            out.push_str(spelled);
        } else if c.is_mark_nonspacing() {
            // A diacritic: dropped.
        } else if c.is_mark() || c.is_symbol() || c.is_punctuation() {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diacritics_go_symbols_become_spaces() {
        assert_eq!(remove_symbols_and_diacritics("café naïve", ""), "cafe naive");
        assert_eq!(remove_symbols_and_diacritics("straße, œuvre!", ""), "strasse  oeuvre ");
        assert_eq!(remove_symbols_and_diacritics("$5.50 & 10%", ".%$"), "$5.50   10%");
        // NFKD: the ligature splits, the superscript becomes a digit.
        assert_eq!(remove_symbols_and_diacritics("ﬁne x²", ""), "fine x2");
    }
}
