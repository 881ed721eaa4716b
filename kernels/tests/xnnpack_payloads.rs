//! `XnnpackBackend` on payloads written here (rbuild's `write_payload`), for the node kinds and
//! datatypes ExecuTorch's partitioner emits that the shared testdata does not cover: quint8,
//! bfloat16, int8 subtract / resize / max pooling / requantizing Convert / unary tables,
//! dynamically quantized convolutions, fully connected layers with runtime weights; and
//! malformed payloads, each rejected at compile time with a message naming the problem.

use rbuild_kernels::nhwc::qs8::dynamic_conv;
use rbuild_kernels::nhwc::resize::{reference as resize_ref, ResizeMode};
use rbuild_kernels::nhwc::Conv2dGeom;
use rbuild_kernels::xnnpack::{compile_payload, DEFAULT_ACTIVATION_LIMIT};
use rbuild_runtime::backends::xnnpack::graph::PoolParams;
use rbuild_runtime::backends::xnnpack::{write_payload, NodeKind, NodeParams, Quant, XnnDatatype as D};

mod xnnpack_graph;
mod xnnpack_mutate;
use xnnpack_graph::{conv_params, f32_bytes, f32s, i32_bytes, i8_bytes, pc, pt, Lcg, G};

/// An int8 3×3 convolution then an add of the input's first channel group… in qint8 or, with
/// `unsigned`, the same graph in quint8 (zero points and data shifted by 128).
fn int8_graph(unsigned: bool, w: &[i8], bias: &[i32]) -> Vec<u8> {
    let (dt, shift) = if unsigned { (D::QUInt8, 128) } else { (D::QInt8, 0) };
    let mut g = G::new();
    let x = g.input(dt, &[1, 5, 5, 4], pt(0.05, 3 + shift));
    let wv = g.constant(D::QcInt8, &[4, 3, 3, 4], pc(vec![0.01, 0.02, 0.015, 0.03], 0), &i8_bytes(w));
    let b = g.constant(D::QcInt32, &[4], pc(vec![0.0005, 0.001, 0.00075, 0.0015], 0), &i32_bytes(bias));
    let c = g.internal(dt, &[1, 5, 5, 4], pt(0.08, -5 + shift));
    g.node(NodeKind::Conv2d, NodeParams::Conv(conv_params(3, 1, 4, 4, x, wv, Some(b), c)), Some((0.0, f32::INFINITY)));
    let y = g.output(dt, &[1, 5, 5, 4], pt(0.1, 7 + shift));
    g.node(NodeKind::Add, NodeParams::Binary { input1: c, input2: x, output: y, flags: 0 }, None);
    let z = g.output(dt, &[1, 5, 5, 4], pt(0.1, 2 + shift));
    g.node(NodeKind::Subtract, NodeParams::Binary { input1: y, input2: c, output: z, flags: 0 }, None);
    g.payload()
}

#[test]
fn quint8_runs_as_qint8_shifted_by_128() {
    let mut r = Lcg(1);
    let (w, bias) = (r.i8s(144), (0..4).map(|_| (r.next() as i32) >> 22).collect::<Vec<_>>());
    let none = |_: &str| None;
    let (ps, pu) = (int8_graph(false, &w, &bias), int8_graph(true, &w, &bias));
    let mut signed = compile_payload(&ps, &none, DEFAULT_ACTIVATION_LIMIT).unwrap();
    let mut unsigned = compile_payload(&pu, &none, DEFAULT_ACTIVATION_LIMIT).unwrap();
    assert_eq!(unsigned.input_types()[0].0, rbuild_runtime::ScalarType::Byte);
    let x = r.i8s(100);
    let xs = i8_bytes(&x);
    let xu: Vec<u8> = xs.iter().map(|b| b ^ 0x80).collect();
    let ys = signed.run_bytes(1, &[&xs]).unwrap();
    let yu = unsigned.run_bytes(1, &[&xu]).unwrap();
    for (s, u) in ys.iter().zip(&yu) {
        assert_eq!(s.iter().map(|b| b ^ 0x80).collect::<Vec<_>>(), *u);
    }
    // The subtract is a real difference: within one step of (y − c) requantized.
    assert!(ys[1].iter().any(|&b| b != ys[1][0]), "a constant output would test nothing");
}

