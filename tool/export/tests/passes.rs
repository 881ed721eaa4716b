//! Each graph pass keeps the numbers its graph computes (checked by eager evaluation before and
//! after, or against hand-computed values where the original ops cannot be evaluated) and makes
//! the structural change it exists for.

use rbuild_export::graph::{Graph, TensorMeta};
use rbuild_export::passes::decompose;
use rbuild_export::{eval, Arg, ConstData, ExportError, GraphBuilder, ValueId};
use rbuild_runtime::{Scalar, ScalarType};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Deterministic values in [lo, hi) (a small LCG: no test depends on a random crate).
struct Lcg(u64);

impl Lcg {
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                lo + (hi - lo) * ((self.0 >> 40) as f32 / (1u64 << 24) as f32)
            })
            .collect()
    }
}

fn constant(b: &mut GraphBuilder, name: &str, sizes: &[usize], data: &[f32]) -> ValueId {
    b.constant(name, ScalarType::Float, sizes, ConstData::owned(f32_bytes(data))).unwrap()
}

fn input(b: &mut GraphBuilder, name: &str, sizes: &[usize]) -> ValueId {
    b.input(name, TensorMeta::fixed(ScalarType::Float, sizes))
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{what}[{i}]: {a} vs {b}");
    }
}

fn count(g: &Graph, op: &str) -> usize {
    g.nodes.iter().filter(|n| n.op == op).count()
}

/// `y[r, o] = b[o] + sum_i x[r, i] * w[o, i]`, computed directly.
fn linear_ref(x: &[f32], w: &[f32], b: Option<&[f32]>, inf: usize, outf: usize) -> Vec<f32> {
    let rows = x.len() / inf;
    let mut y = vec![0f32; rows * outf];
    for r in 0..rows {
        for o in 0..outf {
            let dot: f32 = (0..inf).map(|i| x[r * inf + i] * w[o * inf + i]).sum();
            y[r * outf + o] = dot + b.map_or(0.0, |b| b[o]);
        }
    }
    y
}

#[test]
fn decompose_linear_into_permute_and_matmul() {
    let mut rng = Lcg(1);
    let mut b = GraphBuilder::new();
    let x3 = input(&mut b, "x3", &[2, 3, 4]);
    let x2 = input(&mut b, "x2", &[3, 5]);
    let (w1, b1, w2) = (rng.vec(20, -1.0, 1.0), rng.vec(5, -1.0, 1.0), rng.vec(10, -1.0, 1.0));
    let (cw1, cb1, cw2) = (constant(&mut b, "w1", &[5, 4], &w1), constant(&mut b, "b1", &[5], &b1), constant(&mut b, "w2", &[2, 5], &w2));
    let y1 = b.linear(x3, cw1, Some(cb1)).unwrap();
    let y2 = b.linear(x2, cw2, None).unwrap();
    b.output(y1);
    b.output(y2);
    let mut g = b.finish();

    assert_eq!(decompose::decompose(&mut g, &Default::default()).unwrap(), 2);
    assert_eq!(count(&g, "aten::linear"), 0);
    assert_eq!(count(&g, "aten::addmm"), 1);
    assert_eq!(count(&g, "aten::mm"), 1);
    assert_eq!(count(&g, "aten::permute_copy"), 2);
    assert_eq!(count(&g, "aten::view_copy"), 2, "the 3-D input goes through a 2-D view and back");
    assert_eq!(g.outputs, vec![y1, y2], "graph outputs keep their values");
    assert_eq!(g.meta(y1).sizes(), Some(vec![2, 3, 5]));

    let (in3, in2) = (rng.vec(24, -2.0, 2.0), rng.vec(15, -2.0, 2.0));
    let out = eval::evaluate(&g, &[f32_bytes(&in3), f32_bytes(&in2)]).unwrap();
    assert_close(&floats(&out[0]), &linear_ref(&in3, &w1, Some(&b1), 4, 5), "linear with bias");
    assert_close(&floats(&out[1]), &linear_ref(&in2, &w2, None, 5, 2), "linear without bias");
}

