//! The CPU reference runtime of the `RbuildGpuBackend` payload: every op against a plain
//! reference computed here, a decoder block run token by token over its KV cache against the
//! same block on the full sequence without a cache, error cases, and the `Backend` wrapper
//! through `KernelArgs`.

use std::cell::RefCell;
use std::collections::HashMap;

use rbuild_kernels::gpu_reference::{HostData, HostTensor, Interpreter, ReferenceGpuBackend};
use rbuild_runtime::backend::{Backend, BackendInitContext, DelegateHandle};
use rbuild_runtime::backends::gpu::payload::*;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::ScalarType;

// ---------------------------------------------------------------------------------------------
// Payload builder and helpers
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct B {
    p: Payload,
    named: HashMap<String, Vec<u8>>,
}

fn fx(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&n| Dim::Fixed(n as u64)).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl B {
    fn sym(&mut self, name: &str, min: u64, max: u64) -> Dim {
        self.p.symbols.push(Symbol { name: name.into(), min, max });
        Dim::Symbol(self.p.symbols.len() as u32 - 1)
    }
    fn value(&mut self, name: &str, dtype: DType, dims: &[Dim], kind: ValueKind) -> ValueId {
        self.p.values.push(ValueDef { name: name.into(), meta: TensorMeta { dtype, dims: dims.to_vec(), quant: None }, kind });
        self.p.values.len() as ValueId - 1
    }
    fn input(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> ValueId {
        let id = self.value(name, dtype, dims, ValueKind::Input);
        self.p.inputs.push(id);
        id
    }
    fn constant(&mut self, name: &str, dtype: DType, dims: &[usize], bytes: Vec<u8>) -> ValueId {
        self.named.insert(name.into(), bytes);
        self.value(name, dtype, &fx(dims), ValueKind::Constant { key: name.into() })
    }
    fn cf(&mut self, name: &str, dims: &[usize], data: &[f32]) -> ValueId {
        self.constant(name, DType::F32, dims, f32_bytes(data))
    }
    fn op(&mut self, op: Op, ins: &[ValueId], name: &str, dtype: DType, dims: &[Dim]) -> ValueId {
        let id = self.value(name, dtype, dims, ValueKind::Activation);
        self.p.ops.push(OpNode { op, inputs: ins.to_vec(), outputs: vec![id] });
        id
    }
    fn op0(&mut self, op: Op, ins: &[ValueId]) {
        self.p.ops.push(OpNode { op, inputs: ins.to_vec(), outputs: vec![] });
    }
    fn out(&mut self, id: ValueId) {
        self.p.outputs.push(id);
    }
    fn interp(&self) -> Result<Interpreter, String> {
        // Through the wire format, as a delegate would see it.
        let bytes = self.p.to_bytes().map_err(|e| e.to_string())?;
        let p = Payload::from_bytes(&bytes).map_err(|e| e.to_string())?;
        Interpreter::new(&p, &|k: &str| self.named.get(k).map(|v| v.as_slice()))
    }
    fn run(&self, inputs: &[HostTensor]) -> Vec<HostTensor> {
        self.interp().expect("init").run(inputs).expect("run")
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

#[track_caller]
fn close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "element {i}: got {g}, want {w}");
    }
}

fn f(t: &HostTensor) -> &[f32] {
    t.as_f32().expect("float output")
}

fn naive_linear(x: &[f32], m: usize, k: usize, w: &[f32], n: usize, bias: Option<&[f32]>) -> Vec<f32> {
    let mut o = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| x[i * k + p] as f64 * w[j * k + p] as f64).sum();
            o[i * n + j] = (s + bias.map_or(0.0, |b| b[j] as f64)) as f32;
        }
    }
    o
}

fn naive_layer_norm(x: &[f32], d: usize, w: Option<(&[f32], &[f32])>, eps: f32) -> Vec<f32> {
    let mut o = vec![0.0; x.len()];
    for (xr, yr) in x.chunks(d).zip(o.chunks_mut(d)) {
        let mean = xr.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = xr.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let r = 1.0 / (var + eps as f64).sqrt();
        for c in 0..d {
            let mut v = (xr[c] as f64 - mean) * r;
            if let Some((w, b)) = w {
                v = v * w[c] as f64 + b[c] as f64;
            }
            yr[c] = v as f32;
        }
    }
    o
}

/// Plain attention: q [B,Lq,H,D], k/v [B,Lk,Hkv,D]; row i attends keys `0..keys(i)`.
#[allow(clippy::too_many_arguments)]
fn naive_attention(q: &[f32], k: &[f32], v: &[f32], b: usize, lq: usize, lk: usize, h: usize, hkv: usize, d: usize, scale: f32, keys: impl Fn(usize) -> usize) -> Vec<f32> {
    let mut o = vec![0.0; b * lq * h * d];
    for bi in 0..b {
        for i in 0..lq {
            for hh in 0..h {
                let kh = hh / (h / hkv);
                let qv = &q[((bi * lq + i) * h + hh) * d..][..d];
                let n = keys(i);
                let s: Vec<f64> = (0..n)
                    .map(|j| (0..d).map(|c| qv[c] as f64 * k[((bi * lk + j) * hkv + kh) * d + c] as f64).sum::<f64>() * scale as f64)
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let acc: f64 = (0..n).map(|j| e[j] * v[((bi * lk + j) * hkv + kh) * d + c] as f64).sum();
                    o[((bi * lq + i) * h + hh) * d + c] = (acc / z) as f32;
                }
            }
        }
    }
    o
}

fn scalar_i64(v: i64) -> HostTensor {
    HostTensor::i64(&[], vec![v])
}

// ---------------------------------------------------------------------------------------------
// Per-op tests
// ---------------------------------------------------------------------------------------------

#[test]
fn linear_f32_plain_transposed_bias_and_dynamic_rows() {
    let mut r = Rng(1);
    let (k, n) = (7, 5);
    let mut b = B::default();
    let s = b.sym("rows", 1, 9);
    let x = b.input("x", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(k as u64)]);
    let w = r.vec(n * k);
    let bias = r.vec(n);
    let wt: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect(); // [k, n]
    let wi = b.cf("w", &[n, k], &w);
    let wti = b.cf("wt", &[k, n], &wt);
    let bi = b.cf("b", &[n], &bias);
    let y1 = b.op(Op::Linear { weight_transposed: false }, &[x, wi, bi], "y1", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(n as u64)]);
    let y2 = b.op(Op::Linear { weight_transposed: true }, &[x, wti], "y2", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(n as u64)]);
    b.out(y1);
    b.out(y2);
    let mut it = b.interp().unwrap();
    for rows in [1, 3, 9] {
        let xv = r.vec(2 * rows * k);
        let out = it.run(&[HostTensor::f32(&[2, rows, k], xv.clone())]).unwrap();
        assert_eq!(out[0].dims, vec![2, rows, n]);
        close(f(&out[0]), &naive_linear(&xv, 2 * rows, k, &w, n, Some(&bias)), 1e-5);
        close(f(&out[1]), &naive_linear(&xv, 2 * rows, k, &w, n, None), 1e-5);
    }
}

