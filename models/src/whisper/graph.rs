//! Whisper's methods on the graph builder, with HF `WhisperForConditionalGeneration`'s
//! parameter names:
//!
//! - [`preprocessor`]: PCM → log-mel features (`rbuild::log_mel_spectrogram`), dynamic length;
//! - [`encoder`]: features `[1, n_mels, frames]` → hidden `[1, frames/2, d_model]`;
//! - [`decoder_kv`]: `text_decoder(tokens [1, S], encoder_hidden, input_pos)` → last logits,
//!   self-attention KV cache and cross-attention keys/values as state (projected once per
//!   window, at input_pos 0, by `rbuild::cross_attention`);
//! - [`decoder_full`]: the Core-ATen decoder: static S, no cache, logits for every position.

use rbuild_export::error::Result;
use rbuild_export::graph::Arg;
use rbuild_export::{ConstData, Dim, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

use super::config::{EncoderDims, WhisperConfig};
use super::features::{self, HOP_LENGTH, N_FFT, SAMPLE_RATE};
use crate::params::{Init, Params};
use crate::random::f32_bytes;

/// How attention is expressed: fused ops, or Core ATen (bmm/softmax) for ExecuTorch as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ops {
    Fused,
    CoreAten,
}

fn linear(b: &mut GraphBuilder, p: &mut Params, x: ValueId, module: &str, cin: usize, cout: usize, bias: bool) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{module}.weight"), &[cout, cin], Init::LinearWeight { fan_in: cin })?;
    let bias = if bias { Some(p.tensor(b, &format!("{module}.bias"), &[cout], Init::LinearBias)?) } else { None };
    b.linear(x, w, bias)
}

fn layer_norm(b: &mut GraphBuilder, p: &mut Params, x: ValueId, module: &str, d: usize) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{module}.weight"), &[d], Init::BnGamma)?;
    let bias = p.tensor(b, &format!("{module}.bias"), &[d], Init::BnBeta)?;
    Ok(b.call(
        "aten::native_layer_norm",
        vec![Arg::Tensor(x), Arg::Ints(vec![d as i64]), Arg::Tensor(w), Arg::Tensor(bias), Arg::Float(1e-5)],
    )?[0])
}

pub(crate) fn gelu(b: &mut GraphBuilder, x: ValueId) -> Result<ValueId> {
    b.call1("aten::gelu", vec![Arg::Tensor(x), Arg::Str("none".into())])
}

/// `nn.Conv1d(cin, cout, 3, stride, padding=1)` named `module`.
fn conv1d(b: &mut GraphBuilder, p: &mut Params, x: ValueId, module: &str, cin: usize, cout: usize, stride: usize) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{module}.weight"), &[cout, cin, 3], Init::ConvWeight { fan_in: cin * 3 })?;
    let bias = p.tensor(b, &format!("{module}.bias"), &[cout], Init::ConvBias)?;
    b.call1(
        "aten::convolution",
        vec![
            Arg::Tensor(x),
            Arg::Tensor(w),
            Arg::Tensor(bias),
            Arg::Ints(vec![stride as i64]),
            Arg::Ints(vec![1]),
            Arg::Ints(vec![1]),
            Arg::Bool(false),
            Arg::Ints(vec![0]),
            Arg::Int(1),
        ],
    )
}

/// An attention block's projections under `module`: the query from `x`, the key (no bias, as
/// in every Whisper) and value from `kv` (`x` itself, or the encoder output).
fn qkv(b: &mut GraphBuilder, p: &mut Params, x: ValueId, kv: ValueId, module: &str, d: usize) -> Result<(ValueId, ValueId, ValueId)> {
    let q = linear(b, p, x, &format!("{module}.q_proj"), d, d, true)?;
    let k = linear(b, p, kv, &format!("{module}.k_proj"), d, d, false)?;
    let v = linear(b, p, kv, &format!("{module}.v_proj"), d, d, true)?;
    Ok((q, k, v))
}

/// The pre-LN feed-forward block: `x + fc2(gelu(fc1(LN(x))))`.
fn mlp(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, d: usize, ffn: usize) -> Result<ValueId> {
    let y = layer_norm(b, p, x, &format!("{prefix}.final_layer_norm"), d)?;
    let y = linear(b, p, y, &format!("{prefix}.fc1"), d, ffn, true)?;
    let y = gelu(b, y)?;
    let y = linear(b, p, y, &format!("{prefix}.fc2"), ffn, d, true)?;
    b.add(x, y)
}

