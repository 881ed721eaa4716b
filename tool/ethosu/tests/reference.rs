//! The int8 reference interpreter (`rbuild_ethosu::reference`): hand-computed values per op,
//! and MobileNetV2's Ethos-U subgraph against the CPU lowering of the same fused graph, bit for
//! bit (so a wrong weight layout, padding, bias or scale in `partition::subgraph` fails here,
//! where Vela would compile it without complaint).

use std::collections::HashMap;

use rbuild_ethosu::graph::{Activation, Int8Graph, OpKind, Padding};
use rbuild_ethosu::partition;
use rbuild_ethosu::reference::{activation_range, evaluate};
use rbuild_export::passes::{self, calibrate, to_out};
use rbuild_export::{emit, eval, plan};
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, ScalarType};

// ---------------------------------------------------------------------------------------------
// Per-op unit tests
// ---------------------------------------------------------------------------------------------

/// A one-op conv graph: x [1, H, W, C] (scale xs, zp xz) → out (scale os, zp oz).
#[allow(clippy::too_many_arguments)]
fn conv_graph(
    x_shape: [i32; 4],
    (xs, xz): (f32, i64),
    w_shape: [i32; 4],
    w: &[i8],
    w_scales: Vec<f32>,
    bias: &[i32],
    out_shape: [i32; 4],
    (os, oz): (f32, i64),
    kind: OpKind,
) -> Int8Graph {
    let mut g = Int8Graph::default();
    let x = g.activation("x", &x_shape, xs, xz);
    let axis = if matches!(kind, OpKind::DepthwiseConv2d { .. }) { 3 } else { 0 };
    let wt = g.weight("w", &w_shape, w, w_scales.clone(), axis);
    let bt = g.bias("b", bias, w_scales.iter().map(|s| s * xs).collect());
    let y = g.activation("y", &out_shape, os, oz);
    g.op(kind, &[x, wt, bt], &[y]);
    g.inputs = vec![x];
    g.outputs = vec![y];
    g
}

fn conv_kind(stride: i32, padding: Padding, act: Activation) -> OpKind {
    OpKind::Conv2d { stride: [stride; 2], dilation: [1, 1], padding, act }
}

/// A small deterministic generator (xorshift) for int8 data.
fn codes(n: usize, seed: u64) -> Vec<i8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 56) as u8 as i8
        })
        .collect()
}

#[test]
fn conv_1x1_requantizes_once_midpoints_up() {
    // acc = bias + 2 (x − 1) = [1, 7, −5, 19]; × 0.5 = [0.5, 3.5, −2.5, 9.5] → [1, 4, −2, 10]; − 3.
    let g = conv_graph(
        [1, 2, 2, 1],
        (0.5, 1),
        [1, 1, 1, 1],
        &[2],
        vec![1.0],
        &[1],
        [1, 2, 2, 1],
        (1.0, -3),
        conv_kind(1, Padding::Valid, Activation::None),
    );
    assert_eq!(evaluate(&g, &[vec![1, 4, -2, 10]]).unwrap(), [vec![-2, 1, -5, 7]]);
}

#[test]
fn conv_weight_layout_is_ohwi_and_activations_clamp() {
    // x [1, 1, 2, 2] (one row, two pixels, two channels), weight [2 out, 1, 2, 2 in] VALID → [1, 1, 1, 2].
    // out0 = 1·x(0,c0) + 2·x(0,c1) + 3·x(1,c0) + 4·x(1,c1); out1 = −(same).
    let x = vec![1, 2, 3, 4];
    let w = [1, 2, 3, 4, -1, -2, -3, -4];
    let run = |act| {
        let g = conv_graph([1, 1, 2, 2], (1.0, 0), [2, 1, 2, 2], &w, vec![1.0, 1.0], &[0, 0], [1, 1, 1, 2], (1.0, -20), conv_kind(1, Padding::Valid, act));
        evaluate(&g, &[x.clone()]).unwrap().remove(0)
    };
    // 1 + 4 + 9 + 16 = 30 → 30 − 20 = 10; −30 − 20 = −50.
    assert_eq!(run(Activation::None), [10, -50]);
    // ReLU clamps at the zero point (−20); ReLU6 also at −20 + 6 = −14.
    assert_eq!(run(Activation::Relu), [10, -20]);
    assert_eq!(run(Activation::Relu6), [-14, -20]);
}

