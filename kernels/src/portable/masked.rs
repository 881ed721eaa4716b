//! Bool masks: `masked_fill`, `masked_scatter`, `masked_select`, and `nonzero` (the positions
//! a mask selects). All move raw element bytes, so they work for every dtype.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::index::{check_io, checked_numel, contiguous_strides};
use super::scatter::scalar_element;
use super::util::{broadcast_shapes, broadcast_strides, for_each_broadcast, require_contiguous, Elems};

rbuild_runtime::kernel_table! {
    "aten::masked_fill.Scalar_out" => masked_fill_scalar_out,
    "aten::masked_scatter.out" => masked_scatter_out,
    "aten::masked_select.out" => masked_select_out,
    "aten::nonzero.out" => nonzero_out,
}

/// The broadcast of self and a Bool mask: the result shape, the strides to read each under it,
/// and the mask's bytes.
struct MaskedView<'a> {
    sizes: Vec<usize>,
    self_strides: Vec<usize>,
    mask_strides: Vec<usize>,
    mask: &'a [u8],
}

fn masked_view<'a>(inp: &TensorRef<'_>, mask: &TensorRef<'a>, what: &str) -> KernelResult<MaskedView<'a>> {
    if mask.dtype != ScalarType::Bool {
        return Err(kerr!("{what}: mask must be a Bool tensor, got {}", mask.dtype));
    }
    require_contiguous(mask, what)?;
    let sizes = broadcast_shapes(inp.sizes(), mask.sizes()).map_err(|_| {
        kerr!("{what}: mask of shape {:?} cannot be broadcast with self of shape {:?}", mask.sizes(), inp.sizes())
    })?;
    checked_numel(&sizes, what)?;
    Ok(MaskedView {
        self_strides: broadcast_strides(inp.sizes(), &sizes)?,
        mask_strides: broadcast_strides(mask.sizes(), &sizes)?,
        mask: mask.data()?,
        sizes,
    })
}

/// `masked_fill.Scalar_out(Tensor self, Tensor mask, Scalar value, *, Tensor(a!) out)`: args =
/// [self, mask, value, out, out]. out has the broadcast shape of self and mask; `value`
/// (converted to self's dtype, refusing overflow) where mask is true, self elsewhere.
pub fn masked_fill_scalar_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "masked_fill.Scalar_out";
    let (inp, mask) = (args.tensor(0)?, args.tensor(1)?);
    let mut out = args.out(3)?;
    check_io(&inp, &out, WHAT)?;
    let view = masked_view(&inp, &mask, WHAT)?;
    let value = scalar_element(inp.dtype, args.scalar(2)?, WHAT)?;
    out.resize(&view.sizes)?;
    let es = value.len();
    let (src, dst) = (inp.bytes(), out.bytes_mut());
    for_each_broadcast(&view.sizes, [&view.self_strides, &view.mask_strides], |o, [i, m]| {
        let from = if view.mask[m] != 0 { &value[..] } else { &src[i * es..(i + 1) * es] };
        dst[o * es..(o + 1) * es].copy_from_slice(from);
    });
    Ok(())
}

