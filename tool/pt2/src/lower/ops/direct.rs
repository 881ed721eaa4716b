//! Targets that are export-IR ops: the same operator (`aten::gather`), or its copy form / core
//! form under another name with the same arguments in the same order (`aten::diagonal` →
//! `aten::diagonal_copy`, `aten::cdist` → `aten::_cdist_forward`). Every argument is converted
//! by the IR schema's type, so one handler serves them all.

use rbuild_export::graph::{Arg, IntOrSym, ValueId};
use rbuild_export::ops::SchemaArg;
use rbuild_export::promote::{result_type, Operand as Promoted};
use rbuild_runtime::Scalar;

use super::{Call, Cx, Lowered, OpResult};
use crate::lower::context::Operand;
use crate::schema::Argument;

/// Targets lowered to an IR op of another name that takes the same arguments in order.
pub(crate) const RENAMED: &[(&str, &str)] = &[
    ("aten::cdist", "aten::_cdist_forward"),
    ("aten::pdist", "aten::_pdist_forward"),
    ("aten::grid_sampler", "aten::grid_sampler_2d"),
    ("aten::diagonal", "aten::diagonal_copy"),
    ("aten::as_strided", "aten::as_strided_copy"),
    ("aten::unfold", "aten::unfold_copy"),
    ("aten::narrow", "aten::narrow_copy"),
    ("aten::t", "aten::t_copy"),
    ("aten::squeeze.dim", "aten::squeeze_copy.dim"),
    ("aten::split.Tensor", "aten::split_copy.Tensor"),
    ("aten::unbind.int", "aten::unbind_copy.int"),
    ("aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d"),
    ("aten::_embedding_bag_forward_only", "aten::_embedding_bag"),
    ("aten::__lshift__.Tensor", "aten::bitwise_left_shift.Tensor"),
    ("aten::__lshift__.Scalar", "aten::bitwise_left_shift.Tensor_Scalar"),
    ("aten::__rshift__.Tensor", "aten::bitwise_right_shift.Tensor"),
    ("aten::__rshift__.Scalar", "aten::bitwise_right_shift.Tensor_Scalar"),
    ("aten::__and__.Scalar", "aten::bitwise_and.Scalar"),
    ("aten::__or__.Scalar", "aten::bitwise_or.Scalar"),
    ("aten::__xor__.Scalar", "aten::bitwise_xor.Scalar"),
];

/// The IR op a direct target becomes.
pub(crate) fn ir_op(key: &str) -> &str {
    RENAMED.iter().find(|(k, _)| *k == key).map_or(key, |(_, ir)| ir)
}

pub(crate) fn direct(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let op = ir_op(c.key);
    let def = rbuild_export::ops::op(op).ok_or_else(|| format!("{op} is not an export-IR op"))?;
    let names: Vec<&str> = c.args.names().collect();
    if names.len() != def.functional.args.len() {
        return Err(format!("{} takes {} arguments where {op} takes {}", c.key, names.len(), def.functional.args.len()));
    }
    // Numbers given where a tensor is due become rank-0 tensors of the dtype the op computes in.
    let tensors: Vec<ValueId> = names
        .iter()
        .zip(&def.functional.args)
        .filter(|(_, a)| a.ty == "Tensor")
        .filter_map(|(n, _)| match cx.operand(&c.args, n) {
            Ok(Operand::Tensor(t)) => Some(t),
            _ => None,
        })
        .collect();
    let mut args = Vec::with_capacity(names.len());
    for (name, schema_arg) in names.iter().zip(&def.functional.args) {
        args.push(convert(cx, c, name, schema_arg, &tensors).map_err(|e| format!("{e} (as {op})"))?);
    }
    let outs = cx.call_bounded(op, args, c.data_bound)?;
    Ok(outs.into_iter().map(Lowered::Tensor).collect())
}

/// The node's argument `name` as the IR argument `schema_arg` takes it.
fn convert(cx: &mut Cx, c: &Call<'_>, name: &str, schema_arg: &SchemaArg, tensors: &[ValueId]) -> Result<Arg, String> {
    let a = &c.args;
    let optional = schema_arg.ty.ends_with('?');
    if optional && matches!(a.get(name)?, Argument::None(_)) {
        return Ok(Arg::None);
    }
    if schema_arg.ty == "Tensor?[]" {
        return Ok(Arg::OptTensors(cx.opt_tensors(a, name)?));
    }
    let base = schema_arg.ty.trim_end_matches('?');
    let list = base.contains('[');
    Ok(match base.split('[').next().unwrap_or(base) {
        "Tensor" if list => Arg::Tensors(cx.tensors(a, name)?),
        "Tensor" => match cx.operand(a, name)? {
            Operand::Tensor(t) => Arg::Tensor(t),
            Operand::Number(n) => Arg::Tensor(number_tensor(cx, n, tensors)?),
        },
        "int" | "SymInt" if list => Cx::size_list(&cx.sym_ints(a, name)?),
        "int" | "SymInt" => match cx.sym_int(a, name)? {
            IntOrSym::Int(i) => Arg::Int(i),
            IntOrSym::Sym(v) => Arg::SymInt(v),
        },
        "float" if list => Arg::Floats(cx.opt_floats(a, name)?.unwrap_or_default()),
        "float" => Arg::Float(cx.float(a, name)?),
        "bool" if list => Arg::Bools(cx.bools(a, name)?),
        "bool" => Arg::Bool(cx.bool(a, name)?),
        "Scalar" => match a.get(name)? {
            Argument::SymInt(_) => match cx.sym_int(a, name)? {
                IntOrSym::Int(i) => Arg::Scalar(Scalar::Int(i)),
                IntOrSym::Sym(v) => Arg::SymInt(v),
            },
            _ => Arg::Scalar(cx.scalar(a, name)?),
        },
        "str" => Arg::Str(cx.string(a, name)?),
        "ScalarType" => cx.dtype(a, name)?.map_or(Arg::None, Arg::ScalarType),
        // CPU strided tensors in contiguous memory: the placement options say nothing the
        // program needs (values do not depend on them).
        "Layout" | "Device" | "MemoryFormat" | "Generator" => Arg::None,
        other => return Err(format!("argument '{name}' has type {other}, which the import does not convert")),
    })
}

/// A Python number among tensor operands, as the rank-0 tensor of the dtype ATen computes in
/// (so it never changes the result's dtype, as a wrapped number would not).
pub(crate) fn number_tensor(cx: &mut Cx, n: Scalar, tensors: &[ValueId]) -> Result<ValueId, String> {
    let mut operands: Vec<Promoted> = tensors.iter().map(|&t| Promoted::Tensor(cx.meta(t).dtype, cx.meta(t).rank())).collect();
    operands.push(Promoted::Number(n));
    let dtype = result_type(&operands)?;
    cx.scalar_constant(n, dtype)
}
