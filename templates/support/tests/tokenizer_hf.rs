//! The Hugging Face tokenizer of `llama_tiny` against `tokenizer_cases.json` (produced with
//! Hugging Face's tokenizers): every case's ids with and without BOS, and both decodes; and
//! streamed decoding of each case equals the full decode.

use std::path::Path;

use rbuild_runner_support::text::stream::TextStream;
use rbuild_runner_support::text::tokenizer::{self, Tokenizer};

mod common;
use common::testdata;

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn cases() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(testdata("models/llama_tiny/tokenizer_cases.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn load() -> Box<dyn Tokenizer> {
    tokenizer::load(Path::new(&testdata("models/llama_tiny/tokenizer.json"))).unwrap()
}

#[test]
fn every_case_encodes_and_decodes_as_hugging_face() {
    let tok = load();
    assert_eq!(tok.kind(), "huggingface");
    assert_eq!(tok.vocab_size(), 512);
    assert_eq!(tok.token_to_id("<s>"), Some(1));
    assert_eq!(tok.token_to_id("</s>"), Some(2));
    let cases = cases();
    assert!(cases.len() >= 10);
    for c in &cases {
        let text = c["text"].as_str().unwrap();
        assert_eq!(tok.encode(text, true).unwrap(), ids(&c["ids_with_bos"]), "ids_with_bos of {text:?}");
        assert_eq!(tok.encode(text, false).unwrap(), ids(&c["ids_no_special"]), "ids_no_special of {text:?}");
        assert_eq!(tok.decode(&ids(&c["ids_no_special"]), false).unwrap(), c["decoded_no_special"].as_str().unwrap());
        assert_eq!(tok.decode(&ids(&c["ids_with_bos"]), true).unwrap(), c["decoded_skip_special"].as_str().unwrap());
    }
}

#[test]
fn streaming_each_case_gives_the_full_decode_without_broken_characters() {
    let tok = load();
    let mut held_back = 0;
    for c in cases() {
        let want = c["decoded_no_special"].as_str().unwrap();
        let ids = ids(&c["ids_no_special"]);
        // With the BOS as context, as the runner streams after the prompt.
        let mut s = TextStream::new(&[1], true);
        let mut got = String::new();
        for &id in &ids {
            let piece = s.push(tok.as_ref(), id).unwrap();
            assert!(!piece.contains('\u{FFFD}'), "piece {piece:?} of {want:?}");
            if piece.is_empty() {
                held_back += 1;
            }
            got.push_str(&piece);
        }
        got.push_str(&s.finish(tok.as_ref()).unwrap());
        assert_eq!(got, want);
    }
    // The emoji and CJK cases split characters across byte-level tokens.
    assert!(held_back > 0, "no token was held back; the multi-byte cases were not exercised");
}

#[test]
fn bad_tokenizer_files_are_errors_naming_the_file() {
    let dir = common::temp_dir("bad_tok");
    for (name, content) in [("empty.json", &b""[..]), ("broken.json", b"{\"model\": 3"), ("binary.model", b"\x0a\x05\x00\x01zz")] {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        let e = tokenizer::load(&p).err().expect("must fail").0;
        assert!(e.contains(name), "{e}");
    }
    let e = tokenizer::load(&dir.join("missing.json")).err().unwrap().0;
    assert!(e.contains("missing.json"), "{e}");
}

/// A Llama-2-style tokenizer.json (SentencePiece conventions: "▁" for spaces, byte fallback
/// tokens, a decoder that strips the first leading space).
fn sentencepiece_style() -> Box<dyn Tokenizer> {
    let mut vocab = serde_json::Map::new();
    for (i, s) in ["<unk>", "<s>", "</s>"].iter().enumerate() {
        vocab.insert(s.to_string(), i.into());
    }
    for b in 0..256 {
        vocab.insert(format!("<0x{b:02X}>"), (3 + b).into());
    }
    for (i, s) in ["▁Hello", "▁world", "!"].iter().enumerate() {
        vocab.insert(s.to_string(), (259 + i).into());
    }
    let special = |id: u32, c: &str| serde_json::json!({"id": id, "content": c, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
    let doc = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": true, "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": []}
    });
    let dir = common::temp_dir("sp_style");
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    tokenizer::load(&p).unwrap()
}

#[test]
fn streaming_keeps_context_dependent_spaces_and_byte_fallback_characters() {
    let tok = sentencepiece_style();
    let fox: Vec<u32> = "🦊".bytes().map(|b| 3 + b as u32).collect();
    let mut gen = vec![260];
    gen.extend(&fox);
    gen.push(261);
    let mut all = vec![1, 259];
    all.extend(&gen);
    assert_eq!(tok.decode(&all, true).unwrap(), "Hello world🦊!");
    // Alone, the decoder strips the continuation's leading space ...
    assert_eq!(tok.decode(&gen, true).unwrap(), "world🦊!");
    // ... but streamed after the prompt it keeps it, and the fox comes out whole.
    let mut s = TextStream::new(&[1, 259], true);
    let pieces: Vec<String> = gen.iter().map(|&id| s.push(tok.as_ref(), id).unwrap()).collect();
    assert_eq!(pieces, vec![" world", "", "", "", "🦊", "!"]);
    assert_eq!(s.finish(tok.as_ref()).unwrap(), "");
}
