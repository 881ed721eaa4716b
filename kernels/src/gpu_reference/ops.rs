//! One function per payload op, on host tensors.

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::gpu::payload::{BinaryOp, DType, Dim, GeluApproximation, Op, UnaryOp, ValueId};
use rbuild_runtime::kernel::{normalize_dim, KernelContext};

use super::{describe, round_to, HostData, HostTensor, Interpreter, Slot};
use crate::portable::llm::{attend_reference, rms_norm_reference, rope_reference, Attn, RmsNorm, Rope};
use crate::portable::quant_linear::{linear_reference, Linear, Weights};
use crate::portable::util::{broadcast_shapes, broadcast_strides, for_each_broadcast};

type R<T = ()> = Result<T, String>;

fn dim(d: i64, rank: usize) -> R<usize> {
    normalize_dim(d, rank).map_err(|e| e.message)
}

fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

impl Interpreter {
    fn name(&self, id: ValueId) -> String {
        describe(&self.payload.values[id as usize], id)
    }

    fn dense(&self, id: ValueId) -> R<&HostTensor> {
        match &self.slots[id as usize] {
            Slot::Dense(t) => Ok(t),
            Slot::Quant(_) => Err(format!("{} is quantized, which this op does not take", self.name(id))),
            Slot::Empty => Err(format!("{} has no contents", self.name(id))),
        }
    }

    /// Dims and f32 elements of a float tensor (quantized constants dequantized).
    fn floats(&self, id: ValueId) -> R<(Vec<usize>, Cow<'_, [f32]>)> {
        match &self.slots[id as usize] {
            Slot::Dense(HostTensor { dims, data: HostData::F32(d), .. }) => Ok((dims.clone(), Cow::Borrowed(d))),
            Slot::Dense(t) => Err(format!("{} is {}, a float tensor is needed", self.name(id), t.dtype.name())),
            Slot::Quant(q) => Ok((q.dims.clone(), Cow::Owned(q.dequantize()))),
            Slot::Empty => Err(format!("{} has no contents", self.name(id))),
        }
    }

    fn ints(&self, id: ValueId) -> R<(Vec<usize>, &[i64])> {
        match self.dense(id)? {
            HostTensor { dims, data: HostData::I64(d), .. } => Ok((dims.clone(), d)),
            t => Err(format!("{} is {}, an i32/i64 tensor is needed", self.name(id), t.dtype.name())),
        }
    }

    /// An `if_zero` flag: an integer tensor of one element.
    pub(crate) fn flag(&self, id: ValueId) -> R<i64> {
        match self.ints(id)? {
            (_, [f]) => Ok(*f),
            (_, d) => Err(format!("flag {} has {} elements, needs 1", self.name(id), d.len())),
        }
    }

    /// A non-negative scalar position (one element).
    fn position(&self, id: ValueId) -> R<usize> {
        let (_, d) = self.ints(id)?;
        match d {
            [p] => usize::try_from(*p).map_err(|_| format!("position {} = {p} is negative", self.name(id))),
            _ => Err(format!("position {} has {} elements, needs 1", self.name(id), d.len())),
        }
    }

    fn out_dtype(&self, index: usize) -> DType {
        let id = self.payload.ops[index].outputs[0];
        self.payload.values[id as usize].meta.dtype
    }

    /// Stores an op's float result into its output value (shape bound, rounded to its dtype).
    fn put_f32(&mut self, index: usize, dims: Vec<usize>, mut data: Vec<f32>) -> R {
        let id = self.payload.ops[index].outputs[0];
        let dtype = self.payload.values[id as usize].meta.dtype;
        if !dtype.is_float() {
            return Err(format!("output {} is {}, this op produces a float tensor", self.name(id), dtype.name()));
        }
        data.iter_mut().for_each(|x| *x = round_to(dtype, *x));
        self.put(index, HostTensor { dtype, dims, data: HostData::F32(data) })
    }

    fn put(&mut self, index: usize, t: HostTensor) -> R {
        let id = self.payload.ops[index].outputs[0];
        self.bind(id, &t.dims, "output")?;
        self.slots[id as usize] = Slot::Dense(t);
        Ok(())
    }

    /// The output value's dims with symbols resolved; one unbound symbol is inferred from `numel`.
    fn output_dims(&self, index: usize, total: usize) -> R<Vec<usize>> {
        self.payload.resolve_output_dims(&self.env, self.payload.ops[index].outputs[0], total)
    }
}

