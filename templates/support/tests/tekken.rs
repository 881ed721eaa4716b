//! Mistral's Tekken tokenizer: the two `tekken.json` files mistral-common ships, against
//! mistral-common's own `Tekkenizer` (tool/python/tekken_oracle.py) on a multilingual string
//! set; a small generated file for special tokens, control tokens and the audio section; and
//! malformed files, whose errors name the file and what is wrong.

use std::path::{Path, PathBuf};

use rbuild_runner_support::text::base64::base64_encode;
use rbuild_runner_support::text::stream::TextStream;
use rbuild_runner_support::text::tekken::{AudioConfig, AudioEncodingConfig, Tekken};
use rbuild_runner_support::text::tokenizer::{self, Tokenizer};
use serde_json::{json, Value};

mod common;
use common::{temp_dir, testdata, MERGES};

/// The pre-tokenizer split of mistral-common's tekken files.
const TEKKEN_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The oracle venv's Python (env RBUILD_PYTHON, else the repository's `.venv`); None (after a
/// notice) when there is none, which CI does not allow.
fn oracle_python() -> Option<PathBuf> {
    let p = std::env::var_os("RBUILD_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv/bin/python"));
    if p.exists() {
        return Some(p);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must provide the oracle venv (.venv) with mistral-common");
    eprintln!("SKIPPED: no oracle venv (.venv/bin/python); run tool/ci/setup.sh");
    None
}

/// mistral-common's data folder (where its tekken files are), if the venv has mistral-common.
fn mistral_data_dir(python: &Path) -> Option<PathBuf> {
    let run = std::process::Command::new(python)
        .args(["-c", "import mistral_common, os; print(os.path.dirname(mistral_common.__file__))"])
        .output()
        .unwrap();
    if !run.status.success() {
        assert!(std::env::var_os("CI").is_none(), "CI's venv lacks mistral-common:\n{}", String::from_utf8_lossy(&run.stderr));
        eprintln!("SKIPPED: {} has no mistral-common; run tool/ci/setup.sh", python.display());
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&run.stdout).trim()).join("data"))
}

