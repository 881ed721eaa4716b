//! The demo Voxtral's tokenizer: a small `tekken.json` in Mistral's format (the same file
//! layout, split pattern and special-token ids as Voxtral's own), so the demo runs through the
//! same tokenizer code as a real checkpoint: 1000 special tokens, the 256 single bytes, and
//! frequent English letter pairs up to the demo model's vocabulary.

use serde_json::json;

/// Tekken's pre-tokenizer split (mistral-common's files use this pattern).
const PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const NUM_SPECIAL: usize = 1000;

/// Named specials by id, as in Voxtral's tekken.json; the ids between are `<SPECIAL_i>`.
const SPECIALS: &[(usize, &str)] = &[
    (0, "<unk>"),
    (1, "<s>"),
    (2, "</s>"),
    (3, "[INST]"),
    (4, "[/INST]"),
    (5, "[AVAILABLE_TOOLS]"),
    (6, "[/AVAILABLE_TOOLS]"),
    (7, "[TOOL_RESULTS]"),
    (8, "[/TOOL_RESULTS]"),
    (9, "[TOOL_CALLS]"),
    (10, "[IMG]"),
    (11, "<pad>"),
    (12, "[IMG_BREAK]"),
    (13, "[IMG_END]"),
    (14, "[PREFIX]"),
    (15, "[MIDDLE]"),
    (16, "[SUFFIX]"),
    (17, "[SYSTEM_PROMPT]"),
    (18, "[/SYSTEM_PROMPT]"),
    (19, "[TOOL_CONTENT]"),
    (24, "[AUDIO]"),
    (25, "[BEGIN_AUDIO]"),
    (34, "[TRANSCRIBE]"),
];

/// Letter pairs frequent in English text, merged after the single bytes.
const PAIRS: &[&str] = &[
    "th", "he", "in", "er", "an", " t", "re", "on", " a", "en", "at", "nd", "st", "es", " o", "or", "ed", " s", "is", "ar", "te", "ng", "ou", " i",
    "it", "ha", "al", " w", "le", " c", "se", "nt", " b", "to", "hi", "ti", "as", "of", "ve", " f", "ea", "me", "de", " m",
];

/// The demo's `tekken.json` for a vocabulary of `vocab_size` ids (specials included).
pub fn tekken_json(vocab_size: usize) -> String {
    let regular = vocab_size.saturating_sub(NUM_SPECIAL);
    let tokens = (0..=255u8).map(|b| vec![b]).chain(PAIRS.iter().take(regular.saturating_sub(256)).map(|p| p.as_bytes().to_vec()));
    let vocab: Vec<serde_json::Value> = tokens.enumerate().map(|(rank, bytes)| entry(rank, bytes)).collect();
    let last_listed = SPECIALS.last().map_or(0, |s| s.0);
    let specials: Vec<serde_json::Value> = (0..=last_listed)
        .map(|rank| {
            let name = SPECIALS.iter().find(|s| s.0 == rank).map_or_else(|| format!("<SPECIAL_{rank}>"), |s| s.1.to_string());
            json!({ "rank": rank, "token_str": name, "is_control": true })
        })
        .collect();
    let file = json!({
        "config": {
            "pattern": PATTERN,
            "num_vocab_tokens": vocab.len(),
            "default_vocab_size": NUM_SPECIAL + vocab.len().min(regular),
            "default_num_special_tokens": NUM_SPECIAL,
            "version": "v7",
        },
        "vocab": vocab,
        "special_tokens": specials,
        "audio": {
            "sampling_rate": 16000,
            "frame_rate": 12.5,
            "audio_encoding_config": { "num_mel_bins": 128, "hop_length": 160, "window_size": 400 },
            "chunk_length_s": 30.0,
        },
    });
    file.to_string()
}

fn entry(rank: usize, bytes: Vec<u8>) -> serde_json::Value {
    let text = String::from_utf8(bytes.clone()).ok();
    json!({ "rank": rank, "token_bytes": base64::encode(&bytes), "token_str": text })
}
