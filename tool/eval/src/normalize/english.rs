//! openai-whisper's `EnglishTextNormalizer` (MIT, see `data/WHISPER_LICENSE`), the text
//! normalization its English WER figures use, step for step: lowercase; drop text in brackets
//! and parentheses and the fillers hmm/mm/mhm/mmm/uh/um; expand contractions and titles
//! (won't → will not, mr → mister); drop commas inside numbers and periods not followed by a
//! digit; symbols, punctuation and diacritics to spaces or plain letters; spelled-out numbers
//! to digits; British to American spellings; stray currency and percent signs to spaces;
//! whitespace collapsed.

use std::sync::OnceLock;

use regex::Regex;

use super::numbers::standardize_numbers;
use super::spelling::standardize_spellings;
use super::symbols::remove_symbols_and_diacritics;

/// In the order openai-whisper applies them (later ones see earlier replacements).
const REPLACERS: [(&str, &str); 49] = [
    // Common contractions.
    (r"\bwon't\b", "will not"),
    (r"\bcan't\b", "can not"),
    (r"\blet's\b", "let us"),
    (r"\bain't\b", "aint"),
    (r"\by'all\b", "you all"),
    (r"\bwanna\b", "want to"),
    (r"\bgotta\b", "got to"),
    (r"\bgonna\b", "going to"),
    (r"\bi'ma\b", "i am going to"),
    (r"\bimma\b", "i am going to"),
    (r"\bwoulda\b", "would have"),
    (r"\bcoulda\b", "could have"),
    (r"\bshoulda\b", "should have"),
    (r"\bma'am\b", "madam"),
    // Titles and prefixes.
    (r"\bmr\b", "mister "),
    (r"\bmrs\b", "missus "),
    (r"\bst\b", "saint "),
    (r"\bdr\b", "doctor "),
    (r"\bprof\b", "professor "),
    (r"\bcapt\b", "captain "),
    (r"\bgov\b", "governor "),
    (r"\bald\b", "alderman "),
    (r"\bgen\b", "general "),
    (r"\bsen\b", "senator "),
    (r"\brep\b", "representative "),
    (r"\bpres\b", "president "),
    (r"\brev\b", "reverend "),
    (r"\bhon\b", "honorable "),
    (r"\basst\b", "assistant "),
    (r"\bassoc\b", "associate "),
    (r"\blt\b", "lieutenant "),
    (r"\bcol\b", "colonel "),
    (r"\bjr\b", "junior "),
    (r"\bsr\b", "senior "),
    (r"\besq\b", "esquire "),
    // Perfect tenses.
    (r"'d been\b", " had been"),
    (r"'s been\b", " has been"),
    (r"'d gone\b", " had gone"),
    (r"'s gone\b", " has gone"),
    (r"'d done\b", " had done"),
    (r"'s got\b", " has got"),
    // General contractions.
    (r"n't\b", " not"),
    (r"'re\b", " are"),
    (r"'s\b", " is"),
    (r"'d\b", " would"),
    (r"'ll\b", " will"),
    (r"'t\b", " not"),
    (r"'ve\b", " have"),
    (r"'m\b", " am"),
];

struct Patterns {
    brackets: Regex,
    parentheses: Regex,
    fillers: Regex,
    space_apostrophe: Regex,
    replacers: Vec<(Regex, &'static str)>,
    digit_commas: Regex,
    periods: Regex,
    stray_symbols: Regex,
    stray_percent: Regex,
    whitespace: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("valid regex");
        Patterns {
            brackets: re(r"[<\[][^>\]]*[>\]]"),
            parentheses: re(r"\(([^)]+?)\)"),
            fillers: re(r"\b(hmm|mm|mhm|mmm|uh|um)\b"),
            space_apostrophe: re(r"\s+'"),
            replacers: REPLACERS.iter().map(|&(p, r)| (re(p), r)).collect(),
            digit_commas: re(r"(\d),(\d)"),
            periods: re(r"\.([^0-9]|$)"),
            stray_symbols: re(r"[.$¢€£]([^0-9])"),
            stray_percent: re(r"([^0-9])%"),
            whitespace: re(r"\s+"),
        }
    })
}

/// openai-whisper's `EnglishTextNormalizer()(s)`.
pub fn normalize_english(s: &str) -> String {
    let p = patterns();
    let mut s = s.to_lowercase();
    s = p.brackets.replace_all(&s, "").into_owned();
    s = p.parentheses.replace_all(&s, "").into_owned();
    s = p.fillers.replace_all(&s, "").into_owned();
    s = p.space_apostrophe.replace_all(&s, "'").into_owned();
    for (pattern, replacement) in &p.replacers {
        s = pattern.replace_all(&s, *replacement).into_owned();
    }
    s = p.digit_commas.replace_all(&s, "${1}${2}").into_owned();
    s = p.periods.replace_all(&s, " ${1}").into_owned();
    s = remove_symbols_and_diacritics(&s, ".%$¢€£");
    s = standardize_numbers(&s);
    s = standardize_spellings(&s);
    s = p.stray_symbols.replace_all(&s, " ${1}").into_owned();
    s = p.stray_percent.replace_all(&s, "${1} ").into_owned();
    p.whitespace.replace_all(&s, " ").into_owned()
}

#[cfg(test)]
mod tests {
    use super::normalize_english as n;

    /// openai-whisper's own cases (tests/test_normalizer.py, `test_text_normalizer`).
    #[test]
    fn whisper_text_cases() {
        assert_eq!(n("Let's"), "let us");
        assert_eq!(n("he's like"), "he is like");
        assert_eq!(n("she's been like"), "she has been like");
        assert_eq!(n("10km"), "10 km");
        assert_eq!(n("10mm"), "10 mm");
        assert_eq!(n("RC232"), "rc 232");
        assert_eq!(n("Mr. Park visited Assoc. Prof. Kim Jr."), "mister park visited associate professor kim junior");
    }

    /// Outputs of openai-whisper 20250625's EnglishTextNormalizer on more inputs.
    #[test]
    fn more_cases_from_openai_whisper() {
        for (input, want) in crate::normalize::cases::TEXT_CASES {
            assert_eq!(n(input), *want, "{input:?}");
        }
    }
}
