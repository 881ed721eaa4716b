//! MobileNetV3 small and large (Howard et al. 2019) exactly as torchvision's
//! `mobilenet_v3_small()` / `mobilenet_v3_large()` at width 1.0 with dilation off.

use rbuild_export::error::Result;
use rbuild_export::{GraphBuilder, ValueId};

use crate::params::{conv1x1_bias, conv_norm_act, linear, num_classes, Act, Conv, Params};

/// torchvision builds MobileNetV3's BatchNorm2d with eps 0.001.
const BN_EPS: f64 = 1e-3;
const STEM: usize = 16;

/// One bottleneck: torchvision's `InvertedResidualConfig`.
#[derive(Clone, Copy, Debug)]
struct Block {
    cin: usize,
    k: usize,
    expanded: usize,
    cout: usize,
    se: bool,
    hardswish: bool,
    stride: usize,
}

/// The activation codes of torchvision's table: ReLU (RE) or Hardswish (HS).
const RE: bool = false;
const HS: bool = true;

const fn blk(cin: usize, k: usize, expanded: usize, cout: usize, se: bool, hardswish: bool, stride: usize) -> Block {
    Block { cin, k, expanded, cout, se, hardswish, stride }
}

/// torchvision `_mobilenet_v3_conf("mobilenet_v3_small")`.
const SMALL: [Block; 11] = [
    blk(16, 3, 16, 16, true, RE, 2),
    blk(16, 3, 72, 24, false, RE, 2),
    blk(24, 3, 88, 24, false, RE, 1),
    blk(24, 5, 96, 40, true, HS, 2),
    blk(40, 5, 240, 40, true, HS, 1),
    blk(40, 5, 240, 40, true, HS, 1),
    blk(40, 5, 120, 48, true, HS, 1),
    blk(48, 5, 144, 48, true, HS, 1),
    blk(48, 5, 288, 96, true, HS, 2),
    blk(96, 5, 576, 96, true, HS, 1),
    blk(96, 5, 576, 96, true, HS, 1),
];

/// torchvision `_mobilenet_v3_conf("mobilenet_v3_large")`.
const LARGE: [Block; 15] = [
    blk(16, 3, 16, 16, false, RE, 1),
    blk(16, 3, 64, 24, false, RE, 2),
    blk(24, 3, 72, 24, false, RE, 1),
    blk(24, 5, 72, 40, true, RE, 2),
    blk(40, 5, 120, 40, true, RE, 1),
    blk(40, 5, 120, 40, true, RE, 1),
    blk(40, 3, 240, 80, false, HS, 2),
    blk(80, 3, 200, 80, false, HS, 1),
    blk(80, 3, 184, 80, false, HS, 1),
    blk(80, 3, 184, 80, false, HS, 1),
    blk(80, 3, 480, 112, true, HS, 1),
    blk(112, 3, 672, 112, true, HS, 1),
    blk(112, 5, 672, 160, true, HS, 2),
    blk(160, 5, 960, 160, true, HS, 1),
    blk(160, 5, 960, 160, true, HS, 1),
];

/// The final Linear, whose first dimension gives the class count.
pub const CLASSIFIER: &str = "classifier.3.weight";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Small,
    Large,
}

impl Variant {
    fn blocks(self) -> &'static [Block] {
        match self {
            Variant::Small => &SMALL,
            Variant::Large => &LARGE,
        }
    }

    /// Width of the classifier's hidden layer.
    fn last_channel(self) -> usize {
        match self {
            Variant::Small => 1024,
            Variant::Large => 1280,
        }
    }
}

/// torchvision's `_make_divisible`: round to the nearest multiple of `d` (at least `d`), never
/// dropping more than 10%.
pub fn make_divisible(v: usize, d: usize) -> usize {
    let mut n = ((v + d / 2) / d * d).max(d);
    if (n as f64) < 0.9 * v as f64 {
        n += d;
    }
    n
}