#[test]
fn activation_ranges_follow_the_output_quantization() {
    assert_eq!(activation_range(Activation::None, 0.05, -10), (-128, 127));
    assert_eq!(activation_range(Activation::Relu, 0.05, -10), (-10, 127));
    assert_eq!(activation_range(Activation::Relu6, 0.05, -10), (-10, 110));
    // 6 / 0.02 = 300 above the int8 range: ReLU6 is plain ReLU there.
    assert_eq!(activation_range(Activation::Relu6, 0.02, -128), (-128, 127));
}

#[test]
fn depthwise_with_multiplier_reads_channel_o_div_m() {
    // 1×1 input with two channels, 3×3 SAME: only the centre tap sees the image.
    let mut w = vec![0i8; 9 * 4];
    for o in 0..4 {
        w[4 * 4 + o] = o as i8 + 1; // centre tap (1, 1) of output channel o
        w[o] = 100; // a corner tap: lands in the padding
    }
    let kind = OpKind::DepthwiseConv2d { stride: [1, 1], dilation: [1, 1], padding: Padding::Same, depth_multiplier: 2, act: Activation::None };
    let g = conv_graph([1, 1, 1, 2], (1.0, 5), [1, 3, 3, 4], &w, vec![1.0; 4], &[0, 1, 2, 3], [1, 1, 1, 4], (1.0, 0), kind);
    // x − zp = [10, 20]: outputs [1·10 + 0, 2·10 + 1, 3·20 + 2, 4·20 + 3]; padding reads the zero point (adds 0).
    assert_eq!(evaluate(&g, &[vec![15, 25]]).unwrap(), [vec![10, 21, 62, 83]]);
}

#[test]
fn dilated_strided_conv_matches_a_direct_sum() {
    // 5×5 input, 3×3 kernel, dilation 2, VALID: one output = the sum over the 9 taps at even positions.
    let x: Vec<i8> = (0..25).map(|v| (v * 7 % 23) as i8 - 11).collect();
    let g = conv_graph([1, 5, 5, 1], (1.0, 0), [1, 3, 3, 1], &[1; 9], vec![1.0], &[0], [1, 1, 1, 1], (1.0, 0), OpKind::Conv2d {
        stride: [2, 2],
        dilation: [2, 2],
        padding: Padding::Valid,
        act: Activation::None,
    });
    let want: i32 = [0, 2, 4].iter().flat_map(|&r| [0, 2, 4].map(|c| x[r * 5 + c] as i32)).sum();
    assert_eq!(evaluate(&g, &[x]).unwrap(), [vec![want as i8]]);
}

/// SAME convolution vs the explicit PAD (with the zero point) + VALID convolution of the same
/// padding: equal, for regular and depthwise convolutions.
fn pad_then_valid_equals_same(h: i32, stride: i32, pads: [i32; 2], depthwise: bool) {
    let (c, k) = (3, 3);
    let o = if depthwise { c } else { 4 };
    let out_hw = (h + stride - 1) / stride;
    let w_shape = if depthwise { [1, k, k, c] } else { [o, k, k, c] };
    let w = codes((k * k * c * if depthwise { 1 } else { o }) as usize, 3);
    let scales: Vec<f32> = (0..o).map(|i| 0.01 + 0.003 * i as f32).collect();
    let bias: Vec<i32> = (0..o).map(|i| 50 * i - 70).collect();
    let kind = |padding| {
        if depthwise {
            OpKind::DepthwiseConv2d { stride: [stride; 2], dilation: [1, 1], padding, depth_multiplier: 1, act: Activation::Relu }
        } else {
            conv_kind(stride, padding, Activation::Relu)
        }
    };
    let (xq, oq) = ((0.07, -9), (0.05, 4));
    let same = conv_graph([1, h, h, c], xq, w_shape, &w, scales.clone(), &bias, [1, out_hw, out_hw, o], oq, kind(Padding::Same));
    let mut padded = conv_graph([1, h, h, c], xq, w_shape, &w, scales, &bias, [1, out_hw, out_hw, o], oq, kind(Padding::Valid));
    // Insert x → PAD → x_padded before the convolution.
    let x = padded.inputs[0];
    let hp = h + pads[0] + pads[1];
    let xp = padded.activation("x.padded", &[1, hp, hp, c], xq.0, xq.1);
    let pt = padded.int32_const("paddings", &[0, 0, pads[0], pads[1], pads[0], pads[1], 0, 0]);
    padded.tensors[pt].shape = vec![4, 2];
    padded.ops[0].inputs[0] = xp;
    padded.ops.insert(0, rbuild_ethosu::graph::Op { kind: OpKind::Pad, inputs: vec![x, pt], outputs: vec![xp] });
    let input = codes((h * h * c) as usize, 11);
    let a = evaluate(&same, &[input.clone()]).unwrap();
    let b = evaluate(&padded, &[input]).unwrap();
    assert_eq!(a, b, "h {h} stride {stride} pads {pads:?} depthwise {depthwise}");
    // Not vacuous: not everything clamps to one value.
    assert!(a[0].iter().any(|&v| v != a[0][0]));
}