/// Softmax attention in Core ATen for q [1, S, D], k/v [1, L, D] with `heads` heads (q is
/// scaled first, as HF does), plus an optional additive mask [S, L]: returns [1, S, D].
fn attention_core(b: &mut GraphBuilder, q: ValueId, k: ValueId, v: ValueId, heads: usize, mask: Option<ValueId>) -> Result<ValueId> {
    let (s, l, d) = (fixed_dim(b, q, 1)?, fixed_dim(b, k, 1)?, fixed_dim(b, q, 2)?);
    let (h, hd) = (heads as i64, (d / heads) as i64);
    let q = b.mul_scalar(q, 1.0 / (hd as f64).sqrt())?;
    let split = |b: &mut GraphBuilder, x: ValueId, n: usize, perm: &[i64]| -> Result<ValueId> {
        let y = b.view(x, &[1, n as i64, h, hd])?;
        let y = b.permute(y, perm)?;
        let shape = if perm == [0, 2, 3, 1] { [h, hd, n as i64] } else { [h, n as i64, hd] };
        b.view(y, &shape)
    };
    let qh = split(b, q, s, &[0, 2, 1, 3])?;
    let kt = split(b, k, l, &[0, 2, 3, 1])?;
    let vh = split(b, v, l, &[0, 2, 1, 3])?;
    let mut scores = b.bmm(qh, kt)?;
    if let Some(m) = mask {
        scores = b.add(scores, m)?;
    }
    let probs = b.softmax(scores, -1)?;
    let o = b.bmm(probs, vh)?;
    let o = b.view(o, &[1, h, s as i64, hd])?;
    let o = b.permute(o, &[0, 2, 1, 3])?;
    b.view(o, &[1, s as i64, d as i64])
}

fn fixed_dim(b: &GraphBuilder, x: ValueId, i: usize) -> Result<usize> {
    match b.meta(x).shape.get(i) {
        Some(Dim::Fixed(n)) => Ok(*n),
        other => Err(rbuild_export::ExportError::Invalid(format!("whisper: expected a fixed dim {i}, got {other:?}"))),
    }
}

/// The front end's constants: the Hann window `[n_fft]` and the mel filters `[n_mels, n_fft/2 + 1]`.
pub fn front_end_constants(b: &mut GraphBuilder, n_mels: usize) -> Result<(ValueId, ValueId)> {
    let window = b.constant("hann_window", ScalarType::Float, &[N_FFT], ConstData::owned(f32_bytes(&features::hann_window(N_FFT))))?;
    let filters = features::mel_filters(SAMPLE_RATE, N_FFT, n_mels);
    let filters = b.constant("mel_filters", ScalarType::Float, &[n_mels, N_FFT / 2 + 1], ConstData::owned(f32_bytes(&filters)))?;
    Ok((window, filters))
}

/// The log-mel front end as a method: `pcm f32 [N]` (N in `[n_fft, max_samples]`) →
/// `features f32 [1, n_mels, N / hop]`.
pub fn preprocessor(c: &WhisperConfig, max_samples: usize) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let n = b.sym("samples", N_FFT, max_samples);
    let pcm = b.input("pcm", TensorMeta::new(ScalarType::Float, vec![n]));
    let (window, filters) = front_end_constants(&mut b, c.num_mel_bins)?;
    let mel = b.call1(
        "rbuild::log_mel_spectrogram",
        vec![Arg::Tensor(pcm), Arg::Tensor(window), Arg::Tensor(filters), Arg::Int(HOP_LENGTH as i64)],
    )?;
    // The frame count follows the sample count: its own symbol, bounded by the samples'.
    let frames = b.sym("frames", N_FFT / HOP_LENGTH, max_samples / HOP_LENGTH);
    b.graph.values[mel].meta = TensorMeta::new(ScalarType::Float, vec![Dim::Fixed(1), Dim::Fixed(c.num_mel_bins), frames]);
    b.output(mel);
    Ok(b.finish())
}

/// The encoder: features `[1, n_mels, 2 × max_source_positions]` → `[1, max_source_positions, d_model]`.
pub fn encoder(c: &WhisperConfig, p: &mut Params, ops: Ops) -> Result<Graph> {
    let dims = c.encoder_dims();
    let mut b = GraphBuilder::new();
    let x = b.input("input_features", TensorMeta::fixed(ScalarType::Float, &[1, dims.num_mel_bins, dims.frames_per_window()]));
    let y = encoder_stack(&mut b, p, &dims, "model.encoder", x, ops)?;
    b.output(y);
    Ok(b.finish())
}

