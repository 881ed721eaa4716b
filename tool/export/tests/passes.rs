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

    assert_eq!(decompose::decompose(&mut g).unwrap(), 2);
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

    assert_eq!(decompose::decompose(&mut g).unwrap(), 7);
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
    let e = decompose::decompose(&mut b.finish()).unwrap_err();
    assert!(matches!(&e, ExportError::Invalid(m) if m.contains("train=True")), "{e}");

    let mut b = GraphBuilder::new();
    let x = input(&mut b, "x", &[1, 2, 4, 4]);
    let y = b.adaptive_avg_pool2d(x, [2, 2]).unwrap();
    b.output(y);
    let e = decompose::decompose(&mut b.finish()).unwrap_err().to_string();
    assert!(e.contains("adaptive_avg_pool2d") && e.contains("[2, 2]"), "{e}");
}

#[test]
fn decompose_linear_with_symbolic_batch() {
    let mut rng = Lcg(3);
    let mut b = GraphBuilder::new();
    let n = b.sym("n", 1, 8);
    let x = b.input("x", TensorMeta { dtype: ScalarType::Float, shape: vec![n, rbuild_export::Dim::Fixed(3)] });
    let w = constant(&mut b, "w", &[2, 3], &rng.vec(6, -1.0, 1.0));
    let bias = constant(&mut b, "b", &[2], &rng.vec(2, -1.0, 1.0));
    let y = b.linear(x, w, Some(bias)).unwrap();
    b.output(y);
    let mut g = b.finish();
    decompose::decompose(&mut g).unwrap();
    assert_eq!(count(&g, "aten::addmm"), 1);
    assert_eq!(g.meta(y).shape, vec![n, rbuild_export::Dim::Fixed(2)]);
    // Scalar arguments keep the Scalar form the schema asks for.
    let addmm = g.nodes.iter().find(|n| n.op == "aten::addmm").unwrap();
    assert_eq!(addmm.args[3], Arg::Scalar(Scalar::Int(1)));
}
