//! Tensor creation (`arange`, `full`, `*_like`, `new_*`), dtype conversions and sizes.

use rbuild_export::graph::{Arg, IntOrSym};
use rbuild_runtime::{Scalar, ScalarType};

use super::layout::broadcast_to;
use super::{one, Call, Cx, Lowered, OpResult};
use crate::schema::Argument;

/// `_to_copy`, `to.*`, `type_as`: a cast when the dtype changes, else the input itself.
pub(super) fn convert(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dtype = match c.key {
        "aten::to.other" | "aten::type_as" => Some(cx.meta(cx.tensor(&c.args, "other")?).dtype),
        _ => cx.dtype(&c.args, "dtype")?,
    };
    match dtype {
        Some(t) => one(cx.cast(x, t)?),
        None => one(x),
    }
}

/// `sym_size.int(self, dim)`: a fixed size, or the symbol's run-time value.
pub(super) fn sym_size(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let rank = cx.meta(x).rank() as i64;
    let d = cx.int(&c.args, "dim")?;
    let i = if d < 0 { d + rank } else { d };
    let dim = *usize::try_from(i).ok().and_then(|i| cx.meta(x).shape.get(i)).ok_or_else(|| format!("dim {d} out of range for rank {rank}"))?;
    Ok(vec![Lowered::Int(cx.size_of(dim)?)])
}

/// A `Scalar` argument that may be a run-time size (`arange(end=s0)`).
fn scalar_or_size(cx: &Cx, c: &Call<'_>, name: &str) -> Result<Arg, String> {
    match c.args.get(name)? {
        Argument::SymInt(_) => Ok(match cx.sym_int(&c.args, name)? {
            IntOrSym::Int(i) => Arg::Scalar(Scalar::Int(i)),
            IntOrSym::Sym(v) => Arg::SymInt(v),
        }),
        _ => Ok(Arg::Scalar(cx.scalar(&c.args, name)?)),
    }
}

/// `arange.start(start, end)` as `arange.start_step(start, end, 1)`.
pub(super) fn arange(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let start = if c.key == "aten::arange" { Arg::Scalar(Scalar::Int(0)) } else { scalar_or_size(cx, c, "start")? };
    let end = scalar_or_size(cx, c, "end")?;
    let step = if c.key == "aten::arange.start_step" { scalar_or_size(cx, c, "step")? } else { Arg::Scalar(Scalar::Int(1)) };
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::arange.start_step", vec![start, end, step, dtype, Arg::None, Arg::None, Arg::None])?)
}

/// `full`, `zeros`, `ones` and the `new_*` forms (which default to self's dtype).
pub(super) fn full(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let size = cx.sym_ints(&c.args, "size")?;
    let fill = match c.key {
        "aten::full" | "aten::new_full" => cx.scalar(&c.args, "fill_value")?,
        "aten::ones" | "aten::new_ones" => Scalar::Int(1),
        _ => Scalar::Int(0),
    };
    let dtype = match (cx.dtype(&c.args, "dtype")?, c.key) {
        (Some(t), _) => Some(t),
        (None, "aten::new_ones" | "aten::new_zeros" | "aten::new_full") => Some(cx.meta(cx.tensor(&c.args, "self")?).dtype),
        (None, "aten::zeros" | "aten::ones") => Some(ScalarType::Float),
        // `full` infers its dtype from the fill value.
        (None, _) => None,
    };
    let dtype = dtype.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::full", vec![Cx::size_list(&size), Arg::Scalar(fill), dtype, Arg::None, Arg::None, Arg::None])?)
}

/// `full_like(self, fill_value)`, `zeros_like`, `ones_like`.
pub(super) fn full_like(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let fill = match c.key {
        "aten::full_like" => cx.scalar(&c.args, "fill_value")?,
        "aten::ones_like" => Scalar::Int(1),
        _ => Scalar::Int(0),
    };
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    let args = vec![Arg::Tensor(x), Arg::Scalar(fill), dtype, Arg::None, Arg::None, Arg::None, Arg::None];
    one(cx.call1("aten::full_like", args)?)
}

pub(super) fn scalar_tensor(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let s = cx.scalar(&c.args, "s")?;
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::scalar_tensor", vec![Arg::Scalar(s), dtype, Arg::None, Arg::None, Arg::None])?)
}

/// `self.copy_(src)`: the new value of self is src broadcast to self's shape in self's dtype.
pub(super) fn copy(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let (x, src) = (cx.tensor(&c.args, "self")?, cx.tensor(&c.args, "src")?);
    let target = cx.meta(x).clone();
    let cast = cx.cast(src, target.dtype)?;
    one(broadcast_to(cx, cast, &target.shape)?)
}

/// `fill_.Scalar(self, value)`, `zero_(self)`.
pub(super) fn fill(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let value = if c.key == "aten::zero_" { Scalar::Int(0) } else { cx.scalar(&c.args, "value")? };
    let args = vec![Arg::Tensor(x), Arg::Scalar(value), Arg::None, Arg::None, Arg::None, Arg::None, Arg::None];
    one(cx.call1("aten::full_like", args)?)
}

/// `empty_strided(size, stride)`: uninitialized memory; the program's tensors are contiguous,
/// and the strides only describe where PyTorch would have put values nobody wrote yet, so
/// this is ExecuTorch's `empty`.
pub(super) fn empty_strided(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let size = cx.sym_ints(&c.args, "size")?;
    let stride = cx.sym_ints(&c.args, "stride")?;
    if stride.len() != size.len() {
        return Err(format!("{} strides for {} sizes", stride.len(), size.len()));
    }
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::empty.memory_format", vec![Cx::size_list(&size), dtype, Arg::None, Arg::None, Arg::None, Arg::None])?)
}

/// `new_empty(self, size)`, `empty_like(self)`, `rand_like(self)`, `randn_like(self)`: the
/// creation op at the size given or self's, in the dtype given or self's.
pub(super) fn like(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let size = match c.key {
        "aten::new_empty" => Cx::size_list(&cx.sym_ints(&c.args, "size")?),
        _ => {
            let shape = cx.meta(x).shape.clone();
            let items = shape.iter().map(|&d| cx.size_of(d)).collect::<Result<Vec<_>, _>>()?;
            Cx::size_list(&items)
        }
    };
    let dtype = Arg::ScalarType(cx.dtype(&c.args, "dtype")?.unwrap_or(cx.meta(x).dtype));
    let (op, mut args) = match c.key {
        "aten::rand_like" => ("aten::rand", vec![size, dtype]),
        "aten::randn_like" => ("aten::randn", vec![size, dtype]),
        _ => ("aten::empty.memory_format", vec![size, dtype]),
    };
    args.extend([Arg::None, Arg::None, Arg::None]);
    if op == "aten::empty.memory_format" {
        args.push(Arg::None);
    }
    one(cx.call1(op, args)?)
}
