//! Linear layers (`y = x @ W^T + b`, W `[N, K]` row-major as in Hugging Face) in f32 and in the
//! weight formats of rbuild's LLM quantization, plus ExecuTorch's quantized embedding lookups.
//!
//! - `aten::linear.out`: f32.
//! - `rbuild::linear_f16.out`: float16 weights (half the bytes of f32 in memory-bound decode),
//!   f32 activations, sums and output.
//! - `rbuild::linear_q8.out`: int8 weights, one f32 scale per output channel.
//! - `rbuild::linear_q4.out`: int4 weights packed two per byte (element `k` in byte `k/2`, low
//!   nibble for even `k`; value = nibble − 8), one scale (Float or Half) per `group_size`
//!   elements of a row.
//! - `rbuild::linear_8da4w.out`: the same weights; activations quantized per row and group to
//!   int8 (`sx = max|x|/127`, `xq = round(x/sx)` ties away from zero), integer inner sums.
//! - `rbuild::linear_q8g.out`: int8 weights with one scale (Float or Half) per `group_size`
//!   elements of a row, `w = d·q` (GGUF's Q8_0 at group 32).
//! - `rbuild::linear_q4_1.out`: int4 weights packed as linear_q4 but unsigned (`u` = nibble in
//!   [0, 15]), a scale `d` and a minimum `m` (Float or Half) per group, `w = d·u + m` (GGUF's
//!   Q4_1 at group 32).
//! - `quantized_decomposed::embedding_byte.out` / `embedding_4bit.out`: ExecuTorch 1.3.1's
//!   semantics and packing (for 4-bit, the *high* nibble holds the even element there).
//!
//! The reference sums accumulate in f64. The `parse_linear` checks are shared with the
//! optimized kernels.

use alloc::vec;
use alloc::vec::Vec;

use half::f16;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::llm::{f32_arg, f32_out, require_rank};

rbuild_runtime::kernel_table! {
    "aten::linear.out" => linear_out,
    "rbuild::linear_f16.out" => linear_f16_out,
    "rbuild::linear_q8.out" => linear_q8_out,
    "rbuild::linear_q4.out" => linear_q4_out,
    "rbuild::linear_8da4w.out" => linear_8da4w_out,
    "rbuild::linear_q8g.out" => linear_q8g_out,
    "rbuild::linear_q4_1.out" => linear_q4_1_out,
    "quantized_decomposed::embedding_byte.out" => embedding_byte_out,
    "quantized_decomposed::embedding_4bit.out" => embedding_4bit_out,
}

/// Group sizes the groupwise formats (int4, int4 with minimums, grouped int8) accept.
pub const GROUP_SIZES: [usize; 4] = [32, 64, 128, 256];

/// Which linear op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    F32,
    F16,
    Q8,
    Q4,
    Da4w,
    /// int8 with a scale per group (GGUF Q8_0).
    Q8Group,
    /// Unsigned int4 with a scale and a minimum per group (GGUF Q4_1).
    Q4Min,
}

impl Kind {
    pub fn op(self) -> &'static str {
        match self {
            Kind::F32 => "aten::linear",
            Kind::F16 => "rbuild::linear_f16",
            Kind::Q8 => "rbuild::linear_q8",
            Kind::Q4 => "rbuild::linear_q4",
            Kind::Da4w => "rbuild::linear_8da4w",
            Kind::Q8Group => "rbuild::linear_q8g",
            Kind::Q4Min => "rbuild::linear_q4_1",
        }
    }
}

/// Per-group scales of the int4 formats, Float or Half.
#[derive(Clone, Copy)]
pub(crate) enum Scales<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

impl Scales<'_> {
    #[inline]
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Scales::F32(s) => s[i],
            Scales::F16(s) => s[i].to_f32(),
        }
    }
}

/// The weight operand of a linear op.
#[derive(Clone, Copy)]
pub(crate) enum Weights<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    Q8 { w: &'a [i8], scales: &'a [f32] },
    /// `da` = quantize activations (8da4w) rather than weight-only.
    Q4 { w: &'a [u8], scales: Scales<'a>, group: usize, da: bool },
    /// `w = scales[g] · q`, q int8.
    Q8Group { w: &'a [i8], scales: Scales<'a>, group: usize },
    /// `w = scales[g] · u + mins[g]`, u the unsigned nibble (packed as `Q4`).
    Q4Min { w: &'a [u8], scales: Scales<'a>, mins: Scales<'a>, group: usize },
}

