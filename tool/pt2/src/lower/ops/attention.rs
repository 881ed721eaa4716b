//! `scaled_dot_product_attention` as core ops, the way PyTorch's math path computes it:
//! `softmax((q·√s)(k·√s)ᵀ + bias) v`, where the bias comes from `attn_mask` or causality and
//! rows that are masked entirely give zeros (`_safe_softmax`).

use rbuild_export::graph::{Arg, Dim, ValueId};
use rbuild_runtime::{Scalar, ScalarType};

use super::layout::broadcast_to;
use super::nn::{matmul_values, scaled};
use super::{one, Call, Cx, OpResult};

pub(super) fn scaled_dot_product_attention(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let (q, k, v) = (cx.tensor(a, "query")?, cx.tensor(a, "key")?, cx.tensor(a, "value")?);
    let mask = cx.opt_tensor(a, "attn_mask")?;
    if cx.float(a, "dropout_p")? > 0.0 {
        return Err("dropout_p > 0 (training) is not supported".into());
    }
    let is_causal = cx.bool(a, "is_causal")?;
    if is_causal && mask.is_some() {
        return Err("attn_mask and is_causal together are not supported (PyTorch rejects them too)".into());
    }
    let qm = cx.meta(q).clone();
    let rank = qm.rank();
    if rank < 2 || cx.meta(k).rank() != rank || cx.meta(v).rank() != rank {
        return Err(format!("query, key and value must have the same rank >= 2, got {:?}, {:?}, {:?}", qm.shape, cx.meta(k).shape, cx.meta(v).shape));
    }
    let Dim::Fixed(head_dim) = qm.shape[rank - 1] else { return Err("the head dim must be fixed".into()) };
    let scale = cx.opt_float(a, "scale")?.unwrap_or(1.0 / (head_dim as f64).sqrt());
    let (k, v) = if cx.bool(a, "enable_gqa")? { (repeat_kv(cx, k, &qm.shape)?, repeat_kv(cx, v, &qm.shape)?) } else { (k, v) };

    let root = scale.sqrt();
    let q = scaled(cx, q, root)?;
    let k = scaled(cx, k, root)?;
    let kt = cx.call1("aten::transpose_copy.int", vec![Arg::Tensor(k), Arg::Int(-2), Arg::Int(-1)])?;
    let mut scores = matmul_values(cx, q, kt)?;
    let (len_q, len_k) = (qm.shape[rank - 2], cx.meta(k).shape[rank - 2]);
    let bias = match mask {
        _ if is_causal => Some(causal_bias(cx, len_q, len_k)?),
        Some(m) if cx.meta(m).dtype == ScalarType::Bool => {
            let (zero, minus_inf) = (cx.scalar_constant(Scalar::Double(0.0), qm.dtype)?, cx.scalar_constant(Scalar::Double(f64::NEG_INFINITY), qm.dtype)?);
            Some(cx.call1("aten::where.self", vec![Arg::Tensor(m), Arg::Tensor(zero), Arg::Tensor(minus_inf)])?)
        }
        Some(m) => Some(m),
        None => None,
    };
    if let Some(bias) = bias {
        scores = cx.call1("aten::add.Tensor", vec![Arg::Tensor(scores), Arg::Tensor(bias), Arg::Scalar(Scalar::Int(1))])?;
    }
    let mut attn = cx.call1("aten::_softmax", vec![Arg::Tensor(scores), Arg::Int(-1), Arg::Bool(false)])?;
    if bias.is_some() {
        attn = zero_fully_masked_rows(cx, scores, attn)?;
    }
    one(matmul_values(cx, attn, v)?)
}

/// `_safe_softmax`: rows whose scores are all -inf give 0 instead of NaN.
fn zero_fully_masked_rows(cx: &mut Cx, scores: ValueId, attn: ValueId) -> Result<ValueId, String> {
    let finite = cx.call1("aten::ne.Scalar", vec![Arg::Tensor(scores), Arg::Scalar(Scalar::Double(f64::NEG_INFINITY))])?;
    let any = cx.call1("aten::any.dim", vec![Arg::Tensor(finite), Arg::Int(-1), Arg::Bool(true)])?;
    let zero = cx.scalar_constant(Scalar::Double(0.0), cx.meta(attn).dtype)?;
    cx.call1("aten::where.self", vec![Arg::Tensor(any), Arg::Tensor(attn), Arg::Tensor(zero)])
}

/// The causal bias [L, S]: 0 where key j <= query i (`tril`, aligned top-left as PyTorch
/// does), -inf elsewhere. A constant at the dims' largest sizes, sliced to run-time ones.
fn causal_bias(cx: &mut Cx, len_q: Dim, len_k: Dim) -> Result<ValueId, String> {
    let (rows, cols) = (cx.b.graph.dim_max(len_q), cx.b.graph.dim_max(len_k));
    let values: Vec<f32> = (0..rows * cols).map(|i| if i % cols <= i / cols { 0.0 } else { f32::NEG_INFINITY }).collect();
    let mut bias = cx.f32_constant("causal_bias", &[rows, cols], &values)?;
    for (dim, len) in [(0, len_q), (1, len_k)] {
        if let Dim::Sym(s) = len {
            let end = cx.sym_value(s)?;
            let args = vec![Arg::Tensor(bias), Arg::Int(dim), Arg::Int(0), Arg::SymInt(end), Arg::Int(1)];
            bias = cx.call1("aten::slice_copy.Tensor", args)?;
        }
    }
    Ok(bias)
}

/// Grouped-query attention: each of the Hkv key/value heads serves H/Hkv query heads
/// (`repeat_interleave` over the head dim, as expand + view).
fn repeat_kv(cx: &mut Cx, x: ValueId, query: &[Dim]) -> Result<ValueId, String> {
    let shape = cx.meta(x).shape.clone();
    let r = shape.len();
    if r < 3 {
        return Err("enable_gqa needs a head dim (rank >= 3)".into());
    }
    let (heads, kv_heads) = (cx.b.graph.dim_max(query[r - 3]), cx.b.graph.dim_max(shape[r - 3]));
    if heads == kv_heads {
        return Ok(x);
    }
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(format!("{heads} query heads are not a multiple of {kv_heads} key/value heads"));
    }
    let wide = cx.call1("aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(r as i64 - 2)])?;
    let mut target = shape.clone();
    target.insert(r - 2, Dim::Fixed(heads / kv_heads));
    let wide = broadcast_to(cx, wide, &target)?;
    let mut out = shape;
    out[r - 3] = Dim::Fixed(heads);
    cx.view(wide, &out)
}
