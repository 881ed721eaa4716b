//! A Whisper program: its `preprocessor`, `encoder` and `text_decoder` methods and the
//! getter methods (no inputs; an Int, a Bool or a list of Ints) that describe it.
//!
//! Contract (what `rbuild export --model whisper` writes):
//! `preprocessor(pcm f32[N]) -> features f32[1, n_mels, N / hop]`,
//! `encoder(features f32[1, n_mels, frames_per_window]) -> hidden f32[1, frames_per_window / 2, d]`,
//! `text_decoder(tokens i64[1, S], hidden, input_pos i64[1]) -> logits f32[1, vocab]`, the
//! decoder's caches being program state that a call at input_pos 0 restarts.

use std::time::Instant;

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, KernelRegistry, Method, Program, ScalarType, Value};

use crate::decode::{Model, Vocab};
use crate::stats::Timing;
use crate::transcribe::WindowModel;

/// What the getters say.
#[derive(Clone, Debug, PartialEq)]
pub struct Metadata {
    pub sample_rate: u32,
    pub n_mels: usize,
    pub n_fft: usize,
    pub hop_length: usize,
    pub frames_per_window: usize,
    pub max_audio_samples: usize,
    pub vocab: Vocab,
}

impl Metadata {
    /// Zero samples appended to the audio: one window, as openai-whisper's
    /// `log_mel_spectrogram(audio, padding=N_SAMPLES)` does.
    pub fn padding_samples(&self) -> usize {
        self.frames_per_window * self.hop_length
    }

    /// Seconds per feature frame.
    pub fn frame_seconds(&self) -> f64 {
        self.hop_length as f64 / self.sample_rate as f64
    }
}

pub use rbuild_runner_support::getters::getter;

/// A getter's outputs by method name (None: the program lacks it).
pub type GetterFn<'a> = dyn Fn(&str) -> Result<Option<Vec<Value>>, String> + 'a;

/// Reads the getters through `get` (the program's, or a table in tests).
pub struct Getters<'a> {
    get: &'a GetterFn<'a>,
}

impl<'a> Getters<'a> {
    pub fn new(get: &'a GetterFn<'a>) -> Getters<'a> {
        Getters { get }
    }

    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        let Some(vals) = (self.get)(name)? else { return Ok(None) };
        vals.iter()
            .map(|v| match v {
                Value::Int(i) => Ok(*i),
                other => Err(format!("method '{name}' should return Ints, returns {}", other.kind())),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn int(&self, name: &str) -> Result<Option<i64>, String> {
        match self.ints(name)?.as_deref() {
            None => Ok(None),
            Some([v]) => Ok(Some(*v)),
            Some(v) => Err(format!("method '{name}' should return one Int, returns {} values", v.len())),
        }
    }

    fn required(&self, name: &str) -> Result<i64, String> {
        self.int(name)?.ok_or_else(|| format!("the program has no method '{name}' (required by the Whisper runner)"))
    }

    fn count(&self, name: &str) -> Result<usize, String> {
        let v = self.required(name)?;
        usize::try_from(v).ok().filter(|&n| n > 0).ok_or_else(|| format!("method '{name}' returns {v}, not a positive count"))
    }

    fn flag(&self, name: &str) -> Result<Option<bool>, String> {
        match (self.get)(name)?.as_deref() {
            None => Ok(None),
            Some([Value::Bool(b)]) => Ok(Some(*b)),
            Some([Value::Int(i)]) => Ok(Some(*i != 0)),
            Some(_) => Err(format!("method '{name}' should return one Bool")),
        }
    }
}

/// A language code packed as ASCII bytes, little-endian, into an Int ("en" = 0x6e65).
pub fn unpack_code(v: i64) -> Option<String> {
    let bytes: Vec<u8> = v.to_le_bytes().into_iter().take_while(|&b| b != 0).collect();
    if bytes.is_empty() || !bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-') {
        return None;
    }
    String::from_utf8(bytes).ok()
}

pub fn pack_code(code: &str) -> i64 {
    let mut b = [0u8; 8];
    for (i, c) in code.bytes().take(8).enumerate() {
        b[i] = c;
    }
    i64::from_le_bytes(b)
}

