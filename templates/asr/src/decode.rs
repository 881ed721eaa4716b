//! Decoding one window as openai-whisper's `decoding.py` does: the prompt, no-speech
//! probability and language detection at the start-of-transcript position, the logit filters
//! (token suppression, begin suppression, timestamp rules), greedy or temperature sampling,
//! and the sum/average log probability used by the fallback rules.
//!
//! Independent of how logits are computed: the [`Model`] trait lets tests decode with a fake.

use std::io::Write;

/// The decoder half of a Whisper model.
pub trait Model {
    /// Logits after the last of `tokens`; `input_pos` tokens are already in the decoder's
    /// cache (0 starts afresh on the current window's encoder output).
    fn logits(&mut self, tokens: &[u32], input_pos: usize) -> Result<Vec<f32>, String>;
}

/// The model's special tokens and decoding lists (from the program's getters).
#[derive(Clone, Debug, PartialEq)]
pub struct Vocab {
    pub vocab_size: usize,
    pub eot: u32,
    pub sot: u32,
    pub sot_prev: u32,
    pub no_speech: u32,
    pub no_timestamps: u32,
    /// `<|0.00|>`; None when the vocabulary has no timestamp tokens.
    pub timestamp_begin: Option<u32>,
    /// `<|transcribe|>` / `<|translate|>`: multilingual models' task tokens (English-only
    /// programs may leave them out: their prompts name no task).
    pub transcribe: Option<u32>,
    pub translate: Option<u32>,
    pub lang_ids: Vec<u32>,
    pub lang_codes: Vec<String>,
    pub suppress: Vec<u32>,
    pub begin_suppress: Vec<u32>,
    pub multilingual: bool,
    pub max_target_positions: usize,
}

impl Vocab {
    pub fn lang_id(&self, code: &str) -> Option<u32> {
        self.lang_codes.iter().position(|c| c == code).map(|i| self.lang_ids[i])
    }

    pub fn lang_code(&self, id: u32) -> Option<&str> {
        self.lang_ids.iter().position(|&l| l == id).map(|i| self.lang_codes[i].as_str())
    }

    /// Checks `task` against the model: English-only models transcribe English only, and a
    /// multilingual program must name the task's token.
    pub fn check_task(&self, task: Task) -> Result<(), String> {
        match (self.multilingual, task) {
            (false, Task::Translate) => Err("--task translate: this is an English-only model; it only transcribes English (translation needs a multilingual model)".into()),
            (false, Task::Transcribe) => Ok(()),
            (true, Task::Transcribe) if self.transcribe.is_none() => Err("the model is multilingual but has no get_transcribe_id method".into()),
            (true, Task::Translate) if self.translate.is_none() => Err("the model is multilingual but has no get_translate_id method".into()),
            (true, _) => Ok(()),
        }
    }

    /// The language token for a `--language` code: None means detect it (multilingual) or
    /// no language token at all (English-only models, whose prompts have none).
    pub fn resolve_language(&self, code: &str) -> Result<Option<u32>, String> {
        if !self.multilingual {
            return match code {
                "en" | "auto" => Ok(None),
                other => Err(format!("--language {other}: this is an English-only model (use en or auto)")),
            };
        }
        if code == "auto" {
            return Ok(None);
        }
        self.lang_id(code).map(Some).ok_or_else(|| {
            format!("--language {code}: unknown language; the model knows {}, or auto", self.lang_codes.join(", "))
        })
    }

    pub fn is_timestamp(&self, t: u32) -> bool {
        self.timestamp_begin.is_some_and(|b| t >= b)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Transcribe,
    Translate,
}

#[derive(Clone, Debug)]
pub struct DecodeOptions {
    pub task: Task,
    /// None: detect it from this window (multilingual models), or none at all (English-only).
    pub language: Option<u32>,
    pub timestamps: bool,
    pub temperature: f32,
    /// Besides the room left in the decoder's context.
    pub max_new_tokens: Option<usize>,
    /// The first timestamp may be at most this many timestamp steps (openai: 1.0 s = 50).
    pub max_initial_timestamp: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DecodeResult {
    /// Sampled tokens, the end-of-text token excluded.
    pub tokens: Vec<u32>,
    pub sum_logprob: f64,
    /// sum_logprob / (tokens + 1), as openai-whisper counts it.
    pub avg_logprob: f64,
    pub no_speech_prob: f64,
    /// The language token used (given or detected).
    pub language: Option<u32>,
    pub temperature: f32,
    pub hit_eot: bool,
    pub prompt: Vec<u32>,
}

/// A small seeded PRNG (splitmix64) for temperature sampling: reproducible given `--seed`.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// log softmax in f64 (-inf logits get -inf).
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().filter(|v| !v.is_nan()).fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    if !max.is_finite() {
        return vec![f64::NEG_INFINITY; logits.len()];
    }
    let lse = max + logits.iter().map(|&v| (v as f64 - max).exp()).filter(|x| !x.is_nan()).sum::<f64>().ln();
    logits.iter().map(|&v| if v.is_nan() { f64::NEG_INFINITY } else { v as f64 - lse }).collect()
}

fn logsumexp(x: &[f64]) -> f64 {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + x.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// Index of the largest value (lowest index on ties; NaN never wins).
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] || x[best].is_nan() {
            best = i;
        }
    }
    best
}

