//! Every kernel against the CPU reference twin over a grid of shapes (odd sizes, non-multiples
//! of the tiles), with f32 and f16 storage.

use super::common::*;
use rbuild_runtime::backends::gpu::payload::*;

const FLOATS: [DType; 2] = [DType::F32, DType::F16];

/// One op on inputs given as delegate inputs; the output has dtype `out` and dims `out_dims`.
fn single(op: Op, ins: &[(DType, Vec<usize>)], out: DType, out_dims: &[usize]) -> B {
    let mut b = B::default();
    let ids: Vec<ValueId> = ins.iter().enumerate().map(|(i, (d, dims))| b.input(&format!("in{i}"), *d, &fx(dims))).collect();
    let o = b.op(op, &ids, "out", out, &fx(out_dims));
    b.out(o);
    b
}

fn rand_input(rng: &mut Rng, dtype: DType, dims: &[usize]) -> HostTensor {
    tensor(dtype, dims, rng.vec(dims.iter().product()))
}

#[test]
fn unary_gelu_silu() {
    let mut rng = Rng(1);
    for dt in FLOATS {
        for dims in [vec![1usize], vec![3, 17], vec![127], vec![2, 3, 65]] {
            let mut ops: Vec<Op> = (0..12).map(|c| Op::decode(11, &[Attr::Int(c)]).unwrap()).collect();
            ops.push(Op::Gelu { approximation: GeluApproximation::Erf });
            ops.push(Op::Gelu { approximation: GeluApproximation::Tanh });
            ops.push(Op::Silu);
            for op in ops {
                let b = single(op.clone(), &[(dt, dims.clone())], dt, &dims);
                // Positive inputs for log/sqrt/rsqrt/reciprocal; a wider range elsewhere.
                let n: usize = dims.iter().product();
                let data: Vec<f32> = match op {
                    Op::Unary(UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Reciprocal) => (0..n).map(|_| rng.next().abs() * 4.0 + 0.05).collect(),
                    _ => (0..n).map(|_| rng.next() * 6.0).collect(),
                };
                let t = if dt == DType::F32 { 1e-5 } else { 4e-3 };
                if !check(&b, vec![tensor(dt, &dims, data)], t, &format!("{op:?} {dt:?} {dims:?}")) {
                    return;
                }
            }
        }
    }
}

#[test]
fn binary_broadcast() {
    let mut rng = Rng(2);
    let shapes: [(Vec<usize>, Vec<usize>); 6] = [
        (vec![7], vec![7]),
        (vec![3, 1, 5], vec![4, 5]),
        (vec![7], vec![1]),
        (vec![], vec![2, 3]),
        (vec![2, 3, 1, 17], vec![3, 33, 1]),
        (vec![1, 1, 1, 1, 1, 1, 2, 3], vec![3]),
    ];
    for dt in FLOATS {
        for (sa, sb) in &shapes {
            for code in 0..7 {
                let op = Op::decode(10, &[Attr::Int(code)]).unwrap();
                let rank = sa.len().max(sb.len());
                let mut od = vec![1usize; rank];
                for (i, o) in od.iter_mut().enumerate() {
                    let ga = if i + sa.len() >= rank { sa[i + sa.len() - rank] } else { 1 };
                    let gb = if i + sb.len() >= rank { sb[i + sb.len() - rank] } else { 1 };
                    *o = ga.max(gb);
                }
                let b = single(op.clone(), &[(dt, sa.clone()), (dt, sb.clone())], dt, &od);
                let mut a = rand_input(&mut rng, dt, sa);
                let c = rand_input(&mut rng, dt, sb);
                if code == 6 {
                    // pow: positive bases.
                    if let HostData::F32(v) = &mut a.data {
                        v.iter_mut().for_each(|x| *x = x.abs() + 0.1);
                    }
                }
                let t = if dt == DType::F32 { 1e-5 } else { 4e-3 };
                if !check(&b, vec![a, c], t, &format!("binary {op:?} {dt:?} {sa:?} {sb:?}")) {
                    return;
                }
            }
        }
    }
}

