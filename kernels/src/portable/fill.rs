//! Outputs made from values rather than from input elements: `empty` (zeroed), `fill` with a
//! scalar or a 0-dim tensor, and `repeat_interleave`'s runs of indices. Also the scalar-to-
//! element encoding (with PyTorch's overflow check) that `pad` shares.

use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut};
use rbuild_runtime::{kerr, Scalar, ScalarType};

use super::shape::{check_dim_order_arg, check_dtype};
use super::util::{to_sizes, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::empty.out" => empty_out,
    "dim_order_ops::_empty_dim_order.out" => empty_dim_order_out,
    "aten::fill.Scalar_out" => fill_scalar_out,
    "aten::fill.Tensor_out" => fill_tensor_out,
    "aten::repeat_interleave.Tensor_out" => repeat_interleave_tensor_out,
}

// ---------------------------------------------------------------------------------------------
// Scalars as element bytes
// ---------------------------------------------------------------------------------------------

/// The bytes of one element of `dtype` holding `v`, with PyTorch's overflow check (a value
/// outside the dtype's range is an error; floats truncate toward zero into integers; unsigned
/// types accept negatives down to -max and wrap; any nonzero value is `true`).
pub(super) fn scalar_bytes(dtype: ScalarType, v: Scalar, what: &str) -> KernelResult<Vec<u8>> {
    let overflow = || kerr!("{what}: value {v:?} cannot be converted to {dtype} without overflow");
    // Integers: the accepted range [lo, hi], then the value wrapped into the type's width.
    let int = |lo: i128, hi: i128| -> KernelResult<i64> {
        match v {
            Scalar::Double(d) if d.is_nan() => Ok(0),
            Scalar::Double(d) if d < lo as f64 || d > hi as f64 => Err(overflow()),
            Scalar::Double(d) => Ok(d as i128 as i64),
            s => {
                let i = s.to_i64() as i128;
                if i < lo || i > hi {
                    Err(overflow())
                } else {
                    Ok(i as i64)
                }
            }
        }
    };
    // Floats: finite values beyond the largest finite one overflow; inf and NaN pass.
    let float = |max: f64| -> KernelResult<f64> {
        let x = v.to_f64();
        if x.is_finite() && x.abs() > max {
            Err(overflow())
        } else {
            Ok(x)
        }
    };
    let signed = |bits: u32| (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    let unsigned = |bits: u32| (-((1i128 << bits) - 1), (1i128 << bits) - 1);
    Ok(match dtype {
        ScalarType::Bool => vec![match v {
            Scalar::Double(d) => d != 0.0,
            s => s.to_i64() != 0,
        } as u8],
        ScalarType::Float => (float(f32::MAX as f64)? as f32).to_le_bytes().to_vec(),
        ScalarType::Double => v.to_f64().to_le_bytes().to_vec(),
        ScalarType::Half => f16::from_f64(float(f16::MAX.to_f64())?).to_le_bytes().to_vec(),
        ScalarType::BFloat16 => bf16::from_f64(float(bf16::MAX.to_f64())?).to_le_bytes().to_vec(),
        ScalarType::Char => (int(signed(8).0, signed(8).1)? as i8).to_le_bytes().to_vec(),
        ScalarType::Short => (int(signed(16).0, signed(16).1)? as i16).to_le_bytes().to_vec(),
        ScalarType::Int => (int(signed(32).0, signed(32).1)? as i32).to_le_bytes().to_vec(),
        ScalarType::Long => int(signed(64).0, signed(64).1)?.to_le_bytes().to_vec(),
        ScalarType::Byte => (int(unsigned(8).0, unsigned(8).1)? as u8).to_le_bytes().to_vec(),
        ScalarType::UInt16 => (int(unsigned(16).0, unsigned(16).1)? as u16).to_le_bytes().to_vec(),
        ScalarType::UInt32 => (int(unsigned(32).0, unsigned(32).1)? as u32).to_le_bytes().to_vec(),
        ScalarType::UInt64 => (int(unsigned(64).0, unsigned(64).1)? as u64).to_le_bytes().to_vec(),
        d => return Err(kerr!("{what}: dtype {d} is not supported")),
    })
}

/// Fills `dst` with copies of the element `elem`, doubling the filled prefix each step.
pub(super) fn fill_with(dst: &mut [u8], elem: &[u8]) {
    if dst.len() < elem.len() || elem.is_empty() {
        return;
    }
    dst[..elem.len()].copy_from_slice(elem);
    replicate_first(dst, elem.len());
}

/// Copies the first `esize` bytes of `dst` over the rest of it.
fn replicate_first(dst: &mut [u8], esize: usize) {
    let mut filled = esize;
    while filled < dst.len() {
        let k = filled.min(dst.len() - filled);
        dst.copy_within(0..k, filled);
        filled += k;
    }
}

// ---------------------------------------------------------------------------------------------
// Empty outputs, fills, repeat_interleave
// ---------------------------------------------------------------------------------------------

/// Resizes the output to `sizes` and zeroes it (an empty tensor's contents are unspecified;
/// zeros keep runs reproducible).
fn zeroed(out: &mut TensorMut<'_>, sizes: &[usize]) -> KernelResult {
    out.resize(sizes)?;
    out.bytes_mut().fill(0);
    Ok(())
}

/// `empty.out(SymInt[] size, *, MemoryFormat? memory_format=None, Tensor(a!) out)`: args =
/// [size, memory_format, out, out]. The layout is the output's dim order.
pub fn empty_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let sizes = to_sizes(&args.int_list(0)?)?;
    // MemoryFormat codes: 0 contiguous, 2 channels-last, 3 channels-last 3d (1 = preserve has
    // nothing to preserve here).
    if let Some(format) = args.opt_int(1)?.filter(|f| !matches!(f, 0 | 2 | 3)) {
        return Err(kerr!("empty.out: memory_format {format} is not supported"));
    }
    let mut out = args.out(2)?;
    zeroed(&mut out, &sizes)
}

