//! WAV files → mono f32 at the program's sample rate.
//!
//! `hound` parses the container and decodes 8/16/24/32-bit integer and 32-bit float PCM;
//! channels are averaged (the mix-down openai-whisper's ffmpeg call `-ac 1` does); other rates
//! go through `rubato`'s FFT resampler. That resampler is a fixed-ratio, windowed-sinc
//! anti-aliasing filter applied by FFT: for the fixed rate pairs of this job (44.1/48/8 kHz →
//! 16 kHz) it is as exact as the asynchronous sinc resamplers and much faster, and its output
//! length and delay are known exactly, so the result lines up sample for sample with the input.

use std::path::Path;

/// Decoded audio, mixed down to one channel.
#[derive(Clone, Debug, PartialEq)]
pub struct Audio {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    /// Channels in the file (before the mix-down).
    pub channels: u16,
    /// e.g. "16-bit integer", "32-bit float".
    pub format: String,
}

impl Audio {
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / self.sample_rate as f64
    }
}

/// Reads a WAV file. Errors name the file and what is wrong with it.
pub fn read_wav(path: &Path) -> Result<Audio, String> {
    let at = |what: String| format!("{}: {what}", path.display());
    let file = std::fs::File::open(path).map_err(|e| at(e.to_string()))?;
    let reader = hound::WavReader::new(std::io::BufReader::new(file))
        .map_err(|e| at(format!("not a readable WAV file: {}", hound_error(e))))?;
    decode(reader).map_err(at)
}

/// Decodes WAV bytes already in memory (tests; `name` only labels errors).
pub fn read_wav_bytes(bytes: &[u8], name: &str) -> Result<Audio, String> {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("{name}: not a readable WAV file: {}", hound_error(e)))?;
    decode(reader).map_err(|e| format!("{name}: {e}"))
}

fn hound_error(e: hound::Error) -> String {
    match e {
        hound::Error::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the file ends inside its header".into()
        }
        other => other.to_string(),
    }
}

fn decode<R: std::io::Read>(mut reader: hound::WavReader<R>) -> Result<Audio, String> {
    let spec = reader.spec();
    if spec.channels == 0 {
        return Err("the format chunk declares 0 channels".into());
    }
    if spec.sample_rate == 0 {
        return Err("the format chunk declares a sample rate of 0 Hz".into());
    }
    let declared = reader.len() as usize;
    let (format, interleaved) = match (spec.sample_format, spec.bits_per_sample) {
        (hound::SampleFormat::Float, 32) => ("32-bit float".to_string(), collect(reader.samples::<f32>(), declared, |v| v)?),
        (hound::SampleFormat::Int, bits @ (8 | 16 | 24 | 32)) => {
            let scale = 1.0 / (1u64 << (bits - 1)) as f64;
            (format!("{bits}-bit integer"), collect(reader.samples::<i32>(), declared, |v| (v as f64 * scale) as f32)?)
        }
        (fmt, bits) => {
            let kind = if fmt == hound::SampleFormat::Float { "float" } else { "integer" };
            return Err(format!(
                "unsupported sample format: {bits}-bit {kind} (supported: 8/16/24/32-bit integer and 32-bit float PCM)"
            ));
        }
    };
    let ch = spec.channels as usize;
    if interleaved.len() % ch != 0 {
        return Err(format!(
            "the data chunk holds {} samples, not a whole number of {ch}-channel frames",
            interleaved.len()
        ));
    }
    if interleaved.is_empty() {
        return Err("the data chunk holds no samples".into());
    }
    let samples = if ch == 1 {
        interleaved
    } else {
        interleaved.chunks_exact(ch).map(|f| f.iter().sum::<f32>() / ch as f32).collect()
    };
    Ok(Audio { samples, sample_rate: spec.sample_rate, channels: spec.channels, format })
}