#[test]
fn binary_integer() {
    for dt in [DType::I64, DType::I32] {
        for code in [0, 1, 2, 4, 5] {
            let op = Op::decode(10, &[Attr::Int(code)]).unwrap();
            let b = single(op.clone(), &[(dt, vec![2, 3]), (dt, vec![3])], dt, &[2, 3]);
            let x = HostTensor { dtype: dt, dims: vec![2, 3], data: HostData::I64(vec![1, -2, 3, 40, 5, -60]) };
            let y = HostTensor { dtype: dt, dims: vec![3], data: HostData::I64(vec![7, 8, -9]) };
            if !check(&b, vec![x, y], 0.0, &format!("int {op:?} {dt:?}")) {
                return;
            }
        }
    }
}

#[test]
fn linear_grid() {
    let mut rng = Rng(3);
    let shapes = [(1usize, 7usize, 3usize), (1, 65, 127), (3, 17, 33), (65, 33, 7), (127, 65, 17), (2, 1, 1), (70, 130, 66)];
    for wdt in FLOATS {
        for &(m, k, n) in &shapes {
            for transposed in [false, true] {
                for bias in [false, true] {
                    let mut b = B::default();
                    let x = b.input("x", DType::F32, &fx(&[m, k]));
                    let wd = if transposed { [k, n] } else { [n, k] };
                    let w = b.cf("w", wdt, &wd, &rng.vec(k * n));
                    let mut ins = vec![x, w];
                    if bias {
                        ins.push(b.cf("b", wdt, &[n], &rng.vec(n)));
                    }
                    let o = b.op(Op::Linear { weight_transposed: transposed }, &ins, "y", DType::F32, &fx(&[m, n]));
                    b.out(o);
                    let what = format!("linear {wdt:?} m{m} k{k} n{n} t{transposed} b{bias}");
                    if !check(&b, vec![rand_input(&mut rng, DType::F32, &[m, k])], 1e-4, &what) {
                        return;
                    }
                }
            }
        }
    }
}

#[test]
fn linear_f16_activations_and_3d_input() {
    let mut rng = Rng(4);
    let mut b = B::default();
    let x = b.input("x", DType::F16, &fx(&[2, 3, 17]));
    let w = b.cf("w", DType::F16, &[33, 17], &rng.vec(33 * 17));
    let o = b.op(Op::Linear { weight_transposed: false }, &[x, w], "y", DType::F16, &fx(&[2, 3, 33]));
    b.out(o);
    check(&b, vec![rand_input(&mut rng, DType::F16, &[2, 3, 17])], 4e-3, "linear f16 3-D");
}

#[test]
fn matmul_batched_broadcast() {
    let mut rng = Rng(5);
    let cases: [(Vec<usize>, Vec<usize>, Vec<usize>); 5] = [
        (vec![2, 3, 17, 7], vec![7, 5], vec![2, 3, 17, 5]),
        (vec![2, 1, 5, 7], vec![3, 7, 9], vec![2, 3, 5, 9]),
        (vec![1, 7], vec![7, 1], vec![1, 1]),
        (vec![65, 33], vec![33, 127], vec![65, 127]),
        (vec![4, 1, 65], vec![4, 65, 3], vec![4, 1, 3]),
    ];
    for dt in FLOATS {
        for (ad, bd, od) in &cases {
            let b = single(Op::MatMul, &[(dt, ad.clone()), (dt, bd.clone())], dt, od);
            let t = if dt == DType::F32 { 1e-4 } else { 4e-3 };
            if !check(&b, vec![rand_input(&mut rng, dt, ad), rand_input(&mut rng, dt, bd)], t, &format!("matmul {dt:?} {ad:?}@{bd:?}")) {
                return;
            }
        }
    }
}

