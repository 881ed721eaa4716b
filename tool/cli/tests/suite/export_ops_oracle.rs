//! The core ATen ops imported `torch.export` programs use, one tiny program each, built with
//! `GraphBuilder` the way an importer calls it: the output dtypes must be ATen's (type
//! promotion, bool comparisons, int64 sums, …), rbuild's portable kernels and its full
//! registry must agree bit for bit, and ExecuTorch 1.3.1 must compute the same program within
//! 1e-6 (integers and bools exactly). Covers odd cases: broadcasting, negative dims, rank-0
//! tensors, non-integer scale factors, align_corners, ceil-mode pooling, transposed grouped
//! convolution with output padding. Needs the oracle venv (skipped locally without it).

use crate::common;

use rbuild_export::graph::{Arg, ConstData, TensorMeta};
use rbuild_export::{emit, passes, plan, Graph, GraphBuilder, ValueId};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, KernelRegistry, Program, Scalar, ScalarType, Value};

use ScalarType::{Bool, Float, Long};

/// How a test tensor is filled.
#[derive(Clone, Copy)]
enum Fill {
    /// Signed values with exact halves and integers among them (rounding ties, zeros).
    Spread,
    /// Values in (0.1, 3] (domains of log, sqrt, divisors).
    Positive,
    /// Integers in [0, n) (indices).
    Below(i64),
}

/// A host tensor: dtype, sizes, little-endian bytes.
type HostTensor = (ScalarType, Vec<usize>, Vec<u8>);

fn fill(dtype: ScalarType, sizes: &[usize], how: Fill, seed: u64) -> HostTensor {
    let n: usize = sizes.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 33) as i64
    };
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            let r = next();
            match how {
                Fill::Spread if r % 5 == 0 => ((r / 5) % 13 - 6) as f64 * 0.5,
                Fill::Spread => ((r % 60_000) as f64 / 10_000.0) - 3.0,
                Fill::Positive => 0.1 + (r % 29_000) as f64 / 10_000.0,
                Fill::Below(k) => (r % k) as f64,
            }
        })
        .collect();
    let bytes = match dtype {
        Float => vals.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        Long => vals.iter().flat_map(|&v| (v.round() as i64).to_le_bytes()).collect(),
        Bool => vals.iter().map(|&v| (v.round() as i64 % 2 != 0) as u8).collect(),
        d => panic!("test inputs are f32, i64 or bool, not {d}"),
    };
    (dtype, sizes.to_vec(), bytes)
}

/// One single-op program: its graph, inputs, and the output dtypes ATen gives.
struct Case {
    label: String,
    graph: Graph,
    inputs: Vec<HostTensor>,
    expect: Vec<ScalarType>,
}

/// Builds a case: graph inputs from `inputs` (dtype, sizes, fill); `build` returns the outputs.
fn case(
    label: &str,
    inputs: &[(ScalarType, &[usize], Fill)],
    expect: &[ScalarType],
    build: impl FnOnce(&mut GraphBuilder, &[ValueId]) -> Vec<ValueId>,
) -> Case {
    let mut b = GraphBuilder::new();
    let mut host = Vec::new();
    let ids: Vec<ValueId> = inputs
        .iter()
        .enumerate()
        .map(|(i, &(dtype, sizes, how))| {
            host.push(fill(dtype, sizes, how, i as u64 + label.len() as u64));
            b.input(&format!("x{i}"), TensorMeta::fixed(dtype, sizes))
        })
        .collect();
    for out in build(&mut b, &ids) {
        b.output(out);
    }
    Case { label: label.into(), graph: b.finish(), inputs: host, expect: expect.to_vec() }
}

fn t(v: ValueId) -> Arg {
    Arg::Tensor(v)
}
fn int(v: i64) -> Arg {
    Arg::Int(v)
}
fn ints(v: &[i64]) -> Arg {
    Arg::Ints(v.to_vec())
}
fn num(v: f64) -> Arg {
    Arg::Scalar(Scalar::Double(v))
}
fn inum(v: i64) -> Arg {
    Arg::Scalar(Scalar::Int(v))
}
fn flag(v: bool) -> Arg {
    Arg::Bool(v)
}
fn none() -> Arg {
    Arg::None
}
fn floats(v: &[f64]) -> Arg {
    Arg::Floats(v.to_vec())
}
fn dtype(d: ScalarType) -> Arg {
    Arg::ScalarType(d)
}

