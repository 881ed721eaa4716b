//! Shape and dtype inference of ops that create tensors (`full`, `arange`, …) or convert them
//! (`_to_copy`). Their functional schemas carry dtype/layout/device; the out variants ExecuTorch
//! runs take the dtype from the output tensor and are CPU-strided by construction.

use rbuild_runtime::{Scalar, ScalarType};

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::promote::number_dtype;
use crate::shape::{flag, opt_dtype, opt_ints, scalar, size_dims, sym_of_value, tensor};

/// Output metas of the creation/conversion `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::full" => factory(op, args, 2).and_then(|dtype| {
            let fill = scalar(op, args, 1)?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(number_dtype(fill)), size_dims(g, op, args, 0)?)])
        }),
        "aten::ones" | "aten::zeros" => factory(op, args, 1)
            .and_then(|dtype| Ok(vec![TensorMeta::new(dtype.unwrap_or(ScalarType::Float), size_dims(g, op, args, 0)?)])),
        "aten::scalar_tensor" => factory(op, args, 1).and_then(|dtype| {
            scalar(op, args, 0)?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(ScalarType::Float), vec![])])
        }),
        "aten::arange.start_step" => factory(op, args, 3).and_then(|dtype| arange(g, op, args, dtype)),
        "aten::arange" => factory(op, args, 1).and_then(|dtype| {
            let end = args.first().cloned().ok_or_else(|| shape_err(op, "needs an end"))?;
            arange(g, op, &[Arg::Scalar(Scalar::Int(0)), end, Arg::Scalar(Scalar::Int(1))], dtype)
        }),
        "aten::empty.memory_format" => factory(op, args, 1).and_then(|dtype| {
            memory_format(op, args, 5)?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(ScalarType::Float), size_dims(g, op, args, 0)?)])
        }),
        "aten::rand" | "aten::randn" => factory(op, args, 1).and_then(|dtype| {
            let dtype = dtype.unwrap_or(ScalarType::Float);
            crate::shape::require_float(op, &TensorMeta::new(dtype, vec![]))?;
            Ok(vec![TensorMeta::new(dtype, size_dims(g, op, args, 0)?)])
        }),
        "aten::randperm" => factory(op, args, 1).and_then(|dtype| {
            let n = match args.first() {
                Some(Arg::Int(n)) => Dim::Fixed(usize::try_from(*n).map_err(|_| shape_err(op, format!("n {n} is negative")))?),
                Some(Arg::SymInt(v)) => Dim::Sym(sym_of_value(g, *v).ok_or_else(|| shape_err(op, "n is a run-time value that is not a known dimension"))?),
                other => return Err(shape_err(op, format!("n must be an int, got {other:?}"))),
            };
            Ok(vec![TensorMeta::new(dtype.unwrap_or(ScalarType::Long), vec![n])])
        }),
        "aten::full_like" => factory(op, args, 2).and_then(|dtype| {
            scalar(op, args, 1)?;
            memory_format(op, args, 6)?;
            let x = tensor(g, op, args, 0)?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(x.dtype), x.shape.clone())])
        }),
        "aten::_to_copy" => factory(op, args, 1).and_then(|dtype| {
            blocking(op, args, 5)?;
            memory_format(op, args, 6)?;
            let x = tensor(g, op, args, 0)?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(x.dtype), x.shape.clone())])
        }),
        "dim_order_ops::_to_dim_order_copy" => factory(op, args, 1).and_then(|dtype| {
            blocking(op, args, 5)?;
            let x = tensor(g, op, args, 0)?;
            contiguous_dim_order(op, args, 6, x.rank())?;
            Ok(vec![TensorMeta::new(dtype.unwrap_or(x.dtype), x.shape.clone())])
        }),
        "dim_order_ops::_clone_dim_order" => tensor(g, op, args, 0).and_then(|x| {
            blocking(op, args, 1)?;
            contiguous_dim_order(op, args, 2, x.rank())?;
            Ok(vec![x.clone()])
        }),
        _ => return None,
    };
    Some(r)
}

