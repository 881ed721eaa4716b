//! Token ids → text: Hugging Face `tokenizer.json` (through the `tokenizers` crate, as in
//! templates/llm) or a tiktoken rank file (openai-whisper's `multilingual.tiktoken` /
//! `gpt2.tiktoken`), told apart by content. The runner only decodes, and only text tokens
//! (ids below end-of-text), so Whisper's special tokens need no names here: the program's
//! getters say which ids they are.

use std::collections::HashMap;
use std::path::Path;

use crate::decode::Vocab;

pub trait Tokenizer {
    /// Text of `ids` (lossy UTF-8); every id must be a text token.
    fn decode(&self, ids: &[u32]) -> Result<String, String>;
    /// Number of ids, special tokens included (HF) or the ranks (tiktoken).
    fn vocab_size(&self) -> usize;
    fn token_to_id(&self, token: &str) -> Option<u32>;
    fn kind(&self) -> &'static str;
}

pub struct HfTokenizer(tokenizers::Tokenizer);

impl Tokenizer for HfTokenizer {
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.0.decode(ids, true).map_err(|e| format!("cannot decode token ids: {e}"))
    }

    fn vocab_size(&self) -> usize {
        self.0.get_vocab_size(true)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.0.token_to_id(token)
    }

    fn kind(&self) -> &'static str {
        "huggingface"
    }
}

/// Rank → bytes of a tiktoken file.
pub struct Tiktoken {
    ranks: HashMap<u32, Vec<u8>>,
}

impl Tiktoken {
    pub fn parse(text: &str) -> Result<Tiktoken, String> {
        let mut ranks = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
            let (tok, rank) = line.split_once(' ').ok_or_else(|| bad("expected `base64 rank`"))?;
            let bytes = base64_decode(tok).ok_or_else(|| bad("invalid base64 token"))?;
            let rank: u32 = rank.trim().parse().map_err(|_| bad("invalid rank"))?;
            if ranks.insert(rank, bytes).is_some() {
                return Err(bad("duplicate rank"));
            }
        }
        if ranks.is_empty() {
            return Err("no tokens in the tiktoken file".into());
        }
        // Ranks must be 0..n: ids at or above n are Whisper's special tokens.
        if let Some(gap) = (0..ranks.len() as u32).find(|r| !ranks.contains_key(r)) {
            return Err(format!("ranks are not contiguous: {} ranks but rank {gap} is missing", ranks.len()));
        }
        Ok(Tiktoken { ranks })
    }
}

impl Tokenizer for Tiktoken {
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        let mut out = Vec::new();
        for id in ids {
            out.extend_from_slice(self.ranks.get(id).ok_or_else(|| format!("token id {id} has no rank in the tiktoken file"))?);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn vocab_size(&self) -> usize {
        self.ranks.len()
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.ranks.iter().find(|(_, b)| b.as_slice() == token.as_bytes()).map(|(&r, _)| r)
    }

    fn kind(&self) -> &'static str {
        "tiktoken"
    }
}

/// Loads `path` (format detected from the content). Errors name the file.
pub fn load(path: &Path) -> Result<Box<dyn Tokenizer>, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| at(e.to_string()))?;
    let start = bytes.trim_ascii_start();
    if start.is_empty() {
        return Err(at("the tokenizer file is empty".into()));
    }
    if start[0] == b'{' {
        let t = tokenizers::Tokenizer::from_bytes(&bytes)
            .map_err(|e| at(format!("not a valid Hugging Face tokenizer.json: {e}")))?;
        return Ok(Box::new(HfTokenizer(t)));
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| at("neither a tokenizer.json nor a UTF-8 tiktoken file of `base64 rank` lines".into()))?;
    Ok(Box::new(Tiktoken::parse(text).map_err(|e| at(format!("not a tiktoken file: {e}")))?))
}