fn call(b: &mut GraphBuilder, op: &str, args: Vec<Arg>) -> Vec<ValueId> {
    b.call(op, args).unwrap_or_else(|e| panic!("{op}: {e}"))
}

fn call1(b: &mut GraphBuilder, op: &str, args: Vec<Arg>) -> Vec<ValueId> {
    vec![call(b, op, args)[0]]
}

/// A constant tensor (weights, indices).
fn constant(b: &mut GraphBuilder, name: &str, (d, sizes, bytes): HostTensor) -> ValueId {
    b.constant(name, d, &sizes, ConstData::owned(bytes)).unwrap()
}

const F: Fill = Fill::Spread;
const P: Fill = Fill::Positive;

fn elementwise_cases() -> Vec<Case> {
    let mut out = Vec::new();
    for op in ["cos", "sin", "exp", "tanh", "erf", "sigmoid", "abs", "floor", "ceil", "round", "silu"] {
        out.push(case(op, &[(Float, &[2, 3, 4], F)], &[Float], |b, x| call1(b, &format!("aten::{op}"), vec![t(x[0])])));
    }
    for op in ["sqrt", "rsqrt", "log", "reciprocal"] {
        out.push(case(op, &[(Float, &[3, 5], P)], &[Float], |b, x| call1(b, &format!("aten::{op}"), vec![t(x[0])])));
    }
    // Integer inputs of the float functions compute in float32.
    for op in ["cos", "sqrt", "exp", "sigmoid"] {
        out.push(case(&format!("{op}_int64"), &[(Long, &[7], P)], &[Float], |b, x| call1(b, &format!("aten::{op}"), vec![t(x[0])])));
    }
    out.push(case("abs_int64", &[(Long, &[6], F)], &[Long], |b, x| call1(b, "aten::abs", vec![t(x[0])])));
    out.push(case("leaky_relu", &[(Float, &[4, 5], F)], &[Float], |b, x| call1(b, "aten::leaky_relu", vec![t(x[0]), num(0.2)])));
    // Binary ops broadcast and promote.
    let bin = |b: &mut GraphBuilder, op: &str, x: &[ValueId], alpha: bool| {
        let mut args = vec![t(x[0]), t(x[1])];
        if alpha {
            args.push(inum(1));
        }
        call1(b, op, args)
    };
    out.push(case("add_int64_float_broadcast", &[(Long, &[2, 1, 4], F), (Float, &[3, 1], F)], &[Float], |b, x| {
        bin(b, "aten::add.Tensor", x, true)
    }));
    out.push(case("sub_alpha_broadcast", &[(Float, &[3, 4], F), (Float, &[4], F)], &[Float], |b, x| {
        call1(b, "aten::sub.Tensor", vec![t(x[0]), t(x[1]), num(2.5)])
    }));
    out.push(case("mul_int64", &[(Long, &[3, 4], F), (Long, &[1, 4], F)], &[Long], |b, x| bin(b, "aten::mul.Tensor", x, false)));
    out.push(case("mul_bool_float_rank0", &[(Bool, &[5], F)], &[Float], |b, x| {
        let s = call1(b, "aten::scalar_tensor", vec![num(2.5), none(), none(), none(), none()])[0];
        call1(b, "aten::mul.Tensor", vec![t(x[0]), t(s)])
    }));
    out.push(case("div_int64_true_division", &[(Long, &[2, 5], F), (Long, &[5], Fill::Below(4))], &[Float], |b, x| {
        let one = call1(b, "aten::add.Scalar", vec![t(x[1]), inum(1), inum(1)])[0];
        call1(b, "aten::div.Tensor", vec![t(x[0]), t(one)])
    }));
    out.push(case("minimum_maximum", &[(Float, &[2, 3], F), (Float, &[3], F)], &[Float, Float], |b, x| {
        let lo = bin(b, "aten::minimum", x, false);
        let hi = bin(b, "aten::maximum", x, false);
        vec![lo[0], hi[0]]
    }));
    out.push(case("maximum_int64_float", &[(Long, &[4], F), (Float, &[2, 1], F)], &[Float], |b, x| bin(b, "aten::maximum", x, false)));
    out.push(case("pow_tensor_tensor", &[(Float, &[3, 4], P), (Float, &[4], F)], &[Float], |b, x| bin(b, "aten::pow.Tensor_Tensor", x, false)));
    out.push(case("bitwise_and_bool", &[(Bool, &[2, 4], F), (Bool, &[4], F)], &[Bool], |b, x| bin(b, "aten::bitwise_and.Tensor", x, false)));
    out.push(case("bitwise_or_xor_int64", &[(Long, &[6], F), (Long, &[6], F)], &[Long, Long], |b, x| {
        let o = bin(b, "aten::bitwise_or.Tensor", x, false);
        let xo = bin(b, "aten::bitwise_xor.Tensor", x, false);
        vec![o[0], xo[0]]
    }));
    // Scalar operands: an int tensor with a float number becomes float.
    out.push(case("add_scalar_int64_float", &[(Long, &[5], F)], &[Float], |b, x| call1(b, "aten::add.Scalar", vec![t(x[0]), num(0.5), inum(1)])));
    out.push(case("mul_scalar_int64_float", &[(Long, &[2, 3], F)], &[Float], |b, x| call1(b, "aten::mul.Scalar", vec![t(x[0]), num(-1.5)])));
    out.push(case("mul_scalar_int64_int", &[(Long, &[5], F)], &[Long], |b, x| call1(b, "aten::mul.Scalar", vec![t(x[0]), inum(3)])));
    out.push(case("div_scalar_int64", &[(Long, &[5], F)], &[Float], |b, x| call1(b, "aten::div.Scalar", vec![t(x[0]), inum(4)])));
    out.push(case("sub_scalar_float", &[(Float, &[2, 2], F)], &[Float], |b, x| call1(b, "aten::sub.Scalar", vec![t(x[0]), num(1.25), inum(2)])));
    out.push(case("pow_scalar_int64_float", &[(Long, &[6], F)], &[Float], |b, x| call1(b, "aten::pow.Tensor_Scalar", vec![t(x[0]), num(2.0)])));
    out.push(case("pow_scalar_float", &[(Float, &[6], F)], &[Float], |b, x| call1(b, "aten::pow.Tensor_Scalar", vec![t(x[0]), num(3.0)])));
    // Comparisons give bool.
    for op in ["eq", "ne", "lt", "le", "gt", "ge"] {
        out.push(case(&format!("{op}_tensor_broadcast"), &[(Float, &[3, 4], F), (Long, &[4], F)], &[Bool], |b, x| {
            bin(b, &format!("aten::{op}.Tensor"), x, false)
        }));
        out.push(case(&format!("{op}_scalar"), &[(Long, &[8], F), (Float, &[8], F)], &[Bool, Bool], |b, x| {
            let i = call1(b, &format!("aten::{op}.Scalar"), vec![t(x[0]), inum(1)]);
            let f = call1(b, &format!("aten::{op}.Scalar"), vec![t(x[1]), num(0.5)]);
            vec![i[0], f[0]]
        }));
    }
    out.push(case("logical_ops", &[(Bool, &[2, 3], F), (Float, &[3], F)], &[Bool, Bool, Bool, Bool], |b, x| {
        let and = bin(b, "aten::logical_and", x, false);
        let or = bin(b, "aten::logical_or", x, false);
        let xor = bin(b, "aten::logical_xor", x, false);
        let not = call1(b, "aten::logical_not", vec![t(x[1])]);
        vec![and[0], or[0], xor[0], not[0]]
    }));
    out.push(case("where_promotes_and_broadcasts", &[(Bool, &[2, 1, 3], F), (Float, &[4, 3], F), (Long, &[3], F)], &[Float], |b, x| {
        call1(b, "aten::where.self", vec![t(x[0]), t(x[1]), t(x[2])])
    }));
    out.push(case("where_rank0_other", &[(Bool, &[4], F), (Float, &[4], F)], &[Float], |b, x| {
        let zero = call1(b, "aten::scalar_tensor", vec![num(-7.5), dtype(Float), none(), none(), none()])[0];
        call1(b, "aten::where.self", vec![t(x[0]), t(x[1]), t(zero)])
    }));
    out.push(case("clamp_float_bounds", &[(Float, &[3, 4], F)], &[Float], |b, x| call1(b, "aten::clamp", vec![t(x[0]), num(-1.0), num(1.5)])));
    out.push(case("clamp_int64_min_only", &[(Long, &[6], F)], &[Long], |b, x| call1(b, "aten::clamp", vec![t(x[0]), inum(0), none()])));
    out.push(case("clamp_tensor_bounds", &[(Float, &[2, 4], F), (Float, &[4], F)], &[Float], |b, x| {
        call1(b, "aten::clamp.Tensor", vec![t(x[0]), t(x[1]), none()])
    }));
    out
}