#[test]
fn norms_and_softmax() {
    let mut rng = Rng(6);
    for dt in FLOATS {
        let t = if dt == DType::F32 { 1e-4 } else { 4e-3 };
        for d in [1usize, 3, 17, 127, 300] {
            let dims = [3usize, d];
            for affine in [false, true] {
                let mut b = B::default();
                let x = b.input("x", dt, &fx(&dims));
                let mut ins = vec![x];
                if affine {
                    ins.push(b.cf("w", dt, &[d], &rng.vec(d)));
                    ins.push(b.cf("b", dt, &[d], &rng.vec(d)));
                }
                let o = b.op(Op::LayerNorm { eps: 1e-5, affine }, &ins, "y", dt, &fx(&dims));
                b.out(o);
                if !check(&b, vec![rand_input(&mut rng, dt, &dims)], t, &format!("layer_norm {dt:?} {dims:?} affine {affine}")) {
                    return;
                }
            }
            let mut b = B::default();
            let x = b.input("x", dt, &fx(&dims));
            let w = b.cf("w", dt, &[d], &rng.vec(d));
            let o = b.op(Op::RmsNorm { eps: 1e-6 }, &[x, w], "y", dt, &fx(&dims));
            b.out(o);
            check(&b, vec![rand_input(&mut rng, dt, &dims)], t, &format!("rms_norm {dt:?} {dims:?}"));
        }
        for dim in [-1i64, 0, 1] {
            let dims = [3usize, 17, 5];
            let b = single(Op::Softmax { dim }, &[(dt, dims.to_vec())], dt, &dims);
            let x = tensor(dt, &dims, rng.vec(3 * 17 * 5).iter().map(|v| v * 8.0).collect());
            check(&b, vec![x], t, &format!("softmax {dt:?} dim {dim}"));
        }
        let b = single(Op::Softmax { dim: 0 }, &[(dt, vec![300])], dt, &[300]);
        check(&b, vec![rand_input(&mut rng, dt, &[300])], t, "softmax 300");
    }
}

#[test]
fn attention_grid() {
    let mut rng = Rng(7);
    // (B, Lq, Lk, H, Hkv, D)
    let shapes = [(1usize, 1usize, 1usize, 1usize, 1usize, 4usize), (1, 3, 7, 4, 2, 8), (2, 5, 5, 2, 1, 17), (1, 7, 130, 6, 3, 64), (1, 2, 3, 1, 1, 129)];
    for dt in FLOATS {
        let t = if dt == DType::F32 { 1e-4 } else { 4e-3 };
        for &(bs, lq, lk, h, hkv, d) in &shapes {
            for causal in [false, true] {
                for with_pos in [false, true] {
                    if with_pos && lk < lq {
                        continue;
                    }
                    let mut b = B::default();
                    let q = b.input("q", dt, &fx(&[bs, lq, h, d]));
                    let k = b.input("k", dt, &fx(&[bs, lk, hkv, d]));
                    let v = b.input("v", dt, &fx(&[bs, lk, hkv, d]));
                    let mut ins = vec![q, k, v];
                    if with_pos {
                        ins.push(b.input("pos", DType::I64, &[]));
                    }
                    let op = Op::Attention { causal, scale: 1.0 / (d as f32).sqrt(), num_heads: h as u32, num_kv_heads: hkv as u32 };
                    let o = b.op(op, &ins, "o", dt, &fx(&[bs, lq, h, d]));
                    b.out(o);
                    let mut inputs = vec![
                        rand_input(&mut rng, dt, &[bs, lq, h, d]),
                        rand_input(&mut rng, dt, &[bs, lk, hkv, d]),
                        rand_input(&mut rng, dt, &[bs, lk, hkv, d]),
                    ];
                    if with_pos {
                        inputs.push(HostTensor::i64(&[], vec![(lk - lq) as i64 / 2]));
                    }
                    let what = format!("attention {dt:?} b{bs} lq{lq} lk{lk} h{h}/{hkv} d{d} causal {causal} pos {with_pos}");
                    if !check(&b, inputs, t, &what) {
                        return;
                    }
                }
            }
        }
    }
}

