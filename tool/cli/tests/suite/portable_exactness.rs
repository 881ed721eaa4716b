//! Float programs rbuild exports, one op each where the testdata has no case: ExecuTorch 1.3.1
//! (portable kernels) and rbuild's portable kernels must give the same bits. Covers what the
//! testdata walk cannot: transposed and grouped/dilated convolution with odd padding, a mean
//! over non-trailing dims, addmm with a full-size bias. Needs the oracle venv.

use crate::common;

use rbuild_export::graph::{Arg, ConstData, TensorMeta};
use rbuild_export::{emit, passes, plan, Graph, GraphBuilder};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Program, ScalarType};

/// Deterministic values with a wide spread of magnitudes, so f32 sums round often.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            (u - 0.5) * if (s >> 20) % 7 == 0 { 300.0 } else { 3.0 }
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn constant(b: &mut GraphBuilder, name: &str, sizes: &[usize], seed: u64) -> usize {
    let n = sizes.iter().product();
    b.constant(name, ScalarType::Float, sizes, ConstData::owned(bytes(&values(n, seed)))).unwrap()
}

#[allow(clippy::too_many_arguments)]
fn conv(b: &mut GraphBuilder, x: usize, w: usize, bias: Option<usize>, stride: [i64; 2], padding: [i64; 2], dilation: [i64; 2], transposed: bool, output_padding: [i64; 2], groups: i64) -> usize {
    let args = vec![
        Arg::Tensor(x),
        Arg::Tensor(w),
        bias.map_or(Arg::None, Arg::Tensor),
        Arg::Ints(stride.to_vec()),
        Arg::Ints(padding.to_vec()),
        Arg::Ints(dilation.to_vec()),
        Arg::Bool(transposed),
        Arg::Ints(output_padding.to_vec()),
        Arg::Int(groups),
    ];
    b.call1("aten::convolution", args).unwrap()
}

/// (label, input sizes, graph).
fn programs() -> Vec<(&'static str, Vec<usize>, Graph)> {
    let mut out = Vec::new();
    let input = |b: &mut GraphBuilder, s: &[usize]| b.input("x", TensorMeta::fixed(ScalarType::Float, s));

    let s = vec![1, 6, 7, 9];
    let mut b = GraphBuilder::new();
    let x = input(&mut b, &s);
    let w = constant(&mut b, "w", &[6, 2, 3, 3], 1);
    let bias = constant(&mut b, "b", &[4], 2);
    let y = conv(&mut b, x, w, Some(bias), [2, 1], [1, 2], [1, 1], true, [1, 0], 2);
    b.output(y);
    out.push(("conv_transpose_grouped_strided_bias", s, b.finish()));

    let s = vec![2, 5, 6, 6];
    let mut b = GraphBuilder::new();
    let x = input(&mut b, &s);
    let w = constant(&mut b, "w", &[5, 3, 2, 2], 3);
    let y = conv(&mut b, x, w, None, [1, 2], [0, 1], [2, 1], true, [0, 0], 1);
    b.output(y);
    out.push(("conv_transpose_dilated_no_bias", s, b.finish()));

    let s = vec![1, 8, 11, 10];
    let mut b = GraphBuilder::new();
    let x = input(&mut b, &s);
    let w = constant(&mut b, "w", &[6, 4, 3, 2], 4);
    let bias = constant(&mut b, "b", &[6], 5);
    let y = conv(&mut b, x, w, Some(bias), [2, 1], [1, 0], [2, 3], false, [0, 0], 2);
    b.output(y);
    out.push(("conv_grouped_dilated_asymmetric", s, b.finish()));

    let s = vec![3, 40, 5];
    let mut b = GraphBuilder::new();
    let x = input(&mut b, &s);
    let y = b.mean(x, &[0, 1], false).unwrap();
    b.output(y);
    out.push(("mean_leading_dims", s, b.finish()));

    let s = vec![4, 300];
    let mut b = GraphBuilder::new();
    let x = input(&mut b, &s);
    let w = constant(&mut b, "w", &[7, 300], 6);
    let bias = constant(&mut b, "b", &[7], 7);
    let y = b.linear(x, w, Some(bias)).unwrap();
    b.output(y);
    out.push(("linear_long_rows", s, b.finish()));
    out
}

fn run_portable(program: &[u8], sizes: &[usize], input: &[u8]) -> Vec<u8> {
    let buf = AlignedBuf::from_bytes(program);
    let p = Program::load(buf.as_slice()).unwrap();
    let mut m = p.load_method("forward", &rbuild_kernels::portable_registry(), &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, sizes, input).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    m.output_bytes(0).unwrap().to_vec()
}

#[test]
fn portable_kernels_reproduce_executorch_bit_for_bit() {
    let Some(python) = common::oracle_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (label, sizes, mut g) in programs() {
        passes::optimize(&mut g).unwrap();
        let ops = g.ops();
        let program = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
        let pte = dir.path().join(format!("{label}.pte"));
        std::fs::write(&pte, &program).unwrap();
        let x = bytes(&values(sizes.iter().product(), 99));
        let (_, et) = common::et_run_one(&python, &pte, (safetensors::Dtype::F32, sizes.clone(), &x), dir.path(), label);
        let ours = run_portable(&program, &sizes, &x);
        let differ = et.chunks_exact(4).zip(ours.chunks_exact(4)).filter(|(a, b)| a != b).count();
        eprintln!("{label} ({ops:?}): {differ} of {} values differ from ExecuTorch 1.3.1", et.len() / 4);
        assert_eq!(et.len(), ours.len(), "{label}");
        assert_eq!(differ, 0, "{label}: rbuild's portable kernels differ from ExecuTorch's");
    }
}
