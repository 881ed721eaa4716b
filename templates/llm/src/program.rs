//! An ExecuTorch-style LLM program as a [`Model`]: `forward(tokens: i64[1, S], input_pos:
//! i64[1]) -> logits` with the KV cache inside the program, or `forward(tokens)` over the
//! whole sequence without one, plus the metadata getter methods ExecuTorch's exporter emits.

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::tensor::Dynamism;
use rbuild_runtime::{KernelContext, KernelRegistry, Method, Program, ScalarType, Value};

use crate::generate::Model;

pub use rbuild_runner_support::text::metadata::{getter, read_metadata, Metadata};

pub struct ProgramModel<'p> {
    method: Method<'p>,
    ctx: KernelContext,
    kv: bool,
    /// Tokens one call takes at most.
    per_call: usize,
    /// The tokens input has a fixed length of one (then every call passes exactly one token).
    fixed_one: bool,
    /// The tokens input has a fixed length N > 1 (a program without KV cache, such as a Core
    /// ATen export): sequences are right-padded to N and the logits row of their last token
    /// is read. Padding after the sequence cannot change earlier rows of a causal model.
    pad_to: Option<usize>,
    vocab_size: Option<usize>,
    bytes: Vec<u8>,
}

impl<'p> ProgramModel<'p> {
    /// Wraps the loaded `forward` method after checking its signature.
    pub fn new(method: Method<'p>, meta: &Metadata, threads: usize) -> Result<ProgramModel<'p>, String> {
        let name = method.name.clone();
        let n_inputs = method.inputs().len();
        if !(1..=2).contains(&n_inputs) {
            return Err(format!(
                "method '{name}' takes {n_inputs} inputs; expected (tokens) or (tokens, input_pos)"
            ));
        }
        let tokens = method.input_value(0).and_then(Value::as_tensor).ok_or_else(|| {
            format!("method '{name}': input 0 (tokens) should be a tensor")
        })?;
        let dims = tokens.shape.as_slice();
        if tokens.dtype != ScalarType::Long || dims.len() != 2 || dims[0] != 1 {
            return Err(format!(
                "method '{name}': input 0 (tokens) should be int64 [1, S], is {} {dims:?}",
                tokens.dtype
            ));
        }
        let (per_call, fixed_one, pad_to) = match tokens.dynamism {
            Dynamism::DynamicBound => (tokens.capacity / ScalarType::Long.size(), false, None),
            Dynamism::Static if dims[1] == 1 => (1, true, None),
            Dynamism::Static if n_inputs == 1 => (dims[1], false, Some(dims[1])),
            Dynamism::Static => {
                return Err(format!(
                    "method '{name}': input 0 (tokens) has the fixed shape [1, {}] next to input_pos; a KV-cache \
                     program needs a dynamic sequence length or a single-token input",
                    dims[1]
                ))
            }
        };
        if per_call == 0 {
            return Err(format!("method '{name}': input 0 (tokens) has no room for a token"));
        }
        if n_inputs == 2 {
            let pos = method.input_value(1).and_then(Value::as_tensor).ok_or_else(|| {
                format!("method '{name}': input 1 (input_pos) should be a tensor")
            })?;
            if pos.dtype != ScalarType::Long || pos.shape.numel() != 1 {
                return Err(format!(
                    "method '{name}': input 1 (input_pos) should be int64 [1], is {} {:?}",
                    pos.dtype,
                    pos.shape.as_slice()
                ));
            }
        }
        let kv = n_inputs == 2 && meta.use_kv_cache != Some(false);
        let per_call = per_call.min(meta.max_seq_len.unwrap_or(usize::MAX));
        let ctx = KernelContext { threads: threads.max(1) };
        Ok(ProgramModel { method, ctx, kv, per_call, fixed_one, pad_to, vocab_size: meta.vocab_size, bytes: Vec::new() })
    }

    /// Caps the tokens of one call (prefill then runs in chunks of at most `n`); only a
    /// program with a KV cache can split its input.
    pub fn limit_tokens_per_call(&mut self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Err("a prefill chunk needs at least one token".into());
        }
        if !self.kv {
            return Err(format!("method '{}' keeps no KV cache, so its input cannot be split into chunks", self.method.name));
        }
        self.per_call = self.per_call.min(n);
        Ok(())
    }

    fn set_tokens(&mut self, tokens: &[u32]) -> Result<(), String> {
        let len = self.pad_to.unwrap_or(tokens.len());
        if tokens.len() > len {
            return Err(format!("method '{}' takes at most {len} tokens, got {}", self.method.name, tokens.len()));
        }
        self.bytes.clear();
        self.bytes.extend(tokens.iter().flat_map(|&t| (t as i64).to_le_bytes()));
        // Padding with token 0: any id works, nothing before it attends to it.
        self.bytes.resize(len * 8, 0);
        self.method.set_input_tensor(0, ScalarType::Long, &[1, len], &self.bytes).map_err(|e| e.to_string())
    }

