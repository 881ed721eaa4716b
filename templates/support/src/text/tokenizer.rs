//! The [`Tokenizer`] interface and [`load`], which tells the formats apart by content rather
//! than by name: Hugging Face `tokenizer.json`, Mistral's `tekken.json` (both JSON objects,
//! Tekken's with top-level `config` and `vocab` keys) and tiktoken rank files.

use std::fmt;
use std::path::Path;

use super::hf::HfTokenizer;
use super::tekken::Tekken;
use super::tiktoken::{specials_from_config, Tiktoken};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenizerError(pub String);

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokenizerError {}

pub(crate) fn err(msg: impl Into<String>) -> TokenizerError {
    TokenizerError(msg.into())
}

pub trait Tokenizer {
    /// Token ids of `text`; `add_special` adds what the tokenizer adds around a plain prompt
    /// (the BOS token, for Llama and Mistral models). Special-token strings in `text` are
    /// matched by the Hugging Face and tiktoken formats, never by Tekken (as mistral-common).
    fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError>;
    /// Text of `ids` (lossy: an incomplete UTF-8 sequence decodes to U+FFFD). Ids outside
    /// the vocabulary decode to nothing, as in Hugging Face's tokenizers.
    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError>;
    /// Number of ids, special tokens included.
    fn vocab_size(&self) -> usize;
    fn token_to_id(&self, token: &str) -> Option<u32>;
    /// "huggingface", "tiktoken" or "tekken".
    fn kind(&self) -> &'static str;
}

/// Loads `path`, detecting the format from its content.
pub fn load(path: &Path) -> Result<Box<dyn Tokenizer>, TokenizerError> {
    let bytes = std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    from_bytes(path, &bytes)
}

/// [`load`] on the contents `bytes` of the file at `path` (which errors name, and beside which a
/// tiktoken file's `tokenizer_config.json` is looked for).
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Box<dyn Tokenizer>, TokenizerError> {
    let at = |e: TokenizerError| err(format!("{}: {}", path.display(), e.0));
    match detect(bytes) {
        Format::HuggingFace => Ok(Box::new(HfTokenizer::from_bytes(bytes).map_err(at)?)),
        Format::Tekken => Ok(Box::new(Tekken::from_bytes(bytes).map_err(at)?)),
        Format::Tiktoken => {
            let text = std::str::from_utf8(bytes).map_err(|_| at(err("tiktoken file is not UTF-8")))?;
            let specials = match path.parent().map(|d| d.join("tokenizer_config.json")) {
                Some(cfg) if cfg.is_file() => specials_from_config(&cfg)?,
                _ => None,
            };
            Ok(Box::new(Tiktoken::parse(text, specials).map_err(at)?))
        }
        Format::InvalidJson(why) => Err(at(err(format!("not valid JSON: {why}")))),
        Format::Unknown(why) => Err(at(err(format!(
            "unrecognised tokenizer format ({why}); expected a Hugging Face tokenizer.json, a Mistral \
             tekken.json or a tiktoken file of `base64 rank` lines (SentencePiece .model files are not supported)"
        )))),
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Format {
    HuggingFace,
    Tekken,
    Tiktoken,
    /// Starts like a JSON object but does not parse (e.g. a truncated download).
    InvalidJson(String),
    Unknown(&'static str),
}

/// The top-level keys that tell a `tekken.json` from a `tokenizer.json`; the values are
/// skipped without being built.
#[derive(serde::Deserialize)]
struct JsonProbe {
    config: Option<serde::de::IgnoredAny>,
    vocab: Option<serde::de::IgnoredAny>,
}

pub fn detect(bytes: &[u8]) -> Format {
    let trimmed = bytes.trim_ascii_start();
    if trimmed.is_empty() {
        return Format::Unknown("the file is empty");
    }
    if trimmed[0] == b'{' {
        return match serde_json::from_slice::<JsonProbe>(trimmed) {
            // Hugging Face keeps its vocabulary under `model`: either key at the top is Tekken
            // (and a missing other one an error in Tekken's terms).
            Ok(JsonProbe { config: None, vocab: None }) => Format::HuggingFace,
            Ok(_) => Format::Tekken,
            Err(e) => Format::InvalidJson(e.to_string()),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        assert_eq!(detect(b"  {\"model\": {}}"), Format::HuggingFace);
        assert_eq!(detect(b"{\"config\": {}, \"vocab\": []}"), Format::Tekken);
        assert_eq!(detect(b"{\"config\": {}}"), Format::Tekken);
        assert!(matches!(detect(b"{\"config\": {}, \"vo"), Format::InvalidJson(_)));
        assert_eq!(detect(b"IQ== 0\nIg== 1\n"), Format::Tiktoken);
        assert!(matches!(detect(b""), Format::Unknown(_)));
        assert!(matches!(detect(b"\x0a\x05hello"), Format::Unknown(_)));
        assert!(matches!(detect(b"IQ== zero\n"), Format::Unknown(_)));
    }
}