/// `len(text) / len(zlib(text))`, openai-whisper's repetition measure (level 6 = zlib's
/// default, as Python's `zlib.compress`).
pub fn compression_ratio(bytes: &[u8]) -> f64 {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
    // Writing to a Vec cannot fail.
    let compressed = z.write_all(bytes).and_then(|_| z.finish()).map(|v| v.len()).unwrap_or(1).max(1);
    bytes.len() as f64 / compressed as f64
}

/// The prompt up to and including `<|startoftranscript|>` (with up to
/// max_target_positions/2 − 1 previous tokens after `<|startofprev|>`).
pub fn prompt_head(vocab: &Vocab, prev: &[u32]) -> Vec<u32> {
    let mut p = Vec::new();
    if !prev.is_empty() {
        let keep = (vocab.max_target_positions / 2).saturating_sub(1);
        p.push(vocab.sot_prev);
        p.extend_from_slice(&prev[prev.len().saturating_sub(keep)..]);
    }
    p.push(vocab.sot);
    p
}

/// What follows `<|startoftranscript|>`: language and task (multilingual models only, as
/// openai-whisper's English-only tokenizer has neither) and `<|notimestamps|>`.
pub fn prompt_tail(vocab: &Vocab, language: Option<u32>, task: Task, timestamps: bool) -> Vec<u32> {
    let mut p = Vec::new();
    if vocab.multilingual {
        p.extend(language);
        p.extend(match task {
            Task::Transcribe => vocab.transcribe,
            Task::Translate => vocab.translate,
        });
    }
    if !timestamps {
        p.push(vocab.no_timestamps);
    }
    p
}

/// The language whose token has the largest logit (languages only).
pub fn detect_language(vocab: &Vocab, logits: &[f32]) -> Option<u32> {
    vocab.lang_ids.iter().copied().filter(|&l| (l as usize) < logits.len()).max_by(|&a, &b| {
        logits[a as usize].total_cmp(&logits[b as usize]).then(b.cmp(&a))
    })
}

/// openai-whisper's logit filters, in its order: SuppressBlank (first sampled step),
/// SuppressTokens, ApplyTimestampRules. `sampled` are the tokens sampled so far this window.
pub fn apply_filters(logits: &mut [f32], sampled: &[u32], vocab: &Vocab, opts: &DecodeOptions) {
    let mut ban = |t: u32| {
        if let Some(l) = logits.get_mut(t as usize) {
            *l = f32::NEG_INFINITY;
        }
    };
    if sampled.is_empty() {
        vocab.begin_suppress.iter().for_each(|&t| ban(t));
    }
    vocab.suppress.iter().for_each(|&t| ban(t));
    for t in [vocab.transcribe, vocab.translate].into_iter().flatten().chain([vocab.sot, vocab.sot_prev, vocab.no_speech]) {
        ban(t);
    }
    match (opts.timestamps, vocab.timestamp_begin) {
        (true, Some(tb)) => timestamp_rules(logits, sampled, vocab, tb as usize, opts.max_initial_timestamp),
        // Without timestamps a timestamp token is never wanted (whisper.cpp bans them too):
        // a trained model rarely picks one after <|notimestamps|>, a random one often does.
        (false, Some(tb)) => {
            if let Some(ts) = logits.get_mut(tb as usize..) {
                ts.fill(f32::NEG_INFINITY);
            }
        }
        (_, None) => {}
    }
}