#[test]
fn pad_and_valid_conv_equals_same_conv() {
    for depthwise in [false, true] {
        // Stride 1, 3×3: SAME pads one pixel each side.
        pad_then_valid_equals_same(6, 1, [1, 1], depthwise);
        // Stride 2 on an even size: SAME pads (0, 1), not PyTorch's (1, 1).
        pad_then_valid_equals_same(6, 2, [0, 1], depthwise);
        // Stride 2 on an odd size: SAME pads (1, 1).
        pad_then_valid_equals_same(7, 2, [1, 1], depthwise);
    }
}

#[test]
fn pad_fills_with_the_zero_point() {
    let mut g = Int8Graph::default();
    let x = g.activation("x", &[1, 1, 1, 2], 0.1, -7);
    let p = g.int32_const("p", &[0, 0, 1, 0, 0, 1, 0, 0]);
    g.tensors[p].shape = vec![4, 2];
    let y = g.activation("y", &[1, 2, 2, 2], 0.1, -7);
    g.op(OpKind::Pad, &[x, p], &[y]);
    g.inputs = vec![x];
    g.outputs = vec![y];
    // H padded before, W after: pixel (1, 0) holds the input.
    assert_eq!(evaluate(&g, &[vec![3, 4]]).unwrap(), [vec![-7, -7, -7, -7, 3, 4, -7, -7]]);
}

#[test]
fn fully_connected() {
    let mut g = Int8Graph::default();
    let x = g.activation("x", &[1, 3], 0.5, 1);
    let w = g.weight("w", &[2, 3], &[1, 0, -1, 2, 2, 2], vec![1.0, 0.5], 0);
    let b = g.bias("b", &[5, -1], vec![0.5, 0.25]);
    let y = g.activation("y", &[1, 2], 0.25, 0);
    g.op(OpKind::FullyConnected { act: Activation::None }, &[x, w, b], &[y]);
    g.inputs = vec![x];
    g.outputs = vec![y];
    // x − 1 = [1, 2, 3]: acc = [5 + 1 − 3, −1 + 2·6] = [3, 11]; × (0.5·1/0.25, 0.5·0.5/0.25) = [6, 11].
    assert_eq!(evaluate(&g, &[vec![2, 3, 4]]).unwrap(), [vec![6, 11]]);
}

#[test]
fn add_rescales_both_inputs() {
    let mut g = Int8Graph::default();
    let a = g.activation("a", &[1, 1, 1, 3], 1.0, 2);
    let b = g.activation("b", &[1, 1, 1, 3], 0.25, -4);
    let y = g.activation("y", &[1, 1, 1, 3], 0.5, 1);
    g.op(OpKind::Add { act: Activation::None }, &[a, b], &[y]);
    g.inputs = vec![a, b];
    g.outputs = vec![y];
    // a = [3, −1, 100], b = [2, 0.5, 30] (reals): sums [5, −0.5, 130] / 0.5 + 1 = [11, 0, 261 → 127].
    assert_eq!(evaluate(&g, &[vec![5, 1, 102], vec![4, -2, 116]]).unwrap(), [vec![11, 0, 127]]);
    g.ops[0].kind = OpKind::Add { act: Activation::Relu };
    assert_eq!(evaluate(&g, &[vec![5, 1, 102], vec![4, -2, 116]]).unwrap(), [vec![11, 1, 127]]);
}