/// All `declared` samples, or an error. A data chunk shorter than its header says is an error
/// rather than silently shorter audio: the file is damaged (an interrupted copy or recording),
/// and a transcript of part of it would look complete.
fn collect<T, I>(it: I, declared: usize, conv: impl Fn(T) -> f32) -> Result<Vec<f32>, String>
where
    I: Iterator<Item = hound::Result<T>>,
{
    // The header's count is the file's claim, not a fact: reserve at most ~16 MB up front
    // (a damaged header declaring 4 G samples must not allocate them before the read fails).
    let mut out = Vec::with_capacity(declared.min(1 << 22));
    for s in it {
        match s {
            Ok(v) => out.push(conv(v)),
            // hound reports a short read as an I/O error of its own text, or as EOF.
            Err(e) if is_short_read(&e) => {
                return Err(format!(
                    "truncated data chunk: the header declares {declared} samples but the file ends after {} \
                     (the file is damaged; partial audio is not transcribed)",
                    out.len()
                ));
            }
            Err(e) => return Err(format!("cannot decode sample {}: {e}", out.len())),
        }
    }
    if out.len() < declared {
        return Err(format!(
            "truncated data chunk: the header declares {declared} samples but the file ends after {} \
             (the file is damaged; partial audio is not transcribed)",
            out.len()
        ));
    }
    Ok(out)
}

fn is_short_read(e: &hound::Error) -> bool {
    match e {
        hound::Error::IoError(e) => {
            e.kind() == std::io::ErrorKind::UnexpectedEof || e.to_string().contains("Failed to read enough bytes")
        }
        _ => false,
    }
}

/// `samples` at `from` Hz resampled to `to` Hz: ⌈n·to/from⌉ samples, aligned with the input
/// (the filter's delay removed).
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, String> {
    use rubato::{FftFixedIn, Resampler};
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    let want = (samples.len() as u128 * to as u128).div_ceil(from as u128) as usize;
    // The resampler filters blocks of k·(from/g) input samples (g = gcd) and reports a delay
    // of half an output block, rounded down: with k even that half is a whole number of
    // samples at both rates, so removing it leaves no fractional (sub-sample) shift.
    // The anti-aliasing cutoff rises towards Nyquist with the smaller of the two FFT sizes
    // (k·min(from, to)/g): at least 1024 keeps it near 0.99 of the lower rate's Nyquist, so
    // speech up to ~7.9 kHz, the top of Whisper's mel range, survives 48 kHz → 16 kHz.
    let g = gcd(from as usize, to as usize);
    let mut k = 1024usize.div_ceil(from.min(to) as usize / g).max(2);
    k += k % 2;
    let chunk = from as usize / g * k;
    let mut r = FftFixedIn::<f32>::new(from as usize, to as usize, chunk, 1, 1)
        .map_err(|e| format!("cannot resample {from} Hz to {to} Hz: {e}"))?;
    let delay = r.output_delay();
    let mut out: Vec<f32> = Vec::with_capacity(want + delay + chunk);
    let mut pos = 0;
    let err = |e: rubato::ResampleError| format!("resampling {from} Hz to {to} Hz failed: {e}");
    while pos + r.input_frames_next() <= samples.len() {
        let n = r.input_frames_next();
        let o = r.process(&[&samples[pos..pos + n]], None).map_err(err)?;
        out.extend_from_slice(&o[0]);
        pos += n;
    }
    // The tail, then silence until the delayed output has caught up with the input's end.
    if pos < samples.len() {
        let o = r.process_partial(Some(&[&samples[pos..]]), None).map_err(err)?;
        out.extend_from_slice(&o[0]);
    }
    while out.len() < delay + want {
        let o = r.process_partial(None::<&[&[f32]]>, None).map_err(err)?;
        if o[0].is_empty() {
            break;
        }
        out.extend_from_slice(&o[0]);
    }
    out.drain(..delay.min(out.len()));
    out.resize(want, 0.0);
    Ok(out)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The file's audio as mono samples at `rate` Hz.
pub fn load(path: &Path, rate: u32) -> Result<(Audio, Vec<f32>), String> {
    let audio = read_wav(path)?;
    let pcm = resample(&audio.samples, audio.sample_rate, rate).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((audio, pcm))
}