pub fn read_metadata(g: &Getters<'_>) -> Result<Metadata, String> {
    let vocab_size = g.count("get_vocab_size")?;
    let id = |name: &str| -> Result<u32, String> {
        let v = g.required(name)?;
        check_id(name, v, vocab_size)
    };
    let opt_id = |name: &str| -> Result<Option<u32>, String> { g.int(name)?.map(|v| check_id(name, v, vocab_size)).transpose() };
    let ids = |name: &str| -> Result<Vec<u32>, String> {
        g.ints(name)?.unwrap_or_default().into_iter().map(|v| check_id(name, v, vocab_size)).collect()
    };
    let lang_ids = ids("get_lang_ids")?;
    let codes = g.ints("get_lang_codes")?.unwrap_or_default();
    if codes.len() != lang_ids.len() {
        return Err(format!(
            "get_lang_codes returns {} codes but get_lang_ids {} ids; they should pair up",
            codes.len(),
            lang_ids.len()
        ));
    }
    let lang_codes = codes
        .iter()
        .map(|&c| unpack_code(c).ok_or_else(|| format!("get_lang_codes: {c:#x} is not a packed ASCII language code")))
        .collect::<Result<Vec<_>, _>>()?;
    let timestamp_begin = g.int("get_timestamp_begin")?.map(|v| check_id("get_timestamp_begin", v, vocab_size)).transpose()?;
    let sample_rate = g.count("get_sample_rate")?;
    let vocab = Vocab {
        vocab_size,
        eot: id("get_eos_id")?,
        sot: id("get_decoder_start_token_id")?,
        sot_prev: id("get_sot_prev_id")?,
        no_speech: id("get_no_speech_id")?,
        no_timestamps: id("get_no_timestamps_id")?,
        timestamp_begin,
        transcribe: opt_id("get_transcribe_id")?,
        translate: opt_id("get_translate_id")?,
        multilingual: g.flag("get_is_multilingual")?.unwrap_or(!lang_ids.is_empty()),
        lang_ids,
        lang_codes,
        suppress: ids("get_suppress_tokens")?,
        begin_suppress: ids("get_begin_suppress_tokens")?,
        max_target_positions: g.count("get_max_target_positions")?,
    };
    let m = Metadata {
        sample_rate: u32::try_from(sample_rate).map_err(|_| format!("get_sample_rate returns {sample_rate}"))?,
        n_mels: g.count("get_n_mels")?,
        n_fft: g.count("get_n_fft")?,
        hop_length: g.count("get_hop_length")?,
        frames_per_window: g.count("get_frames_per_window")?,
        max_audio_samples: g.count("get_max_audio_samples")?,
        vocab,
    };
    if m.frames_per_window % 2 != 0 {
        return Err(format!("get_frames_per_window returns {}, not even (the encoder halves it)", m.frames_per_window));
    }
    if m.max_audio_samples <= m.padding_samples() {
        return Err(format!(
            "get_max_audio_samples returns {}, no room for audio besides the {} samples of padding",
            m.max_audio_samples,
            m.padding_samples()
        ));
    }
    Ok(m)
}

fn check_id(name: &str, v: i64, vocab: usize) -> Result<u32, String> {
    u32::try_from(v)
        .ok()
        .filter(|&t| (t as usize) < vocab)
        .ok_or_else(|| format!("method '{name}' returns {v}, not a token id below the vocabulary size {vocab}"))
}

/// The three compute methods, the file's features and the current window's encoder output.
pub struct WhisperProgram<'p> {
    pre: Method<'p>,
    enc: Method<'p>,
    dec: Method<'p>,
    ctx: KernelContext,
    pub meta: Metadata,
    /// Features of the padded audio, [n_mels, frames] row-major.
    features: Vec<f32>,
    frames: usize,
    hidden: Vec<u8>,
    hidden_shape: Vec<usize>,
    scratch: Vec<u8>,
    pub timing: Timing,
}


fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl<'p> WhisperProgram<'p> {
    /// `backends` runs the program's delegates (see `rbuild_runner_support::gpu`).
    pub fn load(program: &Program<'p>, kernels: &KernelRegistry, backends: &BackendRegistry, threads: usize) -> Result<WhisperProgram<'p>, String> {
        let get = |n: &str| getter(program, n, kernels);
        let meta = read_metadata(&Getters::new(&get))?;
        let names = program.method_names();
        let load = |name: &str| -> Result<Method<'p>, String> {
            if !names.contains(&name) {
                return Err(format!("the program has no method '{name}' (required by the Whisper runner)"));
            }
            program.load_method(name, kernels, backends).map_err(|e| format!("method '{name}': {e}"))
        };
        let (pre, enc, dec) = (load("preprocessor")?, load("encoder")?, load("text_decoder")?);
        for (m, n) in [(&pre, 1), (&enc, 1), (&dec, 3)] {
            if m.inputs().len() != n {
                return Err(format!("method '{}' takes {} inputs, expected {n}", m.name, m.inputs().len()));
            }
        }
        let ctx = KernelContext { threads: threads.max(1) };
        Ok(WhisperProgram {
            pre,
            enc,
            dec,
            ctx,
            meta,
            features: Vec::new(),
            frames: 0,
            hidden: Vec::new(),
            hidden_shape: Vec::new(),
            scratch: Vec::new(),
            timing: Timing::default(),
        })
    }

    /// The most audio samples (before padding) one file may have.
    pub fn max_content_samples(&self) -> usize {
        self.meta.max_audio_samples - self.meta.padding_samples()
    }

    /// Runs the preprocessor over `pcm` followed by one window of zeros; returns the number of
    /// frames that hold audio (the rest is padding).
    pub fn compute_features(&mut self, pcm: &[f32]) -> Result<usize, String> {
        let pad = self.meta.padding_samples();
        if pcm.len() > self.max_content_samples() {
            return Err(format!(
                "{} samples of audio, above the program's limit of {} ({:.1} s)",
                pcm.len(),
                self.max_content_samples(),
                self.max_content_samples() as f64 / self.meta.sample_rate as f64
            ));
        }
        let mut padded = Vec::with_capacity(pcm.len() + pad);
        padded.extend_from_slice(pcm);
        padded.resize(pcm.len() + pad, 0.0);
        let t = Instant::now();
        let bytes = f32_bytes(&padded);
        self.pre
            .set_input_tensor(0, ScalarType::Float, &[padded.len()], &bytes)
            .map_err(|e| format!("method 'preprocessor': audio input: {e}"))?;
        self.pre.execute(&mut self.ctx).map_err(|e| format!("method 'preprocessor': {e}"))?;
        let (shape, data) = float_output(&self.pre, 0)?;
        let n_mels = self.meta.n_mels;
        let frames = match shape.as_slice() {
            [1, m, f] if *m == n_mels => *f,
            other => return Err(format!("method 'preprocessor' returns features {other:?}, expected [1, {n_mels}, frames]")),
        };
        let content = pcm.len() / self.meta.hop_length;
        if frames < content + self.meta.frames_per_window {
            return Err(format!(
                "method 'preprocessor' returns {frames} frames for {} samples; expected at least {}",
                padded.len(),
                content + self.meta.frames_per_window
            ));
        }
        self.features = data;
        self.frames = frames;
        self.timing.preprocess += t.elapsed();
        Ok(content)
    }

    /// Features of frames [start, start + frames_per_window), [n_mels, frames_per_window].
    pub fn window(&self, start: usize) -> Result<Vec<f32>, String> {
        let w = self.meta.frames_per_window;
        if start + w > self.frames {
            return Err(format!("window at frame {start} runs past the {} feature frames", self.frames));
        }
        let mut out = Vec::with_capacity(self.meta.n_mels * w);
        for m in 0..self.meta.n_mels {
            out.extend_from_slice(&self.features[m * self.frames + start..m * self.frames + start + w]);
        }
        Ok(out)
    }

    /// The current window's encoder output: shape and values.
    pub fn hidden(&self) -> (Vec<usize>, Vec<f32>) {
        (self.hidden_shape.clone(), f32s(&self.hidden))
    }

    fn encode(&mut self, start: usize) -> Result<(), String> {
        let feats = f32_bytes(&self.window(start)?);
        let t = Instant::now();
        let shape = [1, self.meta.n_mels, self.meta.frames_per_window];
        self.enc.set_input_tensor(0, ScalarType::Float, &shape, &feats).map_err(|e| format!("method 'encoder': {e}"))?;
        self.enc.execute(&mut self.ctx).map_err(|e| format!("method 'encoder': {e}"))?;
        let t_out = self.enc.output_value(0).and_then(Value::as_tensor).ok_or("method 'encoder': output 0 is not a tensor")?;
        let dims = t_out.shape.as_slice().to_vec();
        if t_out.dtype != ScalarType::Float || dims.len() != 3 || dims[0] != 1 {
            return Err(format!("method 'encoder' returns {} {dims:?}, expected float32 [1, T, d_model]", t_out.dtype));
        }
        let bytes = self.enc.output_bytes(0).ok_or("method 'encoder': output 0 has no data")?;
        let n = dims.iter().product::<usize>() * 4;
        let bytes = bytes.get(..n).ok_or_else(|| format!("method 'encoder': output {dims:?} holds only {} bytes", bytes.len()))?;
        self.hidden.clear();
        self.hidden.extend_from_slice(bytes);
        self.hidden_shape = dims;
        self.timing.encoder += t.elapsed();
        self.timing.encoder_calls += 1;
        Ok(())
    }
}

