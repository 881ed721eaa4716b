//! A Voxtral-style multimodal program (see `models/src/voxtral` for the contract): the methods
//! `preprocessor`, `audio_encoder`, `token_embedding` and `text_decoder`, the getters that size
//! them, and the text decoder as a [`Model`] whose `[AUDIO]` placeholders take the audio
//! embeddings.

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, KernelRegistry, Method, Program, ScalarType, Value};
use rbuild_runner_support::text::generate::Model;
use rbuild_runner_support::text::metadata::{self, Metadata};

/// The methods the runner calls, in the order it calls them.
pub const METHODS: [&str; 4] = ["preprocessor", "audio_encoder", "token_embedding", "text_decoder"];

/// What the getters say about the audio side (the text side is [`Metadata`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AudioMeta {
    pub audio_token_id: u32,
    pub tokens_per_chunk: usize,
    pub chunk_frames: usize,
    pub max_chunks: usize,
    pub n_mels: usize,
    pub sample_rate: u32,
    pub hop_length: usize,
    pub max_audio_samples: usize,
    pub hidden_size: usize,
}

pub struct VoxtralProgram<'p> {
    pub text: Metadata,
    pub audio: AudioMeta,
    preprocessor: Method<'p>,
    audio_encoder: Method<'p>,
    token_embedding: Method<'p>,
    text_decoder: Method<'p>,
    ctx: KernelContext,
}