fn timestamp_rules(logits: &mut [f32], sampled: &[u32], vocab: &Vocab, tb: usize, max_initial: Option<u32>) {
    let neg = |l: &mut [f32]| l.iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
    let n = logits.len();
    let tb = tb.min(n);
    let eot = (vocab.eot as usize).min(n);
    if let Some(l) = logits.get_mut(vocab.no_timestamps as usize) {
        *l = f32::NEG_INFINITY;
    }
    let is_ts = |t: u32| t as usize >= tb;
    let last_ts = sampled.last().is_some_and(|&t| is_ts(t));
    let penultimate_ts = sampled.len() < 2 || is_ts(sampled[sampled.len() - 2]);
    if last_ts {
        if penultimate_ts {
            // A pair just closed: text (or the end) must follow.
            neg(&mut logits[tb..]);
        } else {
            // A segment's end timestamp is open: it cannot be followed by text.
            neg(&mut logits[..eot]);
        }
    }
    if let Some(&last) = sampled.iter().rev().find(|&&t| is_ts(t)) {
        // Timestamps never decrease; after a closed pair they strictly increase.
        let floor = if last_ts && !penultimate_ts { last as usize } else { last as usize + 1 };
        neg(&mut logits[tb..floor.min(n)]);
    }
    if sampled.is_empty() {
        neg(&mut logits[..tb]);
        if let Some(m) = max_initial {
            let last_allowed = tb + m as usize;
            if last_allowed + 1 < n {
                neg(&mut logits[last_allowed + 1..]);
            }
        }
    }
    // Force a timestamp when all of them together are likelier than any single text token.
    let lp = log_softmax(logits);
    let ts_lp = logsumexp(&lp[tb..]);
    let text_max = lp[..tb].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if ts_lp > text_max {
        neg(&mut logits[..tb]);
    }
}

/// Greedy (temperature 0) or a draw from softmax(logits / T).
pub fn sample(logits: &[f32], temperature: f32, rng: &mut Rng) -> usize {
    if temperature <= 0.0 {
        return argmax(logits);
    }
    let scaled: Vec<f32> = logits.iter().map(|&v| v / temperature).collect();
    let lp = log_softmax(&scaled);
    let u = rng.next_f64();
    let mut cum = 0.0;
    let mut last_ok = argmax(logits);
    for (i, &l) in lp.iter().enumerate() {
        if l == f64::NEG_INFINITY {
            continue;
        }
        cum += l.exp();
        last_ok = i;
        if u < cum {
            return i;
        }
    }
    last_ok
}

/// Decodes the current window. `prev` is the text to condition on (tokens of earlier
/// windows); the decoder restarts at input_pos 0.
pub fn decode_window(
    model: &mut dyn Model,
    vocab: &Vocab,
    opts: &DecodeOptions,
    prev: &[u32],
    rng: &mut Rng,
) -> Result<DecodeResult, String> {
    let head = prompt_head(vocab, prev);
    // The start-of-transcript position first: its logits give the no-speech probability and
    // (when asked) the language, which the rest of the prompt needs.
    let sot_logits = model.logits(&head, 0)?;
    check_len(&sot_logits, vocab)?;
    let no_speech_prob = log_softmax(&sot_logits)[vocab.no_speech as usize].exp();
    let language = match opts.language {
        Some(l) => Some(l),
        None if vocab.multilingual => Some(
            detect_language(vocab, &sot_logits).ok_or("the model is multilingual but lists no language tokens")?,
        ),
        None => None,
    };
    let tail = prompt_tail(vocab, language, opts.task, opts.timestamps);
    let mut prompt = head.clone();
    prompt.extend_from_slice(&tail);
    let room = vocab.max_target_positions.saturating_sub(prompt.len());
    if room == 0 {
        return Err(format!(
            "the prompt is {} tokens, the decoder's whole context ({})",
            prompt.len(),
            vocab.max_target_positions
        ));
    }
    let max_new = opts.max_new_tokens.map_or(room, |m| m.min(room));
    let mut logits = if tail.is_empty() { sot_logits } else { model.logits(&tail, head.len())? };
    let mut out = DecodeResult {
        tokens: Vec::new(),
        sum_logprob: 0.0,
        avg_logprob: 0.0,
        no_speech_prob,
        language,
        temperature: opts.temperature,
        hit_eot: false,
        prompt: prompt.clone(),
    };
    for step in 0..max_new {
        check_len(&logits, vocab)?;
        apply_filters(&mut logits, &out.tokens, vocab, opts);
        let tok = sample(&logits, opts.temperature, rng);
        let lp = log_softmax(&logits)[tok];
        // A token the filters banned can only come out when everything was banned.
        if lp.is_finite() {
            out.sum_logprob += lp;
        }
        let tok = tok as u32;
        if tok == vocab.eot {
            out.hit_eot = true;
            break;
        }
        out.tokens.push(tok);
        if step + 1 == max_new {
            break;
        }
        logits = model.logits(&[tok], prompt.len() + out.tokens.len() - 1)?;
    }
    out.avg_logprob = out.sum_logprob / (out.tokens.len() + 1) as f64;
    Ok(out)
}

fn check_len(logits: &[f32], vocab: &Vocab) -> Result<(), String> {
    if logits.len() != vocab.vocab_size {
        return Err(format!("the decoder returned {} logits, the vocabulary has {}", logits.len(), vocab.vocab_size));
    }
    Ok(())
}
