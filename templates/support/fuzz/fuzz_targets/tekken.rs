//! Fuzzes the Tekken tokenizer: parsing `tekken.json` (whatever the input claims: ranks,
//! base64, special lists, sizes, patterns) and encoding/decoding text with it and with a fixed
//! valid tokenizer. Any panic or hang is a bug; errors are the expected outcome for bad files.
//!
//! The input is split at its first NUL: before it the file, after it the text (lossy UTF-8),
//! which is also read as little-endian u32 ids to decode.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rbuild_runner_support::text::tekken::Tekken;
use rbuild_runner_support::text::tokenizer::Tokenizer;

/// A valid tokenizer, so that every input reaches encoding and decoding.
fn fixed() -> &'static Tekken {
    static FIXED: OnceLock<Tekken> = OnceLock::new();
    FIXED.get_or_init(|| {
        Tekken::from_bytes(include_bytes!("../seeds/tekken_v7_default_specials.json")).expect("the seed is a valid tekken.json")
    })
}

/// `covers_all_text`: the pattern matches every character (true of Mistral's; a fuzzed
/// pattern may skip text, which tiktoken then drops too).
fn exercise(tok: &Tekken, text: &str, ids: &[u32], covers_all_text: bool) {
    // A pre-tokenizer pattern may give up (fancy-regex's backtrack limit): an error, not a bug.
    if let Ok(encoded) = tok.encode(text, true) {
        assert!(encoded.iter().skip(tok.bos_id().is_some() as usize).all(|&id| id >= tok.num_special_tokens()));
        let decoded = tok.decode(&encoded, true).unwrap();
        // The first 256 ranks are the single bytes, so byte-level BPE round-trips any text
        // exactly (the BOS skipped as a special).
        if covers_all_text {
            assert_eq!(decoded, text);
        }
    }
    for skip_special in [false, true] {
        let _ = tok.decode(ids, skip_special);
    }
    for &id in ids.iter().take(16) {
        if let Some(name) = tok.special_name(id) {
            assert_eq!(tok.token_to_id(&name), Some(id), "special {name}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (file, tail) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let text = String::from_utf8_lossy(tail);
    let ids: Vec<u32> = tail.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if let Ok(tok) = Tekken::from_bytes(file) {
        exercise(&tok, &text, &ids, false);
    }
    exercise(fixed(), &text, &ids, true);
});