/// A checked linear problem: x `[M, K]`, weights for `[N, K]`, out `[M, N]`.
#[derive(Clone, Copy)]
pub(crate) struct Linear<'a> {
    pub x: &'a [f32],
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub bias: Option<&'a [f32]>,
    pub w: Weights<'a>,
}

/// Checks a linear op's arguments and runs `f` on them with the resized output. Argument
/// layout: f32 and f16 [input, weight, bias, out, out]; q8 [input, weight, weight_scales, bias, out,
/// out]; q4/8da4w/q8g [input, weight, weight_scales, bias, group_size, out, out]; q4_1 [input,
/// weight, weight_scales, weight_mins, bias, group_size, out, out].
pub(crate) fn run_linear(ctx: &KernelContext, args: &KernelArgs<'_>, kind: Kind, f: fn(&KernelContext, &Linear<'_>, &mut [f32])) -> KernelResult {
    let op = kind.op();
    let x = args.tensor(0)?;
    let xd = f32_arg(&x, op, "input")?;
    let k = x.sizes().last().copied().ok_or_else(|| kerr!("{op}: input must have at least one dim"))?;
    let m = if k == 0 { x.sizes()[..x.dim() - 1].iter().product() } else { xd.len() / k };
    let wt = args.tensor(1)?;
    require_rank(wt.sizes(), 2, op, "weight")?;
    if !wt.dim_order.is_contiguous() {
        return Err(kerr!("{op}: weight must be contiguous"));
    }
    let n = wt.sizes()[0];
    let (bias_at, out_at) = match kind {
        Kind::F32 | Kind::F16 => (2, 3),
        Kind::Q8 => (3, 4),
        Kind::Q4 | Kind::Da4w | Kind::Q8Group => (3, 5),
        Kind::Q4Min => (4, 6),
    };
    let w = match kind {
        Kind::F32 => {
            if wt.sizes()[1] != k {
                return Err(kerr!("{op}: weight {:?} does not match input {:?} (in_features {k})", wt.sizes(), x.sizes()));
            }
            Weights::F32(f32_arg(&wt, op, "weight")?)
        }
        Kind::F16 => {
            if wt.dtype != ScalarType::Half {
                return Err(kerr!("{op}: weight must be Half (float16), got {}", wt.dtype));
            }
            if wt.sizes()[1] != k {
                return Err(kerr!("{op}: weight {:?} does not match input {:?} (in_features {k})", wt.sizes(), x.sizes()));
            }
            Weights::F16(wt.data::<f16>()?)
        }
        Kind::Q8 => {
            if wt.dtype != ScalarType::Char {
                return Err(kerr!("{op}: weight must be Char (int8), got {}", wt.dtype));
            }
            if wt.sizes()[1] != k {
                return Err(kerr!("{op}: weight {:?} does not match input {:?} (in_features {k})", wt.sizes(), x.sizes()));
            }
            let s = args.tensor(2)?;
            if s.sizes() != [n] {
                return Err(kerr!("{op}: weight_scales must be [{n}] (one per output channel), got {:?}", s.sizes()));
            }
            Weights::Q8 { w: wt.data::<i8>()?, scales: f32_arg(&s, op, "weight_scales")? }
        }
        Kind::Q4 | Kind::Da4w | Kind::Q4Min => {
            if wt.dtype != ScalarType::Byte {
                return Err(kerr!("{op}: weight must be Byte (two int4 per byte), got {}", wt.dtype));
            }
            if wt.sizes()[1] * 2 != k {
                return Err(kerr!(
                    "{op}: packed weight {:?} holds {} inputs per row but input {:?} has {k}",
                    wt.sizes(),
                    wt.sizes()[1] * 2,
                    x.sizes()
                ));
            }
            let group = group_size(args, out_at - 1, op, k)?;
            let scales = group_params(args, 2, op, "weight_scales", n, k / group)?;
            let w = wt.data::<u8>()?;
            if kind == Kind::Q4Min {
                Weights::Q4Min { w, scales, mins: group_params(args, 3, op, "weight_mins", n, k / group)?, group }
            } else {
                Weights::Q4 { w, scales, group, da: kind == Kind::Da4w }
            }
        }
        Kind::Q8Group => {
            if wt.dtype != ScalarType::Char {
                return Err(kerr!("{op}: weight must be Char (int8), got {}", wt.dtype));
            }
            if wt.sizes()[1] != k {
                return Err(kerr!("{op}: weight {:?} does not match input {:?} (in_features {k})", wt.sizes(), x.sizes()));
            }
            let group = group_size(args, out_at - 1, op, k)?;
            Weights::Q8Group { w: wt.data::<i8>()?, scales: group_params(args, 2, op, "weight_scales", n, k / group)?, group }
        }
    };
    let bias = match args.opt_tensor(bias_at)? {
        None => None,
        Some(b) => {
            if b.sizes() != [n] {
                return Err(kerr!("{op}: bias must be [{n}], got {:?}", b.sizes()));
            }
            Some(f32_arg(&b, op, "bias")?)
        }
    };
    let mut out = args.out(out_at)?;
    f32_out(&out, op, "out")?;
    let mut sizes = x.sizes().to_vec();
    *sizes.last_mut().expect("rank >= 1") = n;
    out.resize(&sizes)?;
    f(ctx, &Linear { x: xd, m, k, n, bias, w }, out.data_mut()?);
    Ok(())
}