/// Strings in many scripts and shapes, plus the llama tokenizer cases of templates/llm.
fn strings() -> Vec<String> {
    let mut s: Vec<String> = [
        // CJK, Arabic, Hindi and other scripts
        "東京は日本の首都です。",
        "北京欢迎你，朋友们！",
        "안녕하세요 세계",
        "مرحبا بالعالم، كيف حالك؟",
        "नमस्ते दुनिया, आप कैसे हैं?",
        "Привет, мир! Ёжик",
        "Γειά σου Κόσμε",
        "שלום עולם",
        "ภาษาไทยง่ายนิดเดียว",
        "Tiếng Việt có dấu",
        // emoji, ZWJ sequences, modifiers, flags
        "🦊🐕🐈",
        "👨‍👩‍👧‍👦 family",
        "🏳️‍🌈 and 🏴‍☠️",
        "👍🏽👋🏿",
        "🇫🇷🇯🇵🇺🇸",
        "❤️‍🔥 x",
        // whitespace runs: the `\s+(?!\S)` lookahead leaves one space for the next word
        "a   b",
        "   ",
        " ",
        "trailing spaces   ",
        "  leading",
        "tabs\t\tand\t",
        "\n\n\n",
        "line\n  indented\n\tmore\n",
        " \t \n mixed \r\n end",
        "\r\n\r\n",
        "ideographic\u{3000}space and\u{a0}nbsp",
        // digits
        "1234567890",
        "3.14159 2,718 1e-10 -42",
        "0x1F 0b1010 1_000_000",
        "１２３ full-width",
        "٣٤٥ and ४२",
        // punctuation
        "Hello... world!!! ???",
        "«quotes» „German“ ‘single’ “double”",
        "em—dash – en dash",
        "a/b\\c|d ~`^",
        "((nested [brackets] {braces}))",
        "path/to/file.txt\n/usr/bin/",
        // code
        "fn main() {\n    println!(\"hi\");\n}\n",
        "for i in range(10):\n\tprint(i)\n",
        "<div class=\"x\">&amp;</div>",
        "SELECT * FROM t WHERE a >= 1;",
        // mixed scripts and cases
        "English 中文 العربية हिन्दी 😀 mixed",
        "CamelCaseWords and snake_case_words ALLCAPS",
        "URL https://example.com/path?q=1&r=2#frag",
        "don't can't I'm we'll they've",
        "e\u{301} combining, Zalgo t̸̢e̵x̷t",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        // special-token names as plain text: ordinary tokens, never the special ids
        "[INST] hello [/INST]",
        "<s>text</s>",
        "[AUDIO][BEGIN_AUDIO][TRANSCRIBE]",
        "<SPECIAL_999><unk><pad>",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let llama: Value = serde_json::from_str(&std::fs::read_to_string(testdata("models/llama_tiny/tokenizer_cases.json")).unwrap()).unwrap();
    let llama_texts: Vec<String> = llama["cases"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap().to_string()).collect();
    assert!(llama_texts.len() >= 10);
    s.extend(llama_texts);
    s
}

const SPECIAL_NAMES: &[&str] =
    &["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[TOOL_CONTENT]", "<SPECIAL_20>", "<SPECIAL_999>"];

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Every string of [`strings`] through both tokenizers; returns how many were compared.
fn compare_with_mistral_common(python: &Path, tekken: &Path) -> usize {
    let dir = temp_dir(&format!("tekken_oracle_{}", tekken.file_stem().unwrap().to_string_lossy()));
    let (strings_path, out_path) = (dir.join("strings.json"), dir.join("oracle.json"));
    let strings = strings();
    std::fs::write(&strings_path, serde_json::to_vec(&strings).unwrap()).unwrap();
    let run = std::process::Command::new(python)
        .arg(repo().join("tool/python/tekken_oracle.py"))
        .args([&strings_path, tekken, &out_path])
        .args(SPECIAL_NAMES)
        .output()
        .unwrap();
    assert!(run.status.success(), "tekken_oracle.py failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let oracle: Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();

    let tok = tokenizer::load(tekken).unwrap();
    assert_eq!(tok.kind(), "tekken");
    assert_eq!(tok.vocab_size() as u64, oracle["vocab_size"].as_u64().unwrap());
    let num_special = oracle["num_special_tokens"].as_u64().unwrap() as u32;
    assert_eq!(num_special, 1000);
    for name in SPECIAL_NAMES {
        assert_eq!(tok.token_to_id(name).map(u64::from), oracle["special_ids"][name].as_u64(), "special {name}");
    }
    let cases = oracle["cases"].as_array().unwrap();
    assert_eq!(cases.len(), strings.len());
    let mut held_back = 0;
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want = ids(&c["ids"]);
        assert_eq!(tok.encode(text, false).unwrap(), want, "ids of {text:?}");
        assert_eq!(tok.encode(text, true).unwrap(), ids(&c["ids_bos"]), "ids with BOS of {text:?}");
        assert!(want.iter().all(|&id| id >= num_special), "plain text {text:?} encoded to a special token: {want:?}");
        let decoded = c["decoded"].as_str().unwrap();
        assert_eq!(tok.decode(&want, true).unwrap(), decoded, "decode of {text:?}");
        assert_eq!(tok.decode(&ids(&c["ids_bos"]), false).unwrap(), decoded, "the BOS is a control token, never text");
        // Streamed after the BOS, as the runners stream, the pieces add up to the decode.
        let mut stream = TextStream::new(&[1], true);
        let mut streamed = String::new();
        for &id in &want {
            let piece = stream.push(tok.as_ref(), id).unwrap();
            held_back += piece.is_empty() as usize;
            streamed += &piece;
        }
        streamed += &stream.finish(tok.as_ref()).unwrap();
        assert_eq!(streamed, decoded, "streamed {text:?}");
    }
    assert!(held_back > 0, "no character was split across tokens; the multi-byte cases were not exercised");
    cases.len()
}

#[test]
fn mistral_common_tekken_files_tokenize_as_mistral_common() {
    let Some(python) = oracle_python() else { return };
    let Some(data) = mistral_data_dir(&python) else { return };
    for file in ["tekken_240718.json", "tekken_240911.json"] {
        let n = compare_with_mistral_common(&python, &data.join(file));
        eprintln!("{file}: {n} strings encode and decode as mistral-common's Tekkenizer");
        assert!(n >= 60, "{n}");
    }
}

// ---------------------------------------------------------------------------------------------
// A small generated tekken.json

/// A tekken.json with the single bytes and [`MERGES`] as its vocabulary, 40 special tokens
/// (`specials`, or the v≤7 defaults when None) and the given extra top-level entries.
fn small_tekken(specials: Option<Value>, extra: Value) -> Value {
    let mut vocab: Vec<Value> = (0..=255u8).map(|b| json!({"rank": b, "token_bytes": base64_encode(&[b]), "token_str": null})).collect();
    for (i, m) in MERGES.iter().enumerate() {
        vocab.push(json!({"rank": 256 + i, "token_bytes": base64_encode(m.as_bytes()), "token_str": m}));
    }
    let n = vocab.len();
    let mut doc = json!({
        "config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": n, "default_vocab_size": 40 + n,
                   "default_num_special_tokens": 40, "version": "v7"},
        "vocab": vocab,
    });
    if let Some(s) = specials {
        doc["special_tokens"] = s;
    }
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Voxtral-like specials: the listed ones, with a non-control one among them.
fn voxtral_like_specials() -> Value {
    let mut list = vec![];
    for (rank, (name, control)) in
        [("<unk>", true), ("<s>", true), ("</s>", true), ("[INST]", true), ("[/INST]", true), ("[AUDIO]", true), ("[BEGIN_AUDIO]", true), ("[TRANSCRIBE]", true), ("<note>", false)]
            .iter()
            .enumerate()
    {
        list.push(json!({"rank": rank, "token_str": name, "is_control": control}));
    }
    Value::Array(list)
}

#[test]
fn default_specials_are_padded_with_fillers_and_ids_are_offset() {
    let dir = temp_dir("tekken_defaults");
    let p = write(&dir, "tekken.json", small_tekken(None, json!({})).to_string().as_bytes());
    let tok = Tekken::from_file(&p).unwrap();
    assert_eq!(tok.num_special_tokens(), 40);
    assert_eq!(tok.vocab_size(), 40 + 256 + MERGES.len());
    for (name, id) in [("<unk>", 0), ("<s>", 1), ("</s>", 2), ("[INST]", 3), ("[TOOL_CONTENT]", 19), ("<SPECIAL_20>", 20), ("<SPECIAL_39>", 39)] {
        assert_eq!(tok.token_to_id(name), Some(id), "{name}");
    }
    assert_eq!(tok.token_to_id("<SPECIAL_40>"), None);
    assert_eq!(tok.token_to_id("<SPECIAL_020>"), None);
    assert_eq!(tok.special_name(25).as_deref(), Some("<SPECIAL_25>"));
    assert_eq!(tok.token_to_id("hell"), Some(40 + 258));
    // h e l l o: he < ll < hell; BPE ids are rank + 40.
    assert_eq!(tok.encode("hello", false).unwrap(), vec![40 + 258, 40 + b'o' as u32]);
    assert_eq!(tok.encode("hello", true).unwrap(), vec![1, 40 + 258, 40 + b'o' as u32]);
    assert_eq!(tok.encode("[INST]", false).unwrap(), "[INST]".bytes().map(|b| 40 + b as u32).collect::<Vec<_>>());
    assert_eq!(tok.decode(&[1, 3, 40 + 258, 40 + b'o' as u32, 4, 2, 35, 9999], false).unwrap(), "hello");
    assert!(tok.audio().is_none());
    assert_eq!(tok.config().version, "v7");
}

#[test]
fn listed_specials_control_tokens_and_the_audio_section() {
    let dir = temp_dir("tekken_voxtral");
    let audio = json!({"audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                                 "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
                                 "transcription_delay_ms": null}});
    let doc = small_tekken(Some(voxtral_like_specials()), audio);
    let p = write(&dir, "tekken.json", doc.to_string().as_bytes());
    let tok = tokenizer::load(&p).unwrap();
    assert_eq!(tok.kind(), "tekken");
    assert_eq!(tok.token_to_id("[AUDIO]"), Some(5));
    assert_eq!(tok.token_to_id("[BEGIN_AUDIO]"), Some(6));
    assert_eq!(tok.token_to_id("[TRANSCRIBE]"), Some(7));
    assert_eq!(tok.token_to_id("<SPECIAL_9>"), Some(9));
    assert_eq!(tok.token_to_id("[IMG]"), None);
    let (note, o) = (8, 40 + b'o' as u32);
    // Control tokens never decode to text; other specials do unless skipped.
    assert_eq!(tok.decode(&[1, 3, 6, 5, 5, 4, 7, o, note, 2], false).unwrap(), "o<note>");
    assert_eq!(tok.decode(&[1, 3, 6, 5, 5, 4, 7, o, note, 2], true).unwrap(), "o");
    // As mistral-common, a special token ends a run of regular tokens: the halves of a
    // character around it decode separately (F0 9F: one U+FFFD; A6, 8A: one each).
    let fox: Vec<u32> = "🦊".bytes().map(|b| 40 + b as u32).collect();
    assert_eq!(tok.decode(&[fox[0], fox[1], 5, fox[2], fox[3]], true).unwrap(), "\u{FFFD}\u{FFFD}\u{FFFD}");
    let tekken = Tekken::from_file(&p).unwrap();
    let want = AudioConfig {
        sampling_rate: 16000,
        frame_rate: 12.5,
        audio_encoding_config: AudioEncodingConfig { num_mel_bins: 128, hop_length: 160, window_size: 400 },
        chunk_length_s: Some(30.0),
    };
    assert_eq!(tekken.audio(), Some(&want));
    assert!(tekken.is_control(5) && !tekken.is_control(note) && tekken.is_control(30) && !tekken.is_control(45));
}

