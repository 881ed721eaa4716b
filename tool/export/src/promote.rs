//! ATen's type promotion: the dtype an op computes in when its operands differ
//! (`c10::promoteTypes` and `at::result_type`). Imported programs rely on it: an int64
//! `arange` times a float scalar is float32, a bool mask plus an int is int64.

use rbuild_runtime::{Scalar, ScalarType};

/// One operand of an elementwise op, as `at::result_type` classifies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A tensor and its rank: rank-0 tensors take part only when they change the category
    /// (an int64 scalar tensor does not widen an int32 tensor).
    Tensor(ScalarType, usize),
    /// A Python number (`Scalar` argument): it never widens a tensor of its own category.
    Number(Scalar),
}

fn rank(t: ScalarType) -> Option<u8> {
    use ScalarType::*;
    Some(match t {
        Bool => 0,
        Byte | Char => 1,
        Short => 2,
        Int => 3,
        Long => 4,
        Half | BFloat16 => 5,
        Float => 6,
        Double => 7,
        _ => return None,
    })
}

/// `c10::promoteTypes` over the real dtypes ExecuTorch runs; None for the rest (complex,
/// quantized, unsigned beyond uint8), which ATen also refuses to mix.
pub fn promote_types(a: ScalarType, b: ScalarType) -> Option<ScalarType> {
    use ScalarType::*;
    if a == b {
        return rank(a).map(|_| a);
    }
    let (ra, rb) = (rank(a)?, rank(b)?);
    Some(match (a, b) {
        // uint8 and int8 meet in the smallest type holding both ranges.
        (Byte, Char) | (Char, Byte) => Short,
        (Half, BFloat16) | (BFloat16, Half) => Float,
        _ if ra >= rb => a,
        _ => b,
    })
}

fn category(t: ScalarType) -> u8 {
    if t == ScalarType::Bool {
        0
    } else if t.is_floating() {
        2
    } else {
        1
    }
}

/// `combine_categories`: the dimensioned result wins unless the other is of a higher category.
fn combine(higher: Option<ScalarType>, lower: Option<ScalarType>) -> Option<Option<ScalarType>> {
    Some(match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) if category(l) > category(h) => Some(promote_types(h, l)?),
        (h, _) => h,
    })
}

/// `at::result_type` of `operands`, or a description of why they do not mix.
pub fn result_type(operands: &[Operand]) -> Result<ScalarType, String> {
    let (mut dimmed, mut zero_dim, mut numbers) = (None, None, None);
    let join = |acc: &mut Option<ScalarType>, t: ScalarType| -> Result<(), String> {
        *acc = Some(match *acc {
            None => rank(t).map(|_| t).ok_or_else(|| format!("dtype {t} does not take part in type promotion"))?,
            Some(a) => promote_types(a, t).ok_or_else(|| format!("dtypes {a} and {t} cannot be promoted"))?,
        });
        Ok(())
    };
    for op in operands {
        match *op {
            Operand::Tensor(t, 0) => join(&mut zero_dim, t)?,
            Operand::Tensor(t, _) => join(&mut dimmed, t)?,
            // Numbers count as their default dtype: int64, float32 (torch's default), bool.
            Operand::Number(s) => join(&mut numbers, number_dtype(s))?,
        }
    }
    let mixed = || "operands cannot be promoted".to_string();
    let rest = combine(zero_dim, numbers).ok_or_else(mixed)?;
    combine(dimmed, rest).ok_or_else(mixed)?.ok_or_else(|| "no operands to promote".to_string())
}

/// The dtype a Python number has on its own (`torch.tensor(3)` is int64, `torch.tensor(0.5)`
/// float32).
pub fn number_dtype(s: Scalar) -> ScalarType {
    match s {
        Scalar::Bool(_) => ScalarType::Bool,
        Scalar::Int(_) => ScalarType::Long,
        Scalar::Double(_) => ScalarType::Float,
    }
}

/// Integer and bool inputs of the float functions (`sin`, `sqrt`, true division, …) compute
/// in float32.
pub fn to_float(t: ScalarType) -> ScalarType {
    if t.is_floating() {
        t
    } else {
        ScalarType::Float
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    fn t(d: ScalarType, r: usize) -> Operand {
        Operand::Tensor(d, r)
    }

    #[test]
    fn promote_types_follows_the_aten_lattice() {
        assert_eq!(promote_types(Byte, Char), Some(Short));
        assert_eq!(promote_types(Bool, Char), Some(Char));
        assert_eq!(promote_types(Int, Long), Some(Long));
        assert_eq!(promote_types(Long, Half), Some(Half));
        assert_eq!(promote_types(Half, BFloat16), Some(Float));
        assert_eq!(promote_types(Float, Double), Some(Double));
        assert_eq!(promote_types(Float, ComplexFloat), None);
    }

    #[test]
    fn result_type_ranks_dimensioned_tensors_over_scalars() {
        // An int64 tensor times a float number is float32; an int32 tensor plus an int stays int32.
        assert_eq!(result_type(&[t(Long, 2), Operand::Number(Scalar::Double(0.5))]), Ok(Float));
        assert_eq!(result_type(&[t(Int, 1), Operand::Number(Scalar::Int(7))]), Ok(Int));
        assert_eq!(result_type(&[t(Bool, 1), Operand::Number(Scalar::Int(1))]), Ok(Long));
        // Rank-0 tensors widen only across categories.
        assert_eq!(result_type(&[t(Float, 3), t(Double, 0)]), Ok(Float));
        assert_eq!(result_type(&[t(Long, 3), t(Double, 0)]), Ok(Double));
        assert_eq!(result_type(&[t(Half, 1), Operand::Number(Scalar::Double(2.0))]), Ok(Half));
        assert_eq!(result_type(&[t(Int, 0), t(Long, 0)]), Ok(Long));
        assert_eq!(result_type(&[t(Float, 1), t(Long, 1)]), Ok(Float));
        assert!(result_type(&[t(Float, 1), t(ComplexFloat, 1)]).is_err());
    }
}
