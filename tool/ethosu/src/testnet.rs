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
    g.op(
        OpKind::DepthwiseConv2d { stride: [1, 1], dilation: [1, 1], padding: Padding::Same, depth_multiplier: 1, act: Activation::Relu6 },
        &[y1, dw, db],
        &[y2],
    );

    // residual add
    let s_a = 12.0 / 255.0;
    let y3 = g.activation("add.out", &[1, h, w, c], s_a, -128);
    g.op(OpKind::Add { act: Activation::None }, &[y1, y2], &[y3]);

    // global pooling
    let y4 = g.activation("pool.out", &[1, 1, 1, c], s_a, -128);
    match pooling {
        Pooling::AveragePool => {
            g.op(OpKind::AveragePool2d { filter: [h, w], stride: [1, 1], padding: Padding::Valid, act: Activation::None }, &[y3], &[y4])
        }
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

/// A MobileNetV2 (width 1.0) feature extractor and classifier with synthetic int8 weights,
/// laid out as TFLite does: conv 3×3/2 (32) → 17 inverted-residual blocks (1×1 expand + ReLU6,
/// depthwise 3×3 + ReLU6, 1×1 project, residual ADD when stride 1 and channels match) →
/// conv 1×1 (1280) + ReLU6 → global average (MEAN or AVERAGE_POOL_2D) → RESHAPE →
/// FULLY_CONNECTED (`classes`). Input [1, hw, hw, 3]. SAME padding throughout.
pub fn mobilenet_v2(hw: i32, classes: i32, pooling: Pooling) -> Int8Graph {
    let mut g = Int8Graph::default();
    let mut seed = 100u32;
    let s_act = 6.0 / 255.0;
    let x = g.activation("input", &[1, hw, hw, 3], 1.0 / 128.0, 0);
    let mut cur = x;
    let mut cur_scale = 1.0 / 128.0;
    let mut cur_c = 3;
    let mut h = hw;

    let mut conv = |g: &mut Int8Graph,
                    name: &str,
                    inp: usize,
                    in_scale: f32,
                    cin: i32,
                    cout: i32,
                    k: i32,
                    stride: i32,
                    h: i32,
                    act: Activation,
                    dw: bool|
     -> (usize, i32) {
        seed += 1;
        let oh = (h + stride - 1) / stride;
        let (wshape, n, axis) =
            if dw { (vec![1, k, k, cout], (k * k * cout) as usize, 3) } else { (vec![cout, k, k, cin], (cout * k * k * cin) as usize, 0) };
        let ws: Vec<f32> = (0..cout).map(|c| 0.002 + 0.00001 * (c % 17) as f32).collect();
        let w = g.weight(&format!("{name}.weight"), &wshape, &pseudo_i8(seed, n), ws.clone(), axis);
        let b = g.bias(&format!("{name}.bias"), &vec![0; cout as usize], ws.iter().map(|s| s * in_scale).collect());
        let out_scale = if act == Activation::None { 8.0 / 255.0 } else { s_act };
        let zp = if act == Activation::None { 0 } else { -128 };
        let y = g.activation(&format!("{name}.out"), &[1, oh, oh, cout], out_scale, zp);
        let kind = if dw {
            OpKind::DepthwiseConv2d { stride: [stride, stride], dilation: [1, 1], padding: Padding::Same, depth_multiplier: 1, act }
        } else {
            OpKind::Conv2d { stride: [stride, stride], dilation: [1, 1], padding: Padding::Same, act }
        };
        g.op(kind, &[inp, w, b], &[y]);
        (y, oh)
    };

    let (y, oh) = conv(&mut g, "features.0", cur, cur_scale, cur_c, 32, 3, 2, h, Activation::Relu6, false);
    cur = y;
    cur_scale = s_act;
    cur_c = 32;
    h = oh;
    let cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];
    let mut block = 1;
    for (t, c, n, s) in cfg {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let name = format!("features.{block}");
            let inp = cur;
            let inp_scale = cur_scale;
            let mut hid = cur;
            let mut hid_scale = cur_scale;
            let hidden = cur_c * t;
            if t != 1 {
                let (y, _) = conv(&mut g, &format!("{name}.expand"), hid, hid_scale, cur_c, hidden, 1, 1, h, Activation::Relu6, false);
                hid = y;
                hid_scale = s_act;
            }
            let (y, oh) = conv(&mut g, &format!("{name}.dw"), hid, hid_scale, hidden, hidden, 3, stride, h, Activation::Relu6, true);
            let (y, _) = conv(&mut g, &format!("{name}.project"), y, s_act, hidden, c, 1, 1, oh, Activation::None, false);
            let mut out = y;
            let mut out_scale = 8.0 / 255.0;
            if stride == 1 && cur_c == c {
                let sum = g.activation(&format!("{name}.add"), &[1, oh, oh, c], 16.0 / 255.0, 0);
                g.op(OpKind::Add { act: Activation::None }, &[inp, y], &[sum]);
                out = sum;
                out_scale = 16.0 / 255.0;
                let _ = inp_scale;
            }
            cur = out;
            cur_scale = out_scale;
            cur_c = c;
            h = oh;
            block += 1;
        }
    }
    let (y, _) = conv(&mut g, "features.18", cur, cur_scale, cur_c, 1280, 1, 1, h, Activation::Relu6, false);
    let pooled = g.activation("pool.out", &[1, 1, 1, 1280], s_act, -128);
    match pooling {
        Pooling::AveragePool => {
            g.op(OpKind::AveragePool2d { filter: [h, h], stride: [1, 1], padding: Padding::Valid, act: Activation::None }, &[y], &[pooled])
        }
        Pooling::Mean => {
            let axes = g.int32_const("pool.axes", &[1, 2]);
            g.op(OpKind::Mean { keep_dims: true }, &[y, axes], &[pooled]);
        }
    }
    let flat = g.activation("flatten.out", &[1, 1280], s_act, -128);
    g.op(OpKind::Reshape, &[pooled], &[flat]);
    let fs: Vec<f32> = (0..classes).map(|c| 0.001 + 0.00001 * (c % 13) as f32).collect();
    let fw = g.weight("classifier.weight", &[classes, 1280], &pseudo_i8(7, (classes * 1280) as usize), fs.clone(), 0);
    let fb = g.bias("classifier.bias", &vec![0; classes as usize], fs.iter().map(|s| s * s_act).collect());
    let logits = g.activation("logits", &[1, classes], 0.1, 0);
    g.op(OpKind::FullyConnected { act: Activation::None }, &[flat, fw, fb], &[logits]);
    g.inputs = vec![x];
    g.outputs = vec![logits];
    g
}