fn creation_cases() -> Vec<Case> {
    let opts = || vec![none(), none(), none()];
    let with = |mut head: Vec<Arg>, tail: Vec<Arg>| {
        head.extend(tail);
        head
    };
    vec![
        case("full_float", &[], &[Float], |b, _| call1(b, "aten::full", with(vec![ints(&[2, 3]), num(1.5), none()], opts()))),
        case("full_int_fill_is_int64", &[], &[Long], |b, _| call1(b, "aten::full", with(vec![ints(&[4]), inum(7), none()], opts()))),
        case("full_bool_dtype", &[], &[Bool], |b, _| call1(b, "aten::full", with(vec![ints(&[2, 2]), inum(1), dtype(Bool)], opts()))),
        case("ones_int64_zeros_float", &[], &[Long, Float], |b, _| {
            let o = call1(b, "aten::ones", with(vec![ints(&[2, 3]), dtype(Long)], opts()));
            let z = call1(b, "aten::zeros", with(vec![ints(&[5]), none()], opts()));
            vec![o[0], z[0]]
        }),
        case("scalar_tensor_default_float", &[], &[Float], |b, _| call1(b, "aten::scalar_tensor", with(vec![inum(3), none()], opts()))),
        case("arange_int64", &[], &[Long], |b, _| call1(b, "aten::arange.start_step", with(vec![inum(0), inum(12), inum(1), none()], opts()))),
        case("arange_float_step", &[], &[Float], |b, _| {
            call1(b, "aten::arange.start_step", with(vec![num(0.5), num(3.0), num(0.25), none()], opts()))
        }),
        case("arange_negative_step", &[], &[Long], |b, _| call1(b, "aten::arange.start_step", with(vec![inum(10), inum(0), inum(-3), none()], opts()))),
        case("arange_int_bounds_float_dtype", &[], &[Float], |b, _| {
            call1(b, "aten::arange.start_step", with(vec![inum(-2), inum(5), inum(2), dtype(Float)], opts()))
        }),
        case("full_like_keeps_or_sets_dtype", &[(Long, &[2, 3], F)], &[Long, Float], |b, x| {
            let keep = call1(b, "aten::full_like", with(vec![t(x[0]), inum(-4), none()], with(opts(), vec![none()])));
            let set = call1(b, "aten::full_like", with(vec![t(x[0]), num(0.25), dtype(Float)], with(opts(), vec![none()])));
            vec![keep[0], set[0]]
        }),
        case("to_copy_float_to_int64_and_bool", &[(Float, &[3, 4], F)], &[Long, Bool], |b, x| {
            let to = |b: &mut GraphBuilder, d| call1(b, "aten::_to_copy", with(vec![t(x[0]), dtype(d)], with(opts(), vec![flag(false), none()])))[0];
            vec![to(b, Long), to(b, Bool)]
        }),
        case("to_copy_bool_and_int64_to_float", &[(Bool, &[5], F), (Long, &[5], F)], &[Float, Float], |b, x| {
            let to = |b: &mut GraphBuilder, v| call1(b, "aten::_to_copy", with(vec![t(v), dtype(Float)], with(opts(), vec![flag(false), none()])))[0];
            vec![to(b, x[0]), to(b, x[1])]
        }),
    ]
}

