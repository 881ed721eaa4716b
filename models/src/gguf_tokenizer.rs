//! The tokenizer a GGUF file carries (`tokenizer.ggml.*`), written as the Hugging Face
//! `tokenizer.json` (and `tokenizer_config.json` with the chat template and special tokens)
//! that rbuild's runners read:
//!
//! - `gpt2`: byte-level BPE with the file's merges; the pre-tokenizer follows
//!   `tokenizer.ggml.pre` (llama.cpp's name for the split regex the model was trained with);
//! - `llama`: a SentencePiece vocabulary with scores, as BPE with byte fallback whose merges
//!   are derived from the scores (as transformers converts SentencePiece models).
//!
//! Anything else fails naming the tokenizer model or pre-tokenizer.

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use rbuild_gguf::GgufFile;
use serde_json::{json, Map, Value};

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

/// The split regexes of the pre-tokenizer families llama.cpp names in `tokenizer.ggml.pre`.
const LLAMA3_SPLIT: &str =
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str =
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How the text is split before byte-level BPE, by `tokenizer.ggml.pre`.
enum PreSplit {
    /// GPT-2's regex (the ByteLevel pre-tokenizer's own).
    Gpt2,
    /// Every digit on its own, then GPT-2's regex (StarCoder, SmolLM).
    DigitsThenGpt2,
    /// One regex, then bytes mapped without a second split.
    Regex(&'static str),
}

fn pre_split(pre: &str) -> Option<PreSplit> {
    Some(match pre {
        "default" | "gpt-2" | "gpt2" | "mpt" | "olmo" | "jais" | "trillion" => PreSplit::Gpt2,
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" => PreSplit::DigitsThenGpt2,
        "llama3" | "llama-bpe" | "llama-v3" | "dbrx" | "smaug-bpe" | "falcon3" => PreSplit::Regex(LLAMA3_SPLIT),
        "qwen2" | "stablelm2" | "deepseek-r1-qwen" | "megrez" => PreSplit::Regex(QWEN2_SPLIT),
        _ => return None,
    })
}

const KNOWN_PRE: &str = "default, gpt-2, smollm, starcoder, refact, command-r, llama-bpe (llama3), dbrx, smaug-bpe, qwen2, stablelm2, deepseek-r1-qwen";

fn invalid(file: &GgufFile, message: impl std::fmt::Display) -> ExportError {
    ExportError::Invalid(format!("{}: {message}", file.path()))
}

fn gguf_err(e: rbuild_gguf::GgufError) -> ExportError {
    ExportError::Io { path: e.path, message: e.message }
}

/// What the conversion read from the file.
struct Vocab<'a> {
    tokens: Vec<&'a str>,
    types: Vec<i64>,
    scores: Option<Vec<f64>>,
}

fn vocab(file: &GgufFile) -> Result<Vocab<'_>> {
    let tokens = file.get_str_array("tokenizer.ggml.tokens").map_err(gguf_err)?.ok_or_else(|| invalid(file, "tokenizer.ggml.tokens is missing: the file has no tokenizer"))?;
    let types = file.get_i64_array("tokenizer.ggml.token_type").map_err(gguf_err)?.unwrap_or_else(|| vec![1; tokens.len()]);
    let scores = file.get_f64_array("tokenizer.ggml.scores").map_err(gguf_err)?;
    if types.len() != tokens.len() || scores.as_ref().is_some_and(|s| s.len() != tokens.len()) {
        return Err(invalid(file, format!("tokenizer.ggml.token_type / scores do not have one entry per token ({})", tokens.len())));
    }
    Ok(Vocab { tokens, types, scores })
}

fn added_token(id: usize, content: &str, special: bool) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": !special, "special": special})
}

/// Control and user-defined tokens, matched whole before the model sees the text.
fn added_tokens(v: &Vocab<'_>) -> Vec<Value> {
    v.tokens
        .iter()
        .zip(&v.types)
        .enumerate()
        .filter(|(_, (_, t))| **t == TOKEN_CONTROL || **t == TOKEN_USER_DEFINED)
        .map(|(id, (tok, t))| added_token(id, tok, *t == TOKEN_CONTROL))
        .collect()
}