pub(super) fn run_op(it: &mut Interpreter, index: usize) -> R {
    let node = it.payload.ops[index].clone();
    let ins = &node.inputs;
    match &node.op {
        Op::Linear { weight_transposed } => linear(it, index, ins, *weight_transposed),
        Op::MatMul => matmul(it, index, ins),
        Op::Conv1d { stride, padding, dilation, groups } => {
            conv1d(it, index, ins, [*stride as usize, *padding as usize, *dilation as usize, *groups as usize])
        }
        Op::LayerNorm { eps, affine } => layer_norm(it, index, ins, *eps, *affine),
        Op::RmsNorm { eps } => {
            let (dims, x) = it.floats(ins[0])?;
            let (wd, w) = it.floats(ins[1])?;
            let d = dims.last().copied().unwrap_or(1);
            if wd != [d] {
                return Err(format!("weight {} has shape {wd:?}, expected [{d}] (input {dims:?})", it.name(ins[1])));
            }
            let mut out = vec![0.0; x.len()];
            rms_norm_reference(&RmsNorm { x: &x, w: &w, eps: *eps }, &mut out);
            it.put_f32(index, dims, out)
        }
        Op::Gelu { approximation } => {
            let a = *approximation;
            elementwise(it, index, ins[0], |x| match a {
                GeluApproximation::Erf => 0.5 * x * (1.0 + libm::erf(x * core::f64::consts::FRAC_1_SQRT_2)),
                GeluApproximation::Tanh => {
                    let k = libm::sqrt(2.0 / core::f64::consts::PI);
                    0.5 * x * (1.0 + libm::tanh(k * (x + 0.044715 * x * x * x)))
                }
            })
        }
        Op::Silu => elementwise(it, index, ins[0], |x| x / (1.0 + libm::exp(-x))),
        Op::Softmax { dim: d } => {
            let (dims, x) = it.floats(ins[0])?;
            let ax = dim(*d, dims.len())?;
            let n = dims.get(ax).copied().unwrap_or(1);
            let inner: usize = dims.get(ax + 1..).map_or(1, numel);
            let outer: usize = numel(&dims[..ax.min(dims.len())]);
            let mut out = vec![0.0; x.len()];
            for o in 0..outer {
                for i in 0..inner {
                    crate::portable::reduce::softmax_row_f32(&x, &mut out, o * n * inner + i, n, inner, false);
                }
            }
            it.put_f32(index, dims, out)
        }
        Op::Attention { causal, scale, num_heads, num_kv_heads } => {
            attention(it, index, ins, *causal, *scale, *num_heads as usize, *num_kv_heads as usize)
        }
        Op::Binary(op) => binary(it, index, ins, *op),
        Op::Unary(op) => {
            let op = *op;
            elementwise(it, index, ins[0], move |x| match op {
                UnaryOp::Neg => -x,
                UnaryOp::Exp => libm::exp(x),
                UnaryOp::Log => libm::log(x),
                UnaryOp::Sqrt => libm::sqrt(x),
                UnaryOp::Rsqrt => 1.0 / libm::sqrt(x),
                UnaryOp::Tanh => libm::tanh(x),
                UnaryOp::Sigmoid => 1.0 / (1.0 + libm::exp(-x)),
                UnaryOp::Relu => x.max(0.0),
                UnaryOp::Abs => libm::fabs(x),
                UnaryOp::Reciprocal => 1.0 / x,
                UnaryOp::Sin => libm::sin(x),
                UnaryOp::Cos => libm::cos(x),
            })
        }
        Op::Embedding => embedding(it, index, ins),
        Op::Rope { theta, head_dim, interleaved } => rope(it, index, ins, *theta, *head_dim as usize, *interleaved),
        Op::Reshape => {
            let t = it.dense(ins[0])?.clone();
            let dims = it.output_dims(index, t.data.len())?;
            let dtype = it.out_dtype(index);
            if dtype != t.dtype {
                return Err(format!("reshape changes dtype {} to {}", t.dtype.name(), dtype.name()));
            }
            it.put(index, HostTensor { dims, ..t })
        }
        Op::Permute { dims } => {
            let p: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            permute(it, index, ins[0], &p)
        }
        Op::Transpose { dim0, dim1 } => {
            let rank = it.dense(ins[0])?.dims.len();
            let (a, b) = (dim(*dim0, rank)?, dim(*dim1, rank)?);
            let mut p: Vec<usize> = (0..rank).collect();
            p.swap(a, b);
            permute(it, index, ins[0], &p)
        }
        Op::Slice { dim: d, start, end, step } => slice(it, index, ins[0], *d, *start, *end, *step),
        Op::Cat { dim: d } => cat(it, index, ins, *d),
        Op::Cast => {
            let t = it.dense(ins[0])?.clone();
            let to = it.out_dtype(index);
            let data = match (&t.data, to) {
                (HostData::F32(v), d) if d.is_float() => HostData::F32(v.iter().map(|&x| round_to(d, x)).collect()),
                (HostData::I64(v), d) if d.is_float() => HostData::F32(v.iter().map(|&x| round_to(d, x as f32)).collect()),
                (HostData::Bool(v), d) if d.is_float() => HostData::F32(v.iter().map(|&x| x as f32).collect()),
                // Float to int truncates toward zero (saturating), as PyTorch's cast does for in-range values.
                (HostData::F32(v), DType::I32) => HostData::I64(v.iter().map(|&x| x as i32 as i64).collect()),
                (HostData::F32(v), DType::I64) => HostData::I64(v.iter().map(|&x| x as i64).collect()),
                (HostData::I64(v), DType::I32) => HostData::I64(v.iter().map(|&x| x as i32 as i64).collect()),
                (HostData::I64(v), DType::I64) => HostData::I64(v.clone()),
                (HostData::Bool(v), d) if d.is_index() => HostData::I64(v.iter().map(|&x| x as i64).collect()),
                (HostData::F32(v), DType::Bool) => HostData::Bool(v.iter().map(|&x| (x != 0.0) as u8).collect()),
                (HostData::I64(v), DType::Bool) => HostData::Bool(v.iter().map(|&x| (x != 0) as u8).collect()),
                (HostData::Bool(v), DType::Bool) => HostData::Bool(v.clone()),
                (_, d) => return Err(format!("cast from {} to {} is not supported", t.dtype.name(), d.name())),
            };
            it.put(index, HostTensor { dtype: to, dims: t.dims, data })
        }
        Op::CacheUpdate { seq_dim } => cache_update(it, ins, *seq_dim),
        // The interpreter's run loop skips the guarded ops; the op itself computes nothing.
        Op::IfZero { .. } => Ok(()),
        Op::Positions => {
            let start = it.position(ins[0])?;
            let id = it.payload.ops[index].outputs[0];
            let len = match it.payload.values[id as usize].meta.dims[0] {
                Dim::Fixed(n) => n as usize,
                Dim::Symbol(s) => it.env[s as usize].ok_or_else(|| format!("the length of {} is a symbol no input bound in this call", it.name(id)))?,
            };
            let data = (0..len).map(|i| (start + i) as i64).collect();
            let dtype = it.out_dtype(index);
            it.put(index, HostTensor { dtype, dims: vec![len], data: HostData::I64(data) })
        }
    }
}