fn reduction_cases() -> Vec<Case> {
    vec![
        case("cumsum_float_negative_dim", &[(Float, &[3, 5], F)], &[Float], |b, x| call1(b, "aten::cumsum", vec![t(x[0]), int(-1), none()])),
        case("cumsum_bool_is_int64", &[(Bool, &[2, 6], F)], &[Long], |b, x| call1(b, "aten::cumsum", vec![t(x[0]), int(1), none()])),
        case("cumsum_int64_to_float", &[(Long, &[7], F)], &[Float], |b, x| call1(b, "aten::cumsum", vec![t(x[0]), int(0), dtype(Float)])),
        case("any_dim_and_dims", &[(Bool, &[3, 4, 2], F)], &[Bool, Bool, Bool], |b, x| {
            let d = call1(b, "aten::any.dim", vec![t(x[0]), int(-1), flag(false)]);
            let ds = call1(b, "aten::any.dims", vec![t(x[0]), ints(&[0, 2]), flag(true)]);
            let all = call1(b, "aten::any.dims", vec![t(x[0]), none(), flag(false)]);
            vec![d[0], ds[0], all[0]]
        }),
        case("any_float_input", &[(Float, &[4, 3], F)], &[Bool], |b, x| call1(b, "aten::any.dim", vec![t(x[0]), int(0), flag(true)])),
        case("amax_amin", &[(Float, &[2, 5, 3], F)], &[Float, Float], |b, x| {
            let mx = call1(b, "aten::amax", vec![t(x[0]), ints(&[1]), flag(true)]);
            let mn = call1(b, "aten::amin", vec![t(x[0]), ints(&[0, -1]), flag(false)]);
            vec![mx[0], mn[0]]
        }),
        case("sum_dims_and_all", &[(Float, &[3, 4, 5], F)], &[Float, Float], |b, x| {
            let s = call1(b, "aten::sum.dim_IntList", vec![t(x[0]), ints(&[-1, 0]), flag(false), none()]);
            let all = call1(b, "aten::sum.dim_IntList", vec![t(x[0]), none(), flag(true), none()]);
            vec![s[0], all[0]]
        }),
        case("sum_bool_is_int64", &[(Bool, &[4, 6], F)], &[Long], |b, x| {
            call1(b, "aten::sum.dim_IntList", vec![t(x[0]), ints(&[1]), flag(false), none()])
        }),
        case("argmax", &[(Float, &[3, 7], F)], &[Long, Long], |b, x| {
            let d = call1(b, "aten::argmax", vec![t(x[0]), int(1), flag(false)]);
            let all = call1(b, "aten::argmax", vec![t(x[0]), none(), flag(false)]);
            vec![d[0], all[0]]
        }),
        case("log_softmax", &[(Float, &[2, 3, 6], F)], &[Float], |b, x| call1(b, "aten::_log_softmax", vec![t(x[0]), int(-1), flag(false)])),
        case("mean_dim_keepdim", &[(Float, &[2, 3, 4], F)], &[Float], |b, x| {
            call1(b, "aten::mean.dim", vec![t(x[0]), ints(&[1]), flag(true), none()])
        }),
    ]
}