fn vocab_map(tokens: &[&str]) -> Map<String, Value> {
    // A repeated string keeps its first id (HF's converters do the same).
    let mut m = Map::new();
    for (id, t) in tokens.iter().enumerate() {
        m.entry(t.to_string()).or_insert(json!(id));
    }
    m
}

fn flag(file: &GgufFile, key: &str) -> Result<Option<bool>> {
    file.get_bool(key).map_err(gguf_err)
}

fn token_id(file: &GgufFile, key: &str, n: usize) -> Result<Option<usize>> {
    match file.get_u64(key).map_err(gguf_err)? {
        Some(id) if (id as usize) < n => Ok(Some(id as usize)),
        Some(id) => Err(invalid(file, format!("{key} {id} is outside the vocabulary of {n} tokens"))),
        None => Ok(None),
    }
}

/// A post-processor that prepends BOS, when the file asks for it.
fn bos_processor(bos: Option<(usize, &str)>) -> Value {
    match bos {
        Some((id, text)) => json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": text, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {text: {"id": text, "ids": [id], "tokens": [text]}}
        }),
        None => Value::Null,
    }
}

/// `tokenizer.json` for the tokenizer in `file`.
pub fn tokenizer_json(file: &GgufFile) -> Result<String> {
    let model = file.get_str("tokenizer.ggml.model").map_err(gguf_err)?.ok_or_else(|| invalid(file, "tokenizer.ggml.model is missing: the file has no tokenizer"))?;
    let v = vocab(file)?;
    let doc = match model {
        "gpt2" => gpt2(file, &v)?,
        "llama" => sentencepiece(file, &v)?,
        other => return Err(invalid(file, format!("tokenizer.ggml.model '{other}' is not supported (supported: gpt2, llama)"))),
    };
    serde_json::to_string(&doc).map_err(|e| invalid(file, e))
}

fn gpt2(file: &GgufFile, v: &Vocab<'_>) -> Result<Value> {
    let pre_name = file.get_str("tokenizer.ggml.pre").map_err(gguf_err)?.unwrap_or("default");
    let pre = pre_split(pre_name)
        .ok_or_else(|| invalid(file, format!("tokenizer.ggml.pre '{pre_name}' is not supported (supported: {KNOWN_PRE})")))?;
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let pre_tokenizer = match pre {
        PreSplit::Gpt2 => byte_level(true),
        PreSplit::DigitsThenGpt2 => json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)]}),
        PreSplit::Regex(re) => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false}, byte_level(false)]}),
    };
    let merges = file.get_str_array("tokenizer.ggml.merges").map_err(gguf_err)?.ok_or_else(|| invalid(file, "tokenizer.ggml.merges is missing (a gpt2 tokenizer needs its merges)"))?;
    let mut pairs = Vec::with_capacity(merges.len());
    for (i, m) in merges.iter().enumerate() {
        let (a, b) = m.split_once(' ').ok_or_else(|| invalid(file, format!("tokenizer.ggml.merges[{i}] '{m}' is not two tokens separated by a space")))?;
        pairs.push(json!([a, b]));
    }
    let n = v.tokens.len();
    let add_bos = flag(file, "tokenizer.ggml.add_bos_token")?.unwrap_or(false);
    let bos = token_id(file, "tokenizer.ggml.bos_token_id", n)?.filter(|_| add_bos).map(|id| (id, v.tokens[id]));
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens(v),
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": bos_processor(bos),
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false,
            // llama.cpp (and HF's Llama 3 tokenizer) take a whole word that is a token as is.
            "ignore_merges": matches!(pre, PreSplit::Regex(LLAMA3_SPLIT)),
            "vocab": vocab_map(&v.tokens),
            "merges": pairs,
        }
    }))
}

/// BPE merges of a SentencePiece vocabulary: every split of a piece into two pieces of the
/// vocabulary, ordered by the whole piece's score (highest first; pieces in id order and
/// splits by their ids as tie-breaks), as transformers' SentencePiece extractor orders them.
pub fn merges_from_scores(tokens: &[&str], scores: &[f64]) -> Vec<(String, String)> {
    let ids: std::collections::HashMap<&str, usize> = tokens.iter().enumerate().rev().map(|(i, t)| (*t, i)).collect();
    let mut all: Vec<(usize, usize, f64)> = Vec::new();
    for (piece, &score) in tokens.iter().zip(scores) {
        let mut local: Vec<(usize, usize)> = piece
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| Some((*ids.get(&piece[..at])?, *ids.get(&piece[at..])?)))
            .collect();
        local.sort();
        all.extend(local.into_iter().map(|(l, r)| (l, r, score)));
    }
    // Stable: equal scores keep the order above.
    all.sort_by(|a, b| b.2.partial_cmp(&a.2).unwrap_or(std::cmp::Ordering::Equal));
    all.into_iter().map(|(l, r, _)| (tokens[l].to_string(), tokens[r].to_string())).collect()
}