#[test]
fn linear_grouped_int8_and_int4_weight_only() {
    let mut r = Rng(2);
    let (m, k, n, group): (usize, usize, usize, usize) = (3, 11, 4, 4); // 11 cols: the last group is short, int4 rows are odd
    let groups = k.div_ceil(group);
    let x = r.vec(m * k);
    let scales: Vec<f32> = r.vec(n * groups).iter().map(|s| s.abs() * 0.1 + 0.01).collect();
    let q8: Vec<i8> = (0..n * k).map(|i| ((i * 37) % 255) as i8).collect();
    let q4: Vec<i8> = (0..n * k).map(|i| ((i * 5) % 16) as i8 - 8).collect();
    let row_bytes = k.div_ceil(2);
    let mut packed = vec![0u8; n * row_bytes];
    for rr in 0..n {
        for c in 0..k {
            let nib = (q4[rr * k + c] as u8) & 0x0F;
            packed[rr * row_bytes + c / 2] |= if c % 2 == 0 { nib } else { nib << 4 };
        }
    }
    for (dtype, bytes, q) in [
        (DType::QInt8Grouped, q8.iter().map(|&v| v as u8).collect::<Vec<_>>(), &q8),
        (DType::QInt4Grouped, packed.clone(), &q4),
    ] {
        let mut b = B::default();
        let xi = b.input("x", DType::F32, &fx(&[m, k]));
        let si = b.constant("scales", DType::F16, &[n, groups], scales.iter().flat_map(|&s| half::f16::from_f32(s).to_le_bytes()).collect());
        let wi = b.constant("w", dtype, &[n, k], bytes);
        b.p.values[wi as usize].meta.quant = Some(GroupQuant { group_size: group as u32, scales: si });
        let y = b.op(Op::Linear { weight_transposed: false }, &[xi, wi], "y", DType::F32, &fx(&[m, n]));
        b.out(y);
        // Scales are f16 storage: the reference uses the same rounded scales.
        let rounded: Vec<f32> = scales.iter().map(|&s| half::f16::from_f32(s).to_f32()).collect();
        let w: Vec<f32> = (0..n * k).map(|i| q[i] as f32 * rounded[(i / k) * groups + (i % k) / group]).collect();
        let out = b.run(&[HostTensor::f32(&[m, k], x.clone())]);
        close(f(&out[0]), &naive_linear(&x, m, k, &w, n, None), 1e-5);
    }
    // Transposed int8 weight `[in, out]` = `[k, n]`: groups run along `out`.
    let (kq, nq) = (6usize, 5usize);
    let groups = nq.div_ceil(group);
    let q: Vec<i8> = (0..kq * nq).map(|i| ((i * 29) % 200) as i8).collect();
    let sc: Vec<f32> = (0..kq * groups).map(|i| 0.01 * (i + 1) as f32).collect();
    let mut b = B::default();
    let xi = b.input("x", DType::F32, &fx(&[m, kq]));
    let si = b.cf("scales", &[kq, groups], &sc);
    let wi = b.constant("w", DType::QInt8Grouped, &[kq, nq], q.iter().map(|&v| v as u8).collect());
    b.p.values[wi as usize].meta.quant = Some(GroupQuant { group_size: group as u32, scales: si });
    let y = b.op(Op::Linear { weight_transposed: true }, &[xi, wi], "y", DType::F32, &fx(&[m, nq]));
    b.out(y);
    let wt: Vec<f32> = (0..nq * kq).map(|i| {
        let (o, c) = (i / kq, i % kq); // w[o, c] = deq[c, o]
        q[c * nq + o] as f32 * sc[c * groups + o / group]
    }).collect();
    let xv = r.vec(m * kq);
    let out = b.run(&[HostTensor::f32(&[m, kq], xv.clone())]);
    close(f(&out[0]), &naive_linear(&xv, m, kq, &wt, nq, None), 1e-5);
}

#[test]
fn matmul_batched_with_broadcast() {
    let mut r = Rng(3);
    let mut b = B::default();
    let a = b.input("a", DType::F32, &fx(&[2, 1, 3, 5]));
    let c = b.input("b", DType::F32, &fx(&[3, 5, 4]));
    let y = b.op(Op::MatMul, &[a, c], "y", DType::F32, &fx(&[2, 3, 3, 4]));
    b.out(y);
    let (av, bv) = (r.vec(2 * 3 * 5), r.vec(3 * 5 * 4));
    let out = b.run(&[HostTensor::f32(&[2, 1, 3, 5], av.clone()), HostTensor::f32(&[3, 5, 4], bv.clone())]);
    let mut want = vec![0.0; 2 * 3 * 3 * 4];
    for i in 0..2 {
        for j in 0..3 {
            for m in 0..3 {
                for n in 0..4 {
                    want[((i * 3 + j) * 3 + m) * 4 + n] = (0..5).map(|p| av[(i * 3 + m) * 5 + p] as f64 * bv[(j * 5 + p) * 4 + n] as f64).sum::<f64>() as f32;
                }
            }
        }
    }
    close(f(&out[0]), &want, 1e-5);
}

#[test]
fn conv1d_stride_padding_dilation_groups() {
    let mut r = Rng(4);
    let (n, cin, len, cout, g, k, s, p, d) = (2, 4, 9, 6, 2, 3, 2, 2, 2);
    let out_len = (len + 2 * p - d * (k - 1) - 1) / s + 1;
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[n, cin, len]));
    let w = r.vec(cout * (cin / g) * k);
    let bias = r.vec(cout);
    let wi = b.cf("w", &[cout, cin / g, k], &w);
    let bi = b.cf("b", &[cout], &bias);
    let op = Op::Conv1d { stride: s as u32, padding: p as u32, dilation: d as u32, groups: g as u32 };
    let y = b.op(op, &[x, wi, bi], "y", DType::F32, &fx(&[n, cout, out_len]));
    b.out(y);
    let xv = r.vec(n * cin * len);
    let out = b.run(&[HostTensor::f32(&[n, cin, len], xv.clone())]);
    let mut want = vec![0.0; n * cout * out_len];
    let cig = cin / g;
    for bn in 0..n {
        for oc in 0..cout {
            let grp = oc / (cout / g);
            for o in 0..out_len {
                let mut acc = bias[oc] as f64;
                for ic in 0..cig {
                    for kk in 0..k {
                        let pos = (o * s + kk * d) as i64 - p as i64;
                        if pos >= 0 && (pos as usize) < len {
                            acc += xv[(bn * cin + grp * cig + ic) * len + pos as usize] as f64 * w[(oc * cig + ic) * k + kk] as f64;
                        }
                    }
                }
                want[(bn * cout + oc) * out_len + o] = acc as f32;
            }
        }
    }
    close(f(&out[0]), &want, 1e-5);
}

