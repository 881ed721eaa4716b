//! Token ids → text, through the shared tokenizers of `rbuild-runner-support` (Hugging Face
//! `tokenizer.json`, or a tiktoken rank file: openai-whisper's `multilingual.tiktoken` /
//! `gpt2.tiktoken`), told apart by content. The runner only decodes, and only text tokens
//! (ids below end-of-text), so Whisper's special tokens need no names here: the program's
//! getters say which ids they are.

use std::path::Path;

use rbuild_runner_support::text::tiktoken::Tiktoken;
use rbuild_runner_support::text::tokenizer::{detect, Format};
pub use rbuild_runner_support::text::Tokenizer;

use crate::decode::Vocab;

/// GPT-2's pre-tokenizer split, which openai-whisper's tiktoken encodings use.
const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// A Whisper tiktoken file: `base64 rank` lines with ranks 0..n and no special tokens (the
/// specials are the ids from n on, named by the program, not the file).
pub fn parse_tiktoken(text: &str) -> Result<Tiktoken, String> {
    let t = Tiktoken::with_pattern(text, Some(Vec::new()), GPT2_PATTERN).map_err(|e| e.0)?;
    // Ranks must be 0..n: ids at or above n are Whisper's special tokens.
    if let Some(gap) = t.first_missing_rank() {
        return Err(format!("ranks are not contiguous: rank {gap} is missing below the highest, {}", t.vocab_size() - 1));
    }
    Ok(t)
}

/// Loads `path` (format detected from the content). Errors name the file.
pub fn load(path: &Path) -> Result<Box<dyn Tokenizer>, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| at(e.to_string()))?;
    match detect(&bytes) {
        Format::Tiktoken => {
            let text = std::str::from_utf8(&bytes).map_err(|_| at("a tiktoken file must be UTF-8".into()))?;
            Ok(Box::new(parse_tiktoken(text).map_err(|e| at(format!("not a tiktoken file: {e}")))?))
        }
        Format::Tekken => Err(at("a Mistral tekken.json is not a Whisper tokenizer".into())),
        _ => rbuild_runner_support::text::tokenizer::from_bytes(path, &bytes).map_err(|e| e.0),
    }
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
        ];
        named.extend(vocab.transcribe.map(|id| ("<|transcribe|>".to_string(), id)));
        named.extend(vocab.translate.map(|id| ("<|translate|>".to_string(), id)));
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
            Some(t) => t.decode(&ids, true).map_err(|e| e.0),
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