#[test]
fn decompose_activations_pooling_flatten_and_dropout() {
    let mut rng = Lcg(2);
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[2, 3, 4, 4]);
    let hs = b.hardswish(x).unwrap();
    let hsig = b.hardsigmoid(x).unwrap();
    let pooled = b.adaptive_avg_pool2d(x, [1, 1]).unwrap();
    let same = b.adaptive_avg_pool2d(x, [4, 4]).unwrap();
    let flat = b.flatten(pooled, 1, -1).unwrap();
    let dropped = b.dropout(flat, 0.2).unwrap();
    let after_dropout = b.relu(dropped).unwrap();
    let dropped_out = b.dropout(same, 0.5).unwrap();
    for v in [hs, hsig, flat, after_dropout, dropped_out] {
        b.output(v);
    }
    let mut g = b.finish();

    assert_eq!(decompose::decompose(&mut g, &Default::default()).unwrap(), 7);
    for op in ["aten::hardswish", "aten::hardsigmoid", "aten::adaptive_avg_pool2d", "aten::flatten.using_ints", "aten::dropout"] {
        assert_eq!(count(&g, op), 0, "{op} remains");
    }
    for n in &g.nodes {
        assert!(rbuild_export::ops::out_schema(&n.op).is_some(), "{} has no out variant", n.op);
    }
    // The inner dropout's user reads the flattened value directly; the dropout that is a graph
    // output stays a distinct value (a clone of the identity-pooled input).
    assert!(g.nodes.iter().any(|n| n.op == "aten::relu" && n.args == vec![Arg::Tensor(flat)]));
    assert_eq!(count(&g, "aten::clone"), 1);
    assert_eq!(g.meta(flat).sizes(), Some(vec![2, 3]));

    let xs = rng.vec(96, -5.0, 5.0);
    let out = eval::evaluate(&g, &[f32_bytes(&xs)]).unwrap();
    let hs_ref: Vec<f32> = xs.iter().map(|&v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0).collect();
    let hsig_ref: Vec<f32> = xs.iter().map(|&v| (v + 3.0).clamp(0.0, 6.0) / 6.0).collect();
    let mean_ref: Vec<f32> = xs.chunks(16).map(|c| c.iter().sum::<f32>() / 16.0).collect();
    assert_close(&floats(&out[0]), &hs_ref, "hardswish");
    assert_close(&floats(&out[1]), &hsig_ref, "hardsigmoid");
    assert_close(&floats(&out[2]), &mean_ref, "global pool + flatten");
    assert_close(&floats(&out[3]), &mean_ref.iter().map(|v| v.max(0.0)).collect::<Vec<_>>(), "dropout + relu");
    assert_close(&floats(&out[4]), &xs, "identity pool + dropout");
}

#[test]
fn decompose_rejects_what_it_cannot_keep_exact() {
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 2, 4, 4]);
    let y = b.call1("aten::dropout", vec![Arg::Tensor(x), Arg::Float(0.5), Arg::Bool(true)]).unwrap();
    b.output(y);
    let e = decompose::decompose(&mut b.finish(), &Default::default()).unwrap_err();
    assert!(matches!(&e, ExportError::Invalid(m) if m.contains("train=True")), "{e}");

}

#[test]
fn decompose_adaptive_pool_to_other_sizes_into_the_core_op() {
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 2, 4, 4]);
    let y = b.adaptive_avg_pool2d(x, [2, 2]).unwrap();
    b.output(y);
    let mut g = b.finish();
    decompose::decompose(&mut g, &Default::default()).unwrap();
    assert_eq!(count(&g, "aten::_adaptive_avg_pool2d"), 1);
    let xs: Vec<f32> = (0..32).map(|i| i as f32).collect();
    // 4x4 → 2x2: each output averages one 2x2 block.
    let want: Vec<f32> = (0..2)
        .flat_map(|c| (0..2).flat_map(move |i| (0..2).map(move |j| (c * 16 + i * 8 + j * 2) as f32 + 2.5)))
        .collect();
    assert_close(&eval_f32(&g, &[&xs])[0], &want, "adaptive pool 2x2");
}

#[test]
fn decompose_linear_with_symbolic_batch() {
    let mut rng = Lcg(3);
    let mut b = GraphBuilder::new();
    let n = b.sym("n", 1, 8);
    let x = b.input("x", TensorMeta::new(ScalarType::Float, vec![n, rbuild_export::Dim::Fixed(3)]));
    let w = constant(&mut b, "w", &[2, 3], &rng.vec(6, -1.0, 1.0));
    let bias = constant(&mut b, "b", &[2], &rng.vec(2, -1.0, 1.0));
    let y = b.linear(x, w, Some(bias)).unwrap();
    b.output(y);
    let mut g = b.finish();
    decompose::decompose(&mut g, &Default::default()).unwrap();
    assert_eq!(count(&g, "aten::addmm"), 1);
    assert_eq!(g.meta(y).shape, vec![n, rbuild_export::Dim::Fixed(2)]);
    // Scalar arguments keep the Scalar form the schema asks for.
    let addmm = g.nodes.iter().find(|n| n.op == "aten::addmm").unwrap();
    assert_eq!(addmm.args[3], Arg::Scalar(Scalar::Int(1)));
}