/// `f` in f64 over every element; output like the input.
fn elementwise(it: &mut Interpreter, index: usize, x: ValueId, f: impl Fn(f64) -> f64) -> R {
    let (dims, x) = it.floats(x)?;
    let out = x.iter().map(|&v| f(v as f64) as f32).collect();
    it.put_f32(index, dims, out)
}

fn linear(it: &mut Interpreter, index: usize, ins: &[ValueId], transposed: bool) -> R {
    let (xd, x) = it.floats(ins[0])?;
    let k = *xd.last().ok_or_else(|| format!("input {} is a scalar", it.name(ins[0])))?;
    let m = numel(&xd[..xd.len() - 1]);
    let bias = match ins.get(2) {
        Some(&b) => Some(it.floats(b)?),
        None => None,
    };
    let mut out;
    let n;
    // A quantized `[out, in]` weight is dequantized row by row; a transposed (`[in, out]`) one is
    // dequantized whole by `floats` and takes the float path.
    if let (Slot::Quant(q), false) = (&it.slots[ins[1] as usize], transposed) {
        if q.dims.len() != 2 || q.cols != k {
            return Err(format!("weight {} has shape {:?}, expected [out, {k}]", it.name(ins[1]), q.dims));
        }
        n = q.rows;
        out = vec![0.0; m * n];
        let mut row = vec![0.0f32; k];
        for j in 0..n {
            q.row(j, &mut row);
            for i in 0..m {
                let xr = &x[i * k..(i + 1) * k];
                let acc: f64 = xr.iter().zip(&row).map(|(&a, &b)| a as f64 * b as f64).sum();
                out[i * n + j] = acc as f32;
            }
        }
        if let Some((bd, b)) = &bias {
            if bd[..] != [n] {
                return Err(format!("bias {} has shape {bd:?}, expected [{n}]", it.name(ins[2])));
            }
            for i in 0..m {
                for j in 0..n {
                    out[i * n + j] = (out[i * n + j] as f64 + b[j] as f64) as f32;
                }
            }
        }
    } else {
        let (wd, w) = it.floats(ins[1])?;
        let (wk, wn) = match (wd.as_slice(), transposed) {
            ([o, i], false) => (*i, *o),
            ([i, o], true) => (*i, *o),
            _ => return Err(format!("weight {} has shape {wd:?}, a 2-D weight is needed", it.name(ins[1]))),
        };
        if wk != k {
            return Err(format!("weight {} has shape {wd:?} (transposed: {transposed}), input {xd:?} has {k} features", it.name(ins[1])));
        }
        n = wn;
        let w: Cow<[f32]> = if transposed {
            let mut t = vec![0.0; k * n];
            for r in 0..k {
                for c in 0..n {
                    t[c * k + r] = w[r * n + c];
                }
            }
            Cow::Owned(t)
        } else {
            w
        };
        if let Some((bd, _)) = &bias {
            if bd[..] != [n] {
                return Err(format!("bias {} has shape {bd:?}, expected [{n}]", it.name(ins[2])));
            }
        }
        out = vec![0.0; m * n];
        let p = Linear { x: &x, m, k, n, bias: bias.as_ref().map(|(_, b)| &b[..]), w: Weights::F32(&w) };
        linear_reference(&KernelContext::default(), &p, &mut out);
    }
    let mut dims = xd.clone();
    *dims.last_mut().unwrap_or(&mut 0) = n;
    it.put_f32(index, dims, out)
}