#[test]
fn quint8_weights_with_a_zero_point_match_the_kernel_reference() {
    use rbuild_kernels::nhwc::qs8::{asymmetric::reference::conv_qu8, QParams};
    let mut r = Lcg(6);
    let (qx, qw, qy) = (QParams { scale: 0.05, zero_point: 140 }, QParams { scale: 0.02, zero_point: 117 }, QParams { scale: 0.2, zero_point: 100 });
    let shift = |q: QParams| QParams { scale: q.scale, zero_point: q.zero_point - 128 };
    let mut g = G::new();
    let x = g.input(D::QUInt8, &[1, 5, 5, 3], pt(qx.scale, qx.zero_point));
    let w: Vec<u8> = (0..4 * 9 * 3).map(|_| r.next() as u8).collect();
    let wv = g.constant(D::QUInt8, &[4, 3, 3, 3], pt(qw.scale, qw.zero_point), &w);
    let bias: Vec<i32> = (0..4).map(|_| (r.next() as i32) >> 22).collect();
    let bv = g.constant(D::QInt32, &[4], pt(qx.scale * qw.scale, 0), &i32_bytes(&bias));
    let y = g.output(D::QUInt8, &[1, 5, 5, 4], pt(qy.scale, qy.zero_point));
    g.node(NodeKind::Conv2d, NodeParams::Conv(conv_params(3, 1, 3, 4, x, wv, Some(bv), y)), None);
    // A depthwise 3×3 (multiplier 2) and a fully connected layer on the same input.
    let dw: Vec<u8> = (0..9 * 6).map(|_| r.next() as u8).collect();
    let dwv = g.constant(D::QUInt8, &[1, 3, 3, 6], pt(qw.scale, qw.zero_point), &dw);
    let yd = g.output(D::QUInt8, &[1, 5, 5, 6], pt(qy.scale, qy.zero_point));
    let mut pd = conv_params(3, 1, 1, 2, x, dwv, None, yd);
    pd.groups = 3;
    g.node(NodeKind::DepthwiseConv2d, NodeParams::Conv(pd), None);
    let fw: Vec<u8> = (0..2 * 3).map(|_| r.next() as u8).collect();
    let fv = g.constant(D::QUInt8, &[2, 3], pt(qw.scale, qw.zero_point), &fw);
    let yf = g.output(D::QUInt8, &[1, 5, 5, 2], pt(qy.scale, qy.zero_point));
    g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: x, filter: fv, bias: None, output: yf, flags: 0 }, None);
    let mut plan = g.compile().unwrap();
    let xv: Vec<u8> = (0..75).map(|_| r.next() as u8).collect();
    let out = plan.run_bytes(2, &[&xv]).unwrap();
    let to_i8 = |v: &[u8]| v.iter().map(|&b| (b ^ 0x80) as i8).collect::<Vec<_>>();
    let from_i8 = |v: Vec<i8>| v.iter().map(|&b| b as u8 ^ 0x80).collect::<Vec<_>>();
    let geom = |groups: usize, gi: usize, go: usize, k: usize, p: usize| Conv2dGeom { batch: 1, in_h: 5, in_w: 5, out_h: 5, out_w: 5, kernel_h: k, kernel_w: k, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: p, pad_left: p, groups, group_in: gi, group_out: go };
    let want = conv_qu8(&geom(1, 3, 4, 3, 1), false, shift(qx), &to_i8(&xv), &to_i8(&w), shift(qw), Some(&bias), shift(qy), -128, 127);
    assert_eq!(out[0], from_i8(want));
    let dw_grouped: Vec<u8> = (0..54).map(|i| dw[(i % 9) * 6 + i / 9]).collect();
    let want = conv_qu8(&geom(3, 1, 2, 3, 1), false, shift(qx), &to_i8(&xv), &to_i8(&dw_grouped), shift(qw), None, shift(qy), -128, 127);
    assert_eq!(out[1], from_i8(want));
    let want = conv_qu8(&geom(1, 3, 2, 1, 0), false, shift(qx), &to_i8(&xv), &to_i8(&fw), shift(qw), None, shift(qy), -128, 127);
    assert_eq!(out[2], from_i8(want));
}

#[test]
fn int8_subtract_broadcasts_and_rounds_like_the_real_difference() {
    let mut g = G::new();
    let (qa, qb, qy) = ((0.05, 4), (0.03, -10), (0.06, 1));
    let a = g.input(D::QInt8, &[2, 3, 4], pt(qa.0, qa.1));
    let b = g.input(D::QInt8, &[3, 1], pt(qb.0, qb.1));
    let y = g.output(D::QInt8, &[2, 3, 4], pt(qy.0, qy.1));
    g.node(NodeKind::Subtract, NodeParams::Binary { input1: a, input2: b, output: y, flags: 0 }, Some((-1.0, 2.0)));
    let mut plan = g.compile().unwrap();
    let mut r = Lcg(2);
    let (xa, xb) = (r.i8s(24), r.i8s(3));
    let out = plan.run_bytes(2, &[&i8_bytes(&xa), &i8_bytes(&xb)]).unwrap();
    for i in 0..24 {
        let real = (xa[i] as i32 - qa.1) as f32 * qa.0 - (xb[i / 4 % 3] as i32 - qb.1) as f32 * qb.0;
        let want = (real.clamp(-1.0, 2.0) / qy.0 + qy.1 as f32).clamp(-128.0, 127.0);
        assert!((out[0][i] as i8 as f32 - want).abs() <= 1.0, "{i}: {} vs {want}", out[0][i] as i8);
    }
}