    fn run(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, String> {
        self.set_tokens(tokens)?;
        if self.method.inputs().len() == 2 {
            let pos = (start_pos as i64).to_le_bytes();
            self.method.set_input_tensor(1, ScalarType::Long, &[1], &pos).map_err(|e| e.to_string())?;
        }
        self.method.execute(&mut self.ctx).map_err(|e| e.to_string())?;
        let row = self.pad_to.map(|_| tokens.len() - 1);
        self.logits_row(row)
    }

    /// Output 0 checked as float logits [1, V] or [1, S, V]: its bytes, V and the row count.
    fn logits(&self) -> Result<(&[u8], usize, usize), String> {
        let name = &self.method.name;
        let t = self
            .method
            .output_value(0)
            .and_then(Value::as_tensor)
            .ok_or_else(|| format!("method '{name}': output 0 (logits) is not a tensor"))?;
        if t.dtype != ScalarType::Float {
            return Err(format!("method '{name}': logits are {}, expected float32", t.dtype));
        }
        let dims = t.shape.as_slice();
        let v = *dims.last().ok_or_else(|| format!("method '{name}': logits are a scalar"))?;
        if v == 0 {
            return Err(format!("method '{name}': logits {dims:?} have no vocabulary entries"));
        }
        if let Some(want) = self.vocab_size {
            if v != want {
                return Err(format!("method '{name}': logits have {v} entries, get_vocab_size says {want}"));
            }
        }
        let bytes = self.method.output_bytes(0).ok_or_else(|| format!("method '{name}': logits have no data"))?;
        let n = t.shape.numel();
        if bytes.len() < n * 4 {
            return Err(format!("method '{name}': logits {dims:?} hold only {} bytes", bytes.len()));
        }
        if n == 0 || n % v != 0 {
            return Err(format!("method '{name}': logits {dims:?} hold no whole row of {v} entries"));
        }
        Ok((&bytes[..n * 4], v, n / v))
    }

    /// Row `row` (default: the last) of output 0 (float logits [1, V] or [1, S, V]).
    fn logits_row(&self, row: Option<usize>) -> Result<Vec<f32>, String> {
        let (bytes, v, rows) = self.logits()?;
        let r = match row {
            None => rows - 1,
            Some(r) if r < rows && rows == self.pad_to.unwrap_or(rows) => r,
            Some(_) => {
                let dims = self.method.output_value(0).and_then(Value::as_tensor).map(|t| t.shape.as_slice().to_vec()).unwrap_or_default();
                return Err(format!(
                    "method '{}': logits {dims:?} are not one row per input token, so the row of the last real \
                     token of a padded input cannot be found (export with full logits, or with a KV cache)",
                    self.method.name
                ));
            }
        };
        Ok(f32s(&bytes[r * v * 4..(r + 1) * v * 4]))
    }

    /// One call on `tokens` at `start_pos`, never split: every logits row the program returns
    /// for it. A full-logits program (`get_full_logits`) returns one row per token, others the
    /// last token's row only; a fixed-length program without KV cache returns the rows of the
    /// real tokens (not of the padding). Perplexity needs every position; generation needs
    /// only [`Model::forward`].
    pub fn forward_rows(&mut self, tokens: &[u32], start_pos: usize) -> Result<LogitRows, String> {
        if tokens.is_empty() {
            return Err("forward_rows called with no tokens".into());
        }
        if tokens.len() > self.per_call {
            return Err(format!("method '{}' takes at most {} tokens per call, got {}", self.method.name, self.per_call, tokens.len()));
        }
        self.set_tokens(tokens)?;
        if self.method.inputs().len() == 2 {
            let pos = (start_pos as i64).to_le_bytes();
            self.method.set_input_tensor(1, ScalarType::Long, &[1], &pos).map_err(|e| e.to_string())?;
        }
        self.method.execute(&mut self.ctx).map_err(|e| e.to_string())?;
        let (bytes, vocab, rows) = self.logits()?;
        let rows = match self.pad_to {
            // Padded: the rows of the real tokens, when there is one per position.
            Some(n) if rows == n => tokens.len(),
            Some(_) => return self.logits_row(Some(tokens.len() - 1)).map(|data| LogitRows { vocab, data }),
            None => rows,
        };
        Ok(LogitRows { vocab, data: f32s(&bytes[..rows * vocab * 4]) })
    }
}

/// Logits rows of one call, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct LogitRows {
    pub vocab: usize,
    pub data: Vec<f32>,
}

impl LogitRows {
    pub fn rows(&self) -> usize {
        self.data.len() / self.vocab
    }

    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.vocab..(r + 1) * self.vocab]
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

impl Model for ProgramModel<'_> {
    fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, String> {
        if tokens.is_empty() {
            return Err("forward called with no tokens".into());
        }
        if self.fixed_one && tokens.len() > 1 {
            // A single-token program: feed the tokens one by one (only with a KV cache does
            // that keep earlier ones).
            if !self.kv {
                return Err(format!("method '{}' takes one token per call and keeps no KV cache", self.method.name));
            }
            let mut last = Vec::new();
            for (i, &t) in tokens.iter().enumerate() {
                last = self.run(&[t], start_pos + i)?;
            }
            return Ok(last);
        }
        self.run(tokens, start_pos)
    }

    fn uses_kv_cache(&self) -> bool {
        self.kv
    }

    fn max_tokens_per_call(&self) -> usize {
        self.per_call
    }
}

/// Loads `forward` and the metadata; `Program` parsing is the caller's.
pub fn load_model<'p>(program: &Program<'p>, kernels: &KernelRegistry, threads: usize) -> Result<(ProgramModel<'p>, Metadata), String> {
    let meta = read_metadata(program, kernels)?;
    let method = program.load_method("forward", kernels, &BackendRegistry::new()).map_err(|e| e.to_string())?;
    let model = ProgramModel::new(method, &meta, threads)?;
    Ok((model, meta))
}
