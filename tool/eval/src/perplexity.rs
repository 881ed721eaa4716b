//! Perplexity as llama.cpp's `llama-perplexity` defines it, as plain arithmetic on token ids and
//! logits rows (running a program to get the rows is `lm.rs`'s business):
//!
//! - the whole text is tokenized once (with the BOS token in front when the tokenizer adds one);
//! - it is cut into `n_ctx`-token chunks (a partial last chunk is dropped), and at least two
//!   chunks' worth of tokens are required;
//! - each chunk is evaluated from an empty context, its first token replaced by BOS when the
//!   tokenizer adds one;
//! - only the second half is scored: for logits positions `i` in `[n_ctx/2, n_ctx - 1)`, the
//!   negative log-likelihood of token `i + 1` (log-softmax in f64);
//! - perplexity = exp(mean NLL over every scored token of every chunk).

use std::ops::Range;

/// How a token sequence is cut into scored chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    pub n_ctx: usize,
    pub chunks: usize,
}

/// The smallest context that leaves a position to score (n_ctx/2 < n_ctx - 1).
pub const MIN_CTX: usize = 3;

impl ChunkPlan {
    /// The plan for `n_tokens` tokens in chunks of `n_ctx`; llama-perplexity's errors when the
    /// text is too short or the chunk too small to score anything.
    pub fn new(n_tokens: usize, n_ctx: usize) -> Result<ChunkPlan, String> {
        if n_ctx < MIN_CTX {
            return Err(format!("a context of {n_ctx} tokens scores nothing (positions n/2 … n-2): use at least {MIN_CTX}"));
        }
        let needed = n_ctx.checked_mul(2).ok_or_else(|| format!("context {n_ctx} is too large"))?;
        if n_tokens < needed {
            return Err(format!(
                "the text tokenizes to {n_tokens} tokens; perplexity with a context of {n_ctx} needs at least {needed} (two chunks): use a longer text or a smaller --ctx"
            ));
        }
        Ok(ChunkPlan { n_ctx, chunks: n_tokens / n_ctx })
    }

    /// Logits positions scored in every chunk; position `i` predicts token `i + 1`.
    pub fn scored_positions(&self) -> Range<usize> {
        self.n_ctx / 2..self.n_ctx - 1
    }

    /// The first position scored: everything before it is context only.
    pub fn first_scored(&self) -> usize {
        self.n_ctx / 2
    }

    pub fn scored_per_chunk(&self) -> usize {
        self.scored_positions().len()
    }

    pub fn scored_tokens(&self) -> usize {
        self.chunks * self.scored_per_chunk()
    }

    /// The tokens chunk `index` is evaluated on: its slice of `tokens`, the first replaced by
    /// `bos` when the tokenizer adds one (so every chunk starts as a fresh text does).
    pub fn chunk_input(&self, tokens: &[u32], index: usize, bos: Option<u32>) -> Vec<u32> {
        let start = index * self.n_ctx;
        let mut chunk = tokens[start..start + self.n_ctx].to_vec();
        if let Some(b) = bos {
            chunk[0] = b;
        }
        chunk
    }

    /// The token position `i` of chunk `index` is scored on: the original text's token, not a
    /// BOS replacement (never at position 0 anyway, as scored targets start at n_ctx/2 + 1).
    pub fn target(&self, tokens: &[u32], index: usize, position: usize) -> u32 {
        tokens[index * self.n_ctx + position + 1]
    }
}

/// −log softmax(logits)[target], in f64 with the maximum subtracted first (so large logits
/// cannot overflow).
pub fn nll(logits: &[f32], target: usize) -> Result<f64, String> {
    let Some(&picked) = logits.get(target) else {
        return Err(format!("token id {target} is outside the {} logits of the vocabulary", logits.len()));
    };
    let max = logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    if !max.is_finite() {
        return Err(format!("logits hold no finite maximum ({max})"));
    }
    let sum: f64 = logits.iter().map(|&v| (f64::from(v) - max).exp()).sum();
    Ok(max + sum.ln() - f64::from(picked))
}