fn layout_cases() -> Vec<Case> {
    vec![
        case("transpose_negative_dims", &[(Float, &[2, 3, 4], F)], &[Float], |b, x| call1(b, "aten::transpose_copy.int", vec![t(x[0]), int(0), int(-1)])),
        case("unsqueeze_front_and_back", &[(Long, &[3, 2], F)], &[Long, Long], |b, x| {
            let front = call1(b, "aten::unsqueeze_copy", vec![t(x[0]), int(0)]);
            let back = call1(b, "aten::unsqueeze_copy", vec![t(x[0]), int(-1)]);
            vec![front[0], back[0]]
        }),
        case("squeeze_dims", &[(Float, &[1, 3, 1, 2], F)], &[Float], |b, x| call1(b, "aten::squeeze_copy.dims", vec![t(x[0]), ints(&[0, -2, 1])])),
        case("alias_copy_bool", &[(Bool, &[5], F)], &[Bool], |b, x| call1(b, "aten::alias_copy", vec![t(x[0])])),
        case("repeat_adds_dims", &[(Float, &[2, 3], F)], &[Float], |b, x| call1(b, "aten::repeat", vec![t(x[0]), ints(&[2, 1, 3])])),
        case("split_with_sizes", &[(Float, &[2, 6], F)], &[Float, Float, Float], |b, x| {
            call(b, "aten::split_with_sizes_copy", vec![t(x[0]), ints(&[2, 1, 3]), int(-1)])
        }),
        case("index_select_constant_index", &[(Float, &[3, 5], F)], &[Float], |b, x| {
            let idx = constant(b, "idx", fill(Long, &[4], Fill::Below(5), 9));
            call1(b, "aten::index_select", vec![t(x[0]), int(1), t(idx)])
        }),
        case("index_one_dim", &[(Float, &[4, 5, 2], F), (Long, &[3], Fill::Below(5))], &[Float], |b, x| {
            call1(b, "aten::index.Tensor", vec![t(x[0]), Arg::OptTensors(vec![None, Some(x[1])])])
        }),
        case("index_adjacent_broadcast", &[(Float, &[4, 5, 3], F), (Long, &[2, 1], Fill::Below(4)), (Long, &[3], Fill::Below(5))], &[Float], |b, x| {
            call1(b, "aten::index.Tensor", vec![t(x[0]), Arg::OptTensors(vec![Some(x[1]), Some(x[2])])])
        }),
        case("index_separated_dims_go_first", &[(Long, &[3, 4, 5], F), (Long, &[2], Fill::Below(3)), (Long, &[2], Fill::Below(5))], &[Long], |b, x| {
            call1(b, "aten::index.Tensor", vec![t(x[0]), Arg::OptTensors(vec![Some(x[1]), None, Some(x[2])])])
        }),
        case("select_expand_permute", &[(Float, &[3, 1, 4], F)], &[Float, Float, Float], |b, x| {
            let s = call1(b, "aten::select_copy.int", vec![t(x[0]), int(-1), int(-2)]);
            let e = call1(b, "aten::expand_copy", vec![t(x[0]), ints(&[2, 3, 5, 4]), flag(false)]);
            let p = call1(b, "aten::permute_copy", vec![t(x[0]), ints(&[2, 0, 1])]);
            vec![s[0], e[0], p[0]]
        }),
    ]
}