fn eval_f32(g: &Graph, inputs: &[&[f32]]) -> Vec<Vec<f32>> {
    let inputs: Vec<Vec<u8>> = inputs.iter().map(|v| f32_bytes(v)).collect();
    eval::evaluate(g, &inputs).unwrap().iter().map(|b| floats(b)).collect()
}

fn assert_all_close(got: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len(), "output count");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert_close(a, b, &format!("output {i}"));
    }
}

fn scalar_f(v: f64) -> Arg {
    Arg::Scalar(Scalar::Double(v))
}

#[test]
fn noop_pass_removes_identity_nodes_but_keeps_graph_outputs() {
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[2, 3, 4]);
    let v = b.view(x, &[2, 3, 4]).unwrap();
    let p = b.permute(v, &[0, 1, 2]).unwrap();
    let p = b.permute(p, &[0, -2, -1]).unwrap();
    let c = b.call1("aten::clone", vec![Arg::Tensor(p), Arg::None]).unwrap();
    let m = b.call1("aten::mul.Scalar", vec![Arg::Tensor(c), scalar_f(1.0)]).unwrap();
    let d = b.call1("aten::div.Scalar", vec![Arg::Tensor(m), Arg::Scalar(Scalar::Int(1))]).unwrap();
    let a = b.call1("aten::add.Scalar", vec![Arg::Tensor(d), scalar_f(0.0), Arg::Scalar(Scalar::Int(1))]).unwrap();
    let r = b.relu(a).unwrap();
    // Not no-ops: a real reshape, a real permutation, a real scale.
    let reshaped = b.view(x, &[6, 4]).unwrap();
    let permuted = b.permute(x, &[1, 0, 2]).unwrap();
    let scaled = b.call1("aten::mul.Scalar", vec![Arg::Tensor(x), scalar_f(2.0)]).unwrap();
    // A no-op that is itself a graph output stays.
    let kept = b.call1("aten::clone", vec![Arg::Tensor(x), Arg::None]).unwrap();
    for o in [r, reshaped, permuted, scaled, kept] {
        b.output(o);
    }
    let mut g = b.finish();
    let xs = Lcg(4).vec(24, -3.0, 3.0);
    let before = eval_f32(&g, &[&xs]);

    assert_eq!(rbuild_export::passes::noop::remove_noops(&mut g).unwrap(), 7);
    assert!(g.nodes.iter().any(|n| n.op == "aten::relu" && n.args == vec![Arg::Tensor(x)]), "relu reads the input directly");
    assert_eq!(g.nodes.len(), 5);
    assert_eq!(count(&g, "aten::clone"), 1);
    assert_eq!(g.outputs, vec![r, reshaped, permuted, scaled, kept]);
    assert_all_close(&eval_f32(&g, &[&xs]), &before);

    // Inference dropout (no kernel to evaluate "before"): removed, relu(x) remains.
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[2, 3, 4]);
    let d = b.dropout(x, 0.3).unwrap();
    let r = b.relu(d).unwrap();
    b.output(r);
    let mut g = b.finish();
    assert_eq!(rbuild_export::passes::noop::remove_noops(&mut g).unwrap(), 1);
    assert_all_close(&eval_f32(&g, &[&xs]), &[xs.iter().map(|v| v.max(0.0)).collect()]);
}