fn matmul(it: &mut Interpreter, index: usize, ins: &[ValueId]) -> R {
    let (ad, a) = it.floats(ins[0])?;
    let (bd, b) = it.floats(ins[1])?;
    if ad.len() < 2 || bd.len() < 2 {
        return Err(format!("operands must have rank >= 2, got {ad:?} and {bd:?}"));
    }
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let (k2, n) = (bd[bd.len() - 2], bd[bd.len() - 1]);
    if k != k2 {
        return Err(format!("inner dims differ: {ad:?} @ {bd:?}"));
    }
    let batch = broadcast_shapes(&ad[..ad.len() - 2], &bd[..bd.len() - 2]).map_err(|e| e.message)?;
    let sa = broadcast_strides(&ad[..ad.len() - 2], &batch).map_err(|e| e.message)?;
    let sb = broadcast_strides(&bd[..bd.len() - 2], &batch).map_err(|e| e.message)?;
    let mut out = vec![0.0; numel(&batch) * m * n];
    let run = |o: usize, [ia, ib]: [usize; 2], out: &mut [f32]| {
        let (a, b) = (&a[ia * m * k..(ia + 1) * m * k], &b[ib * k * n..(ib + 1) * k * n]);
        let o = &mut out[o * m * n..(o + 1) * m * n];
        for i in 0..m {
            for j in 0..n {
                o[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum::<f64>() as f32;
            }
        }
    };
    if batch.is_empty() {
        run(0, [0, 0], &mut out);
    } else {
        for_each_broadcast(&batch, [&sa, &sb], |o, offs| run(o, offs, &mut out));
    }
    let mut dims = batch;
    dims.extend([m, n]);
    it.put_f32(index, dims, out)
}

fn conv1d(it: &mut Interpreter, index: usize, ins: &[ValueId], [stride, padding, dilation, groups]: [usize; 4]) -> R {
    let (xd, x) = it.floats(ins[0])?;
    let (wd, w) = it.floats(ins[1])?;
    let (&[n, cin, len], &[cout, cig, k]) = (xd.as_slice(), wd.as_slice()) else {
        return Err(format!("input {xd:?} must be [N, C_in, L] and weight {wd:?} [C_out, C_in/groups, K]"));
    };
    if cin % groups != 0 || cout % groups != 0 || cig != cin / groups {
        return Err(format!("input {xd:?} and weight {wd:?} do not fit groups = {groups}"));
    }
    let bias = match ins.get(2) {
        Some(&b) => {
            let (bd, bv) = it.floats(b)?;
            if bd[..] != [cout] {
                return Err(format!("bias {} has shape {bd:?}, expected [{cout}]", it.name(b)));
            }
            Some(bv)
        }
        None => None,
    };
    let span = dilation.checked_mul(k.saturating_sub(1)).and_then(|s| s.checked_add(1));
    let padded = len.checked_add(2 * padding);
    let out_len = match (span, padded) {
        (Some(s), Some(p)) if k > 0 && p >= s => (p - s) / stride + 1,
        _ => return Err(format!("kernel {k} (dilation {dilation}) does not fit input length {len} + 2×padding {padding}")),
    };
    let mut out = vec![0.0; n * cout * out_len];
    crate::portable::conv::conv1d_reference(
        &x,
        &w,
        bias.as_deref(),
        &mut out,
        [n, cin, len],
        [cout, k, out_len],
        [stride, padding, dilation, groups],
    );
    it.put_f32(index, vec![n, cout, out_len], out)
}

fn layer_norm(it: &mut Interpreter, index: usize, ins: &[ValueId], eps: f32, affine: bool) -> R {
    let (dims, x) = it.floats(ins[0])?;
    let d = dims.last().copied().unwrap_or(1);
    if ins.len() != if affine { 3 } else { 1 } {
        return Err(format!("layer norm (affine: {affine}) takes {}; got {} input(s)", if affine { "x, weight, bias" } else { "x" }, ins.len()));
    }
    let mut params = Vec::new();
    for &p in ins.iter().skip(1) {
        let (pd, pv) = it.floats(p)?;
        if pd != [d] {
            return Err(format!("{} has shape {pd:?}, expected [{d}] (input {dims:?})", it.name(p)));
        }
        params.push(pv);
    }
    let mut out = vec![0.0; x.len()];
    if d > 0 {
        for (xr, yr) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let (mean, rstd) = crate::portable::norm::row_stats(xr.iter().map(|&v| v as f64), d, eps as f64);
            let (mf, rf) = (mean as f32, rstd as f32);
            for (c, (y, &xv)) in yr.iter_mut().zip(xr).enumerate() {
                let mut v = (xv - mf) * rf;
                if let [w, b] = params.as_slice() {
                    v = v * w[c] + b[c];
                }
                *y = v;
            }
        }
    }
    it.put_f32(index, dims, out)
}