/// The encoder's layers under `module` (`model.encoder`, Voxtral's `audio_tower`) on features
/// `x` `[B, n_mels, 2 × max_source_positions]` → `[B, max_source_positions, d_model]`; each
/// window of the batch is encoded on its own. B may be a symbol (fused ops only).
pub fn encoder_stack(b: &mut GraphBuilder, p: &mut Params, c: &EncoderDims, module: &str, x: ValueId, ops: Ops) -> Result<ValueId> {
    let (d, h) = (c.d_model, c.heads);
    let t = c.max_source_positions;
    let batch = b.meta(x).shape[0];
    if let Dim::Sym(s) = batch {
        if ops == Ops::CoreAten {
            return Err(rbuild_export::ExportError::Invalid("the Core-ATen encoder takes one window (a fixed batch of 1)".into()));
        }
        if b.graph.syms[s].value.is_none() {
            b.sym_size(x, 0)?;
        }
    }
    let y = conv1d(b, p, x, &format!("{module}.conv1"), c.num_mel_bins, d, 1)?;
    let y = gelu(b, y)?;
    let y = conv1d(b, p, y, &format!("{module}.conv2"), d, d, 2)?;
    let y = gelu(b, y)?;
    let y = b.permute(y, &[0, 2, 1])?;
    let pos = positions(b, p, &format!("{module}.embed_positions.weight"), t, d, Some(sinusoids(t, d)))?;
    let mut x = b.add(y, pos)?;
    for l in 0..c.layers {
        let prefix = format!("{module}.layers.{l}");
        let y = layer_norm(b, p, x, &format!("{prefix}.self_attn_layer_norm"), d)?;
        let a = format!("{prefix}.self_attn");
        let (q, k, v) = qkv(b, p, y, y, &a, d)?;
        let o = match ops {
            Ops::CoreAten => attention_core(b, q, k, v, h, None)?,
            Ops::Fused => {
                let heads = |b: &mut GraphBuilder, x| b.view_dims(x, &[batch, Dim::Fixed(t), Dim::Fixed(h), Dim::Fixed(d / h)]);
                let (q, k, v) = (heads(b, q)?, heads(b, k)?, heads(b, v)?);
                let o = b.call1(
                    "llama::custom_sdpa",
                    vec![Arg::Tensor(q), Arg::Tensor(k), Arg::Tensor(v), Arg::Int(0), Arg::None, Arg::Float(0.0), Arg::Bool(false), Arg::None],
                )?;
                b.view_dims(o, &[batch, Dim::Fixed(t), Dim::Fixed(d)])?
            }
        };
        let o = linear(b, p, o, &format!("{a}.out_proj"), d, d, true)?;
        x = b.add(x, o)?;
        x = mlp(b, p, x, &prefix, d, c.ffn)?;
    }
    layer_norm(b, p, x, &format!("{module}.layer_norm"), d)
}

/// HF's encoder position table: sinusoids with `log(10000)/(d/2 − 1)` timescales, sin then cos.
pub fn sinusoids(length: usize, d: usize) -> Vec<f32> {
    let half = d / 2;
    let step = (10000f64).ln() / (half as f64 - 1.0).max(1.0);
    let mut out = vec![0f32; length * d];
    for t in 0..length {
        for i in 0..half {
            let angle = t as f64 * (-step * i as f64).exp();
            out[t * d + i] = angle.sin() as f32;
            out[t * d + half + i] = angle.cos() as f32;
        }
    }
    out
}

/// A position table `[n, d]`: from the checkpoint, or (random weights) `generated` when given.
fn positions(b: &mut GraphBuilder, p: &mut Params, name: &str, n: usize, d: usize, generated: Option<Vec<f32>>) -> Result<ValueId> {
    match generated {
        Some(values) if p.is_random() => p.insert_f32(b, name, &[n, d], &values),
        _ => p.tensor(b, name, &[n, d], Init::LinearWeight { fan_in: 1 }),
    }
}