#[test]
fn layer_norm_and_rms_norm() {
    let mut r = Rng(5);
    let d = 13;
    let mut b = B::default();
    let s = b.sym("s", 1, 4);
    let x = b.input("x", DType::F32, &[s, Dim::Fixed(d as u64)]);
    let (w, bias, g) = (r.vec(d), r.vec(d), r.vec(d));
    let wi = b.cf("w", &[d], &w);
    let bi = b.cf("b", &[d], &bias);
    let gi = b.cf("g", &[d], &g);
    let dims = [s, Dim::Fixed(d as u64)];
    let y1 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[x, wi, bi], "y1", DType::F32, &dims);
    let y2 = b.op(Op::LayerNorm { eps: 1e-3, affine: false }, &[x], "y2", DType::F32, &dims);
    let y3 = b.op(Op::RmsNorm { eps: 1e-6 }, &[x, gi], "y3", DType::F32, &dims);
    for y in [y1, y2, y3] {
        b.out(y);
    }
    let xv: Vec<f32> = r.vec(3 * d).iter().map(|v| v * 3.0 + 0.5).collect();
    let out = b.run(&[HostTensor::f32(&[3, d], xv.clone())]);
    close(f(&out[0]), &naive_layer_norm(&xv, d, Some((&w, &bias)), 1e-5), 1e-5);
    close(f(&out[1]), &naive_layer_norm(&xv, d, None, 1e-3), 1e-5);
    let mut want = vec![0.0; 3 * d];
    for (xr, yr) in xv.chunks(d).zip(want.chunks_mut(d)) {
        let ms = xr.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64;
        let rr = 1.0 / (ms + 1e-6).sqrt();
        for c in 0..d {
            yr[c] = (g[c] as f64 * xr[c] as f64 * rr) as f32;
        }
    }
    close(f(&out[2]), &want, 1e-5);
}

#[test]
fn activations_softmax_unary() {
    let mut r = Rng(6);
    let dims = [3usize, 5];
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&dims));
    let mut ys = vec![
        b.op(Op::Gelu { approximation: GeluApproximation::Erf }, &[x], "gelu", DType::F32, &fx(&dims)),
        b.op(Op::Gelu { approximation: GeluApproximation::Tanh }, &[x], "gelu_tanh", DType::F32, &fx(&dims)),
        b.op(Op::Silu, &[x], "silu", DType::F32, &fx(&dims)),
        b.op(Op::Softmax { dim: -1 }, &[x], "softmax_last", DType::F32, &fx(&dims)),
        b.op(Op::Softmax { dim: 0 }, &[x], "softmax_0", DType::F32, &fx(&dims)),
    ];
    let unary = [
        UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid,
        UnaryOp::Relu, UnaryOp::Abs, UnaryOp::Reciprocal, UnaryOp::Sin, UnaryOp::Cos,
    ];
    for u in unary {
        ys.push(b.op(Op::Unary(u), &[x], &format!("{u:?}"), DType::F32, &fx(&dims)));
    }
    for &y in &ys {
        b.out(y);
    }
    let xv: Vec<f32> = r.vec(15).iter().map(|v| v * 3.0).collect();
    let out = b.run(&[HostTensor::f32(&dims, xv.clone())]);
    let map = |g: &dyn Fn(f64) -> f64| -> Vec<f32> { xv.iter().map(|&v| g(v as f64) as f32).collect() };
    close(f(&out[0]), &map(&|x| 0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt()))), 1e-5);
    close(f(&out[1]), &map(&|x| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())), 1e-5);
    close(f(&out[2]), &map(&|x| x / (1.0 + (-x).exp())), 1e-5);
    let softmax = |idx: &dyn Fn(usize, usize) -> usize, rows: usize, n: usize| {
        let mut o = vec![0.0f32; 15];
        for r in 0..rows {
            let m = (0..n).map(|j| xv[idx(r, j)] as f64).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = (0..n).map(|j| (xv[idx(r, j)] as f64 - m).exp()).sum();
            for j in 0..n {
                o[idx(r, j)] = ((xv[idx(r, j)] as f64 - m).exp() / z) as f32;
            }
        }
        o
    };
    close(f(&out[3]), &softmax(&|r, j| r * 5 + j, 3, 5), 1e-5);
    close(f(&out[4]), &softmax(&|r, j| j * 5 + r, 5, 3), 1e-5);
    let fns: [fn(f64) -> f64; 12] = [
        |x| -x, f64::exp, f64::ln, f64::sqrt, |x| 1.0 / x.sqrt(), f64::tanh, |x| 1.0 / (1.0 + (-x).exp()),
        |x| x.max(0.0), f64::abs, |x| 1.0 / x, f64::sin, f64::cos,
    ];
    for (i, g) in fns.iter().enumerate() {
        close(f(&out[5 + i]), &map(g), 1e-5);
    }
}