/// `masked_scatter.out(Tensor self, Tensor mask, Tensor source, *, Tensor(a!) out)`: args =
/// [self, mask, source, out, out]. out has the broadcast shape of self and mask; where mask is
/// true it takes source's elements one after another (row-major), self elsewhere.
pub fn masked_scatter_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "masked_scatter.out";
    let (inp, mask, source) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let mut out = args.out(3)?;
    check_io(&inp, &out, WHAT)?;
    if source.dtype != inp.dtype {
        return Err(kerr!("{WHAT}: source dtype {} differs from self dtype {}", source.dtype, inp.dtype));
    }
    require_contiguous(&source, WHAT)?;
    let view = masked_view(&inp, &mask, WHAT)?;
    // Count first so that a short source is an error before anything is written.
    let mut selected = 0usize;
    for_each_broadcast(&view.sizes, [&view.mask_strides], |_, [m]| selected += (view.mask[m] != 0) as usize);
    if selected > source.numel() {
        return Err(kerr!(
            "{WHAT}: the mask selects {selected} elements but source has only {} (shape {:?})",
            source.numel(),
            source.sizes()
        ));
    }
    out.resize(&view.sizes)?;
    let es = inp.dtype.size();
    let (src, from_source, dst) = (inp.bytes(), source.bytes(), out.bytes_mut());
    let mut next = 0usize;
    for_each_broadcast(&view.sizes, [&view.self_strides, &view.mask_strides], |o, [i, m]| {
        let from = if view.mask[m] != 0 {
            next += 1;
            &from_source[(next - 1) * es..next * es]
        } else {
            &src[i * es..(i + 1) * es]
        };
        dst[o * es..(o + 1) * es].copy_from_slice(from);
    });
    Ok(())
}

/// `masked_select.out(Tensor self, Tensor mask, *, Tensor(a!) out)`: args = [self, mask, out,
/// out]. The elements of self (broadcast with mask) where mask is true, as a 1-D tensor whose
/// length depends on the data (out is resized within its bound).
pub fn masked_select_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "masked_select.out";
    let (inp, mask) = (args.tensor(0)?, args.tensor(1)?);
    let mut out = args.out(2)?;
    check_io(&inp, &out, WHAT)?;
    let view = masked_view(&inp, &mask, WHAT)?;
    let mut picked: Vec<usize> = Vec::new();
    for_each_broadcast(&view.sizes, [&view.self_strides, &view.mask_strides], |_, [i, m]| {
        if view.mask[m] != 0 {
            picked.push(i);
        }
    });
    out.resize(&[picked.len()])?;
    let es = inp.dtype.size();
    let (src, dst) = (inp.bytes(), out.bytes_mut());
    for (o, &i) in picked.iter().enumerate() {
        dst[o * es..(o + 1) * es].copy_from_slice(&src[i * es..(i + 1) * es]);
    }
    Ok(())
}