fn spatial_cases() -> Vec<Case> {
    let image: &[usize] = &[1, 2, 7, 6];
    let nearest = |b: &mut GraphBuilder, x: ValueId, size: Arg, scales: Arg| call1(b, "aten::upsample_nearest2d.vec", vec![t(x), size, scales]);
    let bilinear = |b: &mut GraphBuilder, x: ValueId, size: Arg, align: bool, scales: Arg| {
        call1(b, "aten::upsample_bilinear2d.vec", vec![t(x), size, flag(align), scales])
    };
    vec![
        case("max_pool_ceil_mode_with_indices", &[(Float, image, F)], &[Float, Long], |b, x| {
            call(b, "aten::max_pool2d_with_indices", vec![t(x[0]), ints(&[3, 3]), ints(&[2, 2]), ints(&[1, 1]), ints(&[1, 1]), flag(true)])
        }),
        case("max_pool_default_stride_dilated", &[(Float, &[2, 9, 8], F)], &[Float, Long], |b, x| {
            call(b, "aten::max_pool2d_with_indices", vec![t(x[0]), ints(&[2]), ints(&[]), ints(&[0]), ints(&[2, 1]), flag(false)])
        }),
        case("avg_pool_exclude_pad", &[(Float, image, F)], &[Float], |b, x| {
            call1(b, "aten::avg_pool2d", vec![t(x[0]), ints(&[3, 2]), ints(&[2, 1]), ints(&[1, 1]), flag(false), flag(false), none()])
        }),
        case("avg_pool_ceil_divisor", &[(Float, image, F)], &[Float], |b, x| {
            call1(b, "aten::avg_pool2d", vec![t(x[0]), ints(&[2]), ints(&[2]), ints(&[0]), flag(true), flag(true), int(3)])
        }),
        case("adaptive_avg_pool_uneven", &[(Float, image, F)], &[Float], |b, x| {
            call1(b, "aten::_adaptive_avg_pool2d", vec![t(x[0]), ints(&[3, 4])])
        }),
        case("nearest_scale_2", &[(Float, image, F)], &[Float], |b, x| nearest(b, x[0], none(), floats(&[2.0, 2.0]))),
        case("nearest_fractional_scales", &[(Float, image, F)], &[Float], |b, x| nearest(b, x[0], none(), floats(&[1.5, 0.75]))),
        case("nearest_output_size", &[(Float, image, F)], &[Float], |b, x| nearest(b, x[0], ints(&[5, 13]), none())),
        case("bilinear_scale_2", &[(Float, image, F)], &[Float, Float], |b, x| {
            let half = bilinear(b, x[0], none(), false, floats(&[2.0, 2.0]));
            let corners = bilinear(b, x[0], none(), true, floats(&[2.0, 2.0]));
            vec![half[0], corners[0]]
        }),
        case("bilinear_fractional_scales", &[(Float, image, F)], &[Float, Float], |b, x| {
            let half = bilinear(b, x[0], none(), false, floats(&[1.7, 0.6]));
            let corners = bilinear(b, x[0], none(), true, floats(&[1.7, 0.6]));
            vec![half[0], corners[0]]
        }),
        case("bilinear_output_size", &[(Float, image, F)], &[Float, Float], |b, x| {
            let half = bilinear(b, x[0], ints(&[9, 4]), false, none());
            let corners = bilinear(b, x[0], ints(&[1, 11]), true, none());
            vec![half[0], corners[0]]
        }),
        case("conv_transpose_stride2_output_padding_groups", &[(Float, &[1, 4, 5, 6], F)], &[Float], |b, x| {
            let w = constant(b, "w", fill(Float, &[4, 3, 3, 3], F, 11));
            let bias = constant(b, "b", fill(Float, &[6], F, 12));
            let args = vec![t(x[0]), t(w), t(bias), ints(&[2, 2]), ints(&[1, 1]), ints(&[1, 1]), flag(true), ints(&[1, 1]), int(2)];
            call1(b, "aten::convolution", args)
        }),
        case("conv_transpose_1d_asymmetric", &[(Float, &[2, 3, 7], F)], &[Float], |b, x| {
            let w = constant(b, "w", fill(Float, &[3, 2, 4], F, 13));
            let args = vec![t(x[0]), t(w), none(), ints(&[3]), ints(&[2]), ints(&[1]), flag(true), ints(&[2]), int(1)];
            call1(b, "aten::convolution", args)
        }),
    ]
}