#[allow(clippy::too_many_arguments)]
fn attention(it: &mut Interpreter, index: usize, ins: &[ValueId], causal: bool, scale: f32, heads: usize, kv_heads: usize) -> R {
    let (qd, q) = it.floats(ins[0])?;
    let (kd, k) = it.floats(ins[1])?;
    let (vd, v) = it.floats(ins[2])?;
    let (&[b, lq, h, d], &[kb, lk, kh, kdim], &[vb, vl, vh, dv]) = (qd.as_slice(), kd.as_slice(), vd.as_slice()) else {
        return Err(format!("q {qd:?}, k {kd:?}, v {vd:?} must all be rank 4 [B, L, H, D]"));
    };
    if h != heads || kh != kv_heads || vh != kv_heads || kb != b || vb != b || kdim != d || vl != lk {
        return Err(format!(
            "q {qd:?}, k {kd:?}, v {vd:?} do not match num_heads {heads}, num_kv_heads {kv_heads} (q [B, Lq, H, D], k/v [B, Lk, Hkv, D])"
        ));
    }
    let position = match ins.get(3) {
        Some(&p) => {
            let pos = it.position(p)?;
            if pos.checked_add(lq).is_none_or(|e| e > lk) {
                return Err(format!("position {pos} + {lq} query row(s) exceeds the cache length {lk}"));
            }
            Some(pos)
        }
        None => None,
    };
    if lk == 0 {
        return Err(format!("k {kd:?} has no key rows"));
    }
    let mut out = vec![0.0; b * lq * h * dv];
    let ctx = KernelContext::default();
    let (row_q, row_o) = (h * d, h * dv);
    for bi in 0..b {
        let (kbat, vbat) = (&k[bi * lk * kh * d..(bi + 1) * lk * kh * d], &v[bi * lk * kh * dv..(bi + 1) * lk * kh * dv]);
        for i in 0..lq {
            // Keys this row attends: `0..n`.
            let n = match (position, causal) {
                (Some(p), true) => p + i + 1,
                (Some(p), false) => p + lq,
                (None, true) => (i + 1).min(lk),
                (None, false) => lk,
            };
            let at = (bi * lq + i) * row_q;
            let a = Attn {
                q: &q[at..at + row_q],
                k: kbat,
                v: vbat,
                batch: 1,
                seq: 1,
                heads: h,
                kv_heads: kh,
                dim: d,
                v_dim: dv,
                cache_len: lk,
                start: n - 1,
                causal: false,
                mask: None,
                scale,
            };
            let o = (bi * lq + i) * row_o;
            attend_reference(&ctx, &a, &mut out[o..o + row_o]);
        }
    }
    it.put_f32(index, vec![b, lq, h, dv], out)
}