#[test]
fn embedding_and_rope() {
    let mut rng = Rng(8);
    for dt in FLOATS {
        let t = if dt == DType::F32 { 1e-5 } else { 4e-3 };
        for idt in [DType::I64, DType::I32] {
            let mut b = B::default();
            let table = b.cf("table", dt, &[11, 17], &rng.vec(11 * 17));
            let idx = b.input("idx", idt, &fx(&[2, 3]));
            let o = b.op(Op::Embedding, &[table, idx], "e", dt, &fx(&[2, 3, 17]));
            b.out(o);
            let ids = HostTensor { dtype: idt, dims: vec![2, 3], data: HostData::I64(vec![0, 10, 3, 3, 7, 1]) };
            if !check(&b, vec![ids], t, &format!("embedding {dt:?} {idt:?}")) {
                return;
            }
        }
        for interleaved in [false, true] {
            for (l, h, d) in [(1usize, 1usize, 2usize), (3, 2, 8), (7, 3, 64)] {
                let mut b = B::default();
                let x = b.input("x", dt, &fx(&[2, l, h, d]));
                let pos = b.input("pos", DType::I32, &[]);
                let o = b.op(Op::Rope { theta: 10000.0, head_dim: d as u32, interleaved }, &[x, pos], "r", dt, &fx(&[2, l, h, d]));
                b.out(o);
                let inputs = vec![rand_input(&mut rng, dt, &[2, l, h, d]), HostTensor::i32(&[], vec![5])];
                check(&b, inputs, if dt == DType::F32 { 2e-5 } else { 4e-3 }, &format!("rope {dt:?} interleaved {interleaved} l{l} h{h} d{d}"));
            }
        }
    }
}

#[test]
fn shape_ops_and_cast() {
    let mut rng = Rng(9);
    for dt in FLOATS {
        let dims = [2usize, 3, 5, 7];
        let x = || rand_input(&mut Rng(10), dt, &dims);
        let b = single(Op::Permute { dims: vec![2, 0, 3, 1] }, &[(dt, dims.to_vec())], dt, &[5, 2, 7, 3]);
        if !check(&b, vec![x()], 0.0, "permute") {
            return;
        }
        let b = single(Op::Transpose { dim0: 1, dim1: -1 }, &[(dt, dims.to_vec())], dt, &[2, 7, 5, 3]);
        check(&b, vec![x()], 0.0, "transpose");
        let b = single(Op::Slice { dim: 2, start: 1, end: i64::MAX, step: 2 }, &[(dt, dims.to_vec())], dt, &[2, 3, 2, 7]);
        check(&b, vec![x()], 0.0, "slice step 2");
        let b = single(Op::Slice { dim: -1, start: -3, end: 6, step: 1 }, &[(dt, dims.to_vec())], dt, &[2, 3, 5, 2]);
        check(&b, vec![x()], 0.0, "slice negative start");
        let b = single(Op::Reshape, &[(dt, dims.to_vec())], dt, &[6, 35]);
        check(&b, vec![x()], 0.0, "reshape");
        let b = single(Op::Cat { dim: 1 }, &[(dt, vec![2, 3, 5]), (dt, vec![2, 1, 5]), (dt, vec![2, 7, 5])], dt, &[2, 11, 5]);
        let ins = vec![rand_input(&mut rng, dt, &[2, 3, 5]), rand_input(&mut rng, dt, &[2, 1, 5]), rand_input(&mut rng, dt, &[2, 7, 5])];
        check(&b, ins, 0.0, "cat dim 1");
        let b = single(Op::Cat { dim: -1 }, &[(dt, vec![3, 3]), (dt, vec![3, 1])], dt, &[3, 4]);
        check(&b, vec![rand_input(&mut rng, dt, &[3, 3]), rand_input(&mut rng, dt, &[3, 1])], 0.0, "cat last dim (odd)");
    }
    // Casts between every float dtype and to / from integers and bool.
    let floats = [DType::F32, DType::F16, DType::BF16];
    for from in floats {
        for to in floats.iter().copied().chain([DType::I32, DType::I64, DType::Bool]) {
            let b = single(Op::Cast, &[(from, vec![17])], to, &[17]);
            let data: Vec<f32> = rng.vec(17).iter().map(|v| v * 50.0).collect();
            if !check(&b, vec![tensor(from, &[17], data)], 0.0, &format!("cast {from:?} -> {to:?}")) {
                return;
            }
        }
    }
    for to in [DType::F32, DType::F16, DType::I32, DType::Bool] {
        let b = single(Op::Cast, &[(DType::I64, vec![5])], to, &[5]);
        check(&b, vec![HostTensor::i64(&[5], vec![-3, 0, 1, 7, 1000])], 0.0, &format!("cast i64 -> {to:?}"));
    }
}