/// Shared by both decoders: the token embedding and the output projection's weight.
fn head(b: &mut GraphBuilder, p: &mut Params, c: &WhisperConfig, embed: ValueId) -> Result<ValueId> {
    if c.tie_word_embeddings || p.is_random() || !p.contains("proj_out.weight") {
        if !c.tie_word_embeddings && !p.is_random() {
            return Err(rbuild_export::ExportError::Weight { name: "proj_out.weight".into(), message: "missing (tie_word_embeddings is false)".into() });
        }
        return Ok(embed);
    }
    p.tensor(b, "proj_out.weight", &[c.vocab_size, c.d_model], Init::LinearWeight { fan_in: c.d_model })
}

fn embed(b: &mut GraphBuilder, p: &mut Params, c: &WhisperConfig, tokens: ValueId) -> Result<(ValueId, ValueId)> {
    let table = p.tensor(b, "model.decoder.embed_tokens.weight", &[c.vocab_size, c.d_model], Init::LinearWeight { fan_in: 16 })?;
    let mut x = b.embedding(table, tokens)?;
    if c.scale_embedding {
        x = b.mul_scalar(x, (c.d_model as f64).sqrt())?;
    }
    Ok((table, x))
}

/// The decoder a runner drives token by token: `text_decoder(tokens i64 [1, S], encoder_hidden
/// f32 [1, T, d_model], input_pos i64 [1]) -> logits f32 [1, vocab]` (last position), S dynamic
/// in `[1, cache_len]`. `cross_cache` is the cross-attention keys/values' dtype (Float, or Half
/// to halve what every step reads).
pub fn decoder_kv(c: &WhisperConfig, p: &mut Params, cache_len: usize, cross_cache: ScalarType) -> Result<Graph> {
    let (d, h) = (c.d_model, c.decoder_heads);
    let (hd, t) = (d / h, c.max_source_positions);
    let mut b = GraphBuilder::new();
    let s = b.sym("seq_len", 1, cache_len);
    let tokens = b.input("tokens", TensorMeta::new(ScalarType::Long, vec![Dim::Fixed(1), s]));
    let memory = b.input("encoder_hidden_states", TensorMeta::fixed(ScalarType::Float, &[1, t, d]));
    let input_pos = b.input("input_pos", TensorMeta::fixed(ScalarType::Long, &[1]));
    let seq_len = b.sym_size(tokens, 1)?;
    let start = b.item(input_pos)?;
    let (table, x) = embed(&mut b, p, c, tokens)?;
    let pos = positions(&mut b, p, "model.decoder.embed_positions.weight", c.max_target_positions, d, None)?;
    let mut x = b.call1("rbuild::add_positions", vec![Arg::Tensor(x), Arg::Tensor(pos), Arg::SymInt(start)])?;
    let heads = |b: &mut GraphBuilder, y: ValueId| b.view_dims(y, &[Dim::Fixed(1), s, Dim::Fixed(h), Dim::Fixed(hd)]);
    let merge = |b: &mut GraphBuilder, y: ValueId| b.view_dims(y, &[Dim::Fixed(1), s, Dim::Fixed(d)]);
    for l in 0..c.decoder_layers {
        let prefix = format!("model.decoder.layers.{l}");
        // Causal self-attention over the cache.
        let y = layer_norm(&mut b, p, x, &format!("{prefix}.self_attn_layer_norm"), d)?;
        let a = format!("{prefix}.self_attn");
        let (q, k, v) = qkv(&mut b, p, y, y, &a, d)?;
        let (q, k, v) = (heads(&mut b, q)?, heads(&mut b, k)?, heads(&mut b, v)?);
        let k_cache = b.state(&format!("k_cache_{l}"), ScalarType::Float, &[1, cache_len, h, hd]);
        let v_cache = b.state(&format!("v_cache_{l}"), ScalarType::Float, &[1, cache_len, h, hd]);
        let o = b.call1(
            "llama::sdpa_with_kv_cache",
            vec![
                Arg::Tensor(q),
                Arg::Tensor(k),
                Arg::Tensor(v),
                Arg::Tensor(k_cache),
                Arg::Tensor(v_cache),
                Arg::SymInt(start),
                Arg::SymInt(seq_len),
                Arg::None,
                Arg::Float(0.0),
                Arg::Bool(true),
                Arg::None,
            ],
        )?;
        let o = merge(&mut b, o)?;
        let o = linear(&mut b, p, o, &format!("{a}.out_proj"), d, d, true)?;
        x = b.add(x, o)?;
        // Cross-attention: keys/values of the window, projected at input_pos 0 into state.
        let y = layer_norm(&mut b, p, x, &format!("{prefix}.encoder_attn_layer_norm"), d)?;
        let a = format!("{prefix}.encoder_attn");
        let q = linear(&mut b, p, y, &format!("{a}.q_proj"), d, d, true)?;
        let q = heads(&mut b, q)?;
        let wk = p.tensor(&mut b, &format!("{a}.k_proj.weight"), &[d, d], Init::LinearWeight { fan_in: d })?;
        let wv = p.tensor(&mut b, &format!("{a}.v_proj.weight"), &[d, d], Init::LinearWeight { fan_in: d })?;
        let bv = p.tensor(&mut b, &format!("{a}.v_proj.bias"), &[d], Init::LinearBias)?;
        let ck = b.state(&format!("cross_k_{l}"), cross_cache, &[1, t, h, hd]);
        let cv = b.state(&format!("cross_v_{l}"), cross_cache, &[1, t, h, hd]);
        let o = b.call1(
            "rbuild::cross_attention",
            vec![
                Arg::Tensor(q),
                Arg::Tensor(memory),
                Arg::Tensor(wk),
                Arg::None,
                Arg::Tensor(wv),
                Arg::Tensor(bv),
                Arg::Tensor(ck),
                Arg::Tensor(cv),
                Arg::SymInt(start),
            ],
        )?;
        let o = merge(&mut b, o)?;
        let o = linear(&mut b, p, o, &format!("{a}.out_proj"), d, d, true)?;
        x = b.add(x, o)?;
        x = mlp(&mut b, p, x, &prefix, d, c.decoder_ffn)?;
    }
    let x = layer_norm(&mut b, p, x, "model.decoder.layer_norm", d)?;
    let x = b.select(x, 1, -1)?;
    let w = head(&mut b, p, c, table)?;
    let logits = b.linear(x, w, None)?;
    b.output(logits);
    Ok(b.finish())
}

