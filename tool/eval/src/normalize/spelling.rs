//! openai-whisper's `EnglishSpellingNormalizer`: British spellings to American ones, word by
//! word, from its table (`data/whisper_english_spelling.json`, MIT, see `data/README.md`).

use std::collections::HashMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../data/whisper_english_spelling.json");

fn table() -> &'static HashMap<String, String> {
    static MAP: OnceLock<HashMap<String, String>> = OnceLock::new();
    // The table ships inside the crate; a test parses it, so this cannot fail at run time.
    MAP.get_or_init(|| serde_json::from_str(TABLE).unwrap_or_default())
}

/// Each whitespace-separated word mapped through the table, joined by single spaces.
pub fn standardize_spellings(s: &str) -> String {
    let t = table();
    s.split_whitespace().map(|w| t.get(w).map_or(w, String::as_str)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn british_spellings_become_american() {
        assert!(table().len() > 1700, "the table did not parse");
        // openai-whisper's own cases.
        assert_eq!(standardize_spellings("mobilisation"), "mobilization");
        assert_eq!(standardize_spellings("cancelation"), "cancellation");
        assert_eq!(standardize_spellings("  the colour of  aeroplanes "), "the color of airplanes");
    }
}