#[test]
fn conv1d_grid() {
    let mut rng = Rng(11);
    // (N, Cin, L, Cout, K, stride, padding, dilation, groups)
    let cases = [(1usize, 1usize, 7usize, 1usize, 3usize, 1u32, 0u32, 1u32, 1u32), (2, 4, 17, 6, 3, 2, 1, 1, 2), (1, 3, 33, 5, 5, 1, 2, 2, 1), (1, 8, 16, 8, 3, 1, 1, 1, 8)];
    for dt in FLOATS {
        for &(n, cin, l, cout, k, s, p, d, g) in &cases {
            for bias in [false, true] {
                let out_len = (l + 2 * p as usize - (d as usize * (k - 1) + 1)) / s as usize + 1;
                let mut b = B::default();
                let x = b.input("x", dt, &fx(&[n, cin, l]));
                let w = b.cf("w", dt, &[cout, cin / g as usize, k], &rng.vec(cout * cin / g as usize * k));
                let mut ins = vec![x, w];
                if bias {
                    ins.push(b.cf("b", dt, &[cout], &rng.vec(cout)));
                }
                let o = b.op(Op::Conv1d { stride: s, padding: p, dilation: d, groups: g }, &ins, "y", dt, &fx(&[n, cout, out_len]));
                b.out(o);
                let t = if dt == DType::F32 { 1e-4 } else { 4e-3 };
                if !check(&b, vec![rand_input(&mut rng, dt, &[n, cin, l])], t, &format!("conv1d {dt:?} {cin}->{cout} k{k} s{s} p{p} d{d} g{g}")) {
                    return;
                }
            }
        }
    }
}

#[test]
fn quantized_linear_and_embedding() {
    let mut rng = Rng(12);
    for qdt in [DType::QInt8Grouped, DType::QInt4Grouped] {
        // (m, k, n, group): odd columns, groups that do not divide them, gemv and gemm paths.
        for &(m, k, n, group) in &[(1usize, 7usize, 3usize, 4usize), (1, 65, 33, 32), (3, 17, 5, 5), (65, 33, 7, 8), (2, 64, 130, 64)] {
            for transposed in [false, true] {
                let mut b = B::default();
                let x = b.input("x", DType::F32, &fx(&[m, k]));
                let (r, c) = if transposed { (k, n) } else { (n, k) };
                let w = quantized(&mut b, "w", qdt, r, c, group, &mut rng);
                let bias = b.cf("b", DType::F32, &[n], &rng.vec(n));
                let o = b.op(Op::Linear { weight_transposed: transposed }, &[x, w, bias], "y", DType::F32, &fx(&[m, n]));
                b.out(o);
                let what = format!("linear {qdt:?} m{m} k{k} n{n} g{group} t{transposed}");
                if !check(&b, vec![rand_input(&mut rng, DType::F32, &[m, k])], 1e-4, &what) {
                    return;
                }
            }
        }
        for &(v, d, group) in &[(11usize, 17usize, 4usize), (5, 3, 2), (9, 64, 32)] {
            let mut b = B::default();
            let t = quantized(&mut b, "t", qdt, v, d, group, &mut rng);
            let idx = b.input("idx", DType::I64, &fx(&[4]));
            let o = b.op(Op::Embedding, &[t, idx], "e", DType::F16, &fx(&[4, d]));
            b.out(o);
            let ids = HostTensor::i64(&[4], vec![0, v as i64 - 1, 3 % v as i64, 1]);
            check(&b, vec![ids], 1e-3, &format!("embedding {qdt:?} v{v} d{d} g{group}"));
        }
    }
}