#[test]
fn attention_plain_causal_gqa_and_cached() {
    let mut r = Rng(7);
    let (bt, h, hkv, d) = (2, 4, 2, 3);
    let scale = 0.6;
    // Without position: Lq=3, Lk=5 non-causal; Lq=Lk=4 causal.
    for (lq, lk, causal) in [(3usize, 5usize, false), (4, 4, true), (5, 3, false)] {
        let mut b = B::default();
        let q = b.input("q", DType::F32, &fx(&[bt, lq, h, d]));
        let k = b.input("k", DType::F32, &fx(&[bt, lk, hkv, d]));
        let v = b.input("v", DType::F32, &fx(&[bt, lk, hkv, d]));
        let y = b.op(Op::Attention { causal, scale, num_heads: h as u32, num_kv_heads: hkv as u32 }, &[q, k, v], "y", DType::F32, &fx(&[bt, lq, h, d]));
        b.out(y);
        let (qv, kv, vv) = (r.vec(bt * lq * h * d), r.vec(bt * lk * hkv * d), r.vec(bt * lk * hkv * d));
        let out = b.run(&[HostTensor::f32(&[bt, lq, h, d], qv.clone()), HostTensor::f32(&[bt, lk, hkv, d], kv.clone()), HostTensor::f32(&[bt, lk, hkv, d], vv.clone())]);
        let want = naive_attention(&qv, &kv, &vv, bt, lq, lk, h, hkv, d, scale, |i| if causal { i + 1 } else { lk });
        close(f(&out[0]), &want, 1e-5);
    }
    // With position: caches of 8 rows, q of 2 rows at position 3.
    for causal in [true, false] {
        let (lq, lk, pos) = (2usize, 8usize, 3usize);
        let mut b = B::default();
        let q = b.input("q", DType::F32, &fx(&[bt, lq, h, d]));
        let k = b.input("k", DType::F32, &fx(&[bt, lk, hkv, d]));
        let v = b.input("v", DType::F32, &fx(&[bt, lk, hkv, d]));
        let p = b.input("pos", DType::I32, &[]);
        let y = b.op(Op::Attention { causal, scale, num_heads: h as u32, num_kv_heads: hkv as u32 }, &[q, k, v, p], "y", DType::F32, &fx(&[bt, lq, h, d]));
        b.out(y);
        let (qv, kv, vv) = (r.vec(bt * lq * h * d), r.vec(bt * lk * hkv * d), r.vec(bt * lk * hkv * d));
        let out = b.run(&[
            HostTensor::f32(&[bt, lq, h, d], qv.clone()),
            HostTensor::f32(&[bt, lk, hkv, d], kv.clone()),
            HostTensor::f32(&[bt, lk, hkv, d], vv.clone()),
            HostTensor::i32(&[], vec![pos as i64]),
        ]);
        let want = naive_attention(&qv, &kv, &vv, bt, lq, lk, h, hkv, d, scale, |i| if causal { pos + i + 1 } else { pos + lq });
        close(f(&out[0]), &want, 1e-5);
    }
}

#[test]
fn binary_ops_broadcast_float_and_int() {
    let mut r = Rng(8);
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[2, 3, 1]));
    let y = b.input("y", DType::F32, &fx(&[4]));
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow];
    for op in ops {
        let o = b.op(Op::Binary(op), &[x, y], &format!("{op:?}"), DType::F32, &fx(&[2, 3, 4]));
        b.out(o);
    }
    let i = b.input("i", DType::I64, &fx(&[3]));
    let j = b.input("j", DType::I64, &fx(&[1]));
    let o = b.op(Op::Binary(BinaryOp::Add), &[i, j], "iadd", DType::I64, &fx(&[3]));
    b.out(o);
    let xv: Vec<f32> = r.vec(6).iter().map(|v| v.abs() + 0.1).collect();
    let yv = r.vec(4);
    let out = b.run(&[HostTensor::f32(&[2, 3, 1], xv.clone()), HostTensor::f32(&[4], yv.clone()), HostTensor::i64(&[3], vec![1, 2, 3]), HostTensor::i64(&[1], vec![10])]);
    let fns: [fn(f32, f32) -> f32; 7] = [|a, b| a + b, |a, b| a - b, |a, b| a * b, |a, b| a / b, f32::max, f32::min, |a, b| (a as f64).powf(b as f64) as f32];
    for (n, g) in fns.iter().enumerate() {
        let want: Vec<f32> = (0..24).map(|e| g(xv[e / 4], yv[e % 4])).collect();
        close(f(&out[n]), &want, 1e-5);
    }
    assert_eq!(out[7].data, HostData::I64(vec![11, 12, 13]));
}

#[test]
fn embedding_f16_table_i32_indices() {
    let mut r = Rng(9);
    let (v, d) = (7, 5);
    let table: Vec<f32> = r.vec(v * d).iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
    let mut b = B::default();
    let s = b.sym("s", 1, 6);
    let ids = b.input("ids", DType::I32, &[Dim::Fixed(1), s]);
    let t = b.constant("table", DType::F16, &[v, d], table.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect());
    let y = b.op(Op::Embedding, &[t, ids], "y", DType::F32, &[Dim::Fixed(1), s, Dim::Fixed(d as u64)]);
    b.out(y);
    let idx = [6i64, 0, 3];
    let out = b.run(&[HostTensor::i32(&[1, 3], idx.to_vec())]);
    let want: Vec<f32> = idx.iter().flat_map(|&i| table[i as usize * d..][..d].to_vec()).collect();
    assert_eq!(out[0].dims, vec![1, 3, d]);
    close(f(&out[0]), &want, 0.0);
    let err = b.interp().unwrap().run(&[HostTensor::i32(&[1, 1], vec![7])]).unwrap_err();
    assert!(err.contains("out of range"), "{err}");
}

fn naive_rope(x: &[f32], l: usize, h: usize, d: usize, pos: usize, theta: f64, interleaved: bool) -> Vec<f32> {
    let mut o = vec![0.0; x.len()];
    let half = d / 2;
    for (r, (xr, or)) in x.chunks(d).zip(o.chunks_mut(d)).enumerate() {
        let p = (pos + (r / h) % l) as f64;
        for i in 0..half {
            let a = p * theta.powf(-(2.0 * i as f64) / d as f64);
            let (c, s) = (a.cos(), a.sin());
            let (i0, i1) = if interleaved { (2 * i, 2 * i + 1) } else { (i, i + half) };
            let (x0, x1) = (xr[i0] as f64, xr[i1] as f64);
            or[i0] = (x0 * c - x1 * s) as f32;
            or[i1] = (x1 * c + x0 * s) as f32;
        }
    }
    o
}

#[test]
fn rope_both_layouts_at_a_position() {
    let mut r = Rng(10);
    let (bt, l, h, d) = (2, 3, 2, 6);
    for interleaved in [false, true] {
        let mut b = B::default();
        let x = b.input("x", DType::F32, &fx(&[bt, l, h, d]));
        let p = b.input("p", DType::I64, &[]);
        let y = b.op(Op::Rope { theta: 10000.0, head_dim: d as u32, interleaved }, &[x, p], "y", DType::F32, &fx(&[bt, l, h, d]));
        b.out(y);
        let xv = r.vec(bt * l * h * d);
        let out = b.run(&[HostTensor::f32(&[bt, l, h, d], xv.clone()), scalar_i64(5)]);
        close(f(&out[0]), &naive_rope(&xv, l, h, d, 5, 10000.0, interleaved), 1e-5);
    }
}