#[test]
fn half_and_bfloat16_nodes_round_their_outputs() {
    for (dt, st) in [(D::Fp16, rbuild_runtime::ScalarType::Half), (D::Bf16, rbuild_runtime::ScalarType::BFloat16)] {
        let mut g = G::new();
        let a = g.input(dt, &[7], Quant::None);
        let b = g.input(dt, &[7], Quant::None);
        let s = g.internal(dt, &[7], Quant::None);
        g.node(NodeKind::Multiply, NodeParams::Binary { input1: a, input2: b, output: s, flags: 0 }, None);
        let y = g.output(dt, &[7], Quant::None);
        g.node(NodeKind::Add, NodeParams::Binary { input1: s, input2: a, output: y, flags: 0 }, Some((-2.0, 3.3)));
        let mut plan = g.compile().unwrap();
        assert_eq!(plan.output_types()[0].0, st);
        let av = [0.1f32, -1.7, 2.5, 1e-3, 3.0, -0.4, 1.1];
        let bv = [0.3f32, 0.9, 1.25, 7.0, 0.5, 3.3, -1.9];
        let (enc, dec, round): (fn(f32) -> [u8; 2], fn([u8; 2]) -> f32, fn(f32) -> f32) = if dt == D::Fp16 {
            (|x| half::f16::from_f32(x).to_le_bytes(), |b| half::f16::from_le_bytes(b).to_f32(), |x| half::f16::from_f32(x).to_f32())
        } else {
            (|x| half::bf16::from_f32(x).to_le_bytes(), |b| half::bf16::from_le_bytes(b).to_f32(), |x| half::bf16::from_f32(x).to_f32())
        };
        let ab: Vec<u8> = av.iter().flat_map(|&x| enc(x)).collect();
        let bb: Vec<u8> = bv.iter().flat_map(|&x| enc(x)).collect();
        let out = plan.run_bytes(1, &[&ab, &bb]).unwrap();
        for i in 0..7 {
            let (a, b) = (round(av[i]), round(bv[i]));
            // Each node rounds: the product first, then the clamped sum (bounds rounded too).
            let want = round((round(a * b) + a).max(round(-2.0)).min(round(3.3)));
            assert_eq!(dec([out[0][2 * i], out[0][2 * i + 1]]), want, "{dt:?} element {i}");
        }
    }
}