/// Conv → BN chains: folded when the conv output feeds only the BN; not when it is also read.
#[test]
fn fold_bn_merges_batch_norm_into_convolution() {
    let mut rng = Lcg(5);
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 3, 6, 6]);
    let mut param = |b: &mut GraphBuilder, name: &str, sizes: &[usize], lo: f32, hi: f32| {
        let n = sizes.iter().product();
        constant(b, name, sizes, &rng.vec(n, lo, hi))
    };
    // Conv with bias, BN with gamma and beta.
    let (w1, b1) = (param(&mut b, "w1", &[4, 3, 3, 3], -0.5, 0.5), param(&mut b, "b1", &[4], -0.5, 0.5));
    let (g1, be1) = (param(&mut b, "g1", &[4], 0.5, 1.5), param(&mut b, "be1", &[4], -0.5, 0.5));
    let (m1, v1) = (param(&mut b, "m1", &[4], -0.3, 0.3), param(&mut b, "v1", &[4], 0.2, 2.0));
    let y = b.conv2d(x, w1, Some(b1), 1, 1, 1, 1).unwrap();
    let y = b.batch_norm(y, Some(g1), Some(be1), m1, v1, 1e-5).unwrap();
    let y = b.relu(y).unwrap();
    // Conv without bias, BN without gamma/beta.
    let w2 = param(&mut b, "w2", &[5, 4, 1, 1], -0.5, 0.5);
    let (m2, v2) = (param(&mut b, "m2", &[5], -0.3, 0.3), param(&mut b, "v2", &[5], 0.2, 2.0));
    let y = b.conv2d(y, w2, None, 1, 0, 1, 1).unwrap();
    let y2 = b.batch_norm(y, None, None, m2, v2, 1e-3).unwrap();
    // Depthwise conv whose output is also a graph output: its BN cannot fold.
    let w3 = param(&mut b, "w3", &[5, 1, 3, 3], -0.5, 0.5);
    let (m3, v3) = (param(&mut b, "m3", &[5], -0.3, 0.3), param(&mut b, "v3", &[5], 0.2, 2.0));
    let y3 = b.conv2d(y2, w3, None, 2, 1, 1, 5).unwrap();
    let y4 = b.batch_norm(y3, None, None, m3, v3, 1e-5).unwrap();
    b.output(y2);
    b.output(y3);
    b.output(y4);
    let mut g = b.finish();
    let xs = rng.vec(108, -2.0, 2.0);
    let before = eval_f32(&g, &[&xs]);

    assert_eq!(rbuild_export::passes::fold_bn::fold_batch_norms(&mut g).unwrap(), 2);
    assert_eq!(count(&g, "aten::_native_batch_norm_legit_no_training"), 1);
    assert_eq!(count(&g, "aten::convolution"), 3);
    assert!(g.nodes.iter().filter(|n| n.op == "aten::convolution").take(2).all(|n| matches!(n.args[2], Arg::Tensor(_))), "folded convs gain a bias");
    assert_all_close(&eval_f32(&g, &[&xs]), &before);
}

#[test]
fn const_fold_turns_constant_chains_into_constants() {
    let mut rng = Lcg(6);
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[2, 3]);
    let wv = rng.vec(12, -1.0, 1.0);
    let w = constant(&mut b, "w", &[4, 3], &wv);
    let wt = b.permute(w, &[1, 0]).unwrap();
    let flat = b.view(wt, &[12]).unwrap();
    let back = b.view(flat, &[3, 4]).unwrap();
    let y = b.call1("aten::mm", vec![Arg::Tensor(x), Arg::Tensor(back)]).unwrap();
    // Constant-only, but a graph output: stays a computed value.
    let c = constant(&mut b, "c", &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let ct = b.permute(c, &[1, 0]).unwrap();
    b.output(y);
    b.output(ct);
    let mut g = b.finish();
    let xs = rng.vec(6, -1.0, 1.0);
    let before = eval_f32(&g, &[&xs]);

    assert_eq!(rbuild_export::passes::const_fold::fold_constants(&mut g).unwrap(), 3);
    assert_eq!(g.ops(), vec!["aten::mm".to_string(), "aten::permute_copy".to_string()]);
    let mm = g.nodes.iter().find(|n| n.op == "aten::mm").unwrap();
    let Arg::Tensor(folded) = mm.args[1] else { panic!("mm lost its operand") };
    let data = floats(&g.constant(folded).expect("a constant").bytes());
    let transposed: Vec<f32> = (0..3).flat_map(|i| (0..4).map(move |o| (i, o))).map(|(i, o)| wv[o * 3 + i]).collect();
    assert_eq!(data, transposed);
    assert_all_close(&eval_f32(&g, &[&xs]), &before);
}

#[test]
fn dce_removes_dead_branches_only() {
    let mut rng = Lcg(7);
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 2, 3, 3]);
    let a = b.relu(x).unwrap();
    let dead = b.sigmoid(x).unwrap();
    let dead = b.mul(dead, a).unwrap();
    let _dead = b.relu(dead).unwrap();
    // A batch norm whose extra outputs are unused is alive through its first output.
    let (m, v) = (constant(&mut b, "m", &[2], &[0.1, -0.2]), constant(&mut b, "v", &[2], &[1.0, 0.5]));
    let y = b.batch_norm(a, None, None, m, v, 1e-5).unwrap();
    b.output(y);
    let mut g = b.finish();
    let xs = rng.vec(18, -1.0, 1.0);
    let before = eval_f32(&g, &[&xs]);

    assert_eq!(rbuild_export::passes::dce::eliminate_dead_code(&mut g), 3);
    assert_eq!(g.ops(), vec!["aten::_native_batch_norm_legit_no_training".to_string(), "aten::relu".to_string()]);
    assert_eq!(rbuild_export::passes::dce::eliminate_dead_code(&mut g), 0, "a fixed point");
    assert_all_close(&eval_f32(&g, &[&xs]), &before);
}