/// The `group_size` argument at `at`: one of [`GROUP_SIZES`], dividing in_features `k`.
fn group_size(args: &KernelArgs<'_>, at: usize, op: &str, k: usize) -> KernelResult<usize> {
    let g = args.int(at).map_err(|e| kerr!("{op}: group_size: {e}"))?;
    let group = usize::try_from(g)
        .ok()
        .filter(|g| GROUP_SIZES.contains(g))
        .ok_or_else(|| kerr!("{op}: group_size must be one of {GROUP_SIZES:?}, got {g}"))?;
    if k % group != 0 {
        return Err(kerr!("{op}: in_features {k} is not a multiple of group_size {group}"));
    }
    Ok(group)
}

/// Per-group parameters (scales or minimums) at `at`: Float or Half, contiguous `[n, groups]`.
fn group_params<'a>(args: &KernelArgs<'a>, at: usize, op: &str, name: &str, n: usize, groups: usize) -> KernelResult<Scales<'a>> {
    let s = args.tensor(at)?;
    if s.sizes() != [n, groups] {
        return Err(kerr!("{op}: {name} must be [{n}, {groups}] (N, K/group_size), got {:?}", s.sizes()));
    }
    params(&s, op, name)
}

/// The unsigned nibble of element `k` of a packed row (low nibble for even `k`), in [0, 15].
#[inline]
pub(crate) fn u4_at(row: &[u8], k: usize) -> i32 {
    let b = row[k / 2];
    (if k % 2 == 0 { b & 0x0F } else { b >> 4 }) as i32
}

/// The int4 value of element `k` of a packed row (low nibble for even `k`), in [−8, 7].
#[inline]
pub(crate) fn q4_at(row: &[u8], k: usize) -> i32 {
    u4_at(row, k) - 8
}

/// Quantizes one group of activations to int8, symmetric: returns `sx = max|x|/127` and
/// writes `xq = round(x/sx)` (ties away from zero) clamped to ±127; all zeros when `sx == 0`.
/// The optimized kernels call this same function, so their integer sums match exactly.
#[inline]
pub(crate) fn quantize_group(x: &[f32], xq: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let sx = amax / 127.0;
    if sx == 0.0 || !sx.is_finite() {
        xq.iter_mut().for_each(|q| *q = 0);
        // A NaN/inf group poisons its output as in float arithmetic.
        return if sx == 0.0 { 0.0 } else { f32::NAN };
    }
    for (q, &v) in xq.iter_mut().zip(x) {
        *q = libm::roundf(v / sx).clamp(-127.0, 127.0) as i8;
    }
    sx
}