/// Long-context positions: the angle reduction keeps rope within f32 rounding of the reference's
/// f64 angles.
#[test]
fn rope_at_large_positions() {
    let mut rng = Rng(13);
    for start in [0i64, 3000, 40_000, 1_000_000, 16_000_000] {
        for theta in [10000.0f32, 500000.0] {
            let (l, h, d) = (3usize, 2usize, 128usize);
            let mut b = B::default();
            let x = b.input("x", DType::F32, &fx(&[1, l, h, d]));
            let pos = b.input("pos", DType::I64, &[]);
            let o = b.op(Op::Rope { theta, head_dim: d as u32, interleaved: false }, &[x, pos], "r", DType::F32, &fx(&[1, l, h, d]));
            b.out(o);
            let inputs = vec![rand_input(&mut rng, DType::F32, &[1, l, h, d]), HostTensor::i64(&[], vec![start])];
            if !check(&b, inputs, 2e-5, &format!("rope at {start} theta {theta}")) {
                return;
            }
        }
    }
}

/// Cache writes into f16 / bf16 / f32 state along different seq dims, with odd row widths (rows
/// start mid-word in packed halves), over consecutive calls, read back through attention-free
/// ops (a cast of the whole cache).
#[test]
fn cache_update_odd_rows_and_seq_dims() {
    let mut rng = Rng(14);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        // (cache dims, seq_dim, rows per call)
        for (cache, seq_dim, rows) in [(vec![1usize, 9, 1, 3], 1i64, 2usize), (vec![2, 3, 7, 5], 2, 3), (vec![5, 3], 0, 1), (vec![3, 7], -1, 2)] {
            let mut b = B::default();
            let ax = if seq_dim < 0 { cache.len() - 1 } else { seq_dim as usize };
            let mut rd = cache.clone();
            rd[ax] = rows;
            let r = b.input("rows", dt, &fx(&rd));
            let pos = b.input("pos", DType::I32, &[]);
            let c = b.state("cache", dt, &cache);
            b.op0(Op::CacheUpdate { seq_dim }, &[c, r, pos]);
            let o = b.op(Op::Cast, &[c], "snapshot", DType::F32, &fx(&cache));
            b.out(o);
            let n: usize = rd.iter().product();
            let calls: Vec<Vec<HostTensor>> = (0..cache[ax] / rows)
                .map(|k| vec![tensor(dt, &rd, rng.vec(n)), HostTensor::i32(&[], vec![(k * rows) as i64])])
                .collect();
            if !check_calls(&b, &calls, 0.0, &format!("cache_update {dt:?} {cache:?} seq_dim {seq_dim}")) {
                return;
            }
        }
    }
}