/// `nonzero.out(Tensor self, *, Tensor(a!) out)`: args = [self, out, out]. The coordinates of
/// self's nonzero elements (NaN counts as nonzero, -0.0 does not) in row-major order, as a Long
/// tensor of shape [count, rank] (out is resized within its bound).
pub fn nonzero_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "nonzero.out";
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    if out.dtype != ScalarType::Long {
        return Err(kerr!("{WHAT}: out must be a Long tensor, got {}", out.dtype));
    }
    require_contiguous(&inp, WHAT)?;
    let e = Elems::of(&inp)?;
    let hits: Vec<usize> = (0..e.len()).filter(|&i| e.bool(i)).collect();
    let rank = inp.dim();
    out.resize(&[hits.len(), rank])?;
    let sizes = inp.sizes();
    let strides = contiguous_strides(sizes);
    let dst = out.data_mut::<i64>()?;
    for (row, &i) in hits.iter().enumerate() {
        for d in 0..rank {
            dst[row * rank + d] = ((i / strides[d]) % sizes[d]) as i64;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    #[test]
    fn masked_fill_broadcasts_mask_and_converts_value() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let m = h.bool_tensor(&[2, 1], &[true, false]);
        let v = h.double(-1.5);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(masked_fill_scalar_out, &[x, m, v, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![-1.5, -1.5, -1.5, 4., 5., 6.]);

        // The result takes the broadcast shape of self and mask.
        let x = h.i64(&[3], &[1, 2, 3]);
        let m = h.bool_tensor(&[2, 1], &[false, true]);
        let v = h.int(9);
        let out = h.out(ScalarType::Long, &[2, 3]);
        h.call(masked_fill_scalar_out, &[x, m, v, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 2, 3, 9, 9, 9]);

        let x = h.bool_tensor(&[2], &[false, false]);
        let m = h.bool_tensor(&[2], &[true, false]);
        let v = h.bool(true);
        let out = h.out(ScalarType::Bool, &[2]);
        h.call(masked_fill_scalar_out, &[x, m, v, out, out]).unwrap();
        assert_eq!(h.read_bool(out), vec![true, false]);
    }

    #[test]
    fn masked_fill_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.tensor::<u8>(ScalarType::Byte, &[2], &[1, 2]);
        let m = h.bool_tensor(&[2], &[true, false]);
        let out = h.out(ScalarType::Byte, &[2]);
        let big = h.int(300);
        assert!(h.call(masked_fill_scalar_out, &[x, m, big, out, out]).unwrap_err().message.contains("overflow"));
        let v = h.int(1);
        let int_mask = h.i64(&[2], &[1, 0]);
        assert!(h.call(masked_fill_scalar_out, &[x, int_mask, v, out, out]).is_err());
        let m3 = h.bool_tensor(&[3], &[true, false, true]);
        assert!(h.call(masked_fill_scalar_out, &[x, m3, v, out, out]).is_err());
        let out_f = h.out(ScalarType::Float, &[2]);
        assert!(h.call(masked_fill_scalar_out, &[x, m, v, out_f, out_f]).is_err());
    }

    #[test]
    fn masked_scatter_takes_source_in_order() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 2], &[0., 0., 0., 0.]);
        let m = h.bool_tensor(&[1, 2], &[false, true]);
        let s = h.f32(&[5], &[1., 2., 3., 4., 5.]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(masked_scatter_out, &[x, m, s, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 1., 0., 2.]);

        let short = h.f32(&[1], &[1.]);
        let e = h.call(masked_scatter_out, &[x, m, short, out, out]).unwrap_err();
        assert!(e.message.contains("selects 2"), "{e}");
        let s64 = h.i64(&[2], &[1, 2]);
        assert!(h.call(masked_scatter_out, &[x, m, s64, out, out]).is_err());
    }

    #[test]
    fn masked_select_resizes_to_the_selection() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let m = h.bool_tensor(&[3], &[true, false, true]);
        let out = h.out_dynamic(ScalarType::Long, &[6]);
        h.call(masked_select_out, &[x, m, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![4]);
        assert_eq!(h.read::<i64>(out), vec![1, 3, 4, 6]);

        let none = h.bool_tensor(&[3], &[false; 3]);
        h.call(masked_select_out, &[x, none, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![0]);

        // A mask of higher rank broadcasts self.
        let x = h.f32(&[2], &[7., 8.]);
        let m = h.bool_tensor(&[2, 2], &[true, true, false, true]);
        let out = h.out_dynamic(ScalarType::Float, &[4]);
        h.call(masked_select_out, &[x, m, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![7., 8., 8.]);

        let small = h.out(ScalarType::Float, &[2]);
        assert!(h.call(masked_select_out, &[x, m, small, small]).is_err());
    }

    #[test]
    fn nonzero_coordinates() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0., -0., f32::NAN, 1.5, 0., -2.]);
        let out = h.out_dynamic(ScalarType::Long, &[6, 2]);
        h.call(nonzero_out, &[x, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![3, 2]);
        assert_eq!(h.read::<i64>(out), vec![0, 2, 1, 0, 1, 2]);

        let b = h.bool_tensor(&[2, 1, 2], &[false, true, true, false]);
        let out = h.out_dynamic(ScalarType::Long, &[4, 3]);
        h.call(nonzero_out, &[b, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![0, 0, 1, 1, 0, 0]);

        let s = h.tensor::<i32>(ScalarType::Int, &[], &[3]);
        let out = h.out_dynamic(ScalarType::Long, &[1, 0]);
        h.call(nonzero_out, &[s, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![1, 0]);

        let bad = h.out_dynamic(ScalarType::Int, &[6, 2]);
        assert!(h.call(nonzero_out, &[x, bad, bad]).is_err());
        let small = h.out_dynamic(ScalarType::Long, &[2, 2]);
        assert!(h.call(nonzero_out, &[x, small, small]).is_err());
    }
}