/// `_empty_dim_order.out(SymInt[] size, *, int[]? dim_order=None, Tensor(a!) out)`: args =
/// [size, dim_order, out, out]. A given dim order must be the output's; none means contiguous.
pub fn empty_dim_order_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let sizes = to_sizes(&args.int_list(0)?)?;
    let order = args.opt_int_list(1)?;
    let mut out = args.out(2)?;
    if order.is_none() && !out.dim_order.is_contiguous() {
        return Err(kerr!("_empty_dim_order: no dim_order given but the output's is {:?}", out.dim_order));
    }
    check_dim_order_arg(order, &out, sizes.len())?;
    zeroed(&mut out, &sizes)
}

/// `fill.Scalar_out(Tensor self, Scalar value, *, Tensor(a!) out)`: args = [self, value, out,
/// out]. Self's shape and dtype, every element `value`.
pub fn fill_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let this = args.tensor(0)?;
    let value = args.scalar(1)?;
    let mut out = args.out(2)?;
    check_dtype(&this, &out)?;
    let elem = scalar_bytes(out.dtype, value, "fill.Scalar_out")?;
    out.resize(this.sizes())?;
    fill_with(out.bytes_mut(), &elem);
    Ok(())
}

/// `fill.Tensor_out(Tensor self, Tensor value, *, Tensor(a!) out)`: as `fill.Scalar_out` with
/// the value of a 0-dim tensor, converted to self's dtype.
pub fn fill_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let this = args.tensor(0)?;
    let value = args.tensor(1)?;
    let mut out = args.out(2)?;
    check_dtype(&this, &out)?;
    if value.dim() != 0 {
        return Err(kerr!("fill.Tensor_out: value must be a 0-dim tensor, got shape {:?}", value.sizes()));
    }
    let ev = Elems::of(&value)?;
    out.resize(this.sizes())?;
    if out.numel() == 0 {
        return Ok(());
    }
    ElemsMut::of(&mut out)?.copy_from(0, &ev, 0);
    let esize = out.dtype.size();
    replicate_first(out.bytes_mut(), esize);
    Ok(())
}