fn float_output(m: &Method<'_>, i: usize) -> Result<(Vec<usize>, Vec<f32>), String> {
    let name = &m.name;
    let t = m.output_value(i).and_then(Value::as_tensor).ok_or_else(|| format!("method '{name}': output {i} is not a tensor"))?;
    if t.dtype != ScalarType::Float {
        return Err(format!("method '{name}': output {i} is {}, expected float32", t.dtype));
    }
    let shape = t.shape.as_slice().to_vec();
    let n: usize = shape.iter().product();
    let bytes = m.output_bytes(i).ok_or_else(|| format!("method '{name}': output {i} has no data"))?;
    if bytes.len() < n * 4 {
        return Err(format!("method '{name}': output {i} {shape:?} holds only {} bytes", bytes.len()));
    }
    Ok((shape, f32s(&bytes[..n * 4])))
}

impl Model for WhisperProgram<'_> {
    fn logits(&mut self, tokens: &[u32], input_pos: usize) -> Result<Vec<f32>, String> {
        if self.hidden_shape.is_empty() {
            return Err("text_decoder called before the encoder ran".into());
        }
        let t = Instant::now();
        self.scratch.clear();
        self.scratch.extend(tokens.iter().flat_map(|&t| (t as i64).to_le_bytes()));
        let err = |e: rbuild_runtime::executor::InputError| format!("method 'text_decoder': {e}");
        self.dec.set_input_tensor(0, ScalarType::Long, &[1, tokens.len()], &self.scratch).map_err(err)?;
        // Read only at input_pos 0, where the window's cross-attention keys/values are
        // projected into state; later steps skip the copy (2.3 MB for tiny, per token).
        if input_pos == 0 {
            self.dec.set_input_tensor(1, ScalarType::Float, &self.hidden_shape, &self.hidden).map_err(err)?;
        }
        self.dec.set_input_tensor(2, ScalarType::Long, &[1], &(input_pos as i64).to_le_bytes()).map_err(err)?;
        self.dec.execute(&mut self.ctx).map_err(|e| format!("method 'text_decoder': {e}"))?;
        let (shape, data) = float_output(&self.dec, 0)?;
        let v = self.meta.vocab.vocab_size;
        if shape.last() != Some(&v) || data.len() < v {
            return Err(format!("method 'text_decoder' returns logits {shape:?}, expected [1, {v}]"));
        }
        self.timing.decoder_call(tokens.len(), t.elapsed());
        // The last row, should the method return one per input token.
        Ok(data[data.len() - v..].to_vec())
    }
}

impl WindowModel for WhisperProgram<'_> {
    fn set_window(&mut self, start_frame: usize) -> Result<(), String> {
        self.encode(start_frame)
    }
}
