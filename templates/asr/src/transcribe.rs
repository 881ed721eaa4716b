//! Long-form transcription as openai-whisper's `transcribe()`: sequential windows over the
//! file's features, temperature fallback per window, silent windows skipped, segments split
//! at timestamp pairs, the seek advanced to the last timestamp, and the previous text as the
//! next window's prompt.

use crate::decode::{self, DecodeOptions, DecodeResult, Model, Rng, Task, Vocab};
use crate::tokenizer::Text;

/// A model that can move to another window of the file's features.
pub trait WindowModel: Model {
    /// Runs the encoder on feature frames [start_frame, start_frame + frames_per_window).
    fn set_window(&mut self, start_frame: usize) -> Result<(), String>;
}

#[derive(Clone, Debug)]
pub struct Options {
    pub task: Task,
    /// None: detected on the first window (multilingual models).
    pub language: Option<u32>,
    pub timestamps: bool,
    /// Tried in order until one passes the fallback tests (openai: 0, 0.2, …, 1.0).
    pub temperatures: Vec<f32>,
    pub condition_on_previous_text: bool,
    pub max_new_tokens: Option<usize>,
    pub seed: u64,
    pub compression_ratio_threshold: f64,
    pub logprob_threshold: f64,
    pub no_speech_threshold: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            task: Task::Transcribe,
            language: None,
            timestamps: false,
            temperatures: fallback_temperatures(0.0, 0.2),
            condition_on_previous_text: true,
            max_new_tokens: None,
            seed: 0,
            compression_ratio_threshold: 2.4,
            logprob_threshold: -1.0,
            no_speech_threshold: 0.6,
        }
    }
}

/// `start`, `start + step`, … up to 1.0 (just `start` when step ≤ 0).
pub fn fallback_temperatures(start: f32, step: f32) -> Vec<f32> {
    let mut t = vec![start];
    if step > 0.0 {
        let mut k = 1;
        // Integer steps, so 0.2·5 is exactly the last one and rounding adds no extra step.
        while start + step * k as f32 <= 1.0 + 1e-6 {
            t.push(((start + step * k as f32) * 1e6).round() / 1e6);
            k += 1;
        }
    }
    t
}

/// Frame geometry of the file's features.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// Frames holding audio (padding excluded).
    pub content_frames: usize,
    pub frames_per_window: usize,
    /// Seconds per frame (hop / sample rate).
    pub frame_seconds: f64,
}

impl Geometry {
    /// The encoder halves the frames, so one timestamp step is two frames.
    pub const FRAMES_PER_TIMESTAMP: usize = 2;

    pub fn duration(&self) -> f64 {
        self.content_frames as f64 * self.frame_seconds
    }

