//! The figures the runner reports: load time, audio length, real-time factor, encoder time
//! per window, decoder tokens/s and peak memory.

use std::time::Duration;

/// Time spent in each method, accumulated over a transcription.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub preprocess: Duration,
    pub encoder: Duration,
    pub encoder_calls: usize,
    /// Every decoder call: tokens fed and time.
    pub decoder: Duration,
    pub decoder_tokens: usize,
    /// Calls that fed one token (the sampling loop), apart: multi-token calls are prompts, and
    /// the first of a window also projects the cross-attention keys/values from all encoder
    /// frames. whisper.cpp reports decode speed the same way (single-token runs).
    pub step: Duration,
    pub steps: usize,
}

impl Timing {
    pub fn decoder_call(&mut self, tokens: usize, took: Duration) {
        self.decoder += took;
        self.decoder_tokens += tokens;
        if tokens == 1 {
            self.step += took;
            self.steps += 1;
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub load_ms: f64,
    pub audio_s: f64,
    /// Wall time of feature extraction + transcription.
    pub transcribe_ms: f64,
    pub windows: usize,
    pub encoder_ms_per_window: Option<f64>,
    pub decoder_tokens: usize,
    /// Single-token decoder steps per second ([`Timing::step`]).
    pub decode_tok_s: Option<f64>,
    /// Multi-token (prompt) calls: total milliseconds.
    pub prompt_ms: f64,
    pub peak_rss_bytes: Option<u64>,
}

impl Stats {
    pub fn new(load: Duration, audio_s: f64, transcribe: Duration, t: &Timing) -> Stats {
        Stats {
            load_ms: load.as_secs_f64() * 1e3,
            audio_s,
            transcribe_ms: transcribe.as_secs_f64() * 1e3,
            windows: t.encoder_calls,
            encoder_ms_per_window: (t.encoder_calls > 0).then(|| t.encoder.as_secs_f64() * 1e3 / t.encoder_calls as f64),
            decoder_tokens: t.decoder_tokens,
            decode_tok_s: (t.steps > 0 && t.step > Duration::ZERO).then(|| t.steps as f64 / t.step.as_secs_f64()),
            prompt_ms: t.decoder.saturating_sub(t.step).as_secs_f64() * 1e3,
            peak_rss_bytes: rbuild_runner_support::stats::peak_rss_bytes(),
        }
    }

    /// Processing time over audio time (below 1: faster than real time).
    pub fn real_time_factor(&self) -> Option<f64> {
        (self.audio_s > 0.0).then(|| self.transcribe_ms / 1e3 / self.audio_s)
    }

    pub fn line(&self) -> String {
        let opt = |v: Option<f64>, unit: &str| v.map_or("n/a".to_string(), |v| format!("{v:.1}{unit}"));
        format!(
            "load {:.1} ms, audio {:.2} s, transcribed in {:.1} ms (real-time factor {}), {} window(s), encoder {} per window, \
             decoder {} tokens (prompts {:.1} ms, steps at {}), peak memory {}",
            self.load_ms,
            self.audio_s,
            self.transcribe_ms,
            self.real_time_factor().map_or("n/a".into(), |r| format!("{r:.3}")),
            self.windows,
            opt(self.encoder_ms_per_window, " ms"),
            self.decoder_tokens,
            self.prompt_ms,
            opt(self.decode_tok_s, " tok/s"),
            rbuild_runner_support::stats::mib(self.peak_rss_bytes),
        )
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "load_ms": self.load_ms,
            "audio_s": self.audio_s,
            "transcribe_ms": self.transcribe_ms,
            "real_time_factor": self.real_time_factor(),
            "windows": self.windows,
            "encoder_ms_per_window": self.encoder_ms_per_window,
            "decoder_tokens": self.decoder_tokens,
            "decode_tok_s": self.decode_tok_s,
            "prompt_ms": self.prompt_ms,
            "peak_rss_bytes": self.peak_rss_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_speed_counts_single_token_steps_only() {
        let mut t = Timing::default();
        t.decoder_call(4, Duration::from_millis(90));
        for _ in 0..10 {
            t.decoder_call(1, Duration::from_millis(5));
        }
        let s = Stats::new(Duration::ZERO, 1.0, Duration::from_secs(1), &t);
        assert_eq!(s.decoder_tokens, 14);
        assert!((s.decode_tok_s.unwrap() - 200.0).abs() < 1e-9);
        assert!((s.prompt_ms - 90.0).abs() < 1e-9);
    }
}
