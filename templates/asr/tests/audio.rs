//! WAV decoding and resampling: every sample format, channel count and rate the runner
//! accepts gives the same 16 kHz mono signal; damaged files fail with the file's name.

mod common;
use common::{temp_dir, testdata};

use std::path::Path;

use rbuild_asr_runner::audio;

/// fox_16k.wav read independently of the runner (16-bit mono at 16 kHz).
fn reference() -> Vec<f32> {
    let mut r = hound::WavReader::open(testdata("models/audio/fox_16k.wav")).unwrap();
    let spec = r.spec();
    assert_eq!((spec.channels, spec.sample_rate, spec.bits_per_sample), (1, 16000, 16));
    r.samples::<i16>().map(|s| s.unwrap() as f32 / 32768.0).collect()
}

/// Band-limited (Hann-windowed sinc) interpolation of `x` from `from` to `to` Hz, written
/// out here so the runner's resampler is checked against an independent one.
fn sinc_resample(x: &[f32], from: u32, to: u32) -> Vec<f32> {
    let ratio = to as f64 / from as f64;
    let cutoff = ratio.min(1.0) * 0.97;
    let half = (48.0 / cutoff) as i64;
    let n_out = (x.len() as f64 * ratio).ceil() as usize;
    (0..n_out)
        .map(|j| {
            let t = j as f64 / ratio;
            let c = t.floor() as i64;
            let mut acc = 0.0;
            for n in (c - half).max(0)..=(c + half).min(x.len() as i64 - 1) {
                let d = t - n as f64;
                let w = 0.5 + 0.5 * (std::f64::consts::PI * d / (half as f64 + 1.0)).cos();
                let arg = std::f64::consts::PI * cutoff * d;
                let s = if arg.abs() < 1e-12 { 1.0 } else { arg.sin() / arg };
                acc += x[n as usize] as f64 * cutoff * s * w;
            }
            acc as f32
        })
        .collect()
}

fn correlation(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let ma = a.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let mb = b.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (x, y) = (a[i] as f64 - ma, b[i] as f64 - mb);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa * bb).sqrt()
}

/// Writes `channels` copies (scaled 1, 0.5, …) of `x` at `rate` in the given format.
fn write(path: &Path, x: &[f32], rate: u32, channels: u16, bits: u16, float: bool) {
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: bits,
        sample_format: if float { hound::SampleFormat::Float } else { hound::SampleFormat::Int },
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for &v in x {
        for c in 0..channels {
            let v = v / (1 << c) as f32;
            if float {
                w.write_sample(v).unwrap();
            } else {
                let max = ((1i64 << (bits - 1)) - 1) as f64;
                let q = (v as f64 * (max + 1.0)).round().clamp(-max - 1.0, max) as i64;
                match bits {
                    8 => w.write_sample(q as i8).unwrap(),
                    16 => w.write_sample(q as i16).unwrap(),
                    _ => w.write_sample(q as i32).unwrap(),
                }
            }
        }
    }
    w.finalize().unwrap();
}

#[test]
fn fox_reads_as_its_samples() {
    let a = audio::read_wav(&testdata("models/audio/fox_16k.wav")).unwrap();
    assert_eq!((a.sample_rate, a.channels), (16000, 1));
    assert_eq!(a.samples, reference());
    assert_eq!(a.format, "16-bit integer");
}

#[test]
fn every_variant_gives_the_same_16k_mono_signal() {
    let x = reference();
    let dir = temp_dir("wav-variants");
    let cases: Vec<(&str, u32, u16, u16, bool)> = vec![
        ("int8", 16000, 1, 8, false),
        ("int16", 16000, 1, 16, false),
        ("int24", 16000, 1, 24, false),
        ("int32", 16000, 1, 32, false),
        ("f32", 16000, 1, 32, true),
        ("stereo16", 16000, 2, 16, false),
        ("f32_44k1", 44100, 1, 32, true),
        ("int16_48k_stereo", 48000, 2, 16, false),
        ("int24_8k", 8000, 1, 24, false),
    ];
    for (name, rate, ch, bits, float) in cases {
        let src = if rate == 16000 { x.clone() } else { sinc_resample(&x, 16000, rate) };
        let p = dir.join(format!("{name}.wav"));
        write(&p, &src, rate, ch, bits, float);
        let (a, pcm) = audio::load(&p, 16000).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((a.sample_rate, a.channels), (rate, ch), "{name}");
        let want_len = (src.len() as u64 * 16000).div_ceil(rate as u64) as usize;
        assert_eq!(pcm.len(), want_len, "{name}: length");
        // An 8 kHz file keeps only the band below 4 kHz: compare with that band of the
        // original.
        let reference = if rate < 16000 { sinc_resample(&sinc_resample(&x, 16000, rate), rate, 16000) } else { x.clone() };
        let r = correlation(&pcm, &reference);
        let floor = if bits == 8 { 0.99 } else { 0.999 };
        assert!(r > floor, "{name}: correlation {r}");
    }
}

#[test]
fn resampling_keeps_the_signal_in_place() {
    // A 440 Hz sine at 44.1 kHz, resampled, is the same sine at 16 kHz: no delay, no gain.
    let f = 440.0f64;
    let x: Vec<f32> = (0..44100).map(|i| (2.0 * std::f64::consts::PI * f * i as f64 / 44100.0).sin() as f32 * 0.5).collect();
    // 44100 samples are exactly 25 of the resampler's blocks: no partial tail.
    let y = audio::resample(&x, 44100, 16000).unwrap();
    assert_eq!(y.len(), 16000);
    let err = (400..15600)
        .map(|i| (y[i] as f64 - 0.5 * (2.0 * std::f64::consts::PI * f * i as f64 / 16000.0).sin()).abs())
        .fold(0.0, f64::max);
    assert!(err < 2e-3, "max error {err}");
}

#[test]
fn damaged_files_fail_naming_the_file() {
    for (name, what) in [
        ("wav_bad_riff.wav", "no RIFF tag"),
        ("wav_header_only.wav", "ends after 0"),
        ("wav_odd_data_size.wav", "not a multiple of sample size"),
        ("wav_truncated_data.wav", "truncated data chunk: the header declares 46537 samples but the file ends after 23268"),
    ] {
        let p = testdata(&format!("bad/{name}"));
        let e = audio::read_wav(&p).expect_err(name);
        assert!(e.contains(name), "{name}: {e}");
        assert!(e.contains(what), "{name}: {e}");
    }
    let e = audio::read_wav(Path::new("/nonexistent/speech.wav")).unwrap_err();
    assert!(e.contains("/nonexistent/speech.wav"), "{e}");
}

#[test]
fn unsupported_and_empty_files() {
    let dir = temp_dir("wav-empty");
    let p = dir.join("empty.wav");
    write(&p, &[], 16000, 1, 16, false);
    let e = audio::read_wav(&p).unwrap_err();
    assert!(e.contains("empty.wav") && e.contains("no samples"), "{e}");
}

