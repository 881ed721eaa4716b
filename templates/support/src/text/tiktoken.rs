//! tiktoken rank files (`base64(token) rank` lines, Llama 3 style) with their special tokens.

use std::collections::HashMap;
use std::path::Path;

use super::base64::base64_decode;
use super::bpe::BytePairEncoder;
use super::tokenizer::{err, Tokenizer, TokenizerError};

/// Llama 3's pre-tokenizer split (from Meta's `tokenizer.py`; needs look-ahead, hence
/// fancy-regex).
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama 3.1+'s 256 special tokens, numbered from the first id after the ranks.
pub fn llama3_special_tokens(base: u32) -> Vec<(String, u32)> {
    let named = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>",
        "<|step_id|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eom_id|>",
        "<|eot_id|>",
        "<|python_tag|>",
    ];
    let mut out: Vec<String> = named.iter().map(|s| s.to_string()).collect();
    let mut i = 2;
    while out.len() < 256 {
        out.push(format!("<|reserved_special_token_{i}|>"));
        i += 1;
    }
    out.into_iter().enumerate().map(|(k, s)| (s, base + k as u32)).collect()
}

/// Special tokens from `added_tokens_decoder` of a `tokenizer_config.json`, if it has any.
pub fn specials_from_config(path: &Path) -> Result<Option<Vec<(String, u32)>>, TokenizerError> {
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| err(format!("{}: invalid JSON: {e}", path.display())))?;
    let Some(map) = v.get("added_tokens_decoder").and_then(|m| m.as_object()) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (id, entry) in map {
        let id: u32 = id.parse().map_err(|_| err(format!("{}: added_tokens_decoder key {id:?} is not a token id", path.display())))?;
        let content = entry.get("content").and_then(|c| c.as_str()).ok_or_else(|| {
            err(format!("{}: added_tokens_decoder[{id}] has no \"content\" string", path.display()))
        })?;
        out.push((content.to_string(), id));
    }
    Ok(if out.is_empty() { None } else { Some(out) })
}

pub struct Tiktoken {
    bpe: BytePairEncoder,
    special_encoder: HashMap<String, u32>,
    special_decoder: HashMap<u32, String>,
    /// Alternation of the escaped special tokens, longest first.
    special_re: Option<fancy_regex::Regex>,
    vocab_size: usize,
}

impl Tiktoken {
    /// Parses `base64(token) rank` lines; `specials` default to Llama 3's, numbered after the
    /// highest rank.
    pub fn parse(text: &str, specials: Option<Vec<(String, u32)>>) -> Result<Tiktoken, TokenizerError> {
        Self::with_pattern(text, specials, LLAMA3_PATTERN)
    }

    pub fn with_pattern(text: &str, specials: Option<Vec<(String, u32)>>, pattern: &str) -> Result<Tiktoken, TokenizerError> {
        let mut ranks = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let bad = |what: &str| err(format!("line {}: {what}: {line:?}", n + 1));
            let (tok, rank) = line.split_once(' ').ok_or_else(|| bad("expected `base64 rank`"))?;
            // An empty field is damage, not the empty token (which is written `=`).
            let bytes = base64_decode(tok).filter(|_| !tok.is_empty()).ok_or_else(|| bad("invalid base64 token"))?;
            let rank: u32 = rank.trim().parse().map_err(|_| bad("invalid rank"))?;
            ranks.push((bytes, rank));
        }
        if ranks.is_empty() {
            return Err(err("no tokens in the tiktoken file"));
        }
        let bpe = BytePairEncoder::new(ranks, pattern)?;
        let base = bpe.max_rank().map_or(0, |m| m.saturating_add(1));
        let specials = specials.unwrap_or_else(|| llama3_special_tokens(base));
        let mut special_encoder = HashMap::new();
        let mut special_decoder = HashMap::new();
        for (s, id) in &specials {
            if bpe.bytes(*id).is_some() {
                return Err(err(format!("special token {s:?} has id {id}, which is also a regular token's rank")));
            }
            special_encoder.insert(s.clone(), *id);
            special_decoder.insert(*id, s.clone());
        }
        let special_re = if specials.is_empty() {
            None
        } else {
            let mut names: Vec<&str> = specials.iter().map(|(s, _)| s.as_str()).collect();
            names.sort_by_key(|s| std::cmp::Reverse(s.len()));
            let alt = names.iter().map(|s| fancy_regex::escape(s)).collect::<Vec<_>>().join("|");
            Some(fancy_regex::Regex::new(&alt).map_err(|e| err(format!("special tokens: {e}")))?)
        };
        let vocab_size = bpe.max_rank().into_iter().chain(special_decoder.keys().copied()).max().map_or(0, |m| m as usize + 1);
        Ok(Tiktoken { bpe, special_encoder, special_decoder, special_re, vocab_size })
    }

    /// The lowest rank below the highest that has no token: `None` for a file of ranks 0..n,
    /// as Whisper's files are, whose ids from n on are the model's special tokens.
    pub fn first_missing_rank(&self) -> Option<u32> {
        let max = self.bpe.max_rank()?;
        (0..max).find(|&r| self.bpe.bytes(r).is_none())
    }

    /// Raw bytes of `ids` (special tokens as their text unless skipped).
    pub fn decode_bytes(&self, ids: &[u32], skip_special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.bpe.bytes(id) {
                out.extend_from_slice(b);
            } else if let Some(s) = self.special_decoder.get(&id) {
                if !skip_special {
                    out.extend_from_slice(s.as_bytes());
                }
            }
        }
        out
    }
}

impl Tokenizer for Tiktoken {
    fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let mut out = Vec::new();
        if add_special {
            if let Some(&bos) = self.special_encoder.get("<|begin_of_text|>") {
                out.push(bos);
            }
        }
        let mut rest = 0;
        if let Some(re) = &self.special_re {
            for m in re.find_iter(text) {
                let m = m.map_err(|e| err(format!("special tokens: {e}")))?;
                self.bpe.encode(&text[rest..m.start()], 0, &mut out)?;
                let id = self.special_encoder.get(m.as_str()).ok_or_else(|| err(format!("special token {:?} has no id", m.as_str())))?;
                out.push(*id);
                rest = m.end();
            }
        }
        self.bpe.encode(&text[rest..], 0, &mut out)?;
        Ok(out)
    }

    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, skip_special)).into_owned())
    }

    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.special_encoder.get(token).copied().or_else(|| self.bpe.rank(token.as_bytes()))
    }

    fn kind(&self) -> &'static str {
        "tiktoken"
    }
}