fn sentencepiece(file: &GgufFile, v: &Vocab<'_>) -> Result<Value> {
    let scores = v.scores.as_ref().ok_or_else(|| invalid(file, "tokenizer.ggml.scores is missing (a SentencePiece vocabulary needs its scores)"))?;
    let n = v.tokens.len();
    let unk = token_id(file, "tokenizer.ggml.unknown_token_id", n)?.map(|id| v.tokens[id]).unwrap_or("<unk>");
    let add_prefix = flag(file, "tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
    let add_bos = flag(file, "tokenizer.ggml.add_bos_token")?.unwrap_or(true);
    let bos = token_id(file, "tokenizer.ggml.bos_token_id", n)?.filter(|_| add_bos).map(|id| (id, v.tokens[id]));
    // Byte tokens (<0x0A>) and control tokens take no part in merges.
    let mergeable: Vec<&str> = v.tokens.iter().zip(&v.types).map(|(t, ty)| if *ty == 1 || *ty == TOKEN_USER_DEFINED { *t } else { "\u{0}" }).collect();
    let merges: Vec<Value> = merges_from_scores(&mergeable, scores).into_iter().filter(|(a, b)| a != "\u{0}" && b != "\u{0}").map(|(a, b)| json!([a, b])).collect();
    // ▁ for spaces, and one before the text when the file asks for it (unless the text starts
    // with a space already): the Metaspace pre-tokenizer transformers' GGUF conversion writes.
    let pre_tokenizer = json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": if add_prefix { "first" } else { "never" }, "split": false});
    let mut decoders = vec![json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}), json!({"type": "ByteFallback"}), json!({"type": "Fuse"})];
    if add_prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added_tokens(v),
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": bos_processor(bos),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
            "vocab": vocab_map(&v.tokens),
            "merges": merges,
        }
    }))
}

/// `tokenizer_config.json`: the chat template and the special tokens it refers to (absent
/// values are left out).
pub fn tokenizer_config_json(file: &GgufFile) -> Result<String> {
    let v = vocab(file)?;
    let n = v.tokens.len();
    let mut obj = Map::new();
    if let Some(t) = file.get_str("tokenizer.chat_template").map_err(gguf_err)? {
        obj.insert("chat_template".into(), json!(t));
    }
    for (key, field) in [("tokenizer.ggml.bos_token_id", "bos_token"), ("tokenizer.ggml.eos_token_id", "eos_token"), ("tokenizer.ggml.unknown_token_id", "unk_token"), ("tokenizer.ggml.padding_token_id", "pad_token")] {
        if let Some(id) = token_id(file, key, n)? {
            obj.insert(field.into(), json!(v.tokens[id]));
        }
    }
    if let Some(b) = flag(file, "tokenizer.ggml.add_bos_token")? {
        obj.insert("add_bos_token".into(), json!(b));
    }
    serde_json::to_string_pretty(&Value::Object(obj)).map_err(|e| invalid(file, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentencepiece_merges_follow_scores() {
        // "ab" scores above "abc": its merge comes first; "abc" splits as ab+c and a+bc.
        let tokens = ["a", "b", "c", "ab", "bc", "abc"];
        let scores = [0.0, 0.0, 0.0, -1.0, -3.0, -2.0];
        let m = merges_from_scores(&tokens, &scores);
        let m: Vec<(&str, &str)> = m.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(m, vec![("a", "b"), ("a", "bc"), ("ab", "c"), ("b", "c")]);
    }

    #[test]
    fn every_named_pre_tokenizer_is_known() {
        for pre in KNOWN_PRE.split(", ") {
            let name = pre.split(' ').next().unwrap();
            assert!(pre_split(name).is_some(), "{name}");
        }
        assert!(pre_split("deepseek-coder").is_none());
    }
}