#[test]
fn mean_over_height_and_width() {
    for keep_dims in [true, false] {
        let mut g = Int8Graph::default();
        let x = g.activation("x", &[1, 2, 2, 2], 0.5, 0);
        let axes = g.int32_const("axes", &[1, 2]);
        let y = g.activation("y", if keep_dims { &[1, 1, 1, 2] } else { &[1, 2] }, 1.0, -1);
        g.op(OpKind::Mean { keep_dims }, &[x, axes], &[y]);
        g.inputs = vec![x];
        g.outputs = vec![y];
        // Channel 0: [1, 2, 3, 6] → mean 3 · 0.5 = 1.5 → 2 (midpoint up) − 1 = 1;
        // channel 1: [−8, −8, −8, −9] → −8.25 · 0.5 = −4.125 → −4 − 1 = −5.
        assert_eq!(evaluate(&g, &[vec![1, -8, 2, -8, 3, -8, 6, -9]]).unwrap(), [vec![1, -5]]);
    }
}

#[test]
fn average_pool_rounds_half_away_from_zero_and_skips_padding() {
    let mut g = Int8Graph::default();
    let x = g.activation("x", &[1, 2, 2, 2], 0.1, 0);
    let y = g.activation("y", &[1, 2, 2, 2], 0.1, 0);
    g.op(OpKind::AveragePool2d { filter: [2, 2], stride: [1, 1], padding: Padding::Same, act: Activation::None }, &[x], &[y]);
    g.inputs = vec![x];
    g.outputs = vec![y];
    // Channel 0 [1, 2, 3, 5], channel 1 negated. SAME 2×2 windows (padding after, not counted):
    // (0,0): all four: 11/4 = 2.75 → 3; (0,1): [2, 5] → 3.5 → 4; (1,0): [3, 5] → 4; (1,1): 5.
    let got = evaluate(&g, &[vec![1, -1, 2, -2, 3, -3, 5, -5]]).unwrap();
    assert_eq!(got, [vec![3, -3, 4, -4, 4, -4, 5, -5]]);
}

#[test]
fn reshape_keeps_the_bytes() {
    let mut g = Int8Graph::default();
    let x = g.activation("x", &[1, 1, 1, 4], 0.1, 3);
    let y = g.activation("y", &[1, 4], 0.1, 3);
    g.op(OpKind::Reshape, &[x], &[y]);
    g.inputs = vec![x];
    g.outputs = vec![y];
    assert_eq!(evaluate(&g, &[vec![1, -2, 3, -4]]).unwrap(), [vec![1, -2, 3, -4]]);
}

#[test]
fn malformed_graphs_are_errors() {
    let g = conv_graph([1, 2, 2, 1], (0.5, 1), [1, 1, 1, 1], &[2], vec![1.0], &[1], [1, 2, 2, 1], (1.0, -3), conv_kind(1, Padding::Valid, Activation::None));
    assert!(evaluate(&g, &[vec![1, 2, 3]]).unwrap_err().contains("3 values"));
    assert!(evaluate(&g, &[]).is_err());
    // Output shape that the convolution does not compute.
    let bad = conv_graph([1, 2, 2, 1], (0.5, 1), [1, 1, 1, 1], &[2], vec![1.0], &[1], [1, 1, 2, 1], (1.0, -3), conv_kind(1, Padding::Valid, Activation::None));
    assert!(evaluate(&bad, &[vec![0; 4]]).unwrap_err().contains("shape"));
    // Weight channels that do not match the input.
    let bad = conv_graph([1, 2, 2, 2], (0.5, 1), [1, 1, 1, 1], &[2], vec![1.0], &[1], [1, 2, 2, 1], (1.0, -3), conv_kind(1, Padding::Valid, Activation::None));
    assert!(evaluate(&bad, &[vec![0; 8]]).is_err());
    // A kernel larger than the VALID input.
    let bad = conv_graph([1, 2, 2, 1], (0.5, 1), [1, 3, 3, 1], &[1; 9], vec![1.0], &[1], [1, 1, 1, 1], (1.0, 0), conv_kind(1, Padding::Valid, Activation::None));
    assert!(evaluate(&bad, &[vec![0; 4]]).is_err());
    // Structural errors come from validate().
    let mut bad = g.clone();
    bad.ops[0].inputs[1] = 99;
    assert!(evaluate(&bad, &[vec![0; 4]]).is_err());
}