/// `repeat_interleave.Tensor_out(Tensor repeats, *, SymInt? output_size=None, Tensor(a!) out)`:
/// args = [repeats, output_size, out, out]. Index i repeated repeats[i] times; the length is
/// the sum of the repeats (data-dependent: out is resized).
pub fn repeat_interleave_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let repeats = args.tensor(0)?;
    let output_size = args.opt_int(1)?;
    let mut out = args.out(2)?;
    if repeats.dim() != 1 {
        return Err(kerr!("repeat_interleave: repeats must be 1-D, got shape {:?}", repeats.sizes()));
    }
    if !matches!(repeats.dtype, ScalarType::Int | ScalarType::Long) {
        return Err(kerr!("repeat_interleave: repeats must be Int or Long, got {}", repeats.dtype));
    }
    if repeats.dtype != out.dtype {
        return Err(kerr!("repeat_interleave: output dtype {} differs from repeats dtype {}", out.dtype, repeats.dtype));
    }
    let counts: Vec<i64> = match repeats.dtype {
        ScalarType::Int => repeats.data::<i32>()?.iter().map(|&r| r as i64).collect(),
        _ => repeats.data::<i64>()?.to_vec(),
    };
    let mut total = 0usize;
    for (i, &r) in counts.iter().enumerate() {
        if r < 0 {
            return Err(kerr!("repeat_interleave: repeats[{i}] = {r} is negative"));
        }
        let r = usize::try_from(r).map_err(|_| kerr!("repeat_interleave: repeats[{i}] = {r} is too large"))?;
        total = total.checked_add(r).ok_or_else(|| kerr!("repeat_interleave: the repeats' sum overflows"))?;
    }
    if let Some(n) = output_size.filter(|&n| n as i128 != total as i128) {
        return Err(kerr!("repeat_interleave: output_size {n} differs from the repeats' sum {total}"));
    }
    out.resize(&[total])?;
    let mut eo = ElemsMut::of(&mut out)?;
    let mut at = 0;
    for (i, &r) in counts.iter().enumerate() {
        for _ in 0..r {
            eo.set_i64(at, i as i64);
            at += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::tensor::DimOrder;
    use rbuild_runtime::Value;

    #[test]
    fn scalar_bytes_checks_ranges_like_pytorch() {
        assert_eq!(scalar_bytes(ScalarType::Byte, Scalar::Int(-1), "t").unwrap(), vec![255]);
        assert!(scalar_bytes(ScalarType::Byte, Scalar::Int(256), "t").is_err());
        assert!(scalar_bytes(ScalarType::Char, Scalar::Double(-128.0), "t").is_ok());
        assert!(scalar_bytes(ScalarType::Char, Scalar::Double(-129.0), "t").is_err());
        assert_eq!(scalar_bytes(ScalarType::Int, Scalar::Double(-2.7), "t").unwrap(), (-2i32).to_le_bytes());
        assert!(scalar_bytes(ScalarType::Half, Scalar::Double(1e6), "t").is_err());
        assert!(scalar_bytes(ScalarType::Half, Scalar::Double(f64::INFINITY), "t").is_ok());
        assert!(scalar_bytes(ScalarType::Float, Scalar::Double(1e300), "t").is_err());
        assert_eq!(scalar_bytes(ScalarType::Bool, Scalar::Double(0.5), "t").unwrap(), vec![1]);
        assert_eq!(scalar_bytes(ScalarType::UInt64, Scalar::Int(-1), "t").unwrap(), u64::MAX.to_le_bytes());
        assert!(scalar_bytes(ScalarType::ComplexFloat, Scalar::Int(0), "t").is_err());
    }

    #[test]
    fn empty_outputs_are_zeroed_and_resized() {
        let mut h = OpHarness::new();
        let size = h.int_list(&[2, 3]);
        let none = h.none();
        let out = h.out_dynamic(ScalarType::Float, &[4, 4]);
        h.call(empty_out, &[size, none, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![2, 3]);
        assert_eq!(h.read::<f32>(out), vec![0.; 6]);
        let (cl, preserve) = (h.int(2), h.int(1));
        h.call(empty_out, &[size, cl, out, out]).unwrap();
        assert!(h.call(empty_out, &[size, preserve, out, out]).is_err());
        let neg = h.int_list(&[-1, 3]);
        assert!(h.call(empty_out, &[neg, none, out, out]).is_err());
        let big = h.int_list(&[5, 5]);
        assert!(h.call(empty_out, &[big, none, out, out]).is_err());

        let order = h.int_list(&[0, 1]);
        let oi = h.out(ScalarType::Long, &[2, 3]);
        h.call(empty_dim_order_out, &[size, order, oi, oi]).unwrap();
        h.call(empty_dim_order_out, &[size, none, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![0; 6]);
        let swapped = h.int_list(&[1, 0]);
        assert!(h.call(empty_dim_order_out, &[size, swapped, oi, oi]).is_err());
        let cl_out = h.out(ScalarType::Float, &[1, 2, 2, 2]);
        if let Value::Tensor(t) = &mut h.frame.values[cl_out as usize] {
            t.dim_order = DimOrder::new(&[0, 2, 3, 1]).unwrap();
        }
        let size4 = h.int_list(&[1, 2, 2, 2]);
        let cl_order = h.int_list(&[0, 2, 3, 1]);
        h.call(empty_dim_order_out, &[size4, cl_order, cl_out, cl_out]).unwrap();
        assert!(h.call(empty_dim_order_out, &[size4, none, cl_out, cl_out]).is_err());
    }

    #[test]
    fn fill_scalar_and_tensor() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::BFloat16, &[3], &[bf16::ZERO; 3]);
        let v = h.double(2.5);
        let out = h.out(ScalarType::BFloat16, &[3]);
        h.call(fill_scalar_out, &[x, v, out, out]).unwrap();
        assert_eq!(h.read::<bf16>(out), vec![bf16::from_f32(2.5); 3]);
        let b = h.bool_tensor(&[2], &[false, false]);
        let ob = h.out(ScalarType::Bool, &[2]);
        let seven = h.int(7);
        h.call(fill_scalar_out, &[b, seven, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![true, true]);
        let i8s = h.tensor(ScalarType::Char, &[2], &[0i8, 0]);
        let o8 = h.out(ScalarType::Char, &[2]);
        let big = h.int(200);
        assert!(h.call(fill_scalar_out, &[i8s, big, o8, o8]).is_err());
        assert!(h.call(fill_scalar_out, &[x, v, ob, ob]).is_err());

        let xi = h.tensor(ScalarType::Int, &[2, 2], &[0i32; 4]);
        let fv = h.f32(&[], &[-3.7]);
        let oi = h.out(ScalarType::Int, &[2, 2]);
        h.call(fill_tensor_out, &[xi, fv, oi, oi]).unwrap();
        assert_eq!(h.read::<i32>(oi), vec![-3; 4]);
        let tv = h.bool_tensor(&[], &[true]);
        let of = h.out(ScalarType::Float, &[3]);
        let xf = h.f32(&[3], &[0.; 3]);
        h.call(fill_tensor_out, &[xf, tv, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![1.; 3]);
        let vec1 = h.f32(&[1], &[1.]);
        let e = h.call(fill_tensor_out, &[xf, vec1, of, of]).unwrap_err();
        assert!(e.message.contains("0-dim"), "{e}");
    }

    #[test]
    fn repeat_interleave_counts() {
        let mut h = OpHarness::new();
        let r = h.tensor(ScalarType::Int, &[4], &[2i32, 0, 1, 3]);
        let none = h.none();
        let out = h.out_dynamic(ScalarType::Int, &[10]);
        h.call(repeat_interleave_tensor_out, &[r, none, out, out]).unwrap();
        assert_eq!(h.read::<i32>(out), vec![0, 0, 2, 3, 3, 3]);
        let six = h.int(6);
        h.call(repeat_interleave_tensor_out, &[r, six, out, out]).unwrap();
        let five = h.int(5);
        assert!(h.call(repeat_interleave_tensor_out, &[r, five, out, out]).is_err());

        let rl = h.i64(&[2], &[1, -1]);
        let ol = h.out_dynamic(ScalarType::Long, &[4]);
        let e = h.call(repeat_interleave_tensor_out, &[rl, none, ol, ol]).unwrap_err();
        assert!(e.message.contains("negative"), "{e}");
        let overflow = h.i64(&[2], &[i64::MAX, i64::MAX]);
        assert!(h.call(repeat_interleave_tensor_out, &[overflow, none, ol, ol]).is_err());
        let too_many = h.i64(&[1], &[5]);
        assert!(h.call(repeat_interleave_tensor_out, &[too_many, none, ol, ol]).is_err());
        assert!(h.call(repeat_interleave_tensor_out, &[r, none, ol, ol]).is_err());
        let m = h.i64(&[1, 1], &[1]);
        assert!(h.call(repeat_interleave_tensor_out, &[m, none, ol, ol]).is_err());
        let f = h.f32(&[1], &[1.]);
        assert!(h.call(repeat_interleave_tensor_out, &[f, none, ol, ol]).is_err());
    }
}