#[test]
fn reshape_permute_transpose_slice_cat_cast() {
    let mut b = B::default();
    let s = b.sym("s", 1, 8);
    let x = b.input("x", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(3)]);
    let rs = b.op(Op::Reshape, &[x], "rs", DType::F32, &[s, Dim::Fixed(6)]);
    let pm = b.op(Op::Permute { dims: vec![2, 0, 1] }, &[x], "pm", DType::F32, &[Dim::Fixed(3), Dim::Fixed(2), s]);
    let tr = b.op(Op::Transpose { dim0: -1, dim1: 0 }, &[x], "tr", DType::F32, &[Dim::Fixed(3), s, Dim::Fixed(2)]);
    let sl = b.op(Op::Slice { dim: 2, start: -3, end: i64::MAX, step: 2 }, &[x], "sl", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(2)]);
    let ct = b.op(Op::Cat { dim: 2 }, &[x, sl], "ct", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(5)]);
    let h = b.op(Op::Cast, &[x], "h", DType::F16, &[Dim::Fixed(2), s, Dim::Fixed(3)]);
    let back = b.op(Op::Cast, &[h], "back", DType::F32, &[Dim::Fixed(2), s, Dim::Fixed(3)]);
    let int = b.op(Op::Cast, &[x], "int", DType::I64, &[Dim::Fixed(2), s, Dim::Fixed(3)]);
    for o in [rs, pm, tr, sl, ct, back, int] {
        b.out(o);
    }
    let l = 3;
    let xv: Vec<f32> = (0..2 * l * 3).map(|i| i as f32 * 1.37 - 9.0).collect();
    let out = b.run(&[HostTensor::f32(&[2, l, 3], xv.clone())]);
    let at = |a: usize, b_: usize, c: usize| xv[(a * l + b_) * 3 + c];
    assert_eq!(out[0].dims, vec![l, 6]);
    close(f(&out[0]), &xv, 0.0);
    let mut want = vec![];
    for c in 0..3 {
        for a in 0..2 {
            for bb in 0..l {
                want.push(at(a, bb, c));
            }
        }
    }
    close(f(&out[1]), &want, 0.0);
    let mut want = vec![];
    for c in 0..3 {
        for bb in 0..l {
            for a in 0..2 {
                want.push(at(a, bb, c));
            }
        }
    }
    close(f(&out[2]), &want, 0.0);
    let mut want = vec![];
    for a in 0..2 {
        for bb in 0..l {
            want.extend([at(a, bb, 0), at(a, bb, 2)]);
        }
    }
    close(f(&out[3]), &want, 0.0);
    let mut want = vec![];
    for a in 0..2 {
        for bb in 0..l {
            want.extend([at(a, bb, 0), at(a, bb, 1), at(a, bb, 2), at(a, bb, 0), at(a, bb, 2)]);
        }
    }
    close(f(&out[4]), &want, 0.0);
    let rounded: Vec<f32> = xv.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
    close(f(&out[5]), &rounded, 0.0);
    assert_eq!(out[6].data, HostData::I64(xv.iter().map(|&v| v as i64).collect()));
}

#[test]
fn cache_update_writes_rows_in_place_and_persists() {
    let mut b = B::default();
    let s = b.sym("s", 1, 4);
    let rows = b.input("rows", DType::F32, &[Dim::Fixed(1), s, Dim::Fixed(2)]);
    let p = b.input("p", DType::I64, &[]);
    let cache = b.value("cache", DType::BF16, &fx(&[1, 6, 2]), ValueKind::State { init: StateInit::Zeros });
    b.op0(Op::CacheUpdate { seq_dim: -2 }, &[cache, rows, p]);
    let y = b.op(Op::Binary(BinaryOp::Add), &[cache, cache], "y", DType::F32, &fx(&[1, 6, 2]));
    b.out(y);
    let mut it = b.interp().unwrap();
    it.run(&[HostTensor::f32(&[1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]), scalar_i64(0)]).unwrap();
    let out = it.run(&[HostTensor::f32(&[1, 1, 2], vec![0.1, 5.0]), scalar_i64(4)]).unwrap();
    let b01 = half::bf16::from_f32(0.1).to_f32();
    close(f(&out[0]), &[2.0, 4.0, 6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 2.0 * b01, 10.0, 0.0, 0.0], 0.0);
    let err = it.run(&[HostTensor::f32(&[1, 2, 2], vec![0.0; 4]), scalar_i64(5)]).unwrap_err();
    assert!(err.contains("exceeds cache"), "{err}");
}

/// `if_zero` runs its range only at position 0 (a cross-attention projection into state);
/// `positions` gives `position + i` for the call's length.
#[test]
fn if_zero_guards_a_projection_and_positions_follow_the_call() {
    let mut b = B::default();
    let s = b.sym("s", 1, 5);
    let x = b.input("x", DType::F32, &fx(&[3]));
    let pos = b.input("pos", DType::I64, &fx(&[1]));
    let tokens = b.input("tokens", DType::I64, &[s]);
    let cache = b.value("cache", DType::F32, &fx(&[3]), ValueKind::State { init: StateInit::Zeros });
    b.op0(Op::IfZero { count: 2 }, &[pos]);
    let zero = b.constant("zero", DType::I64, &[1], 0i64.to_le_bytes().to_vec());
    let e = b.op(Op::Unary(UnaryOp::Neg), &[x], "e", DType::F32, &fx(&[3]));
    b.op0(Op::CacheUpdate { seq_dim: 0 }, &[cache, e, zero]);
    let y = b.op(Op::Binary(BinaryOp::Add), &[cache, x], "y", DType::F32, &fx(&[3]));
    let ids = b.op(Op::Positions, &[pos], "ids", DType::I64, &[s]);
    let sum = b.op(Op::Binary(BinaryOp::Add), &[ids, tokens], "sum", DType::I64, &[s]);
    b.out(y);
    b.out(sum);
    let mut it = b.interp().unwrap();
    let ints = |v: &[i64]| HostTensor::i64(&[v.len()], v.to_vec());
    // Position 0: the cache becomes -x, so y = 0.
    let out = it.run(&[HostTensor::f32(&[3], vec![1.0, 2.0, 3.0]), ints(&[0]), ints(&[10, 20])]).unwrap();
    close(f(&out[0]), &[0.0, 0.0, 0.0], 0.0);
    assert_eq!(out[1].data, HostData::I64(vec![10, 21]));
    // Position 4: the guarded ops are skipped, the cache keeps -x of the first call.
    let out = it.run(&[HostTensor::f32(&[3], vec![5.0, 5.0, 5.0]), ints(&[4]), ints(&[1, 1, 1])]).unwrap();
    close(f(&out[0]), &[4.0, 3.0, 2.0], 0.0);
    assert_eq!(out[1].data, HostData::I64(vec![5, 6, 7]));
}

// ---------------------------------------------------------------------------------------------
// KV-cache consistency: a decoder block token by token == the same block on the full sequence
// ---------------------------------------------------------------------------------------------

const D: usize = 8;
const H: usize = 2;
const HKV: usize = 1;
const DH: usize = 4;
const FFN: usize = 12;
const VOCAB: usize = 11;
const MAXS: usize = 8;

