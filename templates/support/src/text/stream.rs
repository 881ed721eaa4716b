//! Incremental detokenization that only ever yields complete UTF-8 text.
//!
//! A token may carry part of a code point (byte-level BPE splits emoji and CJK across tokens),
//! and some decoders change a token's text depending on what precedes it (SentencePiece's
//! leading-space rule). So each step decodes a short window of ids twice — the part already
//! printed, and the same part plus the new ids — and yields the difference, but only once the
//! window no longer ends in an incomplete sequence (which lossy decoding shows as U+FFFD).
//! This is the scheme of Hugging Face's text-generation-inference.

use super::tokenizer::{Tokenizer, TokenizerError};

pub struct TextStream {
    ids: Vec<u32>,
    /// Start of the decoding window (context that was already printed).
    prefix: usize,
    /// End of what has been printed.
    read: usize,
    skip_special: bool,
}

const REPLACEMENT: char = '\u{FFFD}';

impl TextStream {
    /// A stream continuing after `context` (e.g. the prompt), which is never yielded but lets
    /// context-dependent decoders treat the first new token correctly.
    pub fn new(context: &[u32], skip_special: bool) -> TextStream {
        // A few tokens of context suffice for every decoder rule we know of.
        let start = context.len().saturating_sub(5);
        let ids = context[start..].to_vec();
        let read = ids.len();
        TextStream { ids, prefix: 0, read, skip_special }
    }

    /// Adds one token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, tok: &dyn Tokenizer, id: u32) -> Result<String, TokenizerError> {
        self.ids.push(id);
        let (printed, all) = self.window(tok)?;
        if all.len() > printed.len() && !all.ends_with(REPLACEMENT) {
            if let Some(new) = all.get(printed.len()..) {
                if all.starts_with(&printed) {
                    let new = new.to_string();
                    self.prefix = self.read;
                    self.read = self.ids.len();
                    return Ok(new);
                }
            }
        }
        Ok(String::new())
    }

    /// Whatever is still held back at the end of generation (an incomplete sequence comes out
    /// as U+FFFD, as a full decode would show it).
    pub fn finish(&mut self, tok: &dyn Tokenizer) -> Result<String, TokenizerError> {
        if self.read == self.ids.len() {
            return Ok(String::new());
        }
        let (printed, all) = self.window(tok)?;
        self.prefix = self.read;
        self.read = self.ids.len();
        Ok(match all.strip_prefix(printed.as_str()) {
            Some(rest) => rest.to_string(),
            // The decoder rewrote already-printed text; print the new ids on their own.
            None => tok.decode(&self.ids[self.prefix..], self.skip_special)?,
        })
    }

    fn window(&self, tok: &dyn Tokenizer) -> Result<(String, String), TokenizerError> {
        let printed = tok.decode(&self.ids[self.prefix..self.read], self.skip_special)?;
        let all = tok.decode(&self.ids[self.prefix..], self.skip_special)?;
        Ok((printed, all))
    }
}
