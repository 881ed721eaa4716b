//! Complex tensors (interleaved `[re, im]` pairs, as `_fft_r2c` writes them): their conjugate
//! and their real view.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use super::shape::copy_convert;

rbuild_runtime::kernel_table! {
    "aten::_conj_physical.out" => conj_physical_out,
    "aten::view_as_real_copy.out" => view_as_real_copy_out,
}

/// The real dtype of one component of a complex dtype.
fn component(dtype: ScalarType) -> Option<ScalarType> {
    match dtype {
        ScalarType::ComplexHalf => Some(ScalarType::Half),
        ScalarType::ComplexFloat => Some(ScalarType::Float),
        ScalarType::ComplexDouble => Some(ScalarType::Double),
        _ => None,
    }
}

/// `_conj_physical.out(Tensor self, *, Tensor(a!) out)`: args = [self, out, out]. A complex
/// tensor's imaginary parts negated; a real tensor is its own conjugate (PyTorch returns a copy,
/// where ExecuTorch's portable kernel rejects real inputs).
pub fn conj_physical_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    if inp.dtype != out.dtype {
        return Err(kerr!("_conj_physical: out dtype {} differs from self's {}", out.dtype, inp.dtype));
    }
    if !inp.dim_order.is_contiguous() || !out.dim_order.is_contiguous() {
        // Real tensors go through the layout-aware copy; complex ones are handled contiguous.
        if component(inp.dtype).is_none() {
            return copy_convert(&inp, &mut out);
        }
        return Err(kerr!("_conj_physical: complex tensors must be contiguous"));
    }
    out.resize(inp.sizes())?;
    match inp.dtype {
        ScalarType::ComplexFloat => {
            let (x, y) = (inp.data::<[f32; 2]>()?, out.data_mut::<[f32; 2]>()?);
            y.iter_mut().zip(x).for_each(|(y, x)| *y = [x[0], -x[1]]);
        }
        ScalarType::ComplexDouble => {
            let (x, y) = (inp.data::<[f64; 2]>()?, out.data_mut::<[f64; 2]>()?);
            y.iter_mut().zip(x).for_each(|(y, x)| *y = [x[0], -x[1]]);
        }
        ScalarType::ComplexHalf => {
            // Two f16 halves per element: flip the sign bit of the second.
            let (x, y) = (inp.bytes(), out.bytes_mut());
            y.copy_from_slice(x);
            y.chunks_exact_mut(4).for_each(|e| e[3] ^= 0x80);
        }
        _ => return copy_convert(&inp, &mut out),
    }
    Ok(())
}

/// `view_as_real_copy.out(Tensor self, *, Tensor(a!) out)`: args = [self, out, out]. A complex
/// tensor of shape S as a real one of shape S + [2] (the same bytes).
pub fn view_as_real_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    let real = component(inp.dtype).ok_or_else(|| kerr!("view_as_real_copy: self must be complex, got {}", inp.dtype))?;
    if out.dtype != real {
        return Err(kerr!("view_as_real_copy: out must be {real} for a {} self, got {}", inp.dtype, out.dtype));
    }
    if !inp.dim_order.is_contiguous() || !out.dim_order.is_contiguous() {
        return Err(kerr!("view_as_real_copy: self and out must be contiguous"));
    }
    let mut sizes = inp.sizes().to_vec();
    sizes.push(2);
    out.resize(&sizes)?;
    out.bytes_mut().copy_from_slice(inp.bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn conjugate_negates_imaginary_parts_and_copies_reals() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::ComplexFloat, &[2], &[[1.0f32, 2.0], [-3.0, -0.5]]);
        let out = h.out(ScalarType::ComplexFloat, &[2]);
        h.call(super::conj_physical_out, &[x, out, out]).unwrap();
        assert_eq!(h.read::<[f32; 2]>(out), vec![[1.0, -2.0], [-3.0, 0.5]]);

        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1.0, -2.0, 0.5]);
        let out = h.out(ScalarType::Float, &[3]);
        h.call(super::conj_physical_out, &[x, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1.0, -2.0, 0.5]);

        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1.0, -2.0, 0.5]);
        let out = h.out(ScalarType::Double, &[3]);
        assert!(h.call(super::conj_physical_out, &[x, out, out]).is_err(), "dtype change");
    }

    #[test]
    fn real_view_appends_a_dim_of_two() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::ComplexDouble, &[1, 2], &[[1.0f64, 2.0], [3.0, 4.0]]);
        let out = h.out(ScalarType::Double, &[1, 2, 2]);
        h.call(super::view_as_real_copy_out, &[x, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), vec![1.0, 2.0, 3.0, 4.0]);

        let mut h = OpHarness::new();
        let x = h.f32(&[2], &[1.0, 2.0]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        let err = h.call(super::view_as_real_copy_out, &[x, out, out]).unwrap_err();
        assert!(err.message.contains("must be complex"), "{err}");
    }
}
