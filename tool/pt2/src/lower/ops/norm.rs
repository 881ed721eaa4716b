//! Normalizations: batch norm (inference with running statistics, or training statistics of
//! the batch), layer norm, group norm and instance norm (batch norm over N·C channels).

use rbuild_export::graph::{Arg, Dim, ValueId};

use super::nn::first_or_all;
use super::{one, Call, Cx, OpResult};

/// `batch_norm`, `_native_batch_norm_legit_no_training` and `_native_batch_norm_legit`: running
/// statistics at inference; training mode normalizes by the batch's own statistics
/// (`_native_batch_norm_legit.no_stats`), which needs no running statistics to update.
pub(super) fn batch_norm(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let training = match c.key {
        "aten::batch_norm" | "aten::_native_batch_norm_legit" => cx.bool(a, "training")?,
        _ => false,
    };
    let (mean, var) = (cx.opt_tensor(a, "running_mean")?, cx.opt_tensor(a, "running_var")?);
    let opt = |name| cx.opt_tensor(a, name).map(|t| t.map_or(Arg::None, Arg::Tensor));
    let (weight, bias) = (opt("weight")?, opt("bias")?);
    let (momentum, eps) = (cx.float(a, "momentum")?, cx.float(a, "eps")?);
    let composite = c.key == "aten::batch_norm";
    let outs = match (training, mean, var) {
        (true, None, None) => {
            let args = vec![Arg::Tensor(x), weight, bias, Arg::Bool(true), Arg::Float(momentum), Arg::Float(eps)];
            cx.call("aten::_native_batch_norm_legit.no_stats", args)?
        }
        (true, _, _) => {
            return Err("batch norm in training mode updates its running statistics in place, which an inference program \
                        does not do: export the module after .eval(), or with track_running_stats=False"
                .into())
        }
        (false, Some(mean), Some(var)) => {
            let args = vec![Arg::Tensor(x), weight, bias, Arg::Tensor(mean), Arg::Tensor(var), Arg::Float(momentum), Arg::Float(eps)];
            cx.call("aten::_native_batch_norm_legit_no_training", args)?
        }
        (false, _, _) => return Err("batch norm in eval mode needs running_mean and running_var".into()),
    };
    Ok(first_or_all(composite, outs))
}

/// `layer_norm` (the result) and `native_layer_norm` (with mean and rstd).
pub(super) fn layer_norm(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let shape = cx.ints(a, "normalized_shape")?;
    let opt = |name| cx.opt_tensor(a, name).map(|t| t.map_or(Arg::None, Arg::Tensor));
    let (weight, bias) = (opt("weight")?, opt("bias")?);
    let eps = cx.float(a, "eps")?;
    let outs = cx.call("aten::native_layer_norm", vec![Arg::Tensor(x), Arg::Ints(shape), weight, bias, Arg::Float(eps)])?;
    Ok(first_or_all(c.key == "aten::layer_norm", outs))
}

/// The fixed sizes of `x`.
fn sizes(cx: &Cx, x: ValueId, what: &str) -> Result<Vec<usize>, String> {
    cx.meta(x).sizes().ok_or_else(|| format!("{what} needs fixed sizes, got {:?}", cx.meta(x).shape))
}

/// `group_norm(input, num_groups, weight, bias, eps)`: `native_group_norm` over N, C and the
/// elements per channel.
pub(super) fn group_norm(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let s = sizes(cx, x, "group_norm")?;
    if s.len() < 2 {
        return Err(format!("group_norm needs an input [N, C, …], got {s:?}"));
    }
    let hxw: usize = s[2..].iter().product();
    let opt = |name| cx.opt_tensor(a, name).map(|t| t.map_or(Arg::None, Arg::Tensor));
    let (weight, bias) = (opt("weight")?, opt("bias")?);
    let (groups, eps) = (cx.int(a, "num_groups")?, cx.float(a, "eps")?);
    let args = vec![
        Arg::Tensor(x),
        weight,
        bias,
        Arg::Int(s[0] as i64),
        Arg::Int(s[1] as i64),
        Arg::Int(hxw as i64),
        Arg::Int(groups),
        Arg::Float(eps),
    ];
    let outs = cx.call("aten::native_group_norm", args)?;
    Ok(first_or_all(true, outs))
}

/// `instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
/// eps)`: as ATen computes it, batch norm of the input viewed as [1, N·C, …] with the
/// per-channel tensors repeated N times, viewed back.
pub(super) fn instance_norm(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let s = sizes(cx, x, "instance_norm")?;
    if s.len() < 2 {
        return Err(format!("instance_norm needs an input [N, C, …], got {s:?}"));
    }
    let (n, channels) = (s[0], s[0] * s[1]);
    let mut flat: Vec<Dim> = vec![Dim::Fixed(1), Dim::Fixed(channels)];
    flat.extend(s[2..].iter().map(|&d| Dim::Fixed(d)));
    let xv = cx.view(x, &flat)?;
    let mut repeated = |name: &str| -> Result<Arg, String> {
        Ok(match cx.opt_tensor(a, name)? {
            Some(t) if n == 1 => Arg::Tensor(t),
            Some(t) => Arg::Tensor(cx.call1("aten::repeat", vec![Arg::Tensor(t), Arg::Ints(vec![n as i64])])?),
            None => Arg::None,
        })
    };
    let (weight, bias) = (repeated("weight")?, repeated("bias")?);
    let (mean, var) = (repeated("running_mean")?, repeated("running_var")?);
    let (momentum, eps) = (cx.float(a, "momentum")?, cx.float(a, "eps")?);
    let y = if cx.bool(a, "use_input_stats")? {
        let args = vec![Arg::Tensor(xv), weight, bias, Arg::Bool(true), Arg::Float(momentum), Arg::Float(eps)];
        cx.call("aten::_native_batch_norm_legit.no_stats", args)?[0]
    } else {
        let (Arg::Tensor(_), Arg::Tensor(_)) = (&mean, &var) else {
            return Err("instance_norm without use_input_stats needs running_mean and running_var".into());
        };
        let args = vec![Arg::Tensor(xv), weight, bias, mean, var, Arg::Float(momentum), Arg::Float(eps)];
        cx.call("aten::_native_batch_norm_legit_no_training", args)?[0]
    };
    let shape = cx.meta(x).shape.clone();
    one(cx.view(y, &shape)?)
}