fn safetensors_dtype(d: ScalarType) -> safetensors::Dtype {
    match d {
        Float => safetensors::Dtype::F32,
        Long => safetensors::Dtype::I64,
        Bool => safetensors::Dtype::BOOL,
        d => panic!("no safetensors dtype for {d} in this test"),
    }
}

/// Runs `forward` with `kernels`; returns each output's dtype, sizes and bytes.
fn run(program: &[u8], kernels: &KernelRegistry, inputs: &[HostTensor]) -> Vec<HostTensor> {
    let buf = AlignedBuf::from_bytes(program);
    let p = Program::load(buf.as_slice()).unwrap();
    let mut m = p.load_method("forward", kernels, &BackendRegistry::new()).unwrap();
    for (i, (d, sizes, bytes)) in inputs.iter().enumerate() {
        m.set_input_tensor(i, *d, sizes, bytes).unwrap();
    }
    m.execute(&mut KernelContext::default()).unwrap();
    (0..m.outputs().len())
        .map(|i| match m.output_value(i) {
            Some(Value::Tensor(t)) => (t.dtype, t.shape.as_slice().to_vec(), m.output_bytes(i).unwrap().to_vec()),
            other => panic!("output {i} is not a tensor: {other:?}"),
        })
        .collect()
}

#[test]
fn imported_program_ops_match_aten_dtypes_and_executorch() {
    let cases: Vec<Case> = [elementwise_cases(), creation_cases(), reduction_cases(), layout_cases(), spatial_cases()].into_iter().flatten().collect();
    let dir = tempfile::tempdir().unwrap();
    let (portable, full) = (rbuild_kernels::portable_registry(), rbuild_kernels::registry());
    let mut manifest = Vec::new();
    for Case { label, mut graph, inputs, expect } in cases {
        passes::optimize(&mut graph).unwrap_or_else(|e| panic!("{label}: {e}"));
        let program = emit::emit(&graph, &plan::plan_memory(&graph), "forward").unwrap_or_else(|e| panic!("{label}: {e}"));
        let ours = run(&program, &portable, &inputs);
        let dtypes: Vec<ScalarType> = ours.iter().map(|o| o.0).collect();
        assert_eq!(dtypes, expect, "{label}: output dtypes differ from ATen's");
        assert_eq!(run(&program, &full, &inputs), ours, "{label}: the full registry differs from the portable kernels");
        // ExecuTorch must reproduce rbuild's outputs: they go in as the reference.
        let pte = dir.path().join(format!("{label}.pte"));
        let io = dir.path().join(format!("{label}.io.safetensors"));
        std::fs::write(&pte, &program).unwrap();
        let named: Vec<(String, &HostTensor)> = inputs
            .iter()
            .enumerate()
            .map(|(i, x)| (format!("input.{i}"), x))
            .chain(ours.iter().enumerate().map(|(i, y)| (format!("output.{i}"), y)))
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView)> = named
            .iter()
            .map(|(k, (d, s, bytes))| (k.clone(), safetensors::tensor::TensorView::new(safetensors_dtype(*d), s.clone(), bytes).unwrap()))
            .collect();
        std::fs::write(&io, safetensors::serialize(views, None).unwrap()).unwrap();
        manifest.push(serde_json::json!({"label": label, "pte": pte, "io": io, "atol": 1e-6, "rtol": 1e-6, "outputs": ours.len()}));
    }
    let Some(python) = common::oracle_python() else { return };
    let report = common::run_oracle(&python, &manifest, dir.path());
    eprintln!("{}", report.trim());
}

