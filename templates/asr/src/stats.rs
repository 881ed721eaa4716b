//! The figures the runner reports: load time, audio length, real-time factor, encoder time
//! per window, decoder tokens/s and peak memory.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub load_ms: f64,
    pub audio_s: f64,
    /// Wall time of feature extraction + transcription.
    pub transcribe_ms: f64,
    pub windows: usize,
    pub encoder_ms_per_window: Option<f64>,
    pub decoder_tokens: usize,
    pub decode_tok_s: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
}

impl Stats {
    pub fn new(
        load: Duration,
        audio_s: f64,
        transcribe: Duration,
        encoder: Duration,
        encoder_calls: usize,
        decoder: Duration,
        decoder_tokens: usize,
    ) -> Stats {
        Stats {
            load_ms: load.as_secs_f64() * 1e3,
            audio_s,
            transcribe_ms: transcribe.as_secs_f64() * 1e3,
            windows: encoder_calls,
            encoder_ms_per_window: (encoder_calls > 0).then(|| encoder.as_secs_f64() * 1e3 / encoder_calls as f64),
            decoder_tokens,
            decode_tok_s: (decoder_tokens > 0 && decoder > Duration::ZERO).then(|| decoder_tokens as f64 / decoder.as_secs_f64()),
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
             decoder {} tokens at {}, peak memory {}",
            self.load_ms,
            self.audio_s,
            self.transcribe_ms,
            self.real_time_factor().map_or("n/a".into(), |r| format!("{r:.3}")),
            self.windows,
            opt(self.encoder_ms_per_window, " ms"),
            self.decoder_tokens,
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
            "peak_rss_bytes": self.peak_rss_bytes,
        })
    }
}
