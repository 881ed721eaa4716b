//! Hugging Face `tokenizer.json`, through the `tokenizers` crate.

use super::tokenizer::{err, Tokenizer, TokenizerError};

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