fn decoder(cached: bool) -> B {
    let mut r = Rng(42);
    let mut b = B::default();
    let s = b.sym("seq", 1, MAXS as u64);
    let tokens = b.input("tokens", DType::I64, &[Dim::Fixed(1), s]);
    let position = b.input("position", DType::I64, &[]);
    let embed = b.cf("embed", &[VOCAB, D], &r.vec(VOCAB * D));
    let ln1 = (b.cf("ln1.w", &[D], &r.vec(D)), b.cf("ln1.b", &[D], &r.vec(D)));
    let wq = b.cf("wq", &[H * DH, D], &r.vec(H * DH * D));
    let wk = b.cf("wk", &[HKV * DH, D], &r.vec(HKV * DH * D));
    let bk = b.cf("bk", &[HKV * DH], &r.vec(HKV * DH));
    let wv = b.cf("wv", &[D, HKV * DH], &r.vec(HKV * DH * D)); // transposed layout
    let wo = b.cf("wo", &[D, H * DH], &r.vec(D * H * DH));
    let ln2 = (b.cf("ln2.w", &[D], &r.vec(D)), b.cf("ln2.b", &[D], &r.vec(D)));
    let fc1 = b.cf("fc1", &[FFN, D], &r.vec(FFN * D));
    let fc1b = b.cf("fc1.b", &[FFN], &r.vec(FFN));
    let fc2 = b.cf("fc2", &[D, FFN], &r.vec(D * FFN));
    let head = b.cf("head", &[VOCAB, D], &r.vec(VOCAB * D));
    let f = DType::F32;
    let one = Dim::Fixed(1);
    let hid = [one, s, Dim::Fixed(D as u64)];
    let qh = [one, s, Dim::Fixed(H as u64), Dim::Fixed(DH as u64)];
    let kh = [one, s, Dim::Fixed(HKV as u64), Dim::Fixed(DH as u64)];
    let kvd = [one, s, Dim::Fixed((HKV * DH) as u64)];
    let x0 = b.op(Op::Embedding, &[embed, tokens], "x0", f, &hid);
    let h1 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[x0, ln1.0, ln1.1], "h1", f, &hid);
    let q = b.op(Op::Linear { weight_transposed: false }, &[h1, wq], "q", f, &[one, s, Dim::Fixed((H * DH) as u64)]);
    let k = b.op(Op::Linear { weight_transposed: false }, &[h1, wk, bk], "k", f, &kvd);
    let v = b.op(Op::Linear { weight_transposed: true }, &[h1, wv], "v", f, &kvd);
    let q4 = b.op(Op::Reshape, &[q], "q4", f, &qh);
    let k4 = b.op(Op::Reshape, &[k], "k4", f, &kh);
    let v4 = b.op(Op::Reshape, &[v], "v4", f, &kh);
    let rope = Op::Rope { theta: 10000.0, head_dim: DH as u32, interleaved: false };
    let qr = b.op(rope.clone(), &[q4, position], "qr", f, &qh);
    let kr = b.op(rope, &[k4, position], "kr", f, &kh);
    let attn = Op::Attention { causal: true, scale: 1.0 / (DH as f32).sqrt(), num_heads: H as u32, num_kv_heads: HKV as u32 };
    let a4 = if cached {
        let cd = fx(&[1, MAXS, HKV, DH]);
        let kc = b.value("k_cache", f, &cd, ValueKind::State { init: StateInit::Zeros });
        let vc = b.value("v_cache", f, &cd, ValueKind::State { init: StateInit::Zeros });
        b.op0(Op::CacheUpdate { seq_dim: 1 }, &[kc, kr, position]);
        b.op0(Op::CacheUpdate { seq_dim: 1 }, &[vc, v4, position]);
        b.op(attn, &[qr, kc, vc, position], "a4", f, &qh)
    } else {
        b.op(attn, &[qr, kr, v4], "a4", f, &qh)
    };
    let a = b.op(Op::Reshape, &[a4], "a", f, &[one, s, Dim::Fixed((H * DH) as u64)]);
    let o = b.op(Op::Linear { weight_transposed: false }, &[a, wo], "o", f, &hid);
    let r1 = b.op(Op::Binary(BinaryOp::Add), &[x0, o], "r1", f, &hid);
    let h2 = b.op(Op::LayerNorm { eps: 1e-5, affine: true }, &[r1, ln2.0, ln2.1], "h2", f, &hid);
    let m1 = b.op(Op::Linear { weight_transposed: false }, &[h2, fc1, fc1b], "m1", f, &[one, s, Dim::Fixed(FFN as u64)]);
    let g = b.op(Op::Gelu { approximation: GeluApproximation::Erf }, &[m1], "g", f, &[one, s, Dim::Fixed(FFN as u64)]);
    let m2 = b.op(Op::Linear { weight_transposed: false }, &[g, fc2], "m2", f, &hid);
    let r2 = b.op(Op::Binary(BinaryOp::Add), &[r1, m2], "r2", f, &hid);
    let logits = b.op(Op::Linear { weight_transposed: false }, &[r2, head], "logits", f, &[one, s, Dim::Fixed(VOCAB as u64)]);
    b.out(logits);
    b
}

