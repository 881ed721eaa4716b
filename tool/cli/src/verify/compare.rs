//! Comparing a device's outputs with the host reference: numpy's `allclose` rule
//! (`|got - want| <= atol + rtol * |want|`, NaN equal to NaN) for floats, and the same rule on
//! integer values (atol 0 = exact) for integer dtypes.

use super::protocol::Printed;

/// The comparison of all outputs of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub max_abs: f64,
    pub max_rel: f64,
    /// Elements outside the tolerance, over all outputs.
    pub mismatched: usize,
    pub elements: usize,
    /// Why the outputs cannot be compared at all (count, dtype or shape differ).
    pub problem: Option<String>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.problem.is_none() && self.mismatched == 0
    }
}

fn values(t: &Printed) -> Option<Vec<f64>> {
    rbuild_runner_support::tensors::values_f64(t.dtype, &t.data)
}

pub fn compare(got: &[Printed], want: &[Printed], atol: f64, rtol: f64) -> Comparison {
    let mut c = Comparison { max_abs: 0.0, max_rel: 0.0, mismatched: 0, elements: 0, problem: None };
    if got.len() != want.len() {
        c.problem = Some(format!("{} output(s) printed, the host reference has {}", got.len(), want.len()));
        return c;
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.index != i {
            c.problem = Some(format!("output {i} missing (got index {})", g.index));
            return c;
        }
        if g.dtype != w.dtype || g.shape != w.shape {
            c.problem = Some(format!("output {i} is {} {:?}, the host reference {} {:?}", g.dtype, g.shape, w.dtype, w.shape));
            return c;
        }
        let (Some(gv), Some(wv)) = (values(g), values(w)) else {
            c.problem = Some(format!("output {i}: cannot compare {} values", g.dtype));
            return c;
        };
        for (&a, &b) in gv.iter().zip(&wv) {
            c.elements += 1;
            if a.is_nan() && b.is_nan() {
                continue;
            }
            let abs = (a - b).abs();
            let rel = if b != 0.0 { abs / b.abs() } else if abs == 0.0 { 0.0 } else { f64::INFINITY };
            // NaN on one side only never passes.
            if abs.is_nan() || abs > atol + rtol * b.abs() {
                c.mismatched += 1;
            }
            c.max_abs = if abs.is_nan() { f64::NAN } else { c.max_abs.max(abs) };
            c.max_rel = c.max_rel.max(rel);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::ScalarType;

    fn f32s(v: &[f32]) -> Printed {
        Printed { index: 0, dtype: ScalarType::Float, shape: vec![v.len()], data: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
    }

    #[test]
    fn allclose_rule_and_exact_integers() {
        let c = compare(&[f32s(&[1.0, 2.0005])], &[f32s(&[1.0, 2.0])], 1e-4, 1e-3);
        assert!(c.passed(), "{c:?}");
        assert!((c.max_abs - 0.0005).abs() < 1e-6);
        let c = compare(&[f32s(&[1.0, 2.01])], &[f32s(&[1.0, 2.0])], 1e-4, 1e-3);
        assert_eq!((c.passed(), c.mismatched), (false, 1));
        let c = compare(&[f32s(&[f32::NAN])], &[f32s(&[1.0])], 1.0, 1.0);
        assert!(!c.passed());
        let i8s = |v: &[i8]| Printed { index: 0, dtype: ScalarType::Char, shape: vec![v.len()], data: v.iter().map(|&x| x as u8).collect() };
        assert!(compare(&[i8s(&[-3, 5])], &[i8s(&[-3, 5])], 0.0, 0.0).passed());
        let c = compare(&[i8s(&[-3, 6])], &[i8s(&[-3, 5])], 0.0, 0.0);
        assert_eq!((c.passed(), c.max_abs), (false, 1.0));
    }

    #[test]
    fn missing_or_reshaped_outputs_are_problems() {
        assert!(compare(&[], &[f32s(&[1.0])], 0.0, 0.0).problem.unwrap().contains("0 output(s)"));
        let c = compare(&[f32s(&[1.0, 2.0])], &[f32s(&[1.0])], 0.0, 0.0);
        assert!(c.problem.unwrap().contains("[2]"));
    }
}