#[test]
fn dynamically_quantized_convolution_matches_the_kernel_reference() {
    let mut r = Lcg(3);
    let (h, w, cin, cout) = (6, 7, 3, 5);
    let mut g = G::new();
    let x = g.input(D::Fp32, &[2, h, w, cin], Quant::None);
    let q = g.internal(D::QdInt8, &[2, h, w, cin], Quant::PerTokenDynamic { num_nonbatch_dims: 3 });
    g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: q, flags: 0 }, None);
    let filter = r.i8s(cout * 9 * cin);
    let scales = r.f32s(cout, 0.001, 0.01);
    let bias = r.f32s(cout, -1.0, 1.0);
    let wv = g.constant(D::QcInt8, &[cout, 3, 3, cin], pc(scales.clone(), 0), &i8_bytes(&filter));
    let bv = g.constant(D::Fp32, &[cout], Quant::None, &f32_bytes(&bias));
    let y = g.output(D::Fp32, &[2, h, w, cout], Quant::None);
    g.node(NodeKind::Conv2d, NodeParams::Conv(conv_params(3, 1, cin as u32, cout as u32, q, wv, Some(bv), y)), Some((-0.5, 6.0)));
    let mut plan = g.compile().unwrap();
    assert!(plan.step_names().iter().any(|s| s.contains("qd8")), "{:?}", plan.step_names());
    let xv = r.f32s(2 * h * w * cin, -2.0, 2.0);
    let out = f32s(&plan.run_bytes(2, &[&f32_bytes(&xv)]).unwrap()[0]);
    let geom = Conv2dGeom { batch: 2, in_h: h, in_w: w, out_h: h, out_w: w, kernel_h: 3, kernel_w: 3, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: 1, pad_left: 1, groups: 1, group_in: cin, group_out: cout };
    let want = dynamic_conv::reference::conv_qd8(&geom, &xv, &filter, &scales, Some(&bias), -0.5, 6.0);
    assert!(out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn dynamically_quantized_transposed_convolution_matches_the_kernel_reference() {
    let mut r = Lcg(5);
    let (h, w, cin, cout) = (4, 5, 3, 2);
    let mut g = G::new();
    let x = g.input(D::Fp32, &[1, h, w, cin], Quant::None);
    let q = g.internal(D::QdInt8, &[1, h, w, cin], Quant::PerTokenDynamic { num_nonbatch_dims: 3 });
    g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: q, flags: 0 }, None);
    let filter = r.i8s(cout * 9 * cin);
    let scales = r.f32s(cout, 0.001, 0.01);
    let wv = g.constant(D::QcInt8, &[cout, 3, 3, cin], pc(scales.clone(), 0), &i8_bytes(&filter));
    // (4 − 1)·2 + 3 + 1 − 2 = 8 rows, (5 − 1)·2 + 3 + 1 − 2 = 10 columns.
    let y = g.output(D::Fp32, &[1, 8, 10, cout], Quant::None);
    let mut p = conv_params(3, 1, cin as u32, cout as u32, q, wv, None, y);
    (p.subsampling_height, p.subsampling_width, p.adjustment_height, p.adjustment_width) = (2, 2, 1, 1);
    g.node(NodeKind::ConvTranspose2d, NodeParams::Conv(p), None);
    let mut plan = g.compile().unwrap();
    let xv = r.f32s(h * w * cin, -1.0, 2.0);
    let out = f32s(&plan.run_bytes(1, &[&f32_bytes(&xv)]).unwrap()[0]);
    let geom = Conv2dGeom { batch: 1, in_h: h, in_w: w, out_h: 8, out_w: 10, kernel_h: 3, kernel_w: 3, stride_h: 2, stride_w: 2, dilation_h: 1, dilation_w: 1, pad_top: 1, pad_left: 1, groups: 1, group_in: cin, group_out: cout };
    let want = rbuild_kernels::nhwc::qs8::deconv::reference::deconv_qd8(&geom, &xv, &filter, &scales, None, f32::NEG_INFINITY, f32::INFINITY);
    assert!(out.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn weights_only_quantized_fully_connected() {
    let mut g = G::new();
    let x = g.input(D::Fp32, &[2, 4], Quant::None);
    let w = g.constant(D::QcInt8, &[3, 4], pc(vec![0.5, 0.25, 2.0], 0), &i8_bytes(&[1, -2, 3, 4, 5, 6, -7, 8, 0, 1, 0, -1]));
    let y = g.output(D::Fp32, &[2, 3], Quant::None);
    g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: x, filter: w, bias: None, output: y, flags: 0 }, None);
    let mut plan = g.compile().unwrap();
    let out = f32s(&plan.run_bytes(1, &[&f32_bytes(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 2.0])]).unwrap()[0]);
    // Row 0: (1 − 4 + 9 + 16)·0.5, (5 + 12 − 21 + 32)·0.25, (0 + 2 + 0 − 4)·2.
    assert_eq!(&out[..3], &[11.0, 7.0, -4.0]);
    assert_eq!(&out[3..], &[(-1.0 - 1.0 + 8.0) * 0.5, (-5.0 + 3.0 + 16.0) * 0.25, (0.5 - 2.0) * 2.0]);
}