#[test]
fn decoder_block_kv_cache_matches_full_sequence() {
    let tokens = [3i64, 9, 0, 7];
    let full = decoder(false).run(&[HostTensor::i64(&[1, 4], tokens.to_vec()), scalar_i64(0)]);
    assert_eq!(full[0].dims, vec![1, 4, VOCAB]);
    let mut it = decoder(true).interp().unwrap();
    for (step, &t) in tokens.iter().enumerate() {
        let out = it.run(&[HostTensor::i64(&[1, 1], vec![t]), scalar_i64(step as i64)]).unwrap();
        assert_eq!(out[0].dims, vec![1, 1, VOCAB]);
        close(f(&out[0]), &f(&full[0])[step * VOCAB..(step + 1) * VOCAB], 1e-5);
    }
    // A prefill of 2 then 2 single steps gives the same rows too.
    let mut it = decoder(true).interp().unwrap();
    let pre = it.run(&[HostTensor::i64(&[1, 2], tokens[..2].to_vec()), scalar_i64(0)]).unwrap();
    close(f(&pre[0]), &f(&full[0])[..2 * VOCAB], 1e-5);
    for (step, &t) in tokens.iter().enumerate().skip(2) {
        let out = it.run(&[HostTensor::i64(&[1, 1], vec![t]), scalar_i64(step as i64)]).unwrap();
        close(f(&out[0]), &f(&full[0])[step * VOCAB..(step + 1) * VOCAB], 1e-5);
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
fn missing_named_data_and_wrong_size_are_init_errors() {
    let mut b = decoder(true);
    b.named.remove("wk");
    let err = b.interp().err().expect("missing key");
    assert!(err.contains("`wk`") && err.contains("not in the program"), "{err}");
    let mut b = decoder(true);
    b.named.get_mut("fc1.b").unwrap().pop();
    let err = b.interp().err().expect("short data");
    assert!(err.contains("fc1.b") && err.contains("needs 48"), "{err}");
}

#[test]
fn wrong_input_shape_dtype_and_dynamic_dim_above_bound() {
    let mut it = decoder(true).interp().unwrap();
    let err = it.run(&[HostTensor::i64(&[2, 1], vec![1, 2]), scalar_i64(0)]).unwrap_err();
    assert!(err.contains("`tokens`") && err.contains("dim 0 is 1"), "{err}");
    let err = it.run(&[HostTensor::i32(&[1, 1], vec![1]), scalar_i64(0)]).unwrap_err();
    assert!(err.contains("`tokens`") && err.contains("is i64, got i32"), "{err}");
    let err = it.run(&[HostTensor::i64(&[1, 9], vec![1; 9]), scalar_i64(0)]).unwrap_err();
    assert!(err.contains("`tokens`") && err.contains("symbol `seq`") && err.contains("outside its bounds 1..=8"), "{err}");
    let err = it.run(&[HostTensor::i64(&[1, 2], vec![1; 2]), scalar_i64(7)]).unwrap_err();
    assert!(err.contains("exceeds"), "{err}");
    let err = it.run(&[HostTensor::i64(&[1, 1], vec![1])]).unwrap_err();
    assert!(err.contains("takes 2 input(s)"), "{err}");
}

#[test]
fn unsupported_payload_is_an_error_not_a_panic() {
    // Matmul inner dims that do not agree: reported at run with the op named.
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[2, 3]));
    let w = b.cf("w", &[4, 2], &[0.0; 8]);
    let y = b.op(Op::MatMul, &[x, w], "y", DType::F32, &fx(&[2, 2]));
    b.out(y);
    let err = b.interp().unwrap().run(&[HostTensor::f32(&[2, 3], vec![0.0; 6])]).unwrap_err();
    assert!(err.contains("op 0 (`matmul`)") && err.contains("inner dims"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The Backend wrapper through KernelArgs
// ---------------------------------------------------------------------------------------------

thread_local! {
    static HANDLE: RefCell<Option<Box<dyn DelegateHandle>>> = RefCell::new(None);
}

fn call_handle(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    HANDLE.with(|h| match h.borrow_mut().as_mut() {
        Some(handle) => handle.execute(ctx, args),
        None => Err(rbuild_runtime::kernel::KernelError::new("no handle")),
    })
}

#[test]
fn backend_runs_the_decoder_through_kernel_args_with_persistent_state() {
    let backend = ReferenceGpuBackend;
    assert_eq!(backend.id(), RBUILD_GPU_BACKEND_ID);
    let b = decoder(true);
    let blob = b.p.to_bytes().unwrap();
    let named = |k: &str| b.named.get(k).map(|v| v.as_slice());
    let ctx = BackendInitContext { named_data: &named };
    let handle = backend.init(&ctx, &blob, &[]).map_err(|e| e.to_string()).unwrap();
    HANDLE.with(|h| *h.borrow_mut() = Some(handle));

    let tokens = [5i64, 1, 10];
    let full = decoder(false).run(&[HostTensor::i64(&[1, 3], tokens.to_vec()), scalar_i64(0)]);
    for (step, &t) in tokens.iter().enumerate() {
        let mut hn = OpHarness::new();
        let tok = hn.i64(&[1, 1], &[t]);
        let pos = hn.i64(&[], &[step as i64]);
        let out = hn.out_dynamic(ScalarType::Float, &[1, MAXS, VOCAB]);
        hn.call(call_handle, &[tok, pos, out]).unwrap();
        assert_eq!(hn.sizes(out), vec![1, 1, VOCAB]);
        close(&hn.read::<f32>(out), &f(&full[0])[step * VOCAB..(step + 1) * VOCAB], 1e-5);
    }
    // Bad input through KernelArgs: a clear error naming the value.
    let mut hn = OpHarness::new();
    let tok = hn.i64(&[1, 9], &[0; 9]);
    let pos = hn.i64(&[], &[0]);
    let out = hn.out_dynamic(ScalarType::Float, &[1, MAXS, VOCAB]);
    let err = hn.call(call_handle, &[tok, pos, out]).unwrap_err();
    assert!(err.message.contains(RBUILD_GPU_BACKEND_ID) && err.message.contains("outside its bounds"), "{}", err.message);
    let err = hn.call(call_handle, &[tok, pos]).unwrap_err();
    assert!(err.message.contains("2 arguments"), "{}", err.message);
    HANDLE.with(|h| *h.borrow_mut() = None);

    // Init errors carry context.
    let err = backend.init(&ctx, &blob[..10], &[]).err().unwrap();
    assert!(err.contains(RBUILD_GPU_BACKEND_ID), "{err}");
    let empty = |_: &str| -> Option<&[u8]> { None };
    let err = backend.init(&BackendInitContext { named_data: &empty }, &blob, &[]).err().unwrap();
    assert!(err.contains("named_data key `embed`"), "{err}");
}

#[test]
fn named_state_init_bf16_constant_and_quantized_embedding() {
    let mut b = B::default();
    let ids = b.input("ids", DType::I64, &fx(&[3]));
    let init = [0.5f32, -1.25, 3.0];
    b.named.insert("st.init".into(), init.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect());
    let st = b.value("st", DType::F16, &fx(&[3]), ValueKind::State { init: StateInit::Named("st.init".into()) });
    let cv = [1.0f32, 2.5, -0.5];
    let c = b.constant("c", DType::BF16, &[3], cv.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect());
    let y = b.op(Op::Binary(BinaryOp::Mul), &[st, c], "y", DType::F32, &fx(&[3]));
    b.out(y);
    // int4 table [5, 3]: rows of 2 bytes, group 2 → scales [5, 2].
    let q: Vec<i8> = (0..15).map(|i| (i % 16) as i8 - 8).collect();
    let mut packed = vec![0u8; 5 * 2];
    for r in 0..5 {
        for col in 0..3 {
            packed[r * 2 + col / 2] |= ((q[r * 3 + col] as u8) & 0x0F) << (4 * (col % 2));
        }
    }
    let sc: Vec<f32> = (0..10).map(|i| 0.25 * (i + 1) as f32).collect();
    let si = b.cf("t.scales", &[5, 2], &sc);
    let t = b.constant("t", DType::QInt4Grouped, &[5, 3], packed);
    b.p.values[t as usize].meta.quant = Some(GroupQuant { group_size: 2, scales: si });
    let e = b.op(Op::Embedding, &[t, ids], "e", DType::F32, &fx(&[3, 3]));
    b.out(e);
    let out = b.run(&[HostTensor::i64(&[3], vec![4, 0, 2])]);
    close(f(&out[0]), &[0.5, -3.125, -1.5], 0.0);
    let (q, sc) = (&q, &sc);
    let want: Vec<f32> = [4usize, 0, 2].iter().flat_map(|&r| (0..3).map(move |c| q[r * 3 + c] as f32 * sc[r * 2 + c / 2])).collect();
    close(f(&out[1]), &want, 0.0);
}

#[test]
fn negative_position_and_kv_cache_in_f16_state() {
    let mut it = decoder(true).interp().unwrap();
    let err = it.run(&[HostTensor::i64(&[1, 1], vec![1]), scalar_i64(-1)]).unwrap_err();
    assert!(err.contains("`position`") && err.contains("negative"), "{err}");
    // The same block with f16 caches: the state holds f16-rounded rows; logits stay close.
    let mut b = decoder(true);
    for v in b.p.values.iter_mut().filter(|v| v.name.ends_with("_cache")) {
        v.meta.dtype = DType::F16;
    }
    let mut it = b.interp().unwrap();
    let full = decoder(false).run(&[HostTensor::i64(&[1, 2], vec![2, 6]), scalar_i64(0)]);
    for (step, t) in [2i64, 6].into_iter().enumerate() {
        let out = it.run(&[HostTensor::i64(&[1, 1], vec![t]), scalar_i64(step as i64)]).unwrap();
        close(f(&out[0]), &f(&full[0])[step * VOCAB..(step + 1) * VOCAB], 2e-2);
    }
    let kc = b.p.values.iter().position(|v| v.name == "k_cache").unwrap() as ValueId;
    let state = it.state(kc).expect("state");
    assert_eq!(state.dtype, DType::F16);
    let vals = state.as_f32().unwrap();
    assert!(vals.iter().all(|&x| half::f16::from_f32(x).to_f32() == x));
    assert!(vals[..2 * DH].iter().any(|&x| x != 0.0) && vals[2 * DH..].iter().all(|&x| x == 0.0));
}

#[test]
fn slice_edge_cases_huge_step_empty_and_negative_bounds() {
    let mut b = B::default();
    let x = b.input("x", DType::I64, &fx(&[2, 5]));
    let a = b.op(Op::Slice { dim: -1, start: 1, end: i64::MAX, step: i64::MAX }, &[x], "a", DType::I64, &fx(&[2, 1]));
    let e = b.op(Op::Slice { dim: 1, start: 4, end: 2, step: 1 }, &[x], "e", DType::I64, &fx(&[2, 0]));
    let n = b.op(Op::Slice { dim: 1, start: -100, end: -2, step: 2 }, &[x], "n", DType::I64, &fx(&[2, 2]));
    for o in [a, e, n] {
        b.out(o);
    }
    let out = b.run(&[HostTensor::i64(&[2, 5], (0..10).collect())]);
    assert_eq!(out[0].data, HostData::I64(vec![1, 6]));
    assert_eq!(out[1].data, HostData::I64(vec![]));
    assert_eq!(out[2].data, HostData::I64(vec![0, 2, 5, 7]));
}

/// Valid payloads with wrong activation shapes, dtypes or op attributes are rejected with an
/// error (at init or run), never a panic.
#[test]
fn mutated_decoder_payloads_error_without_panicking() {
    let base = decoder(true);
    let mut r = Rng(99);
    let mut pick = |n: usize| ((r.next() + 1.0) * 0.5 * n as f32) as usize % n.max(1);
    let dtypes = [DType::F32, DType::F16, DType::I64, DType::Bool, DType::I32];
    let mut errors = 0;
    for _ in 0..300 {
        let mut b = B { p: base.p.clone(), named: base.named.clone() };
        let acts: Vec<usize> = (0..b.p.values.len()).filter(|&i| matches!(b.p.values[i].kind, ValueKind::Activation)).collect();
        for _ in 0..1 + pick(2) {
            let v = acts[pick(acts.len())];
            match pick(3) {
                0 => {
                    let rank = b.p.values[v].meta.dims.len();
                    if rank > 0 {
                        let d = pick(rank);
                        b.p.values[v].meta.dims[d] = Dim::Fixed(pick(6) as u64);
                    }
                }
                1 => b.p.values[v].meta.dtype = dtypes[pick(dtypes.len())],
                _ => {
                    let o = pick(b.p.ops.len());
                    if let Op::Attention { causal, .. } = &mut b.p.ops[o].op {
                        *causal = !*causal;
                    } else if let Op::Rope { head_dim, .. } = &mut b.p.ops[o].op {
                        *head_dim = 1 + pick(8) as u32;
                    } else if let Op::CacheUpdate { seq_dim } = &mut b.p.ops[o].op {
                        *seq_dim = pick(4) as i64 - 4;
                    }
                }
            }
        }
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut it = b.interp()?;
            it.run(&[HostTensor::i64(&[1, 2], vec![1, 2]), scalar_i64(0)])?;
            it.run(&[HostTensor::i64(&[1, 1], vec![3]), scalar_i64(2)])
        }));
        match run {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                assert!(!e.is_empty());
                errors += 1;
            }
            Err(_) => panic!("panicked on a mutated payload: {:?}", b.p.ops.iter().map(|o| &o.op).collect::<Vec<_>>()),
        }
    }
    assert!(errors > 100, "only {errors} mutations were rejected");
}

#[test]
fn check_shapes_finds_mismatches_before_any_call_and_keeps_state() {
    let mut it = decoder(true).interp().unwrap();
    it.check_shapes().unwrap();
    // The dry run leaves the caches untouched: a real run still matches the uncached block.
    let full = decoder(false).run(&[HostTensor::i64(&[1, 1], vec![4]), scalar_i64(0)]);
    let out = it.run(&[HostTensor::i64(&[1, 1], vec![4]), scalar_i64(0)]).unwrap();
    close(f(&out[0]), f(&full[0]), 1e-5);
    // A reshape whose element count cannot match.
    let mut b = decoder(true);
    let q4 = b.p.values.iter().position(|v| v.name == "q4").unwrap();
    b.p.values[q4].meta.dims[3] = Dim::Fixed(3);
    let err = b.interp().unwrap().check_shapes().unwrap_err();
    assert!(err.contains("(`reshape`)") && err.contains("`q4`"), "{err}");
}