/// Checks the tensor options `dtype?, layout?, device?, pin_memory?` starting at argument
/// `first`; returns the dtype. Layout and device must be absent (strided CPU memory).
fn factory(op: &str, args: &[Arg], first: usize) -> Result<Option<ScalarType>> {
    let dtype = opt_dtype(op, args, first)?;
    for (i, name) in [(first + 1, "layout"), (first + 2, "device")] {
        if !matches!(args.get(i), Some(Arg::None)) {
            return Err(shape_err(op, format!("{name} must be None (strided CPU tensors only), got {:?}", args.get(i))));
        }
    }
    if !matches!(args.get(first + 3), Some(Arg::None | Arg::Bool(false))) {
        return Err(shape_err(op, format!("pin_memory must be None or false, got {:?}", args.get(first + 3))));
    }
    Ok(dtype)
}

/// `non_blocking` must be false: copies here are synchronous.
fn blocking(op: &str, args: &[Arg], i: usize) -> Result<()> {
    if flag(op, args, i)? {
        return Err(shape_err(op, "non_blocking copies are not supported"));
    }
    Ok(())
}

/// `MemoryFormat?`: None, contiguous (0) or preserve (1) — outputs here are contiguous.
fn memory_format(op: &str, args: &[Arg], i: usize) -> Result<()> {
    match args.get(i) {
        Some(Arg::None | Arg::Int(0) | Arg::Int(1)) => Ok(()),
        other => Err(shape_err(op, format!("memory_format must be None, contiguous or preserve, got {other:?}"))),
    }
}

fn contiguous_dim_order(op: &str, args: &[Arg], i: usize, rank: usize) -> Result<()> {
    match opt_ints(op, args, i)? {
        Some(order) if !order.iter().copied().eq(0..rank as i64) => {
            Err(shape_err(op, format!("dim_order {order:?} is not contiguous (only contiguous layouts are emitted)")))
        }
        _ => Ok(()),
    }
}

/// `arange(start, end, step)`: float bounds give float32, integers int64. A run-time `end`
/// (a symbol's value) with start 0 and step 1 gives that symbol's length.
fn arange(g: &Graph, op: &str, args: &[Arg], dtype: Option<ScalarType>) -> Result<Vec<TensorMeta>> {
    if let Some(Arg::SymInt(end)) = args.get(1) {
        let s = sym_of_value(g, *end).ok_or_else(|| shape_err(op, "end is a run-time value that is not a known dimension"))?;
        if !matches!(scalar(op, args, 0)?, Scalar::Int(0)) || !matches!(scalar(op, args, 2)?, Scalar::Int(1)) {
            return Err(shape_err(op, "a run-time end needs start 0 and step 1"));
        }
        return Ok(vec![TensorMeta::new(dtype.unwrap_or(ScalarType::Long), vec![Dim::Sym(s)])]);
    }
    let bounds = [scalar(op, args, 0)?, scalar(op, args, 1)?, scalar(op, args, 2)?];
    let float_bounds = bounds.iter().any(|b| matches!(b, Scalar::Double(_)));
    let dtype = dtype.unwrap_or(if float_bounds { ScalarType::Float } else { ScalarType::Long });
    if dtype == ScalarType::Bool {
        return Err(shape_err(op, "cannot make a bool range"));
    }
    let [start, end, step] = bounds.map(Scalar::to_f64);
    if step == 0.0 || !start.is_finite() || !end.is_finite() || (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        return Err(shape_err(op, format!("range {start} to {end} by {step} is empty or inconsistent with the step's sign")));
    }
    let len = if dtype.is_integral(false) {
        // ATen counts integer ranges in the output's integer type (i128: no overflow here).
        let [start, end, step] = bounds.map(|b| b.to_f64() as i64 as i128);
        (end - start + step - step.signum()) / step
    } else {
        ((end - start) / step).ceil() as i128
    };
    let len = usize::try_from(len.max(0)).map_err(|_| shape_err(op, format!("range of {len} elements is too long")))?;
    Ok(vec![TensorMeta::fixed(dtype, &[len])])
}