// ---------------------------------------------------------------------------------------------
// MobileNetV2: the NPU subgraph against the CPU lowering
// ---------------------------------------------------------------------------------------------

/// NCHW → NHWC of a 4-D int8 tensor.
fn to_nhwc(x: &[i8], [n, c, h, w]: [usize; 4]) -> Vec<i8> {
    let mut y = vec![0i8; x.len()];
    for b in 0..n {
        for ch in 0..c {
            for i in 0..h * w {
                y[(b * h * w + i) * c + ch] = x[(b * c + ch) * h * w + i];
            }
        }
    }
    y
}

#[test]
fn mobilenet_v2_subgraph_matches_the_cpu_lowering_bit_for_bit() {
    let size = 224;
    let w = rbuild_models::random_weights("mobilenet_v2", 1).unwrap();
    let mut g = rbuild_models::build("mobilenet_v2", &w, &[1, 3, size, size]).unwrap();
    let samples = calibrate::random_samples(&g, 2, 7).unwrap();
    let (_, matches) = passes::optimize_int8_for_delegation(&mut g, &samples).unwrap();
    let parts = partition::partition(&g, &matches);
    assert_eq!(parts.partitions.len(), 1);
    let p = &parts.partitions[0];
    assert_eq!((p.inputs.len(), p.outputs.len()), (1, 1));
    let (pin, pout) = (p.inputs[0], p.outputs[0]);

    // The fused int8 graph on the CPU kernels, keeping the int8 values at the partition's edges.
    let input = calibrate::random_samples(&g, 1, 42).unwrap().remove(0);
    let mut seen: HashMap<usize, Vec<u8>> = HashMap::new();
    let float_out = eval::evaluate_observed(&g, &input, |v, bytes| {
        if v == pin || v == pout {
            seen.insert(v, bytes.to_vec());
        }
    })
    .unwrap();
    let as_i8 = |b: &[u8]| b.iter().map(|&v| v as i8).collect::<Vec<i8>>();
    let (x_nchw, want) = (as_i8(&seen[&pin]), as_i8(&seen[&pout]));
    assert_eq!(g.meta(pin).sizes().unwrap(), [1, 3, size, size]);
    assert_eq!(want.len(), 1000);

    // The emitted CPU program computes the same logits (its float output is the dequantized int8
    // output of the fused program: re-quantizing it gives the int8 logits back exactly).
    let mut prog = g.clone();
    to_out::to_out_variants(&mut prog).unwrap();
    let bytes = emit::emit(&prog, &plan::plan_memory(&prog), "forward").unwrap();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &rbuild_runtime::backend::BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[1, 3, size, size], &input[0]).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    let program_out = m.output_bytes(0).unwrap().to_vec();
    assert_eq!(program_out, float_out[0], "emitted program vs graph evaluation");
    let q = matches[&pout].out;
    let requantized: Vec<i8> = program_out
        .chunks_exact(4)
        .map(|b| (f32::from_le_bytes([b[0], b[1], b[2], b[3]]) / q.scale).round() as i64 + q.zero_point)
        .map(|v| v as i8)
        .collect();
    assert_eq!(requantized, want, "re-quantized program output vs the int8 logits");

    // The NPU subgraph on the reference interpreter, from the same int8 input (NHWC).
    let sub = partition::subgraph(&g, &matches, p).unwrap();
    let kinds: std::collections::BTreeSet<&str> = sub.ops.iter().map(|o| o.kind.name()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["ADD", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MEAN", "PAD", "RESHAPE"]);
    let got = evaluate(&sub, &[to_nhwc(&x_nchw, [1, 3, size, size])]).unwrap();
    let diffs = got[0].iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(got[0], want, "{diffs} of 1000 int8 logits differ");
    // Not vacuous: the logits are not all clamped.
    let distinct: std::collections::HashSet<i8> = want.iter().copied().collect();
    assert!(distinct.len() > 10, "{distinct:?}");
}