fn binary(it: &mut Interpreter, index: usize, ins: &[ValueId], op: BinaryOp) -> R {
    let (a, b) = (it.dense(ins[0])?, it.dense(ins[1])?);
    let dims = broadcast_shapes(&a.dims, &b.dims).map_err(|e| e.message)?;
    let sa = broadcast_strides(&a.dims, &dims).map_err(|e| e.message)?;
    let sb = broadcast_strides(&b.dims, &dims).map_err(|e| e.message)?;
    let total = numel(&dims);
    let out_dtype = it.out_dtype(index);
    match (&a.data, &b.data) {
        (HostData::I64(x), HostData::I64(y)) if out_dtype.is_index() => {
            let f = |p: i64, q: i64| -> Option<i64> {
                match op {
                    BinaryOp::Add => Some(p.wrapping_add(q)),
                    BinaryOp::Sub => Some(p.wrapping_sub(q)),
                    BinaryOp::Mul => Some(p.wrapping_mul(q)),
                    BinaryOp::Max => Some(p.max(q)),
                    BinaryOp::Min => Some(p.min(q)),
                    BinaryOp::Div | BinaryOp::Pow => None,
                }
            };
            let mut out = vec![0i64; total];
            let mut bad = false;
            for_each_broadcast(&dims, [&sa, &sb], |o, [i, j]| match f(x[i], y[j]) {
                Some(v) => out[o] = v,
                None => bad = true,
            });
            if bad {
                return Err(format!("integer {op:?} is not supported (only add/sub/mul/max/min)"));
            }
            it.put(index, HostTensor { dtype: out_dtype, dims, data: HostData::I64(out) })
        }
        (HostData::F32(x), HostData::F32(y)) => {
            let mut out = vec![0f32; total];
            for_each_broadcast(&dims, [&sa, &sb], |o, [i, j]| {
                let (p, q) = (x[i], y[j]);
                out[o] = match op {
                    BinaryOp::Add => p + q,
                    BinaryOp::Sub => p - q,
                    BinaryOp::Mul => p * q,
                    BinaryOp::Div => p / q,
                    BinaryOp::Max => if p.is_nan() || q.is_nan() { f32::NAN } else { p.max(q) },
                    BinaryOp::Min => if p.is_nan() || q.is_nan() { f32::NAN } else { p.min(q) },
                    BinaryOp::Pow => libm::powf(p, q),
                };
            });
            it.put_f32(index, dims, out)
        }
        _ => Err(format!(
            "{:?} of {} and {} into {} is not supported (both float, or both integer into an integer output)",
            op,
            a.dtype.name(),
            b.dtype.name(),
            out_dtype.name()
        )),
    }
}

fn embedding(it: &mut Interpreter, index: usize, ins: &[ValueId]) -> R {
    let (id_dims, ids) = it.ints(ins[1])?;
    let ids = ids.to_vec();
    let (vocab, d) = match &it.slots[ins[0] as usize] {
        Slot::Quant(q) if q.dims.len() == 2 => (q.rows, q.cols),
        _ => {
            let t = it.dense(ins[0])?;
            match t.dims.as_slice() {
                &[v, d] if t.dtype.is_float() => (v, d),
                _ => return Err(format!("table {} must be a float [V, D] tensor, is {} {:?}", it.name(ins[0]), t.dtype.name(), t.dims)),
            }
        }
    };
    let mut out = vec![0.0; ids.len() * d];
    for (n, &tok) in ids.iter().enumerate() {
        let r = usize::try_from(tok).ok().filter(|&r| r < vocab).ok_or_else(|| format!("index {tok} is out of range for a table of {vocab} rows"))?;
        let o = &mut out[n * d..(n + 1) * d];
        match &it.slots[ins[0] as usize] {
            Slot::Quant(q) => q.row(r, o),
            Slot::Dense(HostTensor { data: HostData::F32(t), .. }) => o.copy_from_slice(&t[r * d..(r + 1) * d]),
            _ => return Err(format!("table {} has no float contents", it.name(ins[0]))),
        }
    }
    let mut dims = id_dims;
    dims.push(d);
    it.put_f32(index, dims, out)
}