/// The Core-ATen decoder: `text_decoder(tokens i64 [1, S], encoder_hidden f32 [1, T, d_model])
/// -> logits f32 [1, S, vocab]` for a static S, recomputing everything per call.
pub fn decoder_full(c: &WhisperConfig, p: &mut Params, seq_len: usize) -> Result<Graph> {
    let (d, h) = (c.d_model, c.decoder_heads);
    let t = c.max_source_positions;
    let mut b = GraphBuilder::new();
    let tokens = b.input("tokens", TensorMeta::fixed(ScalarType::Long, &[1, seq_len]));
    let memory = b.input("encoder_hidden_states", TensorMeta::fixed(ScalarType::Float, &[1, t, d]));
    let (table, x) = embed(&mut b, p, c, tokens)?;
    let pos = positions(&mut b, p, "model.decoder.embed_positions.weight", c.max_target_positions, d, None)?;
    let pos = b.slice(pos, 0, 0, seq_len as i64)?;
    let mut x = b.add(x, pos)?;
    let mask = crate::llama::causal_mask(seq_len);
    let mask = b.constant("causal_mask", ScalarType::Float, &[seq_len, seq_len], ConstData::owned(f32_bytes(&mask)))?;
    for l in 0..c.decoder_layers {
        let prefix = format!("model.decoder.layers.{l}");
        let y = layer_norm(&mut b, p, x, &format!("{prefix}.self_attn_layer_norm"), d)?;
        let a = format!("{prefix}.self_attn");
        let (q, k, v) = qkv(&mut b, p, y, y, &a, d)?;
        let o = attention_core(&mut b, q, k, v, h, Some(mask))?;
        let o = linear(&mut b, p, o, &format!("{a}.out_proj"), d, d, true)?;
        x = b.add(x, o)?;
        let y = layer_norm(&mut b, p, x, &format!("{prefix}.encoder_attn_layer_norm"), d)?;
        let a = format!("{prefix}.encoder_attn");
        let (q, k, v) = qkv(&mut b, p, y, memory, &a, d)?;
        let o = attention_core(&mut b, q, k, v, h, None)?;
        let o = linear(&mut b, p, o, &format!("{a}.out_proj"), d, d, true)?;
        x = b.add(x, o)?;
        x = mlp(&mut b, p, x, &prefix, d, c.decoder_ffn)?;
    }
    let x = layer_norm(&mut b, p, x, "model.decoder.layer_norm", d)?;
    let w = head(&mut b, p, c, table)?;
    let logits = b.linear(x, w, None)?;
    b.output(logits);
    Ok(b.finish())
}