#[test]
fn int8_resize_max_pool_requantize_and_tables() {
    let mut r = Lcg(4);
    let q = pt(0.04, -3);
    let mut g = G::new();
    let x = g.input(D::QInt8, &[1, 4, 5, 3], q.clone());
    let up = g.output(D::QInt8, &[1, 7, 9, 3], q.clone());
    g.node(NodeKind::StaticResizeBilinear2D, NodeParams::ResizeBilinear { new_height: 7, new_width: 9, input: x, output: up, flags: 8 }, None);
    let pooled = g.output(D::QInt8, &[1, 4, 5, 3], q.clone());
    let pool = PoolParams { padding_top: 1, padding_right: 1, padding_bottom: 1, padding_left: 1, pooling_height: 3, pooling_width: 3, stride_height: 2, stride_width: 2, dilation_height: 1, dilation_width: 1, input: up, output: pooled, flags: 64 };
    g.node(NodeKind::MaxPooling2d, NodeParams::Pool(pool), None);
    let req = g.output(D::QInt8, &[1, 4, 5, 3], pt(0.09, 11));
    g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: req, flags: 0 }, None);
    let sig = g.output(D::QInt8, &[1, 4, 5, 3], pt(1.0 / 256.0, -128));
    g.node(NodeKind::Sigmoid, NodeParams::Unary { input: x, output: sig, flags: 0 }, None);
    let mut plan = g.compile().unwrap();
    let xv = r.i8s(60);
    let out = plan.run_bytes(1, &[&i8_bytes(&xv)]).unwrap();
    let as_i8 = |b: &Vec<u8>| b.iter().map(|&v| v as i8).collect::<Vec<_>>();
    let mode = ResizeMode { align_corners: true, tensorflow_legacy: false };
    let up_want = resize_ref::resize_s8(&xv, 1, [4, 5], 3, [7, 9], mode);
    assert_eq!(as_i8(&out[0]), up_want);
    // Max pooling: the largest value of each window (padding excluded).
    let pooled = as_i8(&out[1]);
    for (oy, ox, c) in [(0usize, 0usize, 0usize), (1, 2, 1), (2, 3, 2), (3, 4, 0)] {
        let mut m = i8::MIN;
        for iy in (2 * oy).saturating_sub(1)..(2 * oy + 2).min(7) {
            for ix in (2 * ox).saturating_sub(1)..(2 * ox + 2).min(9) {
                m = m.max(up_want[(iy * 9 + ix) * 3 + c]);
            }
        }
        assert_eq!(pooled[(oy * 5 + ox) * 3 + c], m);
    }
    // Requantize: within a step of the real value; sigmoid by table: exactly the table formula.
    for (i, &v) in xv.iter().enumerate() {
        let real = (v as i32 + 3) as f32 * 0.04;
        // XNNPACK's multiplier is 256·ratio rounded: within a step.
        assert!(((out[2][i] as i8) as f32 - (real / 0.09 + 11.0)).abs() <= 1.0);
        let s = 1.0 / (1.0 + (-real).exp());
        assert!(((out[3][i] as i8) as f32 - (s * 256.0 - 128.0).min(127.0)).abs() <= 1.0);
    }
}

#[test]
fn fully_connected_with_runtime_weights_and_bias() {
    let mut g = G::new();
    let x = g.input(D::Fp32, &[3, 4], Quant::None);
    let w = g.input(D::Fp32, &[4, 2], Quant::None);
    let b = g.input(D::Fp32, &[2], Quant::None);
    let y = g.output(D::Fp32, &[3, 2], Quant::None);
    g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: x, filter: w, bias: Some(b), output: y, flags: 1 }, None);
    let mut plan = g.compile().unwrap();
    let xv: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let wv: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
    let out = f32s(&plan.run_bytes(1, &[&f32_bytes(&xv), &f32_bytes(&wv), &f32_bytes(&[1.0, -1.0])]).unwrap()[0]);
    for i in 0..3 {
        for j in 0..2 {
            let want: f32 = (0..4).map(|t| xv[i * 4 + t] * wv[t * 2 + j]).sum::<f32>() + [1.0, -1.0][j];
            assert_eq!(out[i * 2 + j], want);
        }
    }
}

