//! Shared test helpers: test data paths, scratch folders, a small Whisper-like vocabulary and
//! a scripted fake model.

#![allow(dead_code)]

use std::path::PathBuf;

use rbuild_asr_runner::decode::{Model, Vocab};
use rbuild_asr_runner::transcribe::WindowModel;

pub fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata").join(rel)
}

/// A fresh, empty scratch folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rbuild-asr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

// Text tokens 0..50, then the specials, then 151 timestamps (0.00 … 3.00 s).
pub const EOT: u32 = 50;
pub const SOT: u32 = 51;
pub const EN: u32 = 52;
pub const DE: u32 = 53;
pub const TRANSLATE: u32 = 54;
pub const TRANSCRIBE: u32 = 55;
pub const SOT_PREV: u32 = 56;
pub const NO_SPEECH: u32 = 57;
pub const NO_TIMESTAMPS: u32 = 58;
pub const TB: u32 = 59;
pub const VOCAB: usize = 59 + 151;

pub fn vocab() -> Vocab {
    Vocab {
        vocab_size: VOCAB,
        eot: EOT,
        sot: SOT,
        sot_prev: SOT_PREV,
        no_speech: NO_SPEECH,
        no_timestamps: NO_TIMESTAMPS,
        timestamp_begin: Some(TB),
        transcribe: Some(TRANSCRIBE),
        translate: Some(TRANSLATE),
        lang_ids: vec![EN, DE],
        lang_codes: vec!["en".into(), "de".into()],
        suppress: vec![7],
        begin_suppress: vec![0, EOT],
        multilingual: true,
        max_target_positions: 64,
    }
}

/// What the fake sees when asked for logits.
pub struct Ctx<'a> {
    /// Start frame of the current window.
    pub window: usize,
    /// Decoding attempt on this window (0 = first; fallback retries count up).
    pub attempt: usize,
    /// Everything in the decoder's cache, the new tokens included.
    pub seq: &'a [u32],
    /// Tokens after the full prompt (None while the prompt is not complete).
    pub sampled: Option<&'a [u32]>,
}

/// Logits from what the fake sees.
pub type LogitsFn = Box<dyn Fn(&Ctx) -> Vec<f32>>;

/// A decoder whose logits come from a closure, checking that positions are consistent with
/// what it was fed (a real KV cache would silently compute garbage otherwise).
pub struct Fake {
    pub f: LogitsFn,
    pub seq: Vec<u32>,
    pub window: Option<usize>,
    pub attempts: usize,
    /// Every window start the encoder was asked for.
    pub windows: Vec<usize>,
    /// Every call: (tokens, input_pos).
    pub calls: Vec<(Vec<u32>, usize)>,
    /// (window, full prompt) of each attempt.
    pub prompts: Vec<(usize, Vec<u32>)>,
}

impl Fake {
    pub fn new(f: impl Fn(&Ctx) -> Vec<f32> + 'static) -> Fake {
        Fake { f: Box::new(f), seq: Vec::new(), window: Some(0), attempts: 0, windows: Vec::new(), calls: Vec::new(), prompts: Vec::new() }
    }

    /// Logits of `tokens` per step after the prompt; `eot` once the script ends.
    pub fn scripted(script: Vec<u32>) -> Fake {
        Fake::new(move |c| match c.sampled {
            Some(s) => one_hot(*script.get(s.len()).unwrap_or(&EOT), 10.0),
            None => flat(),
        })
    }
}

pub fn flat() -> Vec<f32> {
    vec![0.0; VOCAB]
}

pub fn one_hot(t: u32, v: f32) -> Vec<f32> {
    let mut l = flat();
    l[t as usize] = v;
    l
}

/// Where the prompt ends: after sot, its language/task and notimestamps tokens.
fn prompt_end(seq: &[u32]) -> Option<usize> {
    let sot = seq.iter().position(|&t| t == SOT)?;
    let mut i = sot + 1;
    while i < seq.len() && [EN, DE, TRANSLATE, TRANSCRIBE, NO_TIMESTAMPS].contains(&seq[i]) {
        i += 1;
    }
    // The prompt is complete once the task token (always sent by multilingual prompts) is in.
    seq[sot + 1..i].iter().any(|&t| t == TRANSCRIBE || t == TRANSLATE).then_some(i)
}

impl Model for Fake {
    fn logits(&mut self, tokens: &[u32], input_pos: usize) -> Result<Vec<f32>, String> {
        let window = self.window.ok_or("decoder called before the encoder")?;
        if input_pos == 0 {
            self.seq.clear();
        } else if input_pos != self.seq.len() {
            return Err(format!("input_pos {input_pos} but {} tokens are cached", self.seq.len()));
        }
        self.calls.push((tokens.to_vec(), input_pos));
        self.seq.extend_from_slice(tokens);
        let end = prompt_end(&self.seq);
        if input_pos == 0 {
            self.attempts += 1;
        }
        if let Some(e) = end {
            if e == self.seq.len() {
                self.prompts.push((window, self.seq.clone()));
            }
        }
        let ctx = Ctx {
            window,
            attempt: self.attempts - 1,
            seq: &self.seq,
            sampled: end.map(|e| &self.seq[e..]),
        };
        let l = (self.f)(&ctx);
        assert_eq!(l.len(), VOCAB);
        Ok(l)
    }
}

impl WindowModel for Fake {
    fn set_window(&mut self, start_frame: usize) -> Result<(), String> {
        self.window = Some(start_frame);
        self.windows.push(start_frame);
        self.attempts = 0;
        Ok(())
    }
}