/// Appends MobileNetV3 on `input` (float32 NCHW, 3 channels); returns logits [N, num_classes].
pub fn mobilenet_v3(b: &mut GraphBuilder, p: &mut Params, input: ValueId, variant: Variant, num_classes: usize) -> Result<ValueId> {
    let stem = Conv { cin: 3, cout: STEM, k: 3, stride: 2, groups: 1 };
    let mut x = conv_norm_act(b, p, input, "features.0", stem, BN_EPS, Act::Hardswish)?;
    let blocks = variant.blocks();
    for (i, cfg) in blocks.iter().enumerate() {
        x = inverted_residual(b, p, x, &format!("features.{}.block", i + 1), cfg)?;
    }
    let last_in = blocks[blocks.len() - 1].cout;
    let last_conv = 6 * last_in;
    let index = blocks.len() + 1;
    let head = Conv::pointwise(last_in, last_conv);
    x = conv_norm_act(b, p, x, &format!("features.{index}"), head, BN_EPS, Act::Hardswish)?;
    x = b.adaptive_avg_pool2d(x, [1, 1])?;
    x = b.flatten(x, 1, -1)?;
    let hidden = variant.last_channel();
    x = linear(b, p, x, "classifier.0", last_conv, hidden)?;
    x = b.hardswish(x)?;
    x = b.dropout(x, 0.2)?;
    linear(b, p, x, "classifier.3", hidden, num_classes)
}

pub fn mobilenet_v3_small(b: &mut GraphBuilder, p: &mut Params, input: ValueId, num_classes: usize) -> Result<ValueId> {
    mobilenet_v3(b, p, input, Variant::Small, num_classes)
}

pub fn mobilenet_v3_large(b: &mut GraphBuilder, p: &mut Params, input: ValueId, num_classes: usize) -> Result<ValueId> {
    mobilenet_v3(b, p, input, Variant::Large, num_classes)
}

/// [`mobilenet_v3`] with the class count read from the classifier weight.
pub fn build(b: &mut GraphBuilder, p: &mut Params, input: ValueId, variant: Variant) -> Result<ValueId> {
    let n = num_classes(p, CLASSIFIER)?;
    mobilenet_v3(b, p, input, variant, n)
}

/// torchvision's V3 `InvertedResidual`: [1x1 expand] → kxk depthwise → [squeeze-excitation] →
/// 1x1 linear projection, plus a skip connection when the shape is unchanged. Submodules are
/// numbered in order under `prefix` (`features.{i}.block`), so absent ones shift the rest.
fn inverted_residual(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, cfg: &Block) -> Result<ValueId> {
    let act = if cfg.hardswish { Act::Hardswish } else { Act::Relu };
    let mut y = x;
    let mut k = 0;
    if cfg.expanded != cfg.cin {
        let expand = Conv::pointwise(cfg.cin, cfg.expanded);
        y = conv_norm_act(b, p, y, &format!("{prefix}.0"), expand, BN_EPS, act)?;
        k = 1;
    }
    let dw = Conv::depthwise(cfg.expanded, cfg.k, cfg.stride);
    y = conv_norm_act(b, p, y, &format!("{prefix}.{k}"), dw, BN_EPS, act)?;
    k += 1;
    if cfg.se {
        y = squeeze_excitation(b, p, y, &format!("{prefix}.{k}"), cfg.expanded)?;
        k += 1;
    }
    let project = Conv::pointwise(cfg.expanded, cfg.cout);
    y = conv_norm_act(b, p, y, &format!("{prefix}.{k}"), project, BN_EPS, Act::None)?;
    if cfg.stride == 1 && cfg.cin == cfg.cout {
        // torchvision: `result += input`.
        y = b.add(y, x)?;
    }
    Ok(y)
}

/// torchvision's `SqueezeExcitation` with a hardsigmoid gate: per-channel scale from the
/// global average, applied as `scale * input`.
fn squeeze_excitation(b: &mut GraphBuilder, p: &mut Params, x: ValueId, prefix: &str, c: usize) -> Result<ValueId> {
    let squeeze = make_divisible(c / 4, 8);
    let s = b.adaptive_avg_pool2d(x, [1, 1])?;
    let s = conv1x1_bias(b, p, s, &format!("{prefix}.fc1"), c, squeeze)?;
    let s = b.relu(s)?;
    let s = conv1x1_bias(b, p, s, &format!("{prefix}.fc2"), squeeze, c)?;
    let s = b.hardsigmoid(s)?;
    b.mul(s, x)
}
