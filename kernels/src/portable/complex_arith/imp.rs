//! The complex kernels' arithmetic (feature `complex`): elements are interleaved `[re, im]`
//! pairs, every value is computed in f64 and rounded once into the out's precision.

use rbuild_runtime::kernel::{KernelArgs, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::super::binary::{broadcast_plan, Operand};
use super::super::linalg::{mat_dims, result_sizes, MatDims};
use super::super::reduce::Plan;
use super::super::util::{for_each_broadcast, require_contiguous, Elems, ElemsMut};
use super::BinaryOp;

/// A complex number `(re, im)`.
type C = (f64, f64);

/// A tensor's elements as complex numbers (real dtypes with a zero imaginary part).
enum Src<'a> {
    C64(&'a [[f32; 2]]),
    C128(&'a [[f64; 2]]),
    Real(Elems<'a>),
}

impl<'a> Src<'a> {
    fn of(t: &TensorRef<'a>) -> KernelResult<Src<'a>> {
        Ok(match t.dtype {
            ScalarType::ComplexFloat => Src::C64(t.data()?),
            ScalarType::ComplexDouble => Src::C128(t.data()?),
            _ => Src::Real(Elems::of(t)?),
        })
    }

    #[inline]
    fn get(&self, i: usize) -> C {
        match self {
            Src::C64(s) => (s[i][0] as f64, s[i][1] as f64),
            Src::C128(s) => (s[i][0], s[i][1]),
            Src::Real(e) => (e.f64(i), 0.0),
        }
    }
}

/// A complex out's elements.
enum Dst<'a> {
    C64(&'a mut [[f32; 2]]),
    C128(&'a mut [[f64; 2]]),
}

impl<'a> Dst<'a> {
    fn of<'b>(t: &'b mut TensorMut<'a>, what: &str) -> KernelResult<Dst<'b>> {
        Ok(match t.dtype {
            ScalarType::ComplexFloat => Dst::C64(t.data_mut()?),
            ScalarType::ComplexDouble => Dst::C128(t.data_mut()?),
            d => return Err(kerr!("{what}: a complex result cannot be stored in a {d} out")),
        })
    }

    #[inline]
    fn set(&mut self, i: usize, (re, im): C) {
        match self {
            Dst::C64(s) => s[i] = [re as f32, im as f32],
            Dst::C128(s) => s[i] = [re, im],
        }
    }
}

fn mul((a, b): C, (c, d): C) -> C {
    (a * c - b * d, a * d + b * c)
}

/// `(a + bi) / (c + di)` scaled by the larger of |c| and |d| (Smith's method, as PyTorch's
/// and NumPy's complex division), so that large or small divisors neither overflow nor
/// underflow; 0 / 0 gives NaN and x / 0 infinities.
fn div((a, b): C, (c, d): C) -> C {
    let (abs_c, abs_d) = (libm::fabs(c), libm::fabs(d));
    if abs_c >= abs_d {
        if abs_c == 0.0 && abs_d == 0.0 {
            return (a / abs_c, b / abs_d);
        }
        let ratio = d / c;
        let scale = 1.0 / (c + d * ratio);
        ((a + b * ratio) * scale, (b - a * ratio) * scale)
    } else {
        let ratio = c / d;
        let scale = 1.0 / (d + c * ratio);
        ((a * ratio + b) * scale, (b * ratio - a) * scale)
    }
}


/// `out = a op b` over tensors `a`, `b` broadcast together, when either (or out) is complex.
pub(crate) fn binary(args: &KernelArgs<'_>, a: usize, b: usize, out: usize, op: BinaryOp, name: &str) -> KernelResult {
    let (ta, tb) = (args.tensor(a)?, args.tensor(b)?);
    let mut to = args.out(out)?;
    let (sizes, st) = broadcast_plan(&[Operand::Tensor(ta), Operand::Tensor(tb)], &to)?;
    to.resize(&sizes)?;
    let (xa, xb) = (Src::of(&ta)?, Src::of(&tb)?);
    let mut o = Dst::of(&mut to, name)?;
    for_each_broadcast(&sizes, [&st[0], &st[1]], |k, [i, j]| {
        let (p, q) = (xa.get(i), xb.get(j));
        o.set(
            k,
            match op {
                BinaryOp::Add(alpha) => (p.0 + alpha * q.0, p.1 + alpha * q.1),
                BinaryOp::Mul => mul(p, q),
                BinaryOp::Div => div(p, q),
            },
        );
    });
    Ok(())
}

/// `abs` of a complex tensor (args[0]) into a real floating out (args[out]): the magnitude.
pub(crate) fn abs(args: &KernelArgs<'_>, out: usize) -> KernelResult {
    let x = args.tensor(0)?;
    let mut to = args.out(out)?;
    super::super::unary::same_layout("abs.out", &x, &to)?;
    if !to.dtype.is_floating() {
        return Err(kerr!("abs.out: the magnitude of a {} tensor needs a floating out, got {}", x.dtype, to.dtype));
    }
    to.resize(x.sizes())?;
    let xs = Src::of(&x)?;
    let mut o = ElemsMut::of(&mut to)?;
    for i in 0..x.numel() {
        let (re, im) = xs.get(i);
        o.set_f64(i, libm::hypot(re, im));
    }
    Ok(())
}

/// Sums each reduction group of `inp` (as `plan` lays them out) into the complex `out`, which
/// already has the plan's output sizes.
pub(crate) fn sum(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, plan: &Plan) -> KernelResult {
    let x = Src::of(inp)?;
    let mut o = Dst::of(out, "sum")?;
    plan.for_each_group(|k, base| {
        let s = plan.red_offs.iter().fold((0.0, 0.0), |(re, im), &r| {
            let (a, b) = x.get(base + r);
            (re + a, im + b)
        });
        o.set(k, s);
    });
    Ok(())
}

/// `bmm.out` of two complex tensors of one dtype (args = [self, mat2, out, out]).
pub(crate) fn bmm(args: &KernelArgs<'_>) -> KernelResult {
    let (ta, tb) = (args.tensor(0)?, args.tensor(1)?);
    let d = mat_dims(&ta, &tb, true)?;
    let mut out = args.out(2)?;
    if tb.dtype != ta.dtype || out.dtype != ta.dtype {
        return Err(kerr!("bmm.out: self, mat2 and out dtypes must match, got {}, {} and {}", ta.dtype, tb.dtype, out.dtype));
    }
    require_contiguous(&ta, "bmm.out: self")?;
    require_contiguous(&tb, "bmm.out: mat2")?;
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("bmm.out: out dim order {:?} is not supported (contiguous only)", out.dim_order));
    }
    out.resize(&result_sizes(d, true))?;
    let (xa, xb) = (Src::of(&ta)?, Src::of(&tb)?);
    let mut o = Dst::of(&mut out, "bmm.out")?;
    let MatDims { batch, n, k, m } = d;
    for bi in 0..batch {
        for i in 0..n {
            for j in 0..m {
                let (ra, rb) = ((bi * n + i) * k, bi * k * m + j);
                let acc = (0..k).fold((0.0, 0.0), |(re, im), p| {
                    let (a, b) = mul(xa.get(ra + p), xb.get(rb + p * m));
                    (re + a, im + b)
                });
                o.set((bi * n + i) * m + j, acc);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    fn c64(h: &mut OpHarness, sizes: &[usize], v: &[(f32, f32)]) -> u32 {
        let data: Vec<[f32; 2]> = v.iter().map(|&(a, b)| [a, b]).collect();
        h.tensor(ScalarType::ComplexFloat, sizes, &data)
    }

    fn read_c64(h: &OpHarness, id: u32) -> Vec<(f32, f32)> {
        h.read::<[f32; 2]>(id).into_iter().map(|[a, b]| (a, b)).collect()
    }

    #[test]
    fn add_mul_div_broadcast_with_pytorch_values() {
        let mut h = OpHarness::new();
        let a = c64(&mut h, &[2], &[(1.0, 2.0), (3.0, -1.0)]);
        let b = c64(&mut h, &[1], &[(0.5, 0.5)]);
        let alpha = h.int(2);
        let out = h.out(ScalarType::ComplexFloat, &[2]);
        h.call(crate::portable::binary::add_out, &[a, b, alpha, out, out]).unwrap();
        assert_eq!(read_c64(&h, out), vec![(2.0, 3.0), (4.0, 0.0)]);
        h.call(crate::portable::binary::mul_out, &[a, b, out, out]).unwrap();
        // (1+2i)(0.5+0.5i) = -0.5+1.5i; (3-i)(0.5+0.5i) = 2+i.
        assert_eq!(read_c64(&h, out), vec![(-0.5, 1.5), (2.0, 1.0)]);
        h.call(crate::portable::binary::div_out, &[a, b, out, out]).unwrap();
        // (1+2i)/(0.5+0.5i) = 3+i; (3-i)/(0.5+0.5i) = 2-4i.
        assert_eq!(read_c64(&h, out), vec![(3.0, 1.0), (2.0, -4.0)]);
    }

    #[test]
    fn real_and_complex_operands_promote_and_double_outs_widen() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2], &[1.0, -2.0]);
        let b = c64(&mut h, &[2], &[(0.0, 1.0), (2.0, 0.0)]);
        let out = h.out(ScalarType::ComplexDouble, &[2]);
        h.call(crate::portable::binary::mul_out, &[a, b, out, out]).unwrap();
        assert_eq!(h.read::<[f64; 2]>(out), vec![[0.0, 1.0], [-4.0, 0.0]]);
        let real_out = h.out(ScalarType::Float, &[2]);
        let e = h.call(crate::portable::binary::mul_out, &[a, b, real_out, real_out]).unwrap_err();
        assert!(e.message.contains("complex result"), "{e}");
    }

    #[test]
    fn division_by_zero_and_huge_divisors() {
        let (re, im) = super::div((1e300, 1e300), (1e300, 1e300));
        assert!((re - 1.0).abs() < 1e-15 && im == 0.0, "{re} {im}");
        let (re, im) = super::div((1.0, 1.0), (0.0, 0.0));
        assert!(re.is_infinite() && im.is_infinite());
        let (re, im) = super::div((0.0, 0.0), (0.0, 0.0));
        assert!(re.is_nan() && im.is_nan());
    }

    #[test]
    fn abs_is_the_magnitude_in_a_real_out() {
        let mut h = OpHarness::new();
        let x = c64(&mut h, &[2], &[(3.0, 4.0), (-5.0, 12.0)]);
        let out = h.out(ScalarType::Float, &[2]);
        h.call(crate::portable::unary::abs_out, &[x, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![5.0, 13.0]);
        let bad = h.out(ScalarType::Long, &[2]);
        assert!(h.call(crate::portable::unary::abs_out, &[x, bad, bad]).is_err());
    }

    #[test]
    fn sum_over_a_dim_and_everything() {
        let mut h = OpHarness::new();
        let x = c64(&mut h, &[2, 2], &[(1.0, 1.0), (2.0, -1.0), (3.0, 0.5), (4.0, 0.0)]);
        let dims = h.int_list(&[1]);
        let (keep, none) = (h.bool(false), h.none());
        let out = h.out(ScalarType::ComplexFloat, &[2]);
        h.call(crate::portable::reduce::sum_intlist_out, &[x, dims, keep, none, out, out]).unwrap();
        assert_eq!(read_c64(&h, out), vec![(3.0, 0.0), (7.0, 0.5)]);
        let all = h.out(ScalarType::ComplexFloat, &[]);
        h.call(crate::portable::reduce::sum_out, &[x, none, all, all]).unwrap();
        assert_eq!(read_c64(&h, all), vec![(10.0, 0.5)]);
        let real = h.out(ScalarType::Float, &[2]);
        assert!(h.call(crate::portable::reduce::sum_intlist_out, &[x, dims, keep, none, real, real]).is_err());
    }

    #[test]
    fn bmm_multiplies_complex_batches() {
        let mut h = OpHarness::new();
        // [1, 1, 2] @ [1, 2, 1]: (1+i)(2) + (i)(1-i) = 2+2i + 1+i = 3+3i.
        let a = c64(&mut h, &[1, 1, 2], &[(1.0, 1.0), (0.0, 1.0)]);
        let b = c64(&mut h, &[1, 2, 1], &[(2.0, 0.0), (1.0, -1.0)]);
        let out = h.out(ScalarType::ComplexFloat, &[1, 1, 1]);
        h.call(crate::optimized::linalg::bmm_out, &[a, b, out, out]).unwrap();
        assert_eq!(read_c64(&h, out), vec![(3.0, 3.0)]);
        let real = h.f32(&[1, 2, 1], &[1.0, 2.0]);
        assert!(h.call(crate::optimized::linalg::bmm_out, &[a, real, out, out]).is_err());
        let bad = h.f32(&[1, 3, 1], &[1.0, 2.0, 3.0]);
        assert!(h.call(crate::portable::linalg::bmm_out, &[a, bad, out, out]).is_err());
    }
}
