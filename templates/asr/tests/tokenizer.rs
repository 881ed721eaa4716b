//! Tokenizers: HF tokenizer.json and tiktoken files, checked against the program's vocabulary.

mod common;
use common::{temp_dir, testdata, vocab};

use rbuild_asr_runner::decode::Vocab;
use rbuild_asr_runner::tokenizer::{self, Text};

/// A word-level tokenizer.json: "Hello" 0, "world" 1, then Whisper-style added tokens.
fn hf_json(added: &[(&str, u32)]) -> String {
    let added: Vec<serde_json::Value> = added
        .iter()
        .map(|(c, id)| {
            serde_json::json!({"id": id, "content": c, "single_word": false, "lstrip": false, "rstrip": false,
                               "normalized": false, "special": true})
        })
        .collect();
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"Hello": 0, "world": 1}, "unk_token": "Hello"}
    })
    .to_string()
}

fn small_vocab() -> Vocab {
    Vocab {
        vocab_size: 5,
        eot: 2,
        sot: 3,
        lang_ids: vec![4],
        lang_codes: vec!["en".into()],
        ..vocab()
    }
}

#[test]
fn hf_tokenizer_decodes_and_matches_the_program() {
    let d = temp_dir("tok-hf");
    let p = d.join("tokenizer.json");
    std::fs::write(&p, hf_json(&[("<|endoftext|>", 2), ("<|startoftranscript|>", 3), ("<|en|>", 4)])).unwrap();
    let t = tokenizer::load(&p).unwrap();
    assert_eq!(t.kind(), "huggingface");
    assert_eq!(t.vocab_size(), 5);
    tokenizer::check_matches(t.as_ref(), &small_vocab()).unwrap();
    let text = Text { tokenizer: Some(t), eot: 2, vocab_size: 5 };
    // Special and timestamp ids are dropped before decoding.
    assert_eq!(text.text(&[3, 0, 1, 4, 2]).unwrap(), "Hello world");

    // Size mismatch: both sizes named.
    let t = tokenizer::load(&p).unwrap();
    let e = tokenizer::check_matches(t.as_ref(), &Vocab { vocab_size: 51865, ..small_vocab() }).unwrap_err();
    assert!(e.contains('5') && e.contains("51865"), "{e}");
    // A special at another id than the program's.
    std::fs::write(&p, hf_json(&[("<|endoftext|>", 2), ("<|en|>", 3), ("<|startoftranscript|>", 4)])).unwrap();
    let t = tokenizer::load(&p).unwrap();
    let e = tokenizer::check_matches(t.as_ref(), &small_vocab()).unwrap_err();
    assert!(e.contains("<|startoftranscript|>") || e.contains("<|en|>"), "{e}");
}

#[test]
fn tiktoken_ranks_are_the_text_tokens() {
    let d = temp_dir("tok-tt");
    let p = d.join("multilingual.tiktoken");
    // "Hi", " there", "!" at ranks 0, 1, 2: end-of-text must be id 3.
    std::fs::write(&p, "SGk= 0\nIHRoZXJl 1\nIQ== 2\n").unwrap();
    let t = tokenizer::load(&p).unwrap();
    assert_eq!(t.kind(), "tiktoken");
    let v = Vocab { vocab_size: 10, eot: 3, sot: 4, lang_ids: vec![5], ..small_vocab() };
    tokenizer::check_matches(t.as_ref(), &v).unwrap();
    let text = Text { tokenizer: Some(t), eot: 3, vocab_size: 10 };
    assert_eq!(text.text(&[4, 5, 0, 1, 2, 9, 3]).unwrap(), "Hi there!");
    let t = tokenizer::load(&p).unwrap();
    let e = tokenizer::check_matches(t.as_ref(), &Vocab { eot: 50257, ..v }).unwrap_err();
    assert!(e.contains("3 ranks") && e.contains("50257"), "{e}");
}

#[test]
fn broken_tokenizer_files_name_the_file() {
    for name in ["tokenizer_not_json.json", "tokenizer_truncated.json", "tokenizer_missing_vocab.json"] {
        let p = testdata(&format!("bad/{name}"));
        let e = tokenizer::load(&p).err().expect(name);
        assert!(e.contains(name), "{e}");
    }
    let d = temp_dir("tok-bad");
    let p = d.join("gaps.tiktoken");
    std::fs::write(&p, "SGk= 0\nIQ== 5\n").unwrap();
    let e = tokenizer::load(&p).err().unwrap();
    assert!(e.contains("gaps.tiktoken") && e.contains("rank 1"), "{e}");
    // The llama test tokenizer is a valid tokenizer.json, of the wrong size for Whisper.
    let t = tokenizer::load(&testdata("models/llama_tiny/tokenizer.json")).unwrap();
    let e = tokenizer::check_matches(t.as_ref(), &vocab()).unwrap_err();
    assert!(e.contains("<|startoftranscript|>"), "{e}");
}

#[test]
fn without_a_tokenizer_ids_are_the_text() {
    let text = Text { tokenizer: None, eot: 504, vocab_size: 512 };
    assert_eq!(text.text(&[505, 72, 291, 511]).unwrap(), " 72 291");
    // 512 ids need two bytes each for the compression measure.
    assert_eq!(text.ratio_bytes(&[72, 291]).unwrap(), vec![72, 0, 35, 1]);
}