/// conv+BN+hardswish → squeeze-excite-style gate → global pool, flatten, dropout, linear: the
/// whole pipeline, planned, emitted and run in rbuild's runtime, matches eager evaluation of the
/// merely decomposed graph.
#[test]
fn optimize_then_emit_runs_like_the_decomposed_graph() {
    use rbuild_export::{emit, passes, plan};
    use rbuild_runtime::backend::BackendRegistry;
    use rbuild_runtime::buffer::AlignedBuf;
    use rbuild_runtime::{KernelContext, Program};

    let mut rng = Lcg(8);
    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 3, 8, 8]);
    let mut param = |b: &mut GraphBuilder, name: &str, sizes: &[usize], lo: f32, hi: f32| {
        let n = sizes.iter().product();
        constant(b, name, sizes, &rng.vec(n, lo, hi))
    };
    let w = param(&mut b, "conv.w", &[8, 3, 3, 3], -0.5, 0.5);
    let (gamma, beta) = (param(&mut b, "bn.w", &[8], 0.5, 1.5), param(&mut b, "bn.b", &[8], -0.5, 0.5));
    let (mean, var) = (param(&mut b, "bn.mean", &[8], -0.3, 0.3), param(&mut b, "bn.var", &[8], 0.2, 2.0));
    let (fc_w, fc_b) = (param(&mut b, "fc.w", &[5, 8], -0.5, 0.5), param(&mut b, "fc.b", &[5], -0.5, 0.5));
    let y = b.conv2d(x, w, None, 2, 1, 1, 1).unwrap();
    let y = b.batch_norm(y, Some(gamma), Some(beta), mean, var, 1e-5).unwrap();
    let h = b.hardswish(y).unwrap();
    let squeezed = b.adaptive_avg_pool2d(h, [1, 1]).unwrap();
    let gate = b.hardsigmoid(squeezed).unwrap();
    let h = b.mul(h, gate).unwrap();
    let pooled = b.adaptive_avg_pool2d(h, [1, 1]).unwrap();
    let flat = b.flatten(pooled, 1, -1).unwrap();
    let flat = b.dropout(flat, 0.2).unwrap();
    let logits = b.linear(flat, fc_w, Some(fc_b)).unwrap();
    b.output(logits);
    let mut g = b.finish();
    let xs = rng.vec(192, -2.0, 2.0);

    let mut reference = g.clone();
    decompose::decompose(&mut reference, &Default::default()).unwrap();
    let want = eval_f32(&reference, &[&xs]);

    let report = passes::optimize(&mut g).unwrap();
    assert_eq!((report.decomposed, report.bn_folded), (7, 1), "{report}");
    assert!(report.consts_folded >= 1, "the transposed linear weight is folded: {report}");
    assert_eq!(report.nodes_after, g.nodes.len());
    let ops = g.ops();
    assert!(!ops.iter().any(|o| o.contains("batch_norm") || o.contains("permute")), "{ops:?}");
    assert!(ops.iter().all(|o| o.ends_with("out")), "{ops:?}");
    assert_all_close(&eval_f32(&g, &[&xs]), &want);

    let p = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &p, "forward").unwrap();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[1, 3, 8, 8], &f32_bytes(&xs)).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    assert_close(&floats(m.output_bytes(0).unwrap()), &want[0], "runtime output");
}

/// A random draw is made each run: constant folding must not evaluate `rand` once at export
/// (meaningful once the runtime has its kernel, which folding would otherwise use).
#[test]
fn random_ops_are_never_folded() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[4]));
    let r = b.call1("aten::rand", vec![Arg::Ints(vec![4]), Arg::None, Arg::None, Arg::None, Arg::None]).unwrap();
    let y = b.add(x, r).unwrap();
    b.output(y);
    let mut g = b.finish();
    rbuild_export::passes::optimize(&mut g).unwrap();
    assert!(g.ops().contains(&"aten::rand.out".to_string()), "{:?}", g.ops());
    for key in ["aten::rand", "aten::randn.out", "aten::randperm", "aten::native_dropout.out"] {
        assert!(rbuild_export::ops::draws_random(key), "{key}");
    }
    assert!(!rbuild_export::ops::draws_random("aten::add.Tensor"));
}
