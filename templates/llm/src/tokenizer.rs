//! Tokenizers: Hugging Face `tokenizer.json` (through the `tokenizers` crate) and tiktoken rank
//! files (Llama 3 style), told apart by content rather than by name.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenizerError(pub String);

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokenizerError {}

fn err(msg: impl Into<String>) -> TokenizerError {
    TokenizerError(msg.into())
}

pub trait Tokenizer {
    /// Token ids of `text`; `add_special` adds what the tokenizer adds around a plain prompt
    /// (the BOS token, for Llama models). Special-token strings in `text` are always matched.
    fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError>;
    /// Text of `ids` (lossy: an incomplete UTF-8 sequence decodes to U+FFFD). Ids outside
    /// the vocabulary decode to nothing, as in Hugging Face's tokenizers.
    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError>;
    /// Number of ids, special tokens included.
    fn vocab_size(&self) -> usize;
    fn token_to_id(&self, token: &str) -> Option<u32>;
    /// "huggingface" or "tiktoken".
    fn kind(&self) -> &'static str;
}

/// Loads `path`, detecting the format from its content.
pub fn load(path: &Path) -> Result<Box<dyn Tokenizer>, TokenizerError> {
    let bytes = std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let at = |e: TokenizerError| err(format!("{}: {}", path.display(), e.0));
    match detect(&bytes) {
        Format::HuggingFace => Ok(Box::new(HfTokenizer::from_bytes(&bytes).map_err(at)?)),
        Format::Tiktoken => {
            let text = std::str::from_utf8(&bytes).map_err(|_| at(err("tiktoken file is not UTF-8")))?;
            let specials = match path.parent().map(|d| d.join("tokenizer_config.json")) {
                Some(cfg) if cfg.is_file() => specials_from_config(&cfg)?,
                _ => None,
            };
            Ok(Box::new(Tiktoken::parse(text, specials).map_err(at)?))
        }
        Format::Unknown(why) => Err(at(err(format!(
            "unrecognised tokenizer format ({why}); expected a Hugging Face tokenizer.json or a tiktoken \
             file of `base64 rank` lines (SentencePiece .model files are not supported)"
        )))),
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Format {
    HuggingFace,
    Tiktoken,
    Unknown(&'static str),
}

pub fn detect(bytes: &[u8]) -> Format {
    let trimmed = bytes.trim_ascii_start();
    if trimmed.is_empty() {
        return Format::Unknown("the file is empty");
    }
    if trimmed[0] == b'{' {
        return Format::HuggingFace;
    }
    let first = trimmed.split(|&b| b == b'\n').next().unwrap_or_default().trim_ascii();
    let mut parts = first.split(|&b| b == b' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(tok), Some(rank), None)
            if !tok.is_empty()
                && tok.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                && !rank.is_empty()
                && rank.iter().all(u8::is_ascii_digit) =>
        {
            Format::Tiktoken
        }
        _ => Format::Unknown("neither JSON nor `base64 rank` lines"),
    }
}

// ---------------------------------------------------------------------------------------------
// Hugging Face

pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
}

impl HfTokenizer {
    pub fn from_bytes(bytes: &[u8]) -> Result<HfTokenizer, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| err(format!("not a valid Hugging Face tokenizer.json: {e}")))?;
        Ok(HfTokenizer { inner })
    }
}

impl Tokenizer for HfTokenizer {
    fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let enc = self.inner.encode(text, add_special).map_err(|e| err(format!("cannot encode the text: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError> {
        self.inner.decode(ids, skip_special).map_err(|e| err(format!("cannot decode token ids: {e}")))
    }

    fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    fn kind(&self) -> &'static str {
        "huggingface"
    }
}

// ---------------------------------------------------------------------------------------------
// tiktoken

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
fn specials_from_config(path: &Path) -> Result<Option<Vec<(String, u32)>>, TokenizerError> {
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
    encoder: HashMap<Vec<u8>, u32>,
    decoder: HashMap<u32, Vec<u8>>,
    special_encoder: HashMap<String, u32>,
    special_decoder: HashMap<u32, String>,
    /// Alternation of the escaped special tokens, longest first.
    special_re: Option<fancy_regex::Regex>,
    pattern: fancy_regex::Regex,
    vocab_size: usize,
}

impl Tiktoken {
    /// Parses `base64(token) rank` lines; `specials` default to Llama 3's, numbered after the
    /// highest rank.
    pub fn parse(text: &str, specials: Option<Vec<(String, u32)>>) -> Result<Tiktoken, TokenizerError> {
        Self::with_pattern(text, specials, LLAMA3_PATTERN)
    }

