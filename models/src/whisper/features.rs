//! The constants of Whisper's log-mel front end, computed here rather than shipped: the
//! periodic Hann window and Slaney-scale, Slaney-normalised mel filters (librosa's
//! `filters.mel(sr, n_fft, n_mels, htk=False, norm="slaney")`, which openai-whisper's
//! `mel_filters.npz` and HF's feature extractor both hold).

/// Whisper's front-end geometry.
pub const SAMPLE_RATE: usize = 16_000;
pub const N_FFT: usize = 400;
pub const HOP_LENGTH: usize = 160;

/// `torch.hann_window(n, periodic=True)`.
pub fn hann_window(n: usize) -> Vec<f32> {
    (0..n).map(|i| (0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos()) as f32).collect()
}

/// Slaney's mel scale: linear below 1 kHz, logarithmic above.
fn hz_to_mel(f: f64) -> f64 {
    let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
    let min_log_mel = min_log_hz / f_sp;
    let logstep = 6.4f64.ln() / 27.0;
    if f >= min_log_hz {
        min_log_mel + (f / min_log_hz).ln() / logstep
    } else {
        f / f_sp
    }
}

fn mel_to_hz(m: f64) -> f64 {
    let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
    let min_log_mel = min_log_hz / f_sp;
    let logstep = 6.4f64.ln() / 27.0;
    if m >= min_log_mel {
        min_log_hz * (logstep * (m - min_log_mel)).exp()
    } else {
        f_sp * m
    }
}

/// Mel filters `[n_mels, n_fft/2 + 1]` (row-major) from 0 Hz to the Nyquist frequency.
pub fn mel_filters(sample_rate: usize, n_fft: usize, n_mels: usize) -> Vec<f32> {
    let bins = n_fft / 2 + 1;
    let nyquist = sample_rate as f64 / 2.0;
    let fft_freqs: Vec<f64> = (0..bins).map(|i| nyquist * i as f64 / (bins - 1) as f64).collect();
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(nyquist));
    let mel_f: Vec<f64> = (0..n_mels + 2).map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64)).collect();
    let mut out = vec![0f32; n_mels * bins];
    for m in 0..n_mels {
        let (left, center, right) = (mel_f[m], mel_f[m + 1], mel_f[m + 2]);
        // Slaney normalisation: each triangle has unit area in Hz.
        let enorm = 2.0 / (right - left);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let lower = (f - left) / (center - left);
            let upper = (right - f) / (right - center);
            out[m * bins + k] = (lower.min(upper).max(0.0) * enorm) as f32;
        }
    }
    out
}