#[test]
fn malformed_tekken_files_are_errors_naming_the_file_and_the_fault() {
    let dir = temp_dir("tekken_bad");
    let good = small_tekken(None, json!({}));
    let text = good.to_string();
    let mut cases: Vec<(&str, Vec<u8>, &[&str])> = vec![("truncated.json", text.as_bytes()[..text.len() / 2].to_vec(), &["not valid JSON", "EOF"])];
    let mut edit = |name: &'static str, f: &dyn Fn(&mut Value), want: &'static [&'static str]| {
        let mut doc = good.clone();
        f(&mut doc);
        cases.push((name, doc.to_string().into_bytes(), want));
    };
    edit("bad_base64.json", &|d| d["vocab"][260]["token_bytes"] = json!("b*d="), &["rank 260", "base64"]);
    edit("rank_gap.json", &|d| d["vocab"][258]["rank"] = json!(259), &["vocab[258] has rank 259"]);
    edit("not_bytes.json", &|d| d["vocab"][65]["token_bytes"] = json!(base64_encode(b"B")), &["rank 65", "single byte 0x41"]);
    edit("duplicate_bytes.json", &|d| d["vocab"][257]["token_bytes"] = json!(base64_encode(b"he")), &["duplicate token", "256", "257"]);
    edit("missing_config.json", &|d| {
        d.as_object_mut().unwrap().remove("config");
    }, &["missing field `config`"]);
    edit("missing_pattern.json", &|d| {
        d["config"].as_object_mut().unwrap().remove("pattern");
    }, &["missing field `pattern`"]);
    edit("missing_rank.json", &|d| {
        d["vocab"][3].as_object_mut().unwrap().remove("rank");
    }, &["missing field `rank`"]);
    edit("bad_pattern.json", &|d| d["config"]["pattern"] = json!("(unclosed"), &["config.pattern", "does not compile"]);
    edit("short_vocab.json", &|d| d["config"]["default_vocab_size"] = json!(40 + 300), &["vocab has 265 entries", "300"]);
    edit("too_few_regular.json", &|d| d["config"]["default_vocab_size"] = json!(40 + 100), &["only 100 regular tokens"]);
    edit("specials_exceed_vocab.json", &|d| d["config"]["default_num_special_tokens"] = json!(100000), &["exceeds config.default_vocab_size"]);
    edit("v11_without_specials.json", &|d| d["config"]["version"] = json!("v11"), &["v11", "special_tokens"]);
    edit("bad_version.json", &|d| d["config"]["version"] = json!("seven"), &["config.version \"seven\""]);
    edit("special_rank.json", &|d| d["special_tokens"] = json!([{"rank": 1, "token_str": "<s>", "is_control": true}]), &["special_tokens[0]", "rank 1"]);
    edit("special_twice.json", &|d| {
        d["special_tokens"] = json!([{"rank": 0, "token_str": "<s>", "is_control": true}, {"rank": 1, "token_str": "<s>", "is_control": true}])
    }, &["\"<s>\" appears twice"]);
    edit("special_is_filler.json", &|d| d["special_tokens"] = json!([{"rank": 0, "token_str": "<SPECIAL_7>", "is_control": true}]), &["appears twice"]);
    edit("too_many_specials.json", &|d| {
        d["special_tokens"] = Value::Array((0..41).map(|i| json!({"rank": i, "token_str": format!("<t{i}>"), "is_control": true})).collect())
    }, &["41 special tokens listed"]);
    edit("negative_rank.json", &|d| d["vocab"][3]["rank"] = json!(-3), &["invalid value"]);
    for (name, content, want) in cases {
        let p = write(&dir, name, &content);
        let e = match tokenizer::load(&p) {
            Ok(_) => panic!("{name} loaded"),
            Err(e) => e.0,
        };
        assert!(e.contains(name), "{name}: {e}");
        for w in want {
            assert!(e.contains(w), "{name}: {e:?} lacks {w:?}");
        }
    }
}
