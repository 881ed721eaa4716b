//! The demo recipe's audio: three seconds of a synthetic voice (a glottal pulse train through
//! vowel formants, syllable by syllable, with pauses), 16 kHz mono 16-bit WAV. It lets
//! `rbuild whisper-cpu` and its runner work offline; it is not speech anyone said.

use std::f64::consts::PI;
use std::io::Cursor;

use super::features::SAMPLE_RATE;

/// (F1, F2, F3) in Hz of the vowels the voice cycles through: /a/, /i/, /u/, /e/, /o/.
const VOWELS: [(f64, f64, f64); 5] = [(730.0, 1090.0, 2440.0), (270.0, 2290.0, 3010.0), (300.0, 870.0, 2240.0), (530.0, 1840.0, 2480.0), (570.0, 840.0, 2410.0)];

/// Samples of the demo voice in [-1, 1].
pub fn demo_samples(seconds: f64) -> Vec<f32> {
    let n = (seconds * SAMPLE_RATE as f64) as usize;
    let sr = SAMPLE_RATE as f64;
    let syllable = 0.3;
    (0..n)
        .map(|i| {
            let t = i as f64 / sr;
            let k = (t / syllable) as usize;
            let phase = t / syllable - k as f64;
            // Every fourth syllable is a pause; the others rise and fall.
            if k % 4 == 3 {
                return 0.0;
            }
            let envelope = (PI * phase).sin().powi(2);
            let f0 = 115.0 + 20.0 * (2.0 * PI * 0.7 * t).sin();
            let (f1, f2, f3) = VOWELS[k % VOWELS.len()];
            // Harmonics of f0 weighted by the formant resonances (a source-filter voice).
            let mut v = 0.0;
            let mut h = 1;
            while h as f64 * f0 < 4000.0 {
                let f = h as f64 * f0;
                let gain: f64 = [(f1, 90.0), (f2, 110.0), (f3, 170.0)].iter().map(|&(fc, bw)| 1.0 / (1.0 + ((f - fc) / bw).powi(2))).sum();
                v += gain / h as f64 * (2.0 * PI * f * t).sin();
                h += 1;
            }
            (0.25 * envelope * v) as f32
        })
        .map(|x| x.clamp(-1.0, 1.0))
        .collect()
}

/// The demo voice as a 16-bit PCM WAV file.
pub fn demo_wav() -> Vec<u8> {
    let spec = hound::WavSpec { channels: 1, sample_rate: SAMPLE_RATE as u32, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
    let mut out = Cursor::new(Vec::new());
    // Writing to memory cannot fail for lack of space; the samples are in range.
    if let Ok(mut w) = hound::WavWriter::new(&mut out, spec) {
        for s in demo_samples(3.0) {
            let _ = w.write_sample((s * 32767.0).round() as i16);
        }
        let _ = w.finalize();
    }
    out.into_inner()
}