fn rope(it: &mut Interpreter, index: usize, ins: &[ValueId], theta: f32, head_dim: usize, interleaved: bool) -> R {
    let (dims, x) = it.floats(ins[0])?;
    let pos = it.position(ins[1])?;
    let &[_, l, h, d] = dims.as_slice() else {
        return Err(format!("input {} has shape {dims:?}, rope needs [B, L, H, head_dim]", it.name(ins[0])));
    };
    if d != head_dim || d % 2 != 0 {
        return Err(format!("input last dim {d} must equal head_dim {head_dim} and be even"));
    }
    let half = d / 2;
    // Angles in f64: position p, pair i → p · theta^(-2i/D).
    let angle = |p: usize, i: usize| p as f64 * libm::pow(theta as f64, -(2.0 * i as f64) / d as f64);
    let mut out = vec![0.0; x.len()];
    if interleaved {
        for (r, (xr, o)) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
            let p = pos + (r / h) % l;
            for i in 0..half {
                let (c, s) = (libm::cos(angle(p, i)) as f32, libm::sin(angle(p, i)) as f32);
                let (a, b) = (xr[2 * i], xr[2 * i + 1]);
                o[2 * i] = a * c - b * s;
                o[2 * i + 1] = b * c + a * s;
            }
        }
    } else {
        let mut cos = vec![0.0f32; l * d];
        let mut sin = vec![0.0f32; l * d];
        for s in 0..l {
            for j in 0..d {
                let a = angle(pos + s, j % half);
                cos[s * d + j] = libm::cos(a) as f32;
                sin[s * d + j] = libm::sin(a) as f32;
            }
        }
        rope_reference(&Rope { x: &x, cos: &cos, sin: &sin, seq: l, heads: h, dim: d, start: 0 }, &mut out);
    }
    it.put_f32(index, dims, out)
}

/// Gathers `t` through `strides` (per output dim, in input elements) from `base`.
fn gather<T: Copy>(src: &[T], dims: &[usize], strides: &[usize], base: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(numel(dims));
    if numel(dims) == 0 {
        return out;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = base;
    loop {
        out.push(src[off]);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < dims[d] {
                break;
            }
            off -= strides[d] * dims[d];
            idx[d] = 0;
        }
    }
}

fn gather_data(t: &HostTensor, dims: &[usize], strides: &[usize], base: usize) -> HostData {
    match &t.data {
        HostData::F32(v) => HostData::F32(gather(v, dims, strides, base)),
        HostData::I64(v) => HostData::I64(gather(v, dims, strides, base)),
        HostData::Bool(v) => HostData::Bool(gather(v, dims, strides, base)),
    }
}

fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

fn permute(it: &mut Interpreter, index: usize, x: ValueId, p: &[usize]) -> R {
    let t = it.dense(x)?.clone();
    if p.len() != t.dims.len() {
        return Err(format!("permutation {p:?} does not match rank {}", t.dims.len()));
    }
    let cs = contiguous_strides(&t.dims);
    let dims: Vec<usize> = p.iter().map(|&i| t.dims[i]).collect();
    let strides: Vec<usize> = p.iter().map(|&i| cs[i]).collect();
    let data = gather_data(&t, &dims, &strides, 0);
    let dtype = check_same_dtype(it, index, t.dtype)?;
    it.put(index, HostTensor { dtype, dims, data })
}

fn check_same_dtype(it: &Interpreter, index: usize, dtype: DType) -> R<DType> {
    let out = it.out_dtype(index);
    if out != dtype {
        return Err(format!("output is {}, input is {}", out.name(), dtype.name()));
    }
    Ok(dtype)
}

