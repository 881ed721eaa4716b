//! Byte-level BPE `tokenizer.json` files for the demo models: every byte is a token (no
//! merges), so any text round-trips and any id sequence decodes. Families place their
//! special tokens before the bytes (Llama's `<unk> <s> </s>`) or after them (Whisper's
//! `<|endoftext|>` …, as in the real vocabularies).

use serde_json::{json, Map, Value};

/// GPT-2's byte → printable-character map, which byte-level BPE vocabularies are written in.
pub fn byte_symbols() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut extra = 0;
    (0u32..256)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap_or('?')
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap_or('?')
            }
        })
        .collect()
}

fn special(id: usize, content: &str) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
}

/// Specials at ids `0..n`, the 256 bytes after them; `bos` (one of the specials) prepended
/// to every encoding.
pub fn byte_level(specials: &[&str], bos: Option<&str>) -> String {
    let ids: Vec<(usize, &str)> = specials.iter().copied().enumerate().collect();
    document(&ids, specials.len(), bos)
}

/// The 256 bytes at ids `0..256`, then `specials` from 256 on (no BOS).
pub fn byte_level_specials_after(specials: &[&str]) -> String {
    let ids: Vec<(usize, &str)> = specials.iter().enumerate().map(|(i, s)| (256 + i, *s)).collect();
    document(&ids, 0, None)
}

fn document(specials: &[(usize, &str)], first_byte: usize, bos: Option<&str>) -> String {
    let mut vocab = Map::new();
    for &(id, s) in specials.iter().filter(|(id, _)| *id < first_byte) {
        vocab.insert(s.to_string(), json!(id));
    }
    for (b, c) in byte_symbols().into_iter().enumerate() {
        vocab.insert(c.to_string(), json!(b + first_byte));
    }
    for &(id, s) in specials.iter().filter(|(id, _)| *id >= first_byte) {
        vocab.insert(s.to_string(), json!(id));
    }
    let post_processor = match bos.and_then(|b| specials.iter().find(|(_, s)| *s == b)) {
        Some(&(id, b)) => json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": b, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": b, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {b: {"id": b, "ids": [id], "tokens": [b]}}
        }),
        None => Value::Null,
    };
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": specials.iter().map(|&(id, s)| special(id, s)).collect::<Vec<_>>(),
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": specials.first().map(|s| s.1), "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []}
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