/// Checks that `tok` belongs to a program with this vocabulary: a HF tokenizer counts every
/// id (added tokens included); a tiktoken file holds the text tokens, whose count is the
/// end-of-text id (the specials follow it).
pub fn check_matches(tok: &dyn Tokenizer, vocab: &Vocab) -> Result<(), String> {
    let (vocab_size, eot) = (vocab.vocab_size, vocab.eot);
    if tok.kind() == "huggingface" {
        if tok.token_to_id("<|startoftranscript|>").is_none() {
            return Err("the tokenizer has no <|startoftranscript|> token: not a Whisper tokenizer".into());
        }
        // Its added tokens name the specials: they must sit where the program says.
        let mut named: Vec<(String, u32)> = vec![
            ("<|endoftext|>".into(), vocab.eot),
            ("<|startoftranscript|>".into(), vocab.sot),
            ("<|startofprev|>".into(), vocab.sot_prev),
            ("<|notimestamps|>".into(), vocab.no_timestamps),
            ("<|transcribe|>".into(), vocab.transcribe),
            ("<|translate|>".into(), vocab.translate),
        ];
        named.extend(vocab.lang_codes.iter().zip(&vocab.lang_ids).map(|(c, &id)| (format!("<|{c}|>"), id)));
        for (name, id) in named {
            if let Some(t) = tok.token_to_id(&name) {
                if t != id {
                    return Err(format!(
                        "the tokenizer has {name} at id {t}, the program at {id}: tokenizer and program do not match"
                    ));
                }
            }
        }
    }
    match tok.kind() {
        "tiktoken" if tok.vocab_size() != eot as usize => Err(format!(
            "the tiktoken file has {} ranks but the program's end-of-text id is {eot} (it should equal the number \
             of ranks): tokenizer and program do not match (multilingual models use multilingual.tiktoken, \
             English-only ones gpt2.tiktoken)",
            tok.vocab_size()
        )),
        "huggingface" if tok.vocab_size() != vocab_size => Err(format!(
            "the tokenizer has {} tokens (added tokens included) but the program's vocabulary has {vocab_size}: \
             tokenizer and program do not match",
            tok.vocab_size()
        )),
        _ => Ok(()),
    }
}

/// Text of decoded tokens: through the tokenizer, or the ids themselves without one.
pub struct Text {
    pub tokenizer: Option<Box<dyn Tokenizer>>,
    pub eot: u32,
    pub vocab_size: usize,
}

impl Text {
    /// The text tokens of `ids` (timestamps and other specials dropped, as openai-whisper's
    /// `decode` does).
    pub fn text_tokens(&self, ids: &[u32]) -> Vec<u32> {
        ids.iter().copied().filter(|&t| t < self.eot).collect()
    }

    /// Without a tokenizer the text is the ids, each preceded by a space.
    pub fn text(&self, ids: &[u32]) -> Result<String, String> {
        let ids = self.text_tokens(ids);
        match &self.tokenizer {
            Some(t) => t.decode(&ids),
            None => Ok(ids.iter().map(|t| format!(" {t}")).collect()),
        }
    }

    /// The bytes the compression ratio is measured on: the text's UTF-8 (openai-whisper), or
    /// without a tokenizer each id in the fewest little-endian bytes the vocabulary needs
    /// (Hugging Face's token-byte measure).
    pub fn ratio_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, String> {
        if self.tokenizer.is_some() {
            return Ok(self.text(ids)?.into_bytes());
        }
        let width = ((self.vocab_size.max(2) as f64).log2() / 8.0) as usize + 1;
        Ok(self.text_tokens(ids).iter().flat_map(|t| t.to_le_bytes().into_iter().take(width.min(4))).collect())
    }
}

/// Standard base64 (padding optional); None on an invalid character or length.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    if s.is_empty() {
        return None;
    }
    // Padding alone is the empty token: openai's multilingual.tiktoken ends with `= 50256`,
    // which Python's lenient b64decode reads as b"".
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
        for i in 0..chunk.len() - 1 {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}