fn slice(it: &mut Interpreter, index: usize, x: ValueId, d: i64, start: i64, end: i64, step: i64) -> R {
    let t = it.dense(x)?.clone();
    let ax = dim(d, t.dims.len())?;
    let size = t.dims.get(ax).copied().unwrap_or(1) as i64;
    let clamp = |v: i64| if v < 0 { (v + size).max(0) } else { v.min(size) };
    let (s, e) = (clamp(start), clamp(end));
    let len = if e > s { (e - s - 1) / step + 1 } else { 0 } as usize;
    let cs = contiguous_strides(&t.dims);
    let mut dims = t.dims.clone();
    let mut strides = cs.clone();
    if !dims.is_empty() {
        dims[ax] = len;
        // With at most one element the stride is never used (and `step` may be huge).
        strides[ax] = if len > 1 { cs[ax] * step as usize } else { 0 };
    }
    let base = if len > 0 && !cs.is_empty() { s as usize * cs[ax] } else { 0 };
    let data = gather_data(&t, &dims, &strides, base);
    let dtype = check_same_dtype(it, index, t.dtype)?;
    it.put(index, HostTensor { dtype, dims, data })
}

fn cat(it: &mut Interpreter, index: usize, ins: &[ValueId], d: i64) -> R {
    let first = it.dense(ins[0])?.clone();
    let ax = dim(d, first.dims.len())?;
    let mut parts = Vec::with_capacity(ins.len());
    let mut total = 0;
    for &id in ins {
        let t = it.dense(id)?;
        let same = t.dtype == first.dtype
            && t.dims.len() == first.dims.len()
            && t.dims.iter().zip(&first.dims).enumerate().all(|(i, (a, b))| i == ax || a == b);
        if !same {
            return Err(format!("{} is {} {:?}, not compatible with {} {:?} along dim {ax}", it.name(id), t.dtype.name(), t.dims, first.dtype.name(), first.dims));
        }
        total += t.dims[ax];
        parts.push(t);
    }
    let outer = numel(&first.dims[..ax]);
    let inner = numel(&first.dims[ax + 1..]);
    let mut dims = first.dims.clone();
    dims[ax] = total;
    let data = match &first.data {
        HostData::F32(_) => HostData::F32(concat(&parts, outer, inner, |t| match &t.data { HostData::F32(v) => v.as_slice(), _ => &[] })),
        HostData::I64(_) => HostData::I64(concat(&parts, outer, inner, |t| match &t.data { HostData::I64(v) => v.as_slice(), _ => &[] })),
        HostData::Bool(_) => HostData::Bool(concat(&parts, outer, inner, |t| match &t.data { HostData::Bool(v) => v.as_slice(), _ => &[] })),
    };
    let dtype = check_same_dtype(it, index, first.dtype)?;
    it.put(index, HostTensor { dtype, dims, data })
}

fn concat<'a, T: Copy + 'a>(parts: &[&'a HostTensor], outer: usize, inner: usize, get: impl Fn(&'a HostTensor) -> &'a [T]) -> Vec<T> {
    let mut out = Vec::new();
    for o in 0..outer {
        for t in parts {
            let v = get(t);
            let chunk = v.len().checked_div(outer).unwrap_or(0);
            out.extend_from_slice(&v[o * chunk..(o + 1) * chunk]);
        }
    }
    debug_assert!(inner > 0 || out.is_empty());
    out
}

fn cache_update(it: &mut Interpreter, ins: &[ValueId], seq_dim: i64) -> R {
    let pos = it.position(ins[2])?;
    let (rd, rows) = it.floats(ins[1])?;
    let rows = rows.into_owned();
    let cache_name = it.name(ins[0]);
    let Slot::Dense(cache) = &mut it.slots[ins[0] as usize] else {
        return Err(format!("cache {cache_name} is not loaded"));
    };
    let HostData::F32(c) = &mut cache.data else {
        return Err(format!("cache {cache_name} is not a float tensor"));
    };
    let ax = dim(seq_dim, cache.dims.len())?;
    let same = rd.len() == cache.dims.len() && rd.iter().zip(&cache.dims).enumerate().all(|(i, (a, b))| i == ax || a == b);
    if !same {
        return Err(format!("rows {rd:?} do not match cache {cache_name} {:?} outside seq_dim {ax}", cache.dims));
    }
    let max = cache.dims[ax];
    let n = rd[ax];
    if pos.checked_add(n).is_none_or(|e| e > max) {
        return Err(format!("position {pos} + {n} row(s) exceeds cache {cache_name} length {max} along dim {ax}"));
    }
    let outer = numel(&cache.dims[..ax]);
    let inner = numel(&cache.dims[ax + 1..]);
    let dtype = cache.dtype;
    for o in 0..outer {
        let src = &rows[o * n * inner..(o + 1) * n * inner];
        let at = (o * max + pos) * inner;
        for (dst, &s) in c[at..at + n * inner].iter_mut().zip(src) {
            *dst = round_to(dtype, s);
        }
    }
    Ok(())
}