/// Each malformed graph fails to compile with a message containing the given words.
#[test]
fn malformed_payloads_are_rejected_with_clear_errors() {
    type Build = fn(&mut G);
    let cases: Vec<(&str, Build)> = vec![
        ("both a delegate input and a delegate output", |g| {
            g.value(D::Fp32, &[2], Quant::None, 3, None);
        }),
        ("all three must match", |g| {
            let a = g.input(D::Fp16, &[2], Quant::None);
            let y = g.output(D::Fp32, &[2], Quant::None);
            g.node(NodeKind::Add, NodeParams::Binary { input1: a, input2: a, output: y, flags: 0 }, None);
        }),
        ("exclude each other", |g| {
            let a = g.input(D::Fp32, &[1, 2, 2, 1], Quant::None);
            let y = g.output(D::Fp32, &[1, 4, 4, 1], Quant::None);
            g.node(NodeKind::StaticResizeBilinear2D, NodeParams::ResizeBilinear { new_height: 4, new_width: 4, input: a, output: y, flags: 12 }, None);
        }),
        ("output dims", |g| {
            let a = g.input(D::Fp32, &[1, 2, 2, 1], Quant::None);
            let y = g.output(D::Fp32, &[1, 4, 5, 1], Quant::None);
            g.node(NodeKind::StaticResizeBilinear2D, NodeParams::ResizeBilinear { new_height: 4, new_width: 4, input: a, output: y, flags: 0 }, None);
        }),
        ("must be nonzero", |g| {
            let a = g.input(D::QInt8, &[1, 4, 4, 2], pt(0.1, 0));
            let y = g.output(D::QInt8, &[1, 2, 2, 2], pt(0.1, 0));
            let p = PoolParams { padding_top: 0, padding_right: 0, padding_bottom: 0, padding_left: 0, pooling_height: 2, pooling_width: 2, stride_height: 0, stride_width: 2, dilation_height: 1, dilation_width: 1, input: a, output: y, flags: 0 };
            g.node(NodeKind::MaxPooling2d, NodeParams::Pool(p), None);
        }),
        ("does not follow from the window", |g| {
            let a = g.input(D::QInt8, &[1, 4, 4, 2], pt(0.1, 0));
            let y = g.output(D::QInt8, &[1, 3, 2, 2], pt(0.1, 0));
            let p = PoolParams { padding_top: 0, padding_right: 0, padding_bottom: 0, padding_left: 0, pooling_height: 2, pooling_width: 2, stride_height: 2, stride_width: 2, dilation_height: 1, dilation_width: 1, input: a, output: y, flags: 0 };
            g.node(NodeKind::MaxPooling2d, NodeParams::Pool(p), None);
        }),
        ("same type and quantization", |g| {
            let a = g.input(D::QInt8, &[1, 4, 4, 2], pt(0.1, 0));
            let y = g.output(D::QInt8, &[1, 2, 2, 2], pt(0.2, 0));
            let p = PoolParams { padding_top: 0, padding_right: 0, padding_bottom: 0, padding_left: 0, pooling_height: 2, pooling_width: 2, stride_height: 2, stride_width: 2, dilation_height: 1, dilation_width: 1, input: a, output: y, flags: 0 };
            g.node(NodeKind::MaxPooling2d, NodeParams::Pool(p), None);
        }),
        ("shapes do not match", |g| {
            let a = g.input(D::Fp32, &[2, 3, 4], Quant::None);
            let b = g.input(D::Fp32, &[2, 5, 6], Quant::None);
            let y = g.output(D::Fp32, &[2, 3, 6], Quant::None);
            g.node(NodeKind::BatchMatrixMultiply, NodeParams::Binary { input1: a, input2: b, output: y, flags: 0 }, None);
        }),
        ("XNN_FLAG_TRANSPOSE_B only", |g| {
            let a = g.input(D::Fp32, &[2, 3, 4], Quant::None);
            let b = g.input(D::Fp32, &[2, 4, 6], Quant::None);
            let y = g.output(D::Fp32, &[2, 3, 6], Quant::None);
            g.node(NodeKind::BatchMatrixMultiply, NodeParams::Binary { input1: a, input2: b, output: y, flags: 2 }, None);
        }),
        ("filter dims", |g| {
            let x = g.input(D::QInt8, &[1, 3, 3, 2], pt(0.1, 0));
            let w = g.constant(D::QcInt8, &[4, 2, 2, 3], pc(vec![0.1; 4], 0), &[0; 48]);
            let y = g.output(D::QInt8, &[1, 4, 4, 4], pt(0.1, 0));
            let mut p = conv_params(2, 0, 2, 4, x, w, None, y);
            (p.subsampling_height, p.subsampling_width) = (1, 1);
            g.node(NodeKind::ConvTranspose2d, NodeParams::Conv(p), None);
        }),
        ("num_nonbatch_dims 1", |g| {
            let x = g.input(D::Fp32, &[1, 3, 3, 2], Quant::None);
            let q = g.internal(D::QdInt8, &[1, 3, 3, 2], Quant::PerTokenDynamic { num_nonbatch_dims: 1 });
            g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: q, flags: 0 }, None);
            let w = g.constant(D::QcInt8, &[2, 1, 1, 2], pc(vec![0.1; 2], 0), &[1; 4]);
            let y = g.output(D::Fp32, &[1, 3, 3, 2], Quant::None);
            g.node(NodeKind::Conv2d, NodeParams::Conv(conv_params(1, 0, 2, 2, q, w, None, y)), None);
        }),
        ("zero point in range", |g| {
            let a = g.input(D::QUInt8, &[4], pt(0.1, 300));
            let y = g.output(D::QUInt8, &[4], pt(0.1, 300));
            g.node(NodeKind::Clamp, NodeParams::Unary { input: a, output: y, flags: 0 }, Some((0.0, 1.0)));
        }),
        ("scale ratio", |g| {
            let a = g.input(D::QInt8, &[4], pt(1.0, 0));
            let y = g.output(D::QInt8, &[4], pt(1000.0, 0));
            g.node(NodeKind::Convert, NodeParams::Unary { input: a, output: y, flags: 0 }, None);
        }),
        ("ScaledDotProductAttention", |g| {
            let ids: Vec<u32> = (0..5).map(|_| g.input(D::Fp32, &[1, 2, 2], Quant::None)).collect();
            let y = g.output(D::Fp32, &[1, 2, 2], Quant::None);
            g.node(NodeKind::ScaledDotProductAttention, NodeParams::Sdpa { query: ids[0], key: ids[1], value: ids[2], scale: ids[3], mask: ids[4], output: y }, None);
        }),
        ("float input, filter, bias and output", |g| {
            let x = g.input(D::QInt8, &[2, 4], pt(0.1, 0));
            let w = g.input(D::QInt8, &[3, 4], pt(0.1, 0));
            let y = g.output(D::QInt8, &[2, 3], pt(0.1, 0));
            g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: x, filter: w, bias: None, output: y, flags: 0 }, None);
        }),
        ("same type and quantization", |g| {
            let a = g.input(D::QInt8, &[2, 2], pt(0.1, 0));
            let b = g.input(D::QInt8, &[2, 3], pt(0.2, 0));
            let y = g.output(D::QInt8, &[2, 5], pt(0.1, 0));
            g.node(NodeKind::Concatenate2, NodeParams::Concat { axis: 1, inputs: vec![a, b], output: y }, None);
        }),
        ("does not describe the output dims", |g| {
            let a = g.input(D::Fp32, &[2, 6], Quant::None);
            let y = g.output(D::Fp32, &[3, 4], Quant::None);
            g.node(NodeKind::StaticReshape, NodeParams::Reshape { new_shape: vec![4, 3], input: a, output: y }, None);
        }),
        ("TensorFlow SAME padding", |g| {
            let x = g.input(D::Fp32, &[1, 3, 3, 1], Quant::None);
            let w = g.constant(D::Fp32, &[1, 1, 1, 1], Quant::None, &f32_bytes(&[1.0]));
            let y = g.output(D::Fp32, &[1, 3, 3, 1], Quant::None);
            let mut p = conv_params(1, 0, 1, 1, x, w, None, y);
            p.flags = 4;
            g.node(NodeKind::Conv2d, NodeParams::Conv(p), None);
        }),
        ("qbint4 weights need per-channel-group quantization", |g| {
            let x = g.input(D::Fp32, &[2, 64], Quant::None);
            let q = g.internal(D::QdInt8, &[2, 64], Quant::PerTokenDynamic { num_nonbatch_dims: 1 });
            g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: q, flags: 0 }, None);
            let w = g.constant(D::QbInt4, &[3, 64], pc(vec![0.1; 3], 0), &[0x88; 96]);
            let y = g.output(D::Fp32, &[2, 3], Quant::None);
            g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: q, filter: w, bias: None, output: y, flags: 0 }, None);
        }),
        ("repeats or lies outside", |g| {
            let a = g.input(D::Fp32, &[2], Quant::None);
            let y = g.output(D::Fp32, &[2], Quant::None);
            g.node(NodeKind::Negate, NodeParams::Unary { input: a, output: y, flags: 0 }, None);
        }),
    ];
    for (want, build) in cases {
        let mut g = G::new();
        build(&mut g);
        let mut bytes = g.payload();
        if want == "repeats or lies outside" {
            // `payload` numbers the external ids 0, 1: move the output's past the arguments.
            let decoded = rbuild_runtime::backends::xnnpack::parse_payload(&bytes).unwrap();
            let mut graph = decoded.graph.clone();
            graph.values[1].external_id = Some(7);
            bytes = write_payload(&graph, &decoded.constants.to_vec());
        }
        let none = |_: &str| None;
        match compile_payload(&bytes, &none, DEFAULT_ACTIVATION_LIMIT) {
            Ok(_) => panic!("a payload that should fail ({want}) compiled"),
            Err(e) => assert!(e.contains(want), "expected an error containing {want:?}, got {e:?}"),
        }
    }
}