/// Plain loops over every format.
pub(crate) fn linear_reference(_: &KernelContext, p: &Linear<'_>, out: &mut [f32]) {
    let (m, k, n) = (p.m, p.k, p.n);
    let mut xq = vec![0i8; k];
    let mut sx = Vec::new();
    for i in 0..m {
        let x = &p.x[i * k..(i + 1) * k];
        if let Weights::Q4 { group, da: true, .. } = p.w {
            sx = x.chunks(group).zip(xq.chunks_mut(group)).map(|(xg, qg)| quantize_group(xg, qg)).collect();
        }
        for j in 0..n {
            let acc: f64 = match p.w {
                Weights::F32(w) => x.iter().zip(&w[j * k..(j + 1) * k]).map(|(&a, &b)| a as f64 * b as f64).sum(),
                Weights::F16(w) => x.iter().zip(&w[j * k..(j + 1) * k]).map(|(&a, &b)| a as f64 * b.to_f64()).sum(),
                Weights::Q8 { w, scales } => {
                    let s: f64 = x.iter().zip(&w[j * k..(j + 1) * k]).map(|(&a, &b)| a as f64 * b as f64).sum();
                    s * scales[j] as f64
                }
                Weights::Q4 { w, scales, group, da } => {
                    let row = &w[j * k / 2..(j + 1) * k / 2];
                    let groups = k / group;
                    (0..groups)
                        .map(|g| {
                            let s = scales.get(j * groups + g) as f64;
                            let ks = g * group..(g + 1) * group;
                            if da {
                                let isum: i32 = ks.map(|kk| xq[kk] as i32 * q4_at(row, kk)).sum();
                                sx[g] as f64 * s * isum as f64
                            } else {
                                s * ks.map(|kk| x[kk] as f64 * q4_at(row, kk) as f64).sum::<f64>()
                            }
                        })
                        .sum()
                }
                Weights::Q8Group { w, scales, group } => {
                    let row = &w[j * k..(j + 1) * k];
                    let groups = k / group;
                    (0..groups)
                        .map(|g| {
                            let ks = g * group..(g + 1) * group;
                            let dot: f64 = x[ks.clone()].iter().zip(&row[ks]).map(|(&a, &q)| a as f64 * q as f64).sum();
                            scales.get(j * groups + g) as f64 * dot
                        })
                        .sum()
                }
                Weights::Q4Min { w, scales, mins, group } => {
                    let row = &w[j * k / 2..(j + 1) * k / 2];
                    let groups = k / group;
                    (0..groups)
                        .map(|g| {
                            let ks = g * group..(g + 1) * group;
                            let dot: f64 = ks.clone().map(|kk| x[kk] as f64 * u4_at(row, kk) as f64).sum();
                            let xsum: f64 = x[ks].iter().map(|&a| a as f64).sum();
                            scales.get(j * groups + g) as f64 * dot + mins.get(j * groups + g) as f64 * xsum
                        })
                        .sum()
                }
            };
            out[i * n + j] = (acc + p.bias.map_or(0.0, |b| b[j] as f64)) as f32;
        }
    }
}

/// `linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out)`.
pub fn linear_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::F32, linear_reference)
}

/// `linear_f16.out(Tensor input, Tensor weight, Tensor? bias, *, Tensor(a!) out)`: weight Half.
pub fn linear_f16_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::F16, linear_reference)
}

/// `linear_q8.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, *, Tensor(a!) out)`.
pub fn linear_q8_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q8, linear_reference)
}

/// `linear_q4.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out)`.
pub fn linear_q4_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q4, linear_reference)
}

/// `linear_8da4w.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out)`.
pub fn linear_8da4w_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Da4w, linear_reference)
}

/// `linear_q8g.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out)`.
pub fn linear_q8g_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q8Group, linear_reference)
}

/// `linear_q4_1.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor weight_mins, Tensor? bias, int group_size, *, Tensor(a!) out)`.
pub fn linear_q4_1_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q4Min, linear_reference)
}

// ---------------------------------------------------------------------------------------------
// Quantized embeddings (ExecuTorch's kernels/quantized op_embedding*.cpp semantics)
// ---------------------------------------------------------------------------------------------

/// Float or Half parameters read as f32.
fn params<'a>(t: &TensorRef<'a>, op: &str, name: &str) -> KernelResult<Scales<'a>> {
    if !t.dim_order.is_contiguous() {
        return Err(kerr!("{op}: {name} must be contiguous"));
    }
    match t.dtype {
        ScalarType::Float => Ok(Scales::F32(t.data()?)),
        ScalarType::Half => Ok(Scales::F16(t.data()?)),
        d => Err(kerr!("{op}: {name} must be Float or Half, got {d}")),
    }
}

