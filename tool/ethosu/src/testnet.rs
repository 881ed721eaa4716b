//! Small int8 networks with deterministic weights, for tests and examples:
//! conv 3×3 → depthwise 3×3 → add (residual) → average pool (or mean) → reshape → fully connected.

use crate::graph::{Activation, Int8Graph, OpKind, Padding};

/// Deterministic values in [-127, 127] (a 32-bit LCG).
fn pseudo_i8(seed: u32, n: usize) -> Vec<i8> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 24) as i32 - 128).clamp(-127, 127) as i8
        })
        .collect()
}

/// Which reduction ends the feature extractor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    AveragePool,
    Mean,
}

/// Input [1, h, w, cin] int8 → output [1, classes] int8.
pub fn conv_dw_add_pool_fc(h: i32, w: i32, cin: i32, c: i32, classes: i32, pooling: Pooling) -> Int8Graph {
    let mut g = Int8Graph::default();
    let s_in = 0.02f32;
    let x = g.activation("input", &[1, h, w, cin], s_in, -1);

    // conv 3x3, cin → c, ReLU6
    let wsc: Vec<f32> = (0..c).map(|k| 0.004 + 0.0005 * k as f32).collect();
    let cw = g.weight("conv.weight", &[c, 3, 3, cin], &pseudo_i8(1, (c * 9 * cin) as usize), wsc.clone(), 0);
    let cb_data: Vec<i32> = (0..c).map(|k| (k * 37 % 200) - 100).collect();
    let cb = g.bias("conv.bias", &cb_data, wsc.iter().map(|s| s * s_in).collect());
    let s_c = 6.0 / 255.0;
    let y1 = g.activation("conv.out", &[1, h, w, c], s_c, -128);
    g.op(OpKind::Conv2d { stride: [1, 1], dilation: [1, 1], padding: Padding::Same, act: Activation::Relu6 }, &[x, cw, cb], &[y1]);

    // depthwise 3x3 on c channels, ReLU6
    let dsc: Vec<f32> = (0..c).map(|k| 0.01 + 0.001 * k as f32).collect();
    let dw = g.weight("dw.weight", &[1, 3, 3, c], &pseudo_i8(2, (9 * c) as usize), dsc.clone(), 3);
    let db = g.bias("dw.bias", &vec![0; c as usize], dsc.iter().map(|s| s * s_c).collect());
    let y2 = g.activation("dw.out", &[1, h, w, c], s_c, -128);
    g.op(OpKind::DepthwiseConv2d { stride: [1, 1], dilation: [1, 1], padding: Padding::Same, depth_multiplier: 1, act: Activation::Relu6 }, &[y1, dw, db], &[y2]);

    // residual add
    let s_a = 12.0 / 255.0;
    let y3 = g.activation("add.out", &[1, h, w, c], s_a, -128);
    g.op(OpKind::Add { act: Activation::None }, &[y1, y2], &[y3]);

    // global pooling
    let y4 = g.activation("pool.out", &[1, 1, 1, c], s_a, -128);
    match pooling {
        Pooling::AveragePool => g.op(OpKind::AveragePool2d { filter: [h, w], stride: [1, 1], padding: Padding::Valid, act: Activation::None }, &[y3], &[y4]),
        Pooling::Mean => {
            let axes = g.int32_const("mean.axes", &[1, 2]);
            g.op(OpKind::Mean { keep_dims: true }, &[y3, axes], &[y4]);
        }
    }
    let y5 = g.activation("flatten.out", &[1, c], s_a, -128);
    g.op(OpKind::Reshape, &[y4], &[y5]);

    // fully connected c → classes
    let fsc: Vec<f32> = (0..classes).map(|k| 0.003 + 0.0002 * k as f32).collect();
    let fw = g.weight("fc.weight", &[classes, c], &pseudo_i8(3, (classes * c) as usize), fsc.clone(), 0);
    let fb = g.bias("fc.bias", &(0..classes).map(|k| k * 10 - 50).collect::<Vec<_>>(), fsc.iter().map(|s| s * s_a).collect());
    let y6 = g.activation("logits", &[1, classes], 0.1, 0);
    g.op(OpKind::FullyConnected { act: Activation::None }, &[y5, fw, fb], &[y6]);

    g.inputs = vec![x];
    g.outputs = vec![y6];
    g
}