/// More attention shapes: more query rows than keys (causal, top-left aligned), a value head
/// dim different from the key head dim, and a cache read at its last rows.
#[test]
fn attention_edge_shapes() {
    let mut rng = Rng(15);
    for (lq, lk, d, dv, pos) in [(5usize, 3usize, 8usize, 8usize, None), (2, 6, 4, 7, None), (2, 6, 4, 7, Some(4i64)), (1, 300, 16, 16, Some(299))] {
        for causal in [false, true] {
            let mut b = B::default();
            let q = b.input("q", DType::F32, &fx(&[1, lq, 2, d]));
            let k = b.input("k", DType::F32, &fx(&[1, lk, 1, d]));
            let v = b.input("v", DType::F32, &fx(&[1, lk, 1, dv]));
            let mut ins = vec![q, k, v];
            if pos.is_some() {
                ins.push(b.input("pos", DType::I64, &[]));
            }
            let o = b.op(Op::Attention { causal, scale: 0.3, num_heads: 2, num_kv_heads: 1 }, &ins, "o", DType::F32, &fx(&[1, lq, 2, dv]));
            b.out(o);
            let mut inputs = vec![rand_input(&mut rng, DType::F32, &[1, lq, 2, d]), rand_input(&mut rng, DType::F32, &[1, lk, 1, d]), rand_input(&mut rng, DType::F32, &[1, lk, 1, dv])];
            if let Some(p) = pos {
                inputs.push(HostTensor::i64(&[], vec![p]));
            }
            if !check(&b, inputs, 1e-4, &format!("attention lq{lq} lk{lk} d{d} dv{dv} pos {pos:?} causal {causal}")) {
                return;
            }
        }
    }
}

/// Shape ops on integer and bool tensors take the integer copy path.
#[test]
fn shape_ops_on_integers_and_bools() {
    let ints = |d: &[usize], v: Vec<i64>| HostTensor::i64(d, v);
    let b = single(Op::Cat { dim: 0 }, &[(DType::I64, vec![2]), (DType::I64, vec![3])], DType::I64, &[5]);
    if !check(&b, vec![ints(&[2], vec![-1, 2]), ints(&[3], vec![3, -4_000_000, 5])], 0.0, "cat i64") {
        return;
    }
    let b = single(Op::Permute { dims: vec![1, 0] }, &[(DType::I32, vec![2, 3])], DType::I32, &[3, 2]);
    check(&b, vec![HostTensor::i32(&[2, 3], vec![1, 2, 3, 4, 5, 6])], 0.0, "permute i32");
    let bools = HostTensor { dtype: DType::Bool, dims: vec![2, 3], data: HostData::Bool(vec![1, 0, 0, 1, 1, 0]) };
    let b = single(Op::Transpose { dim0: 0, dim1: 1 }, &[(DType::Bool, vec![2, 3])], DType::Bool, &[3, 2]);
    check(&b, vec![bools.clone()], 0.0, "transpose bool");
    for to in [DType::F32, DType::F16, DType::I64] {
        let b = single(Op::Cast, &[(DType::Bool, vec![2, 3])], to, &[2, 3]);
        check(&b, vec![bools.clone()], 0.0, &format!("cast bool -> {to:?}"));
    }
    let b = single(Op::Slice { dim: 1, start: 1, end: 3, step: 1 }, &[(DType::I64, vec![2, 3])], DType::I64, &[2, 2]);
    check(&b, vec![ints(&[2, 3], vec![1, 2, 3, 4, 5, 6])], 0.0, "slice i64");
}

/// Grids past 65535 workgroups in x fold into y: elementwise (16.8M elements), one workgroup
/// per row (70000 rows), GEMV (70000 columns).
#[test]
fn grids_past_the_per_dimension_limit() {
    let mut rng = Rng(16);
    let n = 65535 * 256 + 1000;
    let b = single(Op::Unary(UnaryOp::Neg), &[(DType::F32, vec![n])], DType::F32, &[n]);
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    if !check(&b, vec![tensor(DType::F32, &[n], x)], 0.0, "neg over 16.8M elements") {
        return;
    }
    let rows = 70_000;
    let b = single(Op::Softmax { dim: -1 }, &[(DType::F32, vec![rows, 3])], DType::F32, &[rows, 3]);
    check(&b, vec![rand_input(&mut rng, DType::F32, &[rows, 3])], 1e-5, "softmax over 70000 rows");
    let mut b = B::default();
    let x = b.input("x", DType::F32, &fx(&[1, 3]));
    let w = b.cf("w", DType::F16, &[rows, 3], &rng.vec(rows * 3));
    let o = b.op(Op::Linear { weight_transposed: false }, &[x, w], "y", DType::F32, &fx(&[1, rows]));
    b.out(o);
    check(&b, vec![rand_input(&mut rng, DType::F32, &[1, 3])], 1e-5, "gemv over 70000 columns");
}

