//! MobileNetV2 (Sandler et al. 2018) exactly as torchvision's `mobilenet_v2()` at width 1.0:
//! same layers, same parameter names, same arithmetic order.

use rbuild_export::error::Result;
use rbuild_export::{GraphBuilder, ValueId};

use crate::params::{conv_bn, conv_norm_act, linear, num_classes, Act, Conv, Params};

/// torchvision's BatchNorm2d default.
const BN_EPS: f64 = 1e-5;
const STEM: usize = 32;
const LAST: usize = 1280;

/// Inverted-residual stages: (expand ratio t, output channels c, repeats n, first stride s).
const STAGES: [(usize, usize, usize, usize); 7] =
    [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];

/// The classifier's Linear weight, whose first dimension gives the class count.
pub const CLASSIFIER: &str = "classifier.1.weight";

/// Appends MobileNetV2 on `input` (float32 NCHW, 3 channels); returns logits [N, num_classes].
pub fn mobilenet_v2(b: &mut GraphBuilder, p: &mut Params, input: ValueId, num_classes: usize) -> Result<ValueId> {
    let stem = Conv { cin: 3, cout: STEM, k: 3, stride: 2, groups: 1 };
    let mut x = conv_norm_act(b, p, input, "features.0", stem, BN_EPS, Act::Relu6)?;
    let (mut cin, mut index) = (STEM, 1);
    for (t, c, n, s) in STAGES {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            x = inverted_residual(b, p, x, &format!("features.{index}.conv"), cin, c, stride, t)?;
            cin = c;
            index += 1;
        }
    }
    let head = Conv::pointwise(cin, LAST);
    x = conv_norm_act(b, p, x, &format!("features.{index}"), head, BN_EPS, Act::Relu6)?;
    x = b.adaptive_avg_pool2d(x, [1, 1])?;
    x = b.flatten(x, 1, -1)?;
    x = b.dropout(x, 0.2)?;
    linear(b, p, x, "classifier.1", LAST, num_classes)
}

/// [`mobilenet_v2`] with the class count read from the classifier weight.
pub fn build(b: &mut GraphBuilder, p: &mut Params, input: ValueId) -> Result<ValueId> {
    let n = num_classes(p, CLASSIFIER)?;
    mobilenet_v2(b, p, input, n)
}

/// torchvision's `InvertedResidual`: [1x1 expand] → 3x3 depthwise → 1x1 linear projection,
/// with a skip connection when the shape is unchanged. `prefix` is `features.{i}.conv`.
#[allow(clippy::too_many_arguments)]
fn inverted_residual(
    b: &mut GraphBuilder,
    p: &mut Params,
    x: ValueId,
    prefix: &str,
    cin: usize,
    cout: usize,
    stride: usize,
    t: usize,
) -> Result<ValueId> {
    let hidden = cin * t;
    let mut y = x;
    // Submodule indices inside `conv` shift by one when there is no expansion layer.
    let mut k = 0;
    if t != 1 {
        y = conv_norm_act(b, p, y, &format!("{prefix}.0"), Conv::pointwise(cin, hidden), BN_EPS, Act::Relu6)?;
        k = 1;
    }
    let dw = Conv::depthwise(hidden, 3, stride);
    y = conv_norm_act(b, p, y, &format!("{prefix}.{k}"), dw, BN_EPS, Act::Relu6)?;
    let project = Conv::pointwise(hidden, cout);
    y = conv_bn(b, p, y, (&format!("{prefix}.{}", k + 1), &format!("{prefix}.{}", k + 2)), project, BN_EPS, Act::None)?;
    if stride == 1 && cin == cout {
        y = b.add(x, y)?;
    }
    Ok(y)
}