/// A program over a run-time sequence length (positions, a causal mask, a learned position
/// table sliced to the length, broadcasting to run-time sizes), run at several lengths from
/// one program in rbuild and in ExecuTorch.
#[test]
fn run_time_lengths_flow_through_sizes_in_rbuild_and_executorch() {
    use rbuild_export::graph::IntOrSym;
    let mut b = GraphBuilder::new();
    let seq = b.sym("seq", 1, 8);
    let x = b.input("x", TensorMeta::new(Float, vec![rbuild_export::Dim::Fixed(1), seq, rbuild_export::Dim::Fixed(4)]));
    let n = b.sym_size(x, 1).unwrap();
    let opts = [none(), none(), none(), none()];
    let mut arange_args = vec![inum(0), Arg::SymInt(n), inum(1)];
    arange_args.extend(opts.clone());
    let pos = call(&mut b, "aten::arange.start_step", arange_args)[0];
    let table = constant(&mut b, "positions", fill(Float, &[8, 4], F, 5));
    let rows = call(&mut b, "aten::slice_copy.Tensor", vec![t(table), int(0), int(0), Arg::SymInt(n), int(1)])[0];
    let y = call(&mut b, "aten::add.Tensor", vec![t(x), t(rows), inum(1)])[0];
    let (col, row) = (call(&mut b, "aten::unsqueeze_copy", vec![t(pos), int(1)])[0], call(&mut b, "aten::unsqueeze_copy", vec![t(pos), int(0)])[0]);
    let causal = call(&mut b, "aten::le.Tensor", vec![t(row), t(col)])[0];
    let mut full_args = vec![Arg::SymInts(vec![IntOrSym::Sym(n), IntOrSym::Sym(n)]), num(-1e9)];
    full_args.extend(opts);
    let blocked = call(&mut b, "aten::full", full_args)[0];
    let zero = call(&mut b, "aten::full_like", vec![t(blocked), num(0.0), none(), none(), none(), none(), none()])[0];
    let mask = call(&mut b, "aten::where.self", vec![t(causal), t(zero), t(blocked)])[0];
    let wide = call(&mut b, "aten::expand_copy", vec![t(row), Arg::SymInts(vec![IntOrSym::Int(3), IntOrSym::Sym(n)]), flag(false)])[0];
    let running = call(&mut b, "aten::cumsum", vec![t(y), int(1), none()])[0];
    for v in [pos, y, mask, wide, running] {
        b.output(v);
    }
    let mut g = b.finish();
    passes::optimize(&mut g).unwrap();
    let program = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pte = dir.path().join("dynamic.pte");
    std::fs::write(&pte, &program).unwrap();
    let mut manifest = Vec::new();
    for len in [1usize, 3, 8] {
        let input = fill(Float, &[1, len, 4], F, len as u64);
        let ours = run(&program, &rbuild_kernels::portable_registry(), std::slice::from_ref(&input));
        let sizes: Vec<Vec<usize>> = ours.iter().map(|o| o.1.clone()).collect();
        assert_eq!(sizes, [vec![len], vec![1, len, 4], vec![len, len], vec![3, len], vec![1, len, 4]], "length {len}");
        let mask: Vec<f32> = ours[2].2.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let want: Vec<f32> = (0..len * len).map(|k| if k % len <= k / len { 0.0 } else { -1e9 }).collect();
        assert_eq!(mask, want, "causal mask at length {len}");
        let io = dir.path().join(format!("dynamic{len}.io.safetensors"));
        let named: Vec<(String, &HostTensor)> = std::iter::once(("input.0".to_string(), &input)).chain(ours.iter().enumerate().map(|(i, y)| (format!("output.{i}"), y))).collect();
        let views: Vec<(String, safetensors::tensor::TensorView)> =
            named.iter().map(|(k, (d, s, bytes))| (k.clone(), safetensors::tensor::TensorView::new(safetensors_dtype(*d), s.clone(), bytes).unwrap())).collect();
        std::fs::write(&io, safetensors::serialize(views, None).unwrap()).unwrap();
        manifest.push(serde_json::json!({"label": format!("length {len}"), "pte": pte, "io": io, "atol": 1e-6, "rtol": 1e-6, "outputs": ours.len()}));
    }
    let Some(python) = common::oracle_python() else { return };
    eprintln!("{}", common::run_oracle(&python, &manifest, dir.path()).trim());
}
