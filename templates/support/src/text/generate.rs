//! The generation loop, independent of how logits are computed: prefill (in chunks), then one
//! step per token, sampling, stopping at EOS or the token budget, and timing each phase.

use std::time::{Duration, Instant};

use super::sampling::Sampler;

/// Something that turns token ids into next-token logits.
pub trait Model {
    /// Logits for the token after the last of `tokens`. With a KV cache, `tokens` are the new
    /// tokens only and `start_pos` is how many tokens the model has already seen; without one,
    /// `tokens` is the whole sequence and `start_pos` is 0.
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, String>;
    /// Whether the model keeps state between calls (a KV cache).
    fn uses_kv_cache(&self) -> bool;
    /// The most tokens one call may take (prefill is split into chunks of this size).
    fn max_tokens_per_call(&self) -> usize;
}

#[derive(Clone, Debug)]
pub struct GenConfig {
    pub max_new_tokens: usize,
    /// The context the model holds: prompt + generated tokens may not exceed it.
    pub max_context: usize,
    pub eos_ids: Vec<u32>,
    pub ignore_eos: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Generation {
    pub generated: Vec<u32>,
    /// Prompt processing until the first token was sampled.
    pub prefill: Duration,
    /// From the first sampled token to the last.
    pub decode: Duration,
    /// Whether generation stopped on an EOS token.
    pub hit_eos: bool,
}

/// The error for a prompt that leaves no room for the requested tokens.
pub fn check_budget(prompt_len: usize, max_new_tokens: usize, max_context: usize) -> Result<(), String> {
    if prompt_len == 0 {
        return Err("the prompt encodes to no tokens; nothing to continue from".into());
    }
    if prompt_len.saturating_add(max_new_tokens) > max_context {
        return Err(format!(
            "the prompt is {prompt_len} tokens and {max_new_tokens} new tokens were asked for: {} in all, \
             above the program's maximum sequence length of {max_context} (shorten the prompt or lower \
             --max-new-tokens to at most {})",
            prompt_len + max_new_tokens,
            max_context.saturating_sub(prompt_len)
        ));
    }
    Ok(())
}

/// Runs prompt + generation; `on_token` sees each token as soon as it is sampled (and may stop
/// the run with an error, e.g. when stdout is closed).
pub fn generate(
    model: &mut dyn Model,
    prompt: &[u32],
    sampler: &mut Sampler,
    cfg: &GenConfig,
    on_token: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Result<Generation, String> {
    check_budget(prompt.len(), cfg.max_new_tokens, cfg.max_context)?;
    let mut out = Generation::default();
    if cfg.max_new_tokens == 0 {
        return Ok(out);
    }
    let chunk = model.max_tokens_per_call().max(1);
    let kv = model.uses_kv_cache();
    let t0 = Instant::now();
    let mut logits = if kv {
        let mut last = Vec::new();
        for (k, part) in prompt.chunks(chunk).enumerate() {
            last = model.forward(part, k * chunk)?;
        }
        last
    } else {
        if prompt.len() > chunk {
            return Err(format!(
                "the prompt is {} tokens but the program (without a KV cache) takes at most {chunk} per call",
                prompt.len()
            ));
        }
        model.forward(prompt, 0)?
    };
    let mut seq: Vec<u32> = prompt.to_vec();
    let mut first_at = None;
    loop {
        let tok = u32::try_from(sampler.sample(&logits)).map_err(|_| "sampled id does not fit in u32".to_string())?;
        let now = Instant::now();
        if first_at.is_none() {
            out.prefill = now - t0;
            first_at = Some(now);
        }
        out.generated.push(tok);
        seq.push(tok);
        on_token(tok)?;
        if !cfg.ignore_eos && cfg.eos_ids.contains(&tok) {
            out.hit_eos = true;
            break;
        }
        if out.generated.len() >= cfg.max_new_tokens {
            break;
        }
        logits = if kv {
            model.forward(&[tok], seq.len() - 1)?
        } else {
            if seq.len() > chunk {
                return Err(format!("the sequence reached {} tokens, above the {chunk} the program takes per call", seq.len()));
            }
            model.forward(&seq, 0)?
        };
    }
    if let Some(first) = first_at {
        out.decode = first.elapsed();
    }
    Ok(out)
}

/// The figures the runner reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub load_ms: f64,
    pub ttft_ms: f64,
    pub prefill_tokens: usize,
    pub prefill_tok_s: Option<f64>,
    /// Tokens produced by decode steps (all generated tokens but the first, which prefill
    /// produced).
    pub decode_tokens: usize,
    pub decode_tok_s: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
}

impl Stats {
    pub fn new(load: Duration, prompt_len: usize, g: &Generation, peak_rss_bytes: Option<u64>) -> Stats {
        let rate = |n: usize, d: Duration| (n > 0 && d > Duration::ZERO).then(|| n as f64 / d.as_secs_f64());
        let decode_tokens = g.generated.len().saturating_sub(1);
        Stats {
            load_ms: load.as_secs_f64() * 1e3,
            ttft_ms: g.prefill.as_secs_f64() * 1e3,
            prefill_tokens: prompt_len,
            prefill_tok_s: if g.generated.is_empty() { None } else { rate(prompt_len, g.prefill) },
            decode_tokens,
            decode_tok_s: rate(decode_tokens, g.decode),
            peak_rss_bytes,
        }
    }

    pub fn line(&self) -> String {
        let rate = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.1} tok/s"));
        let mem = crate::stats::mib(self.peak_rss_bytes);
        format!(
            "load {:.1} ms, time to first token {:.1} ms, prefill {} tokens at {}, decode {} tokens at {}, peak memory {}",
            self.load_ms,
            self.ttft_ms,
            self.prefill_tokens,
            rate(self.prefill_tok_s),
            self.decode_tokens,
            rate(self.decode_tok_s),
            mem
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "load_ms": self.load_ms,
            "ttft_ms": self.ttft_ms,
            "prefill_tokens": self.prefill_tokens,
            "prefill_tok_s": self.prefill_tok_s,
            "decode_tokens": self.decode_tokens,
            "decode_tok_s": self.decode_tok_s,
            "peak_rss_bytes": self.peak_rss_bytes,
        })
    }
}