/// Decode over long caches: keys split across workgroups (attention_combine.wgsl merges them),
/// including positions that leave some key ranges empty.
#[test]
fn split_key_attention_over_long_caches() {
    let mut rng = Rng(17);
    for dt in FLOATS {
        let t = if dt == DType::F32 { 1e-4 } else { 4e-3 };
        for (lk, lq, h, hkv, d, pos) in [(256usize, 1usize, 2usize, 1usize, 16usize, 255i64), (1000, 1, 4, 2, 64, 3), (1000, 2, 2, 2, 8, 600), (2500, 1, 1, 1, 33, 2499), (2500, 1, 3, 1, 130, 1200)] {
            for causal in [false, true] {
                let mut b = B::default();
                let q = b.input("q", dt, &fx(&[1, lq, h, d]));
                let k = b.input("k", dt, &fx(&[1, lk, hkv, d]));
                let v = b.input("v", dt, &fx(&[1, lk, hkv, d]));
                let p = b.input("pos", DType::I64, &[]);
                let op = Op::Attention { causal, scale: 1.0 / (d as f32).sqrt(), num_heads: h as u32, num_kv_heads: hkv as u32 };
                let o = b.op(op, &[q, k, v, p], "o", dt, &fx(&[1, lq, h, d]));
                b.out(o);
                let inputs = vec![
                    rand_input(&mut rng, dt, &[1, lq, h, d]),
                    rand_input(&mut rng, dt, &[1, lk, hkv, d]),
                    rand_input(&mut rng, dt, &[1, lk, hkv, d]),
                    HostTensor::i64(&[], vec![pos.min((lk - lq) as i64)]),
                ];
                if !check(&b, inputs, t, &format!("split attention {dt:?} lk{lk} lq{lq} h{h}/{hkv} d{d} pos {pos} causal {causal}")) {
                    return;
                }
            }
        }
    }
    // Without a position, causal rows past the keys (top-left aligned) on a long key set.
    let mut b = B::default();
    let q = b.input("q", DType::F32, &fx(&[1, 3, 2, 8]));
    let k = b.input("k", DType::F32, &fx(&[1, 700, 2, 8]));
    let v = b.input("v", DType::F32, &fx(&[1, 700, 2, 8]));
    let o = b.op(Op::Attention { causal: true, scale: 0.35, num_heads: 2, num_kv_heads: 2 }, &[q, k, v], "o", DType::F32, &fx(&[1, 3, 2, 8]));
    b.out(o);
    let inputs = vec![rand_input(&mut rng, DType::F32, &[1, 3, 2, 8]), rand_input(&mut rng, DType::F32, &[1, 700, 2, 8]), rand_input(&mut rng, DType::F32, &[1, 700, 2, 8])];
    if !check(&b, inputs.clone(), 1e-4, "split attention causal without position") {
        return;
    }
    // The split path really ran: its combine pass shows in a profile.
    let Some(gpu) = gpu() else { return };
    let mut p = b.program(&gpu).unwrap();
    if p.set_profiling(true).is_ok() {
        p.run(&inputs).unwrap();
        let kernels: Vec<&str> = p.last_profile().iter().map(|t| t.kernel).collect();
        assert_eq!(kernels, [crate::dut::kernel_file(rbuild_gpu_schedule::Kernel::Attention), crate::dut::kernel_file(rbuild_gpu_schedule::Kernel::AttentionCombine)]);
    }
}