/// A running sum of negative log-likelihoods.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NllSum {
    pub sum: f64,
    pub count: usize,
}

impl NllSum {
    pub fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.count += 1;
    }

    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// exp(mean NLL); NaN before anything was added.
    pub fn perplexity(&self) -> f64 {
        self.mean().exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_is_minus_log_softmax() {
        // Uniform over 4: −ln(1/4).
        assert!((nll(&[0.0; 4], 2).unwrap() - 4f64.ln()).abs() < 1e-12);
        // [ln 1, ln 3]: p(1) = 3/4.
        let row = [0.0, 3f32.ln()];
        assert!((nll(&row, 1).unwrap() - (4.0f64 / 3.0).ln()).abs() < 1e-7);
        assert!((nll(&row, 0).unwrap() - 4f64.ln()).abs() < 1e-7);
        // Shifting every logit changes nothing; huge ones do not overflow.
        assert!((nll(&[1000.0, 1000.0 + 3f32.ln()], 1).unwrap() - (4.0f64 / 3.0).ln()).abs() < 1e-4);
        assert!(nll(&[0.0; 4], 4).unwrap_err().contains("token id 4 is outside the 4 logits"));
        assert!(nll(&[f32::NAN; 2], 0).is_err());
    }

    #[test]
    fn chunks_score_their_second_half() {
        let plan = ChunkPlan::new(21, 8).unwrap();
        assert_eq!(plan, ChunkPlan { n_ctx: 8, chunks: 2 });
        // Positions 4, 5, 6 predict tokens 5, 6, 7; position 7 predicts beyond the chunk.
        assert_eq!(plan.scored_positions(), 4..7);
        assert_eq!(plan.scored_tokens(), 6);
        let odd = ChunkPlan::new(10, 5).unwrap();
        assert_eq!(odd.scored_positions(), 2..4);
        assert_eq!(ChunkPlan::new(6, 3).unwrap().scored_positions(), 1..2);
    }

    #[test]
    fn chunk_inputs_start_with_bos_and_targets_stay_the_text() {
        let tokens: Vec<u32> = (100..117).collect();
        let plan = ChunkPlan::new(tokens.len(), 8).unwrap();
        assert_eq!(plan.chunks, 2);
        assert_eq!(plan.chunk_input(&tokens, 1, Some(1)), vec![1, 109, 110, 111, 112, 113, 114, 115]);
        assert_eq!(plan.chunk_input(&tokens, 1, None), (108..116).collect::<Vec<u32>>());
        assert_eq!(plan.target(&tokens, 1, 4), 113);
        assert_eq!(plan.target(&tokens, 0, 6), 107);
    }

    #[test]
    fn too_short_texts_and_tiny_contexts_are_refused() {
        assert!(ChunkPlan::new(15, 8).unwrap_err().contains("tokenizes to 15 tokens; perplexity with a context of 8 needs at least 16"));
        assert!(ChunkPlan::new(100, 2).unwrap_err().contains("use at least 3"));
    }

    /// A hand-checkable run: two chunks of 4 tokens over a vocabulary of 2; positions 2 are
    /// scored (predicting token 3 of each chunk).
    #[test]
    fn perplexity_of_a_hand_computed_sequence() {
        let tokens = [0u32, 1, 1, 0, 1, 0, 0, 1];
        let plan = ChunkPlan::new(tokens.len(), 4).unwrap();
        assert_eq!(plan.scored_positions(), 2..3);
        // Chunk 0 predicts token 0 with p = 1/4, chunk 1 token 1 with p = 1/2.
        let rows = [[0.0, 3f32.ln()], [0.0, 0.0]];
        let mut sum = NllSum::default();
        for (c, row) in rows.iter().enumerate() {
            for pos in plan.scored_positions() {
                sum.add(nll(row, plan.target(&tokens, c, pos) as usize).unwrap());
            }
        }
        assert_eq!(sum.count, 2);
        // exp((ln 4 + ln 2) / 2) = sqrt(8).
        assert!((sum.perplexity() - 8f64.sqrt()).abs() < 1e-6, "{}", sum.perplexity());
    }
}