/// `embedding_{byte,4bit}.out(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points,
/// int weight_quant_min, int weight_quant_max, Tensor indices, *, Tensor(a!) out)`: args =
/// [weight, scales, zero_points, qmin, qmax, indices, out, out]. Output = indices.shape +
/// [embedding_dim]; element j of row r is `(float(q[r, j]) − float(zp[r, g])) · float(s[r, g])`,
/// g = j / group, cast to out's dtype.
fn embedding_q(args: &KernelArgs<'_>, nbit: u32) -> KernelResult {
    let op = if nbit == 8 { "quantized_decomposed::embedding_byte" } else { "quantized_decomposed::embedding_4bit" };
    let w = args.tensor(0)?;
    let s = args.tensor(1)?;
    let zp = args.opt_tensor(2)?;
    let (qmin, qmax) = (args.int(3)?, args.int(4)?);
    let idx = args.tensor(5)?;
    require_rank(w.sizes(), 2, op, "weight")?;
    if !w.dim_order.is_contiguous() || !idx.dim_order.is_contiguous() {
        return Err(kerr!("{op}: weight and indices must be contiguous"));
    }
    let (rows, packed) = (w.sizes()[0], w.sizes()[1]);
    let dim = if nbit == 8 { packed } else { packed * 2 };
    match (nbit, w.dtype) {
        (8, ScalarType::Byte | ScalarType::Char) | (4, ScalarType::Byte) => {}
        (_, d) => return Err(kerr!("{op}: weight dtype {d} is not supported (Byte{})", if nbit == 8 { " or Char" } else { "" })),
    }
    if s.dim() != 1 && s.dim() != 2 {
        return Err(kerr!("{op}: weight_scales must be 1-D or 2-D, got {:?}", s.sizes()));
    }
    if s.sizes()[0] != rows {
        return Err(kerr!("{op}: weight_scales {:?} must have one row per embedding ({rows})", s.sizes()));
    }
    let groups = if s.dim() == 2 { s.sizes()[1] } else { 1 };
    if groups == 0 || dim % groups != 0 {
        return Err(kerr!("{op}: {groups} groups do not divide embedding_dim {dim}"));
    }
    let group = dim / groups;
    if qmin > qmax {
        return Err(kerr!("{op}: weight_quant_min {qmin} is greater than weight_quant_max {qmax}"));
    }
    let mut out = args.out(6)?;
    let odt = out.dtype;
    if odt != ScalarType::Float && odt != ScalarType::Half {
        return Err(kerr!("{op}: out must be Float or Half, got {odt}"));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{op}: out must be contiguous"));
    }
    // ExecuTorch's `.out` variant reads the scales (and zero points) as out's dtype.
    if s.dtype != odt {
        return Err(kerr!("{op}: weight_scales dtype {} must match out dtype {odt}", s.dtype));
    }
    let scales = params(&s, op, "weight_scales")?;
    let zps = match &zp {
        None => None,
        Some(z) => {
            if z.sizes() != s.sizes() {
                return Err(kerr!("{op}: weight_zero_points {:?} must match weight_scales {:?}", z.sizes(), s.sizes()));
            }
            if z.dtype != odt {
                return Err(kerr!("{op}: weight_zero_points dtype {} must match out dtype {odt}", z.dtype));
            }
            Some(params(z, op, "weight_zero_points")?)
        }
    };
    let ids: Vec<i64> = match idx.dtype {
        ScalarType::Long => idx.data::<i64>()?.to_vec(),
        ScalarType::Int => idx.data::<i32>()?.iter().map(|&v| v as i64).collect(),
        d => return Err(kerr!("{op}: indices must be Long or Int, got {d}")),
    };
    let mut sizes = idx.sizes().to_vec();
    sizes.push(dim);
    out.resize(&sizes)?;
    let wb = w.bytes();
    let mut vals = vec![0.0f32; ids.len() * dim];
    for (&id, row_vals) in ids.iter().zip(vals.chunks_exact_mut(dim.max(1))) {
        if id < 0 || id as usize >= rows {
            return Err(kerr!("{op}: index {id} is out of range for {rows} embeddings"));
        }
        let r = id as usize;
        let wrow = &wb[r * packed..(r + 1) * packed];
        for (j, v) in row_vals.iter_mut().enumerate() {
            let q = match (nbit, w.dtype) {
                (8, ScalarType::Char) => wrow[j] as i8 as f32,
                (8, _) => wrow[j] as f32,
                // ExecuTorch's 4-bit packing: even elements in the high nibble.
                _ => (if j % 2 == 0 { wrow[j / 2] >> 4 } else { wrow[j / 2] & 0x0F }) as f32 - 8.0,
            };
            let g = r * groups + j / group;
            let z = zps.map_or(0.0, |z| z.get(g));
            *v = (q - z) * scales.get(g);
        }
    }
    if odt == ScalarType::Float {
        out.data_mut::<f32>()?.copy_from_slice(&vals);
    } else {
        for (o, &v) in out.data_mut::<f16>()?.iter_mut().zip(&vals) {
            *o = f16::from_f32(v);
        }
    }
    Ok(())
}