/// Small graphs of the node kinds and datatypes only this file covers, for the mutation test.
fn mutation_seeds() -> Vec<Vec<u8>> {
    let mut r = Lcg(7);
    let mut seeds = vec![int8_graph(true, &r.i8s(144), &[1, -2, 3, 4]), int8_graph(false, &r.i8s(144), &[0; 4])];
    // Dynamically quantized convolution and transposed convolution, 8-bit resize and pooling,
    // zero-point weights, runtime and weights-only fully connected, half precision.
    for transposed in [false, true] {
        let mut g = G::new();
        let x = g.input(D::Fp32, &[1, 4, 4, 2], Quant::None);
        let q = g.internal(D::QdInt8, &[1, 4, 4, 2], Quant::PerTokenDynamic { num_nonbatch_dims: 3 });
        g.node(NodeKind::Convert, NodeParams::Unary { input: x, output: q, flags: 0 }, None);
        let w = g.constant(D::QcInt8, &[3, 3, 3, 2], pc(vec![0.01, 0.02, 0.03], 0), &i8_bytes(&r.i8s(54)));
        let b = g.constant(D::Fp32, &[3], Quant::None, &f32_bytes(&[0.1, 0.2, 0.3]));
        let side = if transposed { 7 } else { 4 };
        let y = g.output(D::Fp32, &[1, side, side, 3], Quant::None);
        let mut p = conv_params(3, 1, 2, 3, q, w, Some(b), y);
        if transposed {
            (p.subsampling_height, p.subsampling_width) = (2, 2);
        }
        g.node(if transposed { NodeKind::ConvTranspose2d } else { NodeKind::Conv2d }, NodeParams::Conv(p), Some((-1.0, 1.0)));
        seeds.push(g.payload());
    }
    let mut g = G::new();
    let x = g.input(D::QUInt8, &[1, 3, 4, 2], pt(0.1, 130));
    let up = g.internal(D::QUInt8, &[1, 6, 8, 2], pt(0.1, 130));
    g.node(NodeKind::StaticResizeBilinear2D, NodeParams::ResizeBilinear { new_height: 6, new_width: 8, input: x, output: up, flags: 0 }, None);
    let pooled = g.internal(D::QUInt8, &[1, 3, 4, 2], pt(0.1, 130));
    let pool = PoolParams { padding_top: 0, padding_right: 0, padding_bottom: 0, padding_left: 0, pooling_height: 2, pooling_width: 2, stride_height: 2, stride_width: 2, dilation_height: 1, dilation_width: 1, input: up, output: pooled, flags: 0 };
    g.node(NodeKind::MaxPooling2d, NodeParams::Pool(pool), None);
    let w = g.constant(D::QUInt8, &[3, 1, 1, 2], pt(0.02, 120), &[1, 200, 50, 90, 128, 7]);
    let y = g.output(D::QUInt8, &[1, 3, 4, 3], pt(0.3, 128));
    g.node(NodeKind::Conv2d, NodeParams::Conv(conv_params(1, 0, 2, 3, pooled, w, None, y)), None);
    let z = g.output(D::QUInt8, &[1, 3, 4, 3], pt(0.2, 100));
    g.node(NodeKind::Subtract, NodeParams::Binary { input1: y, input2: y, output: z, flags: 0 }, None);
    seeds.push(g.payload());
    let mut g = G::new();
    let x = g.input(D::Fp16, &[3, 4], Quant::None);
    let w = g.input(D::Fp16, &[4, 2], Quant::None);
    let h = g.internal(D::Fp16, &[3, 2], Quant::None);
    g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: x, filter: w, bias: None, output: h, flags: 1 }, None);
    let wq = g.constant(D::QcInt4, &[3, 2], pc(vec![0.5, 0.25, 0.125], 0), &[0x9F, 0x18, 0x07]);
    let xf = g.input(D::Fp32, &[3, 2], Quant::None);
    let y = g.output(D::Fp32, &[3, 3], Quant::None);
    g.node(NodeKind::FullyConnected, NodeParams::FullyConnected { input: xf, filter: wq, bias: None, output: y, flags: 0 }, None);
    let yh = g.output(D::Fp16, &[3, 2], Quant::None);
    g.node(NodeKind::Sigmoid, NodeParams::Unary { input: h, output: yh, flags: 0 }, None);
    seeds.push(g.payload());
    seeds
}

