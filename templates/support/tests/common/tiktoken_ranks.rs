//! A small tiktoken rank file, shared with the llm template's tests (included by path).

use rbuild_runner_support::text::base64::base64_encode;

/// Merges after the single bytes (rank = byte value). Llama 3's special tokens then default to
/// ids 265.. (`<|eot_id|>` = 274).
pub const MERGES: &[&str] = &["he", "ll", "hell", " w", "or", " wor", "ld", " world", "lo"];

pub fn rank_file() -> String {
    let mut s = String::new();
    for b in 0..=255u8 {
        s.push_str(&format!("{} {b}\n", base64_encode(&[b])));
    }
    for (i, m) in MERGES.iter().enumerate() {
        s.push_str(&format!("{} {}\n", base64_encode(m.as_bytes()), 256 + i));
    }
    s
}
