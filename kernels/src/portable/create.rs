//! Tensor factories: `full`, `full_like`, `zeros`, `ones`, `scalar_tensor`, `arange`.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, Scalar, Value};

use super::util::{to_sizes, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::full.out" => full_out,
    "aten::full_like.out" => full_like_out,
    "aten::zeros.out" => zeros_out,
    "aten::ones.out" => ones_out,
    "aten::scalar_tensor.out" => scalar_tensor_out,
    "aten::arange.out" => arange_out,
    "aten::arange.start_out" => arange_start_out,
}

/// Resizes the out at args[out] to `sizes` and fills it with `v` converted to its dtype
/// (a Double truncates into integer outs; any nonzero value is `true` in a bool out).
fn fill(args: &KernelArgs<'_>, out: usize, sizes: &[usize], v: Scalar) -> KernelResult {
    let mut to = args.out(out)?;
    to.resize(sizes)?;
    let n = to.numel();
    if n == 0 {
        return Ok(());
    }
    {
        let mut eo = ElemsMut::of(&mut to)?;
        match v {
            Scalar::Double(d) => eo.set_f64(0, d),
            s => eo.set_i64(0, s.to_i64()),
        }
    }
    // Replicate element 0's bytes, doubling the filled prefix: one loop for every dtype.
    let bytes = to.bytes_mut();
    let mut filled = bytes.len() / n;
    while filled < bytes.len() {
        let k = filled.min(bytes.len() - filled);
        bytes.copy_within(0..k, filled);
        filled += k;
    }
    Ok(())
}

/// `full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out)`: [size, fill_value, out, out].
pub fn full_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let sizes = to_sizes(&args.int_list(0)?)?;
    fill(args, 2, &sizes, args.scalar(1)?)
}

/// `full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None,
/// Tensor(a!) out)`: [self, fill_value, memory_format, out, out]. Only self's sizes are used,
/// so its data is never read (and a constant fill is the same in every memory format).
pub fn full_like_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let shape = match args.value(0)? {
        Value::Tensor(t) => t.shape,
        v => return Err(kerr!("full_like.out: argument 0 must be a Tensor, found {}", v.kind())),
    };
    fill(args, 3, shape.as_slice(), args.scalar(1)?)
}

/// `zeros.out(SymInt[] size, *, Tensor(a!) out)`: [size, out, out].
pub fn zeros_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    fill(args, 1, &to_sizes(&args.int_list(0)?)?, Scalar::Int(0))
}

/// `ones.out(SymInt[] size, *, Tensor(a!) out)`: [size, out, out].
pub fn ones_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    fill(args, 1, &to_sizes(&args.int_list(0)?)?, Scalar::Int(1))
}

/// `scalar_tensor.out(Scalar s, *, Tensor(a!) out)`: a 0-dim tensor holding `s`.
pub fn scalar_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    fill(args, 1, &[], args.scalar(0)?)
}

/// Fills args[out] with `start, start + step, …` below `end` (above it for a negative step).
/// The length is `ceil((end - start) / step)` computed in f64, as PyTorch does.
fn arange(args: &KernelArgs<'_>, out: usize, name: &str, start: Scalar, end: Scalar, step: Scalar) -> KernelResult {
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    if !(s.is_finite() && e.is_finite() && st.is_finite()) {
        return Err(kerr!("{name}: start {s}, end {e} and step {st} must be finite"));
    }
    if st == 0.0 {
        return Err(kerr!("{name}: step must be nonzero"));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err(kerr!("{name}: end {e} is on the wrong side of start {s} for step {st}"));
    }
    let len = libm::ceil((e - s) / st);
    if len > usize::MAX as f64 {
        return Err(kerr!("{name}: length {len} is too large"));
    }
    let len = len as usize;
    let mut to = args.out(out)?;
    to.resize(&[len])?;
    let mut eo = ElemsMut::of(&mut to)?;
    if start.is_floating() || end.is_floating() || step.is_floating() {
        for i in 0..len {
            eo.set_f64(i, s + i as f64 * st);
        }
    } else {
        // All-integer ranges stay exact in i64 (values are within [start, end], no overflow).
        let (si, sti) = (start.to_i64(), step.to_i64());
        for i in 0..len {
            eo.set_i64(i, si + i as i64 * sti);
        }
    }
    Ok(())
}

/// `arange.out(Scalar end, *, Tensor(a!) out)`: [end, out, out].
pub fn arange_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    arange(args, 1, "arange.out", Scalar::Int(0), args.scalar(0)?, Scalar::Int(1))
}