/// The graphs above with one or two fields changed: each fails to compile with a message or
/// compiles and runs on zeros — never a panic.
#[test]
fn changed_payloads_fail_cleanly_or_run() {
    let mut seed = 0x853c49e6748fea9bu64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let rounds = std::env::var("RBUILD_XNNPACK_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let (mut compiled, mut rejected) = (0, 0);
    for seed_payload in mutation_seeds() {
        let decoded = rbuild_runtime::backends::xnnpack::parse_payload(&seed_payload).unwrap();
        assert!(compile_payload(&seed_payload, &|_| None, DEFAULT_ACTIVATION_LIMIT).is_ok(), "the unchanged graph compiles");
        for _ in 0..rounds {
            let mut g = decoded.graph.clone();
            for _ in 0..1 + next() % 2 {
                xnnpack_mutate::mutate_graph(&mut g, &mut next);
            }
            let m = write_payload(&g, decoded.constants);
            let r = std::panic::catch_unwind(|| match compile_payload(&m, &|_| None, 64 << 20) {
                Ok(mut plan) => {
                    let _ = plan.run_in_place(2);
                    true
                }
                Err(e) => {
                    assert!(!e.is_empty());
                    false
                }
            });
            match r {
                Ok(true) => compiled += 1,
                Ok(false) => rejected += 1,
                Err(_) => panic!("graph {g:?}: panicked"),
            }
        }
    }
    eprintln!("changed payloads: {compiled} compiled and ran, {rejected} rejected");
}