fn need(name: &str, v: Option<usize>) -> Result<usize, String> {
    v.ok_or_else(|| format!("the program has no '{name}' method (not a Voxtral-style audio LLM program?)"))
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Output 0 of `m` as f32 values and its shape.
fn float_output(m: &Method<'_>) -> Result<(Vec<usize>, Vec<f32>), String> {
    let name = &m.name;
    let t = m.output_value(0).and_then(Value::as_tensor).ok_or_else(|| format!("method '{name}': output 0 is not a tensor"))?;
    if t.dtype != ScalarType::Float {
        return Err(format!("method '{name}': output 0 is {}, expected float32", t.dtype));
    }
    let shape = t.shape.as_slice().to_vec();
    let n = t.shape.numel();
    let bytes = m.output_bytes(0).ok_or_else(|| format!("method '{name}': output 0 has no data"))?;
    if bytes.len() < n * 4 {
        return Err(format!("method '{name}': output 0 {shape:?} holds only {} bytes", bytes.len()));
    }
    Ok((shape, bytes[..n * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()))
}

impl<'p> VoxtralProgram<'p> {
    pub fn load(program: &Program<'p>, kernels: &KernelRegistry, backends: &BackendRegistry, threads: usize) -> Result<VoxtralProgram<'p>, String> {
        let names = program.method_names();
        let missing: Vec<&str> = METHODS.iter().copied().filter(|m| !names.contains(m)).collect();
        if !missing.is_empty() {
            return Err(format!("the program lacks the method(s) {} of a Voxtral-style program (it has {})", missing.join(", "), names.join(", ")));
        }
        let text = metadata::read_metadata(program, kernels)?;
        let count = |n: &str| -> Result<usize, String> { need(n, metadata::positive(program, n, kernels)?) };
        let audio_token = metadata::int(program, "get_audio_token_id", kernels)?;
        let audio = AudioMeta {
            audio_token_id: audio_token
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| "the program's get_audio_token_id is missing or not a token id".to_string())?,
            tokens_per_chunk: count("get_tokens_per_chunk")?,
            chunk_frames: count("get_chunk_frames")?,
            max_chunks: count("get_max_chunks")?,
            n_mels: count("get_n_mels")?,
            sample_rate: u32::try_from(count("get_sample_rate")?).map_err(|_| "get_sample_rate is out of range".to_string())?,
            hop_length: count("get_hop_length")?,
            max_audio_samples: count("get_max_audio_samples")?,
            hidden_size: count("get_hidden_size")?,
        };
        let load = |n: &str| program.load_method(n, kernels, backends).map_err(|e| format!("method '{n}': {e}"));
        let mut ctx = KernelContext::default();
        ctx.threads = threads.max(1);
        Ok(VoxtralProgram {
            text,
            audio,
            preprocessor: load("preprocessor")?,
            audio_encoder: load("audio_encoder")?,
            token_embedding: load("token_embedding")?,
            text_decoder: load("text_decoder")?,
            ctx,
        })
    }

    /// The longest sequence the KV cache holds.
    pub fn max_context(&self) -> Result<usize, String> {
        self.text.max_context_len.or(self.text.max_seq_len).ok_or_else(|| "the program has no get_max_seq_len method".to_string())
    }

    /// Chunks the preprocessor makes of `samples` samples (what `n_audio_tokens` counts).
    pub fn chunks_for(&self, samples: usize) -> usize {
        samples.div_ceil(self.audio.chunk_frames * self.audio.hop_length).max(1)
    }

    /// Log-mel chunks `[n, n_mels, chunk_frames]` of 16 kHz mono PCM.
    pub fn features(&mut self, pcm: &[f32]) -> Result<(Vec<usize>, Vec<f32>), String> {
        if pcm.len() > self.audio.max_audio_samples {
            return Err(format!(
                "the audio is {:.2} s long; the program takes at most {:.2} s ({} chunks; export with a larger max-audio-seconds)",
                pcm.len() as f64 / self.audio.sample_rate as f64,
                self.audio.max_audio_samples as f64 / self.audio.sample_rate as f64,
                self.audio.max_chunks
            ));
        }
        let m = &mut self.preprocessor;
        m.set_input_tensor(0, ScalarType::Float, &[pcm.len()], &f32_bytes(pcm)).map_err(|e| format!("method 'preprocessor': {e}"))?;
        m.execute(&mut self.ctx).map_err(|e| format!("method 'preprocessor': {e}"))?;
        let (shape, data) = float_output(m)?;
        if shape.len() != 3 || shape[1] != self.audio.n_mels || shape[2] != self.audio.chunk_frames {
            return Err(format!("method 'preprocessor' returned {shape:?}, expected [n, {}, {}]", self.audio.n_mels, self.audio.chunk_frames));
        }
        Ok((shape, data))
    }

    /// Audio embeddings, `tokens_per_chunk` rows of `hidden_size` per chunk, in order.
    pub fn encode_audio(&mut self, shape: &[usize], features: &[f32]) -> Result<Vec<f32>, String> {
        let m = &mut self.audio_encoder;
        m.set_input_tensor(0, ScalarType::Float, shape, &f32_bytes(features)).map_err(|e| format!("method 'audio_encoder': {e}"))?;
        m.execute(&mut self.ctx).map_err(|e| format!("method 'audio_encoder': {e}"))?;
        let (out_shape, data) = float_output(m)?;
        let want = shape[0] * self.audio.tokens_per_chunk * self.audio.hidden_size;
        if data.len() != want || out_shape.last() != Some(&self.audio.hidden_size) {
            return Err(format!(
                "method 'audio_encoder' returned {out_shape:?} for {} chunk(s); expected {} rows of {}",
                shape[0],
                shape[0] * self.audio.tokens_per_chunk,
                self.audio.hidden_size
            ));
        }
        Ok(data)
    }

    /// Text embeddings `[len, hidden]` of `tokens`.
    fn embed(&mut self, tokens: &[u32]) -> Result<Vec<f32>, String> {
        let ids: Vec<u8> = tokens.iter().flat_map(|&t| i64::from(t).to_le_bytes()).collect();
        let m = &mut self.token_embedding;
        m.set_input_tensor(0, ScalarType::Long, &[1, tokens.len()], &ids).map_err(|e| format!("method 'token_embedding': {e}"))?;
        m.execute(&mut self.ctx).map_err(|e| format!("method 'token_embedding': {e}"))?;
        let (shape, data) = float_output(m)?;
        if data.len() != tokens.len() * self.audio.hidden_size {
            return Err(format!("method 'token_embedding' returned {shape:?} for {} tokens", tokens.len()));
        }
        Ok(data)
    }

    /// Last-position logits after feeding `embeddings` (`len` rows) at `start_pos`.
    fn decode(&mut self, embeddings: &[f32], len: usize, start_pos: usize) -> Result<Vec<f32>, String> {
        let hidden = self.audio.hidden_size;
        let m = &mut self.text_decoder;
        m.set_input_tensor(0, ScalarType::Float, &[1, len, hidden], &f32_bytes(embeddings)).map_err(|e| format!("method 'text_decoder': {e}"))?;
        m.set_input_tensor(1, ScalarType::Long, &[1], &(start_pos as i64).to_le_bytes()).map_err(|e| format!("method 'text_decoder': {e}"))?;
        m.execute(&mut self.ctx).map_err(|e| format!("method 'text_decoder': {e}"))?;
        let (shape, data) = float_output(m)?;
        let v = *shape.last().ok_or("method 'text_decoder': logits are a scalar")?;
        if v == 0 || data.len() % v != 0 {
            return Err(format!("method 'text_decoder': logits {shape:?} hold no whole row"));
        }
        if let Some(want) = self.text.vocab_size {
            if v != want {
                return Err(format!("method 'text_decoder': logits have {v} entries, get_vocab_size says {want}"));
            }
        }
        Ok(data[data.len() - v..].to_vec())
    }

    /// The text decoder as a [`Model`] for a prompt whose `[AUDIO]` tokens take the rows of
    /// `audio` (from [`VoxtralProgram::encode_audio`]) in order.
    pub fn decoder<'a>(&'a mut self, audio: &'a [f32]) -> AudioPromptModel<'a, 'p> {
        AudioPromptModel { program: self, audio, next_audio_row: 0 }
    }
}

/// Prompt tokens → embeddings (audio placeholders replaced) → logits, with the KV cache.
pub struct AudioPromptModel<'a, 'p> {
    program: &'a mut VoxtralProgram<'p>,
    audio: &'a [f32],
    next_audio_row: usize,
}

impl AudioPromptModel<'_, '_> {
    /// Audio rows not yet placed (a prompt with fewer placeholders than audio tokens).
    pub fn unused_audio_rows(&self) -> usize {
        self.audio.len() / self.program.audio.hidden_size - self.next_audio_row
    }
}

impl Model for AudioPromptModel<'_, '_> {
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, String> {
        if tokens.is_empty() {
            return Err("forward called with no tokens".into());
        }
        let hidden = self.program.audio.hidden_size;
        let audio_id = self.program.audio.audio_token_id;
        let mut emb = self.program.embed(tokens)?;
        for (i, _) in tokens.iter().enumerate().filter(|(_, &t)| t == audio_id) {
            let row = self.audio.get(self.next_audio_row * hidden..(self.next_audio_row + 1) * hidden).ok_or_else(|| {
                format!("the prompt has more [AUDIO] tokens ({audio_id}) than the audio gives embeddings ({})", self.audio.len() / hidden)
            })?;
            emb[i * hidden..(i + 1) * hidden].copy_from_slice(row);
            self.next_audio_row += 1;
        }
        self.program.decode(&emb, tokens.len(), start_pos)
    }

    fn uses_kv_cache(&self) -> bool {
        true
    }

    fn max_tokens_per_call(&self) -> usize {
        self.program.text.max_seq_len.unwrap_or(1)
    }
}