pub fn embedding_byte_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    embedding_q(args, 8)
}

pub fn embedding_4bit_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    embedding_q(args, 4)
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn linear_f32_hand_computed_with_leading_dims_and_bias() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2, 3], &[1.0, 2.0, 3.0, -1.0, 0.0, 1.0]);
        let w = h.f32(&[2, 3], &[1.0, 0.0, 1.0, 0.5, 0.5, 0.5]);
        let b = h.f32(&[2], &[10.0, 20.0]);
        let out = h.out_dynamic(ScalarType::Float, &[1, 4, 2]);
        h.call(super::linear_out, &[x, w, b, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![1, 2, 2]);
        assert_eq!(h.read::<f32>(out), vec![14.0, 23.0, 10.0, 20.0]);
        let bad = h.f32(&[2, 4], &[0.0; 8]);
        let e = h.call(super::linear_out, &[x, bad, b, out, out]).unwrap_err();
        assert!(e.message.contains("aten::linear") && e.message.contains("in_features 3"), "{e}");
    }

    #[test]
    fn linear_q8_hand_computed() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2], &[1.0, 2.0]);
        let w = h.tensor::<i8>(ScalarType::Char, &[2, 2], &[3, -4, 127, -128]);
        let s = h.f32(&[2], &[0.5, 0.25]);
        let none = h.none();
        let out = h.out(ScalarType::Float, &[2]);
        h.call(super::linear_q8_out, &[x, w, s, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0.5 * (3.0 - 8.0), 0.25 * (127.0 - 256.0)]);
        let s1 = h.f32(&[1], &[1.0]);
        let e = h.call(super::linear_q8_out, &[x, w, s1, none, out, out]).unwrap_err();
        assert!(e.message.contains("rbuild::linear_q8") && e.message.contains("weight_scales"), "{e}");
    }

    /// Packs int4 values (in [-8, 7]) two per byte, low nibble first.
    fn pack(q: &[i32]) -> Vec<u8> {
        q.chunks(2).map(|p| ((p[0] + 8) as u8) | (((p[1] + 8) as u8) << 4)).collect()
    }

    #[test]
    fn linear_q4_and_8da4w_hand_computed() {
        // K = 64, group 32, N = 1: first group all q=1 with scale 0.5, second q=-8 with scale Half 2.
        let mut q = vec![1; 32];
        q.extend(vec![-8; 32]);
        let xs: Vec<f32> = (0..64).map(|i| if i < 32 { 1.0 } else { 0.5 }).collect();
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 64], &xs);
        let w = h.tensor::<u8>(ScalarType::Byte, &[1, 32], &pack(&q));
        let s = h.tensor::<f16>(ScalarType::Half, &[1, 2], &[f16::from_f32(0.5), f16::from_f32(2.0)]);
        let (none, g) = (h.none(), h.int(32));
        let out = h.out(ScalarType::Float, &[1, 1]);
        h.call(super::linear_q4_out, &[x, w, s, none, g, out, out]).unwrap();
        let want = 0.5 * 32.0 + 2.0 * (-8.0 * 0.5 * 32.0);
        assert_eq!(h.read::<f32>(out), vec![want]);
        // 8da4w: both groups are constant, so quantization is exact (xq = 127, sx = amax/127).
        h.call(super::linear_8da4w_out, &[x, w, s, none, g, out, out]).unwrap();
        let got = h.read::<f32>(out)[0];
        assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        let g48 = h.int(48);
        let e = h.call(super::linear_q4_out, &[x, w, s, none, g48, out, out]).unwrap_err();
        assert!(e.message.contains("group_size must be one of"), "{e}");
    }

    #[test]
    fn linear_q8g_and_q4_1_hand_computed() {
        // K = 64, group 32, N = 2, batch [2, 1]. Row 0: q = 2 in group 0 (scale 0.5), q = −128
        // in group 1 (scale Half 0.25). Row 1: q = 1 everywhere, scale 1.
        let xs: Vec<f32> = (0..128).map(|i| if i % 64 < 32 { 1.0 } else { -0.5 }).collect();
        let mut q: Vec<i8> = vec![2; 32];
        q.extend([-128; 32]);
        q.extend([1; 64]);
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 1, 64], &xs);
        let w = h.tensor::<i8>(ScalarType::Char, &[2, 64], &q);
        let halves = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let s = h.tensor::<f16>(ScalarType::Half, &[2, 2], &halves(&[0.5, 0.25, 1.0, 1.0]));
        let b = h.f32(&[2], &[10.0, 0.0]);
        let g = h.int(32);
        let out = h.out_dynamic(ScalarType::Float, &[4, 1, 2]);
        h.call(super::linear_q8g_out, &[x, w, s, b, g, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![2, 1, 2]);
        let row0 = 10.0 + 0.5 * 2.0 * 32.0 + 0.25 * (-128.0) * (-0.5) * 32.0;
        let row1 = 32.0 - 0.5 * 32.0;
        assert_eq!(h.read::<f32>(out), vec![row0, row1, row0, row1]);

        // Q4_1, N = 1: u = 3 in group 0 (d 0.5, m −1), u = 15 in group 1 (d 2, m 0.25).
        let mut u = vec![3u8; 32];
        u.extend([15; 32]);
        let packed: Vec<u8> = u.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
        let w = h.tensor::<u8>(ScalarType::Byte, &[1, 32], &packed);
        let s = h.f32(&[1, 2], &[0.5, 2.0]);
        let mins = h.tensor::<f16>(ScalarType::Half, &[1, 2], &halves(&[-1.0, 0.25]));
        let none = h.none();
        let out = h.out(ScalarType::Float, &[2, 1, 1]);
        h.call(super::linear_q4_1_out, &[x, w, s, mins, none, g, out, out]).unwrap();
        let want = (0.5 * 3.0 - 1.0) * 32.0 + (2.0 * 15.0 + 0.25) * (-0.5) * 32.0;
        assert_eq!(h.read::<f32>(out), vec![want, want]);
    }

    #[test]
    fn linear_q8g_and_q4_1_reject_bad_arguments_by_name() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 64], &[0.5; 64]);
        let (none, g32, g48, g128) = (h.none(), h.int(32), h.int(48), h.int(128));
        let q8 = h.tensor::<i8>(ScalarType::Char, &[3, 64], &[1; 192]);
        let q4 = h.tensor::<u8>(ScalarType::Byte, &[3, 32], &[0x21; 96]);
        let s = h.f32(&[3, 2], &[0.5; 6]);
        let s_short = h.f32(&[3, 1], &[0.5; 3]);
        let s_int = h.tensor::<i32>(ScalarType::Int, &[3, 2], &[1; 6]);
        let bias_bad = h.f32(&[2], &[0.0; 2]);
        let out = h.out(ScalarType::Float, &[1, 3]);
        let out_i = h.out(ScalarType::Int, &[1, 3]);
        let q8g = |h: &mut OpHarness, a: &[u32]| h.call(super::linear_q8g_out, a).unwrap_err().message;
        let q41 = |h: &mut OpHarness, a: &[u32]| h.call(super::linear_q4_1_out, a).unwrap_err().message;
        let expect = |msg: String, op: &str, what: &str| assert!(msg.contains(op) && msg.contains(what), "{msg}");
        expect(q8g(&mut h, &[x, q4, s, none, g32, out, out]), "rbuild::linear_q8g", "weight must be Char");
        expect(q8g(&mut h, &[x, q8, s_short, none, g32, out, out]), "rbuild::linear_q8g", "weight_scales must be [3, 2]");
        expect(q8g(&mut h, &[x, q8, s_int, none, g32, out, out]), "rbuild::linear_q8g", "weight_scales must be Float or Half");
        expect(q8g(&mut h, &[x, q8, s, none, g48, out, out]), "rbuild::linear_q8g", "group_size must be one of");
        expect(q8g(&mut h, &[x, q8, s, none, g128, out, out]), "rbuild::linear_q8g", "not a multiple of group_size");
        expect(q8g(&mut h, &[x, q8, s, bias_bad, g32, out, out]), "rbuild::linear_q8g", "bias");
        expect(q8g(&mut h, &[x, q8, s, none, g32, out_i, out_i]), "rbuild::linear_q8g", "out must be Float");
        expect(q41(&mut h, &[x, q8, s, s, none, g32, out, out]), "rbuild::linear_q4_1", "weight must be Byte");
        expect(q41(&mut h, &[x, q4, s, s_short, none, g32, out, out]), "rbuild::linear_q4_1", "weight_mins must be [3, 2]");
        expect(q41(&mut h, &[x, q4, s, s_int, none, g32, out, out]), "rbuild::linear_q4_1", "weight_mins must be Float or Half");
        expect(q41(&mut h, &[x, q4, s_short, s, none, g32, out, out]), "rbuild::linear_q4_1", "weight_scales must be [3, 2]");
        expect(q41(&mut h, &[x, q4, s, s, none, g48, out, out]), "rbuild::linear_q4_1", "group_size must be one of");
        let x48 = h.f32(&[1, 48], &[0.5; 48]);
        expect(q41(&mut h, &[x48, q4, s, s, none, g32, out, out]), "rbuild::linear_q4_1", "holds 64 inputs per row");
        expect(q8g(&mut h, &[x48, q8, s, none, g32, out, out]), "rbuild::linear_q8g", "in_features 48");
    }

    #[test]
    fn activation_quantization_rounds_half_away_from_zero() {
        let x = [127.0, 0.5, -0.5, 1.5, -2.5, 0.0];
        let mut q = [0i8; 6];
        let sx = super::quantize_group(&x, &mut q);
        assert_eq!(sx, 1.0);
        assert_eq!(q, [127, 1, -1, 2, -3, 0]);
        assert_eq!(super::quantize_group(&[0.0; 4], &mut q[..4]), 0.0);
    }

    #[test]
    fn embedding_byte_and_4bit_hand_computed() {
        let mut h = OpHarness::new();
        // 2 rows of 4, groups of 2; zero points given.
        let w = h.tensor::<i8>(ScalarType::Char, &[2, 4], &[1, 2, 3, 4, -1, -2, -3, -4]);
        let s = h.f32(&[2, 2], &[1.0, 0.5, 2.0, 0.25]);
        let z = h.f32(&[2, 2], &[0.0, 1.0, 1.0, 0.0]);
        let (lo, hi) = (h.int(-128), h.int(127));
        let idx = h.i64(&[1, 2], &[1, 0]);
        let out = h.out(ScalarType::Float, &[1, 2, 4]);
        h.call(super::embedding_byte_out, &[w, s, z, lo, hi, idx, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![-4.0, -6.0, -0.75, -1.0, 1.0, 2.0, 1.0, 1.5]);

        // 4-bit: row [0x9A, 0x7F] holds elements [9-8, 10-8, 7-8, 15-8] (high nibble first).
        let w4 = h.tensor::<u8>(ScalarType::Byte, &[1, 2], &[0x9A, 0x7F]);
        let s4 = h.f32(&[1], &[0.5]);
        let none = h.none();
        let idx = h.i64(&[1], &[0]);
        let out = h.out(ScalarType::Float, &[1, 4]);
        h.call(super::embedding_4bit_out, &[w4, s4, none, lo, hi, idx, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0.5, 1.0, -0.5, 3.5]);
        let idx = h.i64(&[1], &[1]);
        let e = h.call(super::embedding_4bit_out, &[w4, s4, none, lo, hi, idx, out, out]).unwrap_err();
        assert!(e.message.contains("embedding_4bit") && e.message.contains("out of range"), "{e}");
    }
}