    pub fn with_pattern(text: &str, specials: Option<Vec<(String, u32)>>, pattern: &str) -> Result<Tiktoken, TokenizerError> {
        let mut encoder = HashMap::new();
        let mut decoder = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let bad = |what: &str| err(format!("line {}: {what}: {line:?}", n + 1));
            let (tok, rank) = line.split_once(' ').ok_or_else(|| bad("expected `base64 rank`"))?;
            let bytes = base64_decode(tok).ok_or_else(|| bad("invalid base64 token"))?;
            let rank: u32 = rank.trim().parse().map_err(|_| bad("invalid rank"))?;
            if decoder.insert(rank, bytes.clone()).is_some() {
                return Err(bad("duplicate rank"));
            }
            if encoder.insert(bytes, rank).is_some() {
                return Err(bad("duplicate token"));
            }
        }
        if encoder.is_empty() {
            return Err(err("no tokens in the tiktoken file"));
        }
        let base = decoder.keys().max().map_or(0, |m| m + 1);
        let specials = specials.unwrap_or_else(|| llama3_special_tokens(base));
        let mut special_encoder = HashMap::new();
        let mut special_decoder = HashMap::new();
        for (s, id) in &specials {
            if decoder.contains_key(id) {
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
        let pattern = fancy_regex::Regex::new(pattern).map_err(|e| err(format!("pre-tokenizer pattern: {e}")))?;
        let vocab_size = decoder.keys().chain(special_decoder.keys()).max().map_or(0, |&m| m as usize + 1);
        Ok(Tiktoken { encoder, decoder, special_encoder, special_decoder, special_re, pattern, vocab_size })
    }

    fn encode_ordinary(&self, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        for m in self.pattern.find_iter(text) {
            let m = m.map_err(|e| err(format!("pre-tokenizer: {e}")))?;
            let piece = m.as_str().as_bytes();
            match self.encoder.get(piece) {
                Some(&id) => out.push(id),
                None => self.byte_pair_encode(piece, out)?,
            }
        }
        Ok(())
    }

    /// Repeatedly merges the adjacent pair whose concatenation has the lowest rank (leftmost
    /// on ties), as tiktoken does.
    fn byte_pair_encode(&self, piece: &[u8], out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        while bounds.len() > 2 {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..bounds.len() - 2 {
                if let Some(&r) = self.encoder.get(&piece[bounds[i]..bounds[i + 2]]) {
                    if best.is_none_or(|(br, _)| r < br) {
                        best = Some((r, i));
                    }
                }
            }
            match best {
                Some((_, i)) => {
                    bounds.remove(i + 1);
                }
                None => break,
            }
        }
        for w in bounds.windows(2) {
            let part = &piece[w[0]..w[1]];
            let id = self
                .encoder
                .get(part)
                .ok_or_else(|| err(format!("bytes {part:02x?} have no token (the rank file lacks single bytes)")))?;
            out.push(*id);
        }
        Ok(())
    }

    /// Raw bytes of `ids` (special tokens as their text unless skipped).
    pub fn decode_bytes(&self, ids: &[u32], skip_special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for id in ids {
            if let Some(b) = self.decoder.get(id) {
                out.extend_from_slice(b);
            } else if let Some(s) = self.special_decoder.get(id) {
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
                self.encode_ordinary(&text[rest..m.start()], &mut out)?;
                let id = self.special_encoder.get(m.as_str()).ok_or_else(|| err(format!("special token {:?} has no id", m.as_str())))?;
                out.push(*id);
                rest = m.end();
            }
        }
        self.encode_ordinary(&text[rest..], &mut out)?;
        Ok(out)
    }

    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, skip_special)).into_owned())
    }

    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.special_encoder.get(token).or_else(|| self.encoder.get(token.as_bytes())).copied()
    }

    fn kind(&self) -> &'static str {
        "tiktoken"
    }
}

/// Standard base64 (with or without `=` padding); None on any invalid character or length.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let n = chunk.len() - 1;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

/// Standard padded base64 (used by tests to write rank files).
pub fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(v >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for n in 0..40u8 {
            let b: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
            assert_eq!(base64_decode(&base64_encode(&b)).unwrap(), b);
        }
        assert_eq!(base64_decode("IQ==").unwrap(), b"!");
        assert_eq!(base64_decode("SGVsbG8=").unwrap(), b"Hello");
        assert!(base64_decode("S").is_none());
        assert!(base64_decode("S*==").is_none());
    }

    #[test]
    fn detects_formats() {
        assert_eq!(detect(b"  {\"model\": {}}"), Format::HuggingFace);
        assert_eq!(detect(b"IQ== 0\nIg== 1\n"), Format::Tiktoken);
        assert!(matches!(detect(b""), Format::Unknown(_)));
        assert!(matches!(detect(b"\x0a\x05hello"), Format::Unknown(_)));
        assert!(matches!(detect(b"IQ== zero\n"), Format::Unknown(_)));
    }
}
