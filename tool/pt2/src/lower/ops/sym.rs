//! Integers about sizes: Python operators on SymInts/SymBools (`_operator.ge(u0, 0)`,
//! `torch.sym_max`), `item()` of an integer tensor, and the size queries `sym_numel`,
//! `sym_stride`, `sym_storage_offset`. Values known at export fold into constants; run-time
//! ones become ExecuTorch's prim ops (a SymBool is an integer 0/1).

use rbuild_export::graph::{Arg, Dim, IntOrSym};

use super::{Call, Cx, Lowered, OpResult};
use crate::schema::SymInt;

/// Python's binary operators on sizes: (target, prim op, folding at export).
const BINARY: &[(&str, &str, fn(i64, i64) -> Option<i64>)] = &[
    ("_operator.add", "executorch_prim::add.Scalar", |a, b| a.checked_add(b)),
    ("_operator.sub", "executorch_prim::sub.Scalar", |a, b| a.checked_sub(b)),
    ("_operator.mul", "executorch_prim::mul.Scalar", |a, b| a.checked_mul(b)),
    ("_operator.floordiv", "executorch_prim::floordiv.Scalar", floor_div),
    ("_operator.mod", "executorch_prim::mod.Scalar", |a, b| floor_div(a, b).and_then(|q| a.checked_sub(b.checked_mul(q)?))),
    ("_operator.eq", "executorch_prim::eq.Scalar", |a, b| Some((a == b) as i64)),
    ("_operator.lt", "executorch_prim::lt.Scalar", |a, b| Some((a < b) as i64)),
    ("_operator.le", "executorch_prim::le.Scalar", |a, b| Some((a <= b) as i64)),
    ("_operator.gt", "executorch_prim::gt.Scalar", |a, b| Some((a > b) as i64)),
    ("_operator.ge", "executorch_prim::ge.Scalar", |a, b| Some((a >= b) as i64)),
    ("torch.sym_max", "executorch_prim::sym_max.Scalar", |a, b| Some(a.max(b))),
    ("torch.sym_min", "executorch_prim::sym_min.Scalar", |a, b| Some(a.min(b))),
    ("_operator.and_", "executorch_prim::mul.Scalar", |a, b| Some((a != 0 && b != 0) as i64)),
];

/// Every Python operator target this module maps.
pub(crate) const PYTHON_OPS: &[&str] = &[
    "_operator.add",
    "_operator.sub",
    "_operator.mul",
    "_operator.floordiv",
    "_operator.mod",
    "_operator.eq",
    "_operator.ne",
    "_operator.lt",
    "_operator.le",
    "_operator.gt",
    "_operator.ge",
    "_operator.and_",
    "_operator.neg",
    "_operator.not_",
    "torch.sym_max",
    "torch.sym_min",
    "torch.sym_not",
];

/// Python's `//`: rounds toward negative infinity.
fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && (a < 0) != (b < 0) { q - 1 } else { q })
}

fn int(v: IntOrSym) -> Arg {
    match v {
        IntOrSym::Int(i) => Arg::Int(i),
        IntOrSym::Sym(s) => Arg::SymInt(s),
    }
}

fn prim(cx: &mut Cx, op: &str, args: Vec<Arg>) -> Result<IntOrSym, String> {
    cx.call1(op, args).map(IntOrSym::Sym)
}

/// `_operator.*` and `torch.sym_*` on sizes.
pub(super) fn python_op(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = cx.sym_scalar(&c.args, "a")?;
    let result = match c.key {
        "_operator.neg" => match a {
            IntOrSym::Int(i) => IntOrSym::Int(i.checked_neg().ok_or("negation overflows")?),
            s => prim(cx, "executorch_prim::neg.Scalar", vec![int(s)])?,
        },
        "_operator.not_" | "torch.sym_not" => match a {
            IntOrSym::Int(i) => IntOrSym::Int((i == 0) as i64),
            s => prim(cx, "executorch_prim::sym_not.Scalar", vec![int(s)])?,
        },
        "_operator.ne" => {
            let b = cx.sym_scalar(&c.args, "b")?;
            match (a, b) {
                (IntOrSym::Int(x), IntOrSym::Int(y)) => IntOrSym::Int((x != y) as i64),
                _ => {
                    let eq = prim(cx, "executorch_prim::eq.Scalar", vec![int(a), int(b)])?;
                    prim(cx, "executorch_prim::sym_not.Scalar", vec![int(eq)])?
                }
            }
        }
        key => {
            let &(_, op, fold) = BINARY.iter().find(|(k, _, _)| *k == key).ok_or_else(|| format!("{key} is not a size operator"))?;
            let b = cx.sym_scalar(&c.args, "b")?;
            match (a, b) {
                (IntOrSym::Int(x), IntOrSym::Int(y)) => IntOrSym::Int(fold(x, y).ok_or_else(|| format!("{key}({x}, {y}) is undefined or overflows"))?),
                _ => prim(cx, op, vec![int(a), int(b)])?,
            }
        }
    };
    Ok(vec![Lowered::Int(result)])
}

/// `_local_scalar_dense(self)` (`.item()`) of a one-element integer tensor: a run-time integer.
pub(super) fn item(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let v = cx.b.item(x).map_err(|e| e.to_string())?;
    Ok(vec![Lowered::Int(IntOrSym::Sym(v))])
}

/// `sym_numel(self)`: the product of the sizes (a prim op when one is a run-time size).
pub(super) fn numel(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let shape = cx.meta(x).shape.clone();
    if let Some(sizes) = shape.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n as i64) } else { None }).collect::<Option<Vec<_>>>() {
        return Ok(vec![Lowered::Int(IntOrSym::Int(sizes.iter().product()))]);
    }
    let v = cx.call1("aten::sym_numel", vec![Arg::Tensor(x)])?;
    Ok(vec![Lowered::Int(IntOrSym::Sym(v))])
}

/// `sym_stride.int(self, dim)` and `sym_storage_offset(self)`: what the archive records for
/// that tensor in PyTorch's layout (a transposed view has transposed strides), which the
/// program's arithmetic is written against.
pub(super) fn layout_query(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let meta = c.self_meta.ok_or("the archive does not record self's layout")?;
    let value = match c.key {
        "aten::sym_storage_offset" => &meta.storage_offset,
        _ => {
            let d = cx.int(&c.args, "dim")?;
            let rank = meta.strides.len() as i64;
            let i = if d < 0 { d + rank } else { d };
            usize::try_from(i).ok().and_then(|i| meta.strides.get(i)).ok_or_else(|| format!("dim {d} out of range for rank {rank}"))?
        }
    };
    let v = match value {
        SymInt::Int(n) => IntOrSym::Int(*n),
        SymInt::Expr(e) => {
            let s = e.symbol().and_then(|s| cx.symbols.get(s).copied()).ok_or_else(|| {
                format!("the stride/offset {} is an expression of sizes, which the import cannot compute", e.expr_str)
            })?;
            cx.size_of(Dim::Sym(s))?
        }
    };
    Ok(vec![Lowered::Int(v)])
}
