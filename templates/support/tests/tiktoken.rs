//! The tiktoken tokenizer on a small generated rank file: rank-ordered byte-pair merges, Llama
//! 3's pre-tokenizer split, special tokens (default numbering and from tokenizer_config.json),
//! byte-exact decoding and streaming of characters split across tokens.

use rbuild_runner_support::text::stream::TextStream;
use rbuild_runner_support::text::base64::base64_encode;
use rbuild_runner_support::text::tiktoken::Tiktoken;
use rbuild_runner_support::text::tokenizer::{self, Tokenizer};

mod common;
use common::{rank_file, MERGES};

fn tok() -> Tiktoken {
    Tiktoken::parse(&rank_file(), None).unwrap()
}

#[test]
fn merges_follow_rank_order() {
    let t = tok();
    // h e l l o: he(256) < ll(257) < lo(264) → [he] l l o → [he][ll] o → [hell] o.
    assert_eq!(t.encode("hello", false).unwrap(), vec![258, b'o' as u32]);
    // ll (257) outranks lo (264).
    assert_eq!(t.encode("llo", false).unwrap(), vec![257, b'o' as u32]);
    // A piece that is itself a token is looked up whole.
    assert_eq!(t.encode(" world", false).unwrap(), vec![263]);
    assert_eq!(t.encode("hello world", false).unwrap(), vec![258, b'o' as u32, 263]);
}

#[test]
fn llama3_pre_tokenizer_splits() {
    let t = tok();
    let b = |s: &str| s.bytes().map(u32::from).collect::<Vec<_>>();
    // "Hello" | "," | " world" | "!" | " " | "123" | "456"
    let mut want = vec![72, 101, 257, 111];
    want.extend(b(","));
    want.push(263);
    want.extend(b("! 123456"));
    assert_eq!(t.encode("Hello, world! 123456", false).unwrap(), want);
    // Contractions split off, case-insensitively: "IT" | "'S"; "it" | "'s".
    assert_eq!(t.encode("IT'S", false).unwrap(), b("IT'S"));
    assert_eq!(t.encode("it's", false).unwrap(), b("it's"));
    // Digit runs split in threes, and merges never cross a piece boundary: with "34" a token,
    // "1234" → "123" | "4" keeps 3 and 4 apart, while "3456" → "345" | "6" merges them.
    let t2 = Tiktoken::parse(&format!("{}{} 300\n", rank_file(), base64_encode(b"34")), None).unwrap();
    assert_eq!(t2.encode("1234", false).unwrap(), b("1234"));
    assert_eq!(t2.encode("3456", false).unwrap(), vec![300, b'5' as u32, b'6' as u32]);
}

#[test]
fn special_tokens_default_to_llama3_numbering() {
    let t = tok();
    let base = 256 + MERGES.len() as u32;
    assert_eq!(t.token_to_id("<|begin_of_text|>"), Some(base));
    assert_eq!(t.token_to_id("<|end_of_text|>"), Some(base + 1));
    assert_eq!(t.token_to_id("<|start_header_id|>"), Some(base + 6));
    assert_eq!(t.token_to_id("<|eot_id|>"), Some(base + 9));
    assert_eq!(t.token_to_id("<|reserved_special_token_2|>"), Some(base + 11));
    assert_eq!(t.vocab_size(), base as usize + 256);
    let ids = t.encode("hello<|eot_id|> world", true).unwrap();
    assert_eq!(ids, vec![base, 258, b'o' as u32, base + 9, 263]);
    assert_eq!(t.decode(&ids, true).unwrap(), "hello world");
    assert_eq!(t.decode(&ids, false).unwrap(), "<|begin_of_text|>hello<|eot_id|> world");
}

#[test]
fn detected_by_content_with_specials_from_tokenizer_config() {
    let dir = common::temp_dir("tiktoken");
    let path = dir.join("tokenizer.model");
    std::fs::write(&path, rank_file()).unwrap();
    let t = tokenizer::load(&path).unwrap();
    assert_eq!(t.kind(), "tiktoken");
    assert_eq!(t.token_to_id("<|eot_id|>"), Some(265 + 9));
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"added_tokens_decoder": {"300": {"content": "<|begin_of_text|>"}, "301": {"content": "<|my_end|>"}}}"#,
    )
    .unwrap();
    let t = tokenizer::load(&path).unwrap();
    assert_eq!(t.token_to_id("<|my_end|>"), Some(301));
    assert_eq!(t.token_to_id("<|eot_id|>"), None);
    assert_eq!(t.encode("he<|my_end|>", true).unwrap(), vec![300, 256, 301]);
}

#[test]
fn malformed_rank_files_are_errors_naming_the_line() {
    let e = Tiktoken::parse("IQ== 0\nnot*base64 1\n", None).err().unwrap().0;
    assert!(e.contains("line 2"), "{e}");
    let e = Tiktoken::parse("IQ== 0\nIg== x\n", None).err().unwrap().0;
    assert!(e.contains("line 2") && e.contains("rank"), "{e}");
    let e = Tiktoken::parse("IQ== 0\nIg== 0\n", None).err().unwrap().0;
    assert!(e.contains("duplicate rank"), "{e}");
    // A byte with no token cannot be encoded: an error, not a panic.
    let t = Tiktoken::parse("YQ== 0\n", None).unwrap();
    assert!(t.encode("ab", false).is_err());
}

#[test]
fn streaming_holds_back_split_characters() {
    let t = tok();
    // 🦊 is F0 9F A6 8A: four single-byte tokens; é is C3 A9.
    let ids = t.encode("a🦊é", false).unwrap();
    assert_eq!(ids, vec![97, 0xF0, 0x9F, 0xA6, 0x8A, 0xC3, 0xA9]);
    let mut s = TextStream::new(&[], true);
    let pieces: Vec<String> = ids.iter().map(|&id| s.push(&t, id).unwrap()).collect();
    assert_eq!(pieces, vec!["a", "", "", "", "🦊", "", "é"]);
    assert_eq!(s.finish(&t).unwrap(), "");
    // Generation ending inside a character: the remainder comes out as U+FFFD, once.
    let mut s = TextStream::new(&[], true);
    assert_eq!(s.push(&t, 0xF0).unwrap(), "");
    assert_eq!(s.push(&t, 0x9F).unwrap(), "");
    assert_eq!(s.finish(&t).unwrap(), "\u{FFFD}");
    // Invalid bytes followed by valid text are not held back forever.
    let mut s = TextStream::new(&[], true);
    let mut out = s.push(&t, 0xFF).unwrap();
    out += &s.push(&t, b'x' as u32).unwrap();
    out += &s.finish(&t).unwrap();
    assert_eq!(out, "\u{FFFD}x");
}