    pub fn time_precision(&self) -> f64 {
        Self::FRAMES_PER_TIMESTAMP as f64 * self.frame_seconds
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub id: usize,
    /// Feature frame of the window it came from.
    pub seek: usize,
    pub start: f64,
    pub end: f64,
    pub text: String,
    /// Its tokens, timestamps included.
    pub tokens: Vec<u32>,
    pub temperature: f32,
    pub avg_logprob: f64,
    pub compression_ratio: f64,
    pub no_speech_prob: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Transcript {
    pub segments: Vec<Segment>,
    pub language: Option<u32>,
    pub windows: usize,
    pub skipped_windows: usize,
    /// Decoding attempts past the first (temperature fallback).
    pub fallbacks: usize,
    pub sampled_tokens: usize,
}

/// Progress report before each window: (1-based window, estimated total, window start s).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, f64);

/// Transcribes the file; `on_segment` sees each segment as soon as its window is decoded.
pub fn transcribe(
    model: &mut dyn WindowModel,
    vocab: &Vocab,
    geo: Geometry,
    opts: &Options,
    text: &Text,
    on_segment: &mut dyn FnMut(&Segment) -> Result<(), String>,
    progress: Progress<'_>,
) -> Result<Transcript, String> {
    if opts.timestamps && vocab.timestamp_begin.is_none() {
        return Err("--timestamps: the model's vocabulary has no timestamp tokens".into());
    }
    if opts.temperatures.is_empty() {
        return Err("no decoding temperature given".into());
    }
    let fpw = geo.frames_per_window;
    let mut out = Transcript { language: opts.language, ..Transcript::default() };
    let mut rng = Rng::new(opts.seed);
    let mut all_tokens: Vec<u32> = Vec::new();
    let mut prompt_reset_since = 0;
    let mut last_end = 0.0f64;
    let mut seek = 0;
    while seek < geo.content_frames {
        out.windows += 1;
        let estimate = out.windows - 1 + (geo.content_frames - seek).div_ceil(fpw);
        let time_offset = seek as f64 * geo.frame_seconds;
        progress(out.windows, estimate, time_offset);
        let segment_size = fpw.min(geo.content_frames - seek);
        model.set_window(seek)?;

        let dopts = DecodeOptions {
            task: opts.task,
            language: out.language,
            timestamps: opts.timestamps,
            temperature: opts.temperatures[0],
            max_new_tokens: opts.max_new_tokens,
            max_initial_timestamp: Some(50),
        };
        let prev = &all_tokens[prompt_reset_since..];
        let (res, ratio) = decode_with_fallback(model, vocab, &dopts, opts, prev, text, &mut rng, &mut out.fallbacks)?;
        out.sampled_tokens += res.tokens.len() + usize::from(res.hit_eot);
        if out.language.is_none() {
            out.language = res.language;
        }
        if res.no_speech_prob > opts.no_speech_threshold && res.avg_logprob < opts.logprob_threshold {
            // Silence: nothing to keep from this window.
            out.skipped_windows += 1;
            seek += segment_size;
            continue;
        }

        let (pieces, advance) = split(&res.tokens, vocab, geo, seek, segment_size);
        let window_end = (seek + segment_size) as f64 * geo.frame_seconds;
        for (start, end, tokens) in pieces {
            // Inside the audio and after the previous segment: cue times only increase.
            let start = start.clamp(last_end, geo.duration());
            let end = end.min(window_end).clamp(start, geo.duration());
            let body = text.text(&tokens)?;
            // Instantaneous or textless segments are dropped (openai-whisper clears them).
            if end <= start || body.trim().is_empty() {
                continue;
            }
            let seg = Segment {
                id: out.segments.len(),
                seek,
                start,
                end,
                text: body,
                tokens,
                temperature: res.temperature,
                avg_logprob: res.avg_logprob,
                compression_ratio: ratio,
                no_speech_prob: res.no_speech_prob,
            };
            on_segment(&seg)?;
            last_end = end;
            all_tokens.extend_from_slice(&seg.tokens);
            out.segments.push(seg);
        }
        if !opts.condition_on_previous_text || res.temperature > 0.5 {
            prompt_reset_since = all_tokens.len();
        }
        seek += advance;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn decode_with_fallback(
    model: &mut dyn WindowModel,
    vocab: &Vocab,
    base: &DecodeOptions,
    opts: &Options,
    prev: &[u32],
    text: &Text,
    rng: &mut Rng,
    fallbacks: &mut usize,
) -> Result<(DecodeResult, f64), String> {
    let mut best = None;
    for (i, &t) in opts.temperatures.iter().enumerate() {
        if i > 0 {
            *fallbacks += 1;
        }
        let d = DecodeOptions { temperature: t, ..base.clone() };
        let res = decode::decode_window(model, vocab, &d, prev, rng)?;
        let ratio = decode::compression_ratio(&text.ratio_bytes(&res.tokens)?);
        let mut needs_fallback =
            ratio > opts.compression_ratio_threshold || res.avg_logprob < opts.logprob_threshold;
        if res.no_speech_prob > opts.no_speech_threshold && res.avg_logprob < opts.logprob_threshold {
            // Looks silent: the window will be skipped, retrying cannot help.
            needs_fallback = false;
        }
        best = Some((res, ratio));
        if !needs_fallback {
            break;
        }
    }
    best.ok_or_else(|| "no decoding temperature given".into())
}

/// Splits a window's tokens into (start s, end s, tokens) pieces and says how many frames to
/// advance, as openai-whisper: at consecutive timestamp pairs when there are any, seeking to
/// the last timestamp (or past the window when the output ends with a single timestamp);
/// otherwise one piece for the whole window.
pub fn split(tokens: &[u32], vocab: &Vocab, geo: Geometry, seek: usize, segment_size: usize) -> (Vec<(f64, f64, Vec<u32>)>, usize) {
    let offset = seek as f64 * geo.frame_seconds;
    let window_end = offset + segment_size as f64 * geo.frame_seconds;
    let Some(tb) = vocab.timestamp_begin else {
        return (vec![(offset, window_end, tokens.to_vec())], segment_size);
    };
    let is_ts: Vec<bool> = tokens.iter().map(|&t| t >= tb).collect();
    let at = |t: u32| offset + (t - tb) as f64 * geo.time_precision();
    let single_ending = is_ts.len() >= 2 && !is_ts[is_ts.len() - 2] && is_ts[is_ts.len() - 1];
    let mut slices: Vec<usize> = (1..tokens.len()).filter(|&i| is_ts[i - 1] && is_ts[i]).collect();
    if slices.is_empty() {
        // No pairs: one piece, ending at the last timestamp if there is a non-zero one.
        let end = match tokens.iter().rev().find(|&&t| t >= tb) {
            Some(&t) if t != tb => at(t),
            _ => window_end,
        };
        return (vec![(offset, end, tokens.to_vec())], segment_size);
    }
    if single_ending {
        slices.push(tokens.len());
    }
    let mut pieces = Vec::new();
    let mut last = 0;
    for &s in &slices {
        let part = &tokens[last..s];
        pieces.push((at(part[0].max(tb)), at(part[part.len() - 1].max(tb)), part.to_vec()));
        last = s;
    }
    let advance = if single_ending {
        segment_size
    } else {
        (tokens[last - 1] - tb) as usize * Geometry::FRAMES_PER_TIMESTAMP
    };
    // A last timestamp of 0.00 would seek nowhere and decode the same window forever.
    (pieces, if advance == 0 { segment_size } else { advance.min(segment_size) })
}