/// `arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out)`:
/// [start, end, step, out, out].
pub fn arange_start_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    arange(args, 3, "arange.start_out", args.scalar(0)?, args.scalar(1)?, args.scalar(2)?)
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn full_float_int_bool_half() {
        let mut h = OpHarness::new();
        let size = h.int_list(&[2, 3]);
        let v = h.double(1.5);
        let o = h.out(ScalarType::Float, &[2, 3]);
        h.call(super::full_out, &[size, v, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.5; 6]);

        let size5 = h.int_list(&[5]);
        let seven = h.int(7);
        let oi = h.out(ScalarType::Long, &[5]);
        h.call(super::full_out, &[size5, seven, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![7; 5]);

        let ninf = h.double(f64::NEG_INFINITY);
        let of = h.out(ScalarType::Float, &[5]);
        h.call(super::full_out, &[size5, ninf, of, of]).unwrap();
        assert_eq!(h.read::<f32>(of), vec![f32::NEG_INFINITY; 5]);

        let t = h.bool(true);
        let ob = h.out(ScalarType::Bool, &[5]);
        h.call(super::full_out, &[size5, t, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![true; 5]);

        let oh = h.out(ScalarType::Half, &[2, 3]);
        h.call(super::full_out, &[size, v, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f32(1.5); 6]);
    }

    #[test]
    fn full_rejects_wrong_static_size() {
        let mut h = OpHarness::new();
        let size = h.int_list(&[4]);
        let v = h.int(0);
        let o = h.out(ScalarType::Float, &[3]);
        let e = h.call(super::full_out, &[size, v, o, o]).unwrap_err();
        assert!(e.message.contains("static shape"), "{e}");
        let neg = h.int_list(&[-1]);
        assert!(h.call(super::full_out, &[neg, v, o, o]).is_err());
    }

    #[test]
    fn full_like_zeros_ones_scalar_tensor() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 2], &[5, 6, 7, 8]);
        let v = h.double(2.5);
        let none = h.none();
        let o = h.out(ScalarType::Float, &[2, 2]);
        h.call(super::full_like_out, &[x, v, none, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![2.5; 4]);
        let zero = h.int(0);
        let oi = h.out(ScalarType::Long, &[2, 2]);
        h.call(super::full_like_out, &[x, zero, none, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![0; 4]);

        let size = h.int_list(&[3]);
        let oz = h.out(ScalarType::Int, &[3]);
        h.call(super::ones_out, &[size, oz, oz]).unwrap();
        assert_eq!(h.read::<i32>(oz), vec![1; 3]);
        h.call(super::zeros_out, &[size, oz, oz]).unwrap();
        assert_eq!(h.read::<i32>(oz), vec![0; 3]);

        let s = h.double(f64::NEG_INFINITY);
        let os = h.out(ScalarType::Float, &[]);
        h.call(super::scalar_tensor_out, &[s, os, os]).unwrap();
        assert_eq!(h.read::<f32>(os), vec![f32::NEG_INFINITY]);
        assert_eq!(h.sizes(os), vec![0usize; 0]);
    }

    #[test]
    fn arange_lengths_and_values() {
        let mut h = OpHarness::new();
        // arange(5.0, -1.0, -0.5): 12 values.
        let (s, e, st) = (h.double(5.0), h.double(-1.0), h.double(-0.5));
        let o = h.out_dynamic(ScalarType::Float, &[16]);
        h.call(super::arange_start_out, &[s, e, st, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), (0..12).map(|i| 5.0 - 0.5 * i as f32).collect::<alloc::vec::Vec<_>>());

        let (s, e, st) = (h.int(1), h.int(20), h.int(3));
        let oi = h.out(ScalarType::Long, &[7]);
        h.call(super::arange_start_out, &[s, e, st, oi, oi]).unwrap();
        assert_eq!(h.read::<i64>(oi), vec![1, 4, 7, 10, 13, 16, 19]);

        // ceil((1 - 0) / 0.3) = 4.
        let (s, e, st) = (h.double(0.0), h.double(1.0), h.double(0.3));
        let of = h.out_dynamic(ScalarType::Double, &[8]);
        h.call(super::arange_start_out, &[s, e, st, of, of]).unwrap();
        assert_eq!(h.read::<f64>(of), vec![0.0, 0.3, 0.6, 0.3 * 3.0]);

        let end = h.int(4);
        let oe = h.out(ScalarType::Float, &[4]);
        h.call(super::arange_out, &[end, oe, oe]).unwrap();
        assert_eq!(h.read::<f32>(oe), vec![0., 1., 2., 3.]);

        // Empty range.
        let (s, e, st) = (h.int(3), h.int(3), h.int(1));
        let o0 = h.out_dynamic(ScalarType::Long, &[4]);
        h.call(super::arange_start_out, &[s, e, st, o0, o0]).unwrap();
        assert_eq!(h.sizes(o0), vec![0]);
    }

    #[test]
    fn arange_rejects_bad_steps() {
        let mut h = OpHarness::new();
        let o = h.out_dynamic(ScalarType::Long, &[8]);
        let (s, e, zero, neg) = (h.int(0), h.int(5), h.int(0), h.int(-1));
        let err = h.call(super::arange_start_out, &[s, e, zero, o, o]).unwrap_err();
        assert!(err.message.contains("nonzero"), "{err}");
        let err = h.call(super::arange_start_out, &[s, e, neg, o, o]).unwrap_err();
        assert!(err.message.contains("wrong side"), "{err}");
        // Too long for the planned bound.
        let (big, one) = (h.int(100), h.int(1));
        assert!(h.call(super::arange_start_out, &[s, big, one, o, o]).is_err());
    }
}
