//! Batch-norm folding: an inference batch norm right after a convolution with constant weights
//! scales each output channel by `gamma / sqrt(var + eps)` and shifts it, which the
//! convolution's weight and bias can absorb. The batch norm node disappears.
//!
//! Folding needs: the convolution's output read only by the batch norm, constant f32 weight,
//! bias (or none), running stats, gamma and beta (or none), a non-transposed convolution, and
//! the batch norm's two extra outputs unused. Anything else is left alone.

use super::{f32_bytes, f32s, float_arg, opt_tensor_arg, tensor_arg, Renames};
use crate::error::Result;
use crate::graph::{Arg, ConstData, Graph, Origin, ValueId};

const BATCH_NORM: &str = "aten::_native_batch_norm_legit_no_training";

/// A batch norm that can be folded, and what folding reads.
struct Fold {
    conv: usize,
    conv_out: ValueId,
    bn_out: ValueId,
    weight: ValueId,
    bias: Option<ValueId>,
    gamma: Option<ValueId>,
    beta: Option<ValueId>,
    mean: ValueId,
    var: ValueId,
    eps: f64,
}

/// Folds every foldable batch norm; returns how many were folded.
pub fn fold_batch_norms(g: &mut Graph) -> Result<usize> {
    let producers = g.producers();
    let uses = g.use_counts();
    let mut renames = Renames::default();
    let mut remove = vec![false; g.nodes.len()];
    for bn in 0..g.nodes.len() {
        if g.nodes[bn].op != BATCH_NORM {
            continue;
        }
        let Some(f) = foldable(g, bn, &producers, &uses)? else { continue };
        let Some((w, b)) = folded_params(g, &f) else { continue };
        let wname = format!("{}.bn_folded", g.values[f.weight].name);
        let bname = format!("{}.bn_folded_bias", g.values[f.weight].name);
        let wmeta = g.meta(f.weight).clone();
        let bmeta = crate::graph::TensorMeta::fixed(wmeta.dtype, &[b.len()]);
        let w = g.add_value(wmeta, Origin::Const(ConstData::owned(f32_bytes(&w))), wname);
        let b = g.add_value(bmeta, Origin::Const(ConstData::owned(f32_bytes(&b))), bname);
        let conv = &mut g.nodes[f.conv];
        conv.args[1] = Arg::Tensor(w);
        conv.args[2] = Arg::Tensor(b);
        renames.add(f.bn_out, f.conv_out);
        remove[bn] = true;
    }
    let folded = remove.iter().filter(|r| **r).count();
    let mut r = remove.into_iter();
    g.nodes.retain(|_| !r.next().unwrap_or(false));
    renames.apply(g);
    Ok(folded)
}

fn foldable(g: &Graph, bn: usize, producers: &[Option<usize>], uses: &[usize]) -> Result<Option<Fold>> {
    let node = &g.nodes[bn];
    let [bn_out, extra1, extra2] = node.outputs[..] else { return Ok(None) };
    if uses[extra1] != 0 || uses[extra2] != 0 {
        return Ok(None);
    }
    let x = tensor_arg(node, 0)?;
    let Some(conv) = producers[x] else { return Ok(None) };
    let cn = &g.nodes[conv];
    if cn.op != "aten::convolution" || cn.outputs != [x] || uses[x] != 1 || cn.args.get(6) != Some(&Arg::Bool(false)) {
        return Ok(None);
    }
    let f = Fold {
        conv,
        conv_out: x,
        bn_out,
        weight: tensor_arg(cn, 1)?,
        bias: opt_tensor_arg(cn, 2)?,
        gamma: opt_tensor_arg(node, 1)?,
        beta: opt_tensor_arg(node, 2)?,
        mean: tensor_arg(node, 3)?,
        var: tensor_arg(node, 4)?,
        eps: float_arg(node, 6)?,
    };
    let params = [Some(f.weight), f.bias, f.gamma, f.beta, Some(f.mean), Some(f.var)];
    let all_const_f32 = params
        .iter()
        .flatten()
        .all(|&v| g.constant(v).is_some() && g.meta(v).dtype == rbuild_runtime::ScalarType::Float);
    Ok(all_const_f32.then_some(f))
}

/// The folded weight and bias, computed in f64; None when the parameter sizes disagree.
fn folded_params(g: &Graph, f: &Fold) -> Option<(Vec<f32>, Vec<f32>)> {
    let read = |v: ValueId| g.constant(v).map(|c| f32s(&c.bytes()));
    let (w, mean, var) = (read(f.weight)?, read(f.mean)?, read(f.var)?);
    let channels = mean.len();
    let per_channel_param = |v: Option<ValueId>, default: f32| match v {
        Some(v) => read(v).filter(|p| p.len() == channels),
        None => Some(vec![default; channels]),
    };
    let (bias, gamma, beta) = (per_channel_param(f.bias, 0.0)?, per_channel_param(f.gamma, 1.0)?, per_channel_param(f.beta, 0.0)?);
    if channels == 0 || var.len() != channels || w.len() % channels != 0 {
        return None;
    }
    let per = w.len() / channels;
    let scale: Vec<f64> = (0..channels).map(|c| gamma[c] as f64 / (var[c] as f64 + f.eps).sqrt()).collect();
    let w = w.iter().enumerate().map(|(i, &v)| (v as f64 * scale[i / per]) as f32).collect();
    let b = (0..channels).map(|c| ((bias[c] as f64 - mean[c] as f64) * scale[c] + beta[c] as f64) as f32).collect();
    Some((w, b))
}
