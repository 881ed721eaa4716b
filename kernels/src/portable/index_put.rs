//! `index_put`: writes (or adds) values at the positions advanced indexing selects
//! (`self[indices] = values`), out of place and in place. Plain writes copy raw element bytes,
//! so they work for every dtype.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::kerr;

use super::index::{check_io, IndexPlan};
use super::scatter::add_elements;
use super::util::{broadcast_strides, for_each_broadcast, require_contiguous};

rbuild_runtime::kernel_table! {
    "aten::index_put.out" => index_put_out,
    "aten::index_put_" => index_put_,
}

/// Writes (or adds) `values`, broadcast to the shape of `dst[indices]`, into `dst` at the
/// positions `plan` describes. Repeated positions: the last write wins, or all accumulate in
/// row-major order.
fn put_values(dst: &mut TensorMut<'_>, plan: &IndexPlan, values: &TensorRef<'_>, accumulate: bool, what: &str) -> KernelResult {
    if values.dtype != dst.dtype {
        return Err(kerr!("{what}: values dtype {} differs from self dtype {}", values.dtype, dst.dtype));
    }
    require_contiguous(values, what)?;
    let vstrides = broadcast_strides(values.sizes(), &plan.out_sizes).map_err(|_| {
        kerr!(
            "{what}: values of shape {:?} cannot be broadcast to the indexing result of shape {:?}",
            values.sizes(),
            plan.out_sizes
        )
    })?;
    let n = plan.numel();
    if n == 0 {
        return Ok(());
    }
    let block = plan.block;
    // Value element for each result element: the identity unless values broadcast.
    let voff: Option<Vec<usize>> = (values.numel() != n).then(|| {
        let mut v = Vec::with_capacity(n);
        for_each_broadcast(&plan.out_sizes, [&vstrides], |_, [i]| v.push(i));
        v
    });
    let value_at = |x: usize| voff.as_ref().map_or(x, |t| t[x]);
    if accumulate {
        let mut writes = Vec::with_capacity(n);
        plan.for_each_block(|b, off| writes.extend((0..block).map(|j| (off + j, value_at(b * block + j)))));
        return add_elements(what, dst, values, &writes);
    }
    let es = dst.dtype.size();
    let (vals, d) = (values.bytes(), dst.bytes_mut());
    match voff {
        // Same layout as the result: whole blocks at once.
        None => plan.for_each_block(|b, off| {
            let len = block * es;
            d[off * es..off * es + len].copy_from_slice(&vals[b * len..(b + 1) * len]);
        }),
        Some(_) => plan.for_each_block(|b, off| {
            for j in 0..block {
                let v = value_at(b * block + j);
                d[(off + j) * es..(off + j + 1) * es].copy_from_slice(&vals[v * es..(v + 1) * es]);
            }
        }),
    }
    Ok(())
}

/// `index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *,
/// Tensor(a!) out)`: args = [self, indices, values, accumulate, out, out]. out = self, then
/// out[indices] = values (or += with `accumulate`), indices as in `index.Tensor`: None entries,
/// Long/Int tensors broadcast together (negative indices wrap), bool masks.
pub fn index_put_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "index_put.out";
    let inp = args.tensor(0)?;
    let raw = args.opt_tensor_list(1)?;
    let values = args.tensor(2)?;
    let accumulate = args.bool(3)?;
    let mut out = args.out(4)?;
    check_io(&inp, &out, WHAT)?;
    let plan = IndexPlan::new(inp.sizes(), &raw, WHAT)?;
    out.resize(inp.sizes())?;
    out.bytes_mut().copy_from_slice(inp.bytes());
    put_values(&mut out, &plan, &values, accumulate, WHAT)
}

/// `index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) ->
/// Tensor(a!)`: args = [self, indices, values, accumulate, self]. `index_put.out` written into
/// self (a KV-cache update in exported LLMs).
pub fn index_put_(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "index_put_";
    let mut target = args.out(0)?;
    let raw = args.opt_tensor_list(1)?;
    let values = args.tensor(2)?;
    let accumulate = args.bool(3)?;
    if !target.dim_order.is_contiguous() {
        return Err(kerr!("{WHAT}: self dim order {:?} is not supported (contiguous only)", target.dim_order));
    }
    let sizes = target.sizes().to_vec();
    let plan = IndexPlan::new(&sizes, &raw, WHAT)?;
    put_values(&mut target, &plan, &values, accumulate, WHAT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::iota;
    use half::bf16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    fn put(
        h: &mut OpHarness,
        x: u32,
        indices: &[Option<u32>],
        values: u32,
        accumulate: bool,
        out: u32,
    ) -> Result<(), rbuild_runtime::KernelError> {
        let list = h.opt_tensor_list(indices);
        let acc = h.bool(accumulate);
        h.call(index_put_out, &[x, list, values, acc, out, out])
    }

    #[test]
    fn index_put_rows_negative_and_accumulate() {
        let mut h = OpHarness::new();
        let x = h.f32(&[4, 2], &[0.; 8]);
        let i = h.i64(&[2], &[-1, 1]);
        let v = h.f32(&[2, 2], &[1., 2., 3., 4.]);
        let out = h.out(ScalarType::Float, &[4, 2]);
        put(&mut h, x, &[Some(i)], v, false, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0., 3., 4., 0., 0., 1., 2.]);

        let i = h.i64(&[3], &[0, 2, 0]);
        let j = h.tensor::<i32>(ScalarType::Int, &[3], &[1, 0, 1]);
        let v = h.f32(&[3], &[5., 6., 7.]);
        put(&mut h, x, &[Some(i), Some(j)], v, true, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 12., 0., 0., 6., 0., 0., 0.]);
        // Without accumulate the last duplicate wins.
        put(&mut h, x, &[Some(i), Some(j)], v, false, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 7., 0., 0., 6., 0., 0., 0.]);
    }

    #[test]
    fn index_put_none_prefix_broadcast_values_and_mask() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let j = h.i64(&[2], &[2, 0]);
        let v = h.f32(&[1], &[-1.]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        put(&mut h, x, &[None, Some(j)], v, false, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![-1., 1., -1., -1., 4., -1.]);

        let m = h.bool_tensor(&[2, 3], &[true, false, false, false, true, true]);
        let v = h.f32(&[3], &[10., 20., 30.]);
        put(&mut h, x, &[Some(m)], v, true, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![10., 1., 2., 3., 24., 35.]);

        let rowmask = h.bool_tensor(&[2], &[false, true]);
        let v = h.f32(&[3], &[7., 8., 9.]);
        put(&mut h, x, &[Some(rowmask)], v, false, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 1., 2., 7., 8., 9.]);

        // No index tensors: values broadcast over the whole tensor.
        let v = h.f32(&[3], &[1., 1., 1.]);
        put(&mut h, x, &[None], v, true, out).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 2., 3., 4., 5., 6.]);
    }

    #[test]
    fn index_put_other_dtypes() {
        let mut h = OpHarness::new();
        let x = h.bool_tensor(&[3], &[true, false, false]);
        let i = h.i64(&[2], &[0, 1]);
        let v = h.bool_tensor(&[2], &[true, true]);
        let out = h.out(ScalarType::Bool, &[3]);
        put(&mut h, x, &[Some(i)], v, true, out).unwrap();
        assert_eq!(h.read_bool(out), vec![true, true, false]);

        let x = h.tensor(ScalarType::BFloat16, &[2], &[bf16::from_f32(1.5), bf16::ZERO]);
        let i = h.i64(&[2], &[1, 1]);
        let v = h.tensor(ScalarType::BFloat16, &[2], &[bf16::from_f32(0.25), bf16::from_f32(0.5)]);
        let out = h.out(ScalarType::BFloat16, &[2]);
        put(&mut h, x, &[Some(i)], v, true, out).unwrap();
        assert_eq!(h.read::<bf16>(out), vec![bf16::from_f32(1.5), bf16::from_f32(0.75)]);
    }

    #[test]
    fn index_put_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3, 2], &iota(6));
        let out = h.out(ScalarType::Float, &[3, 2]);
        let v = h.f32(&[2], &[1., 2.]);
        let far = h.i64(&[1], &[5]);
        let e = put(&mut h, x, &[None, Some(far)], v, false, out).unwrap_err();
        assert!(e.message.contains("index 5") && e.message.contains("indices[1]"), "{e}");
        let low = h.i64(&[1], &[-4]);
        assert!(put(&mut h, x, &[Some(low)], v, false, out).unwrap_err().message.contains("index -4"));
        let ok = h.i64(&[2], &[0, 1]);
        let v3 = h.f32(&[3], &[1., 2., 3.]);
        assert!(put(&mut h, x, &[Some(ok)], v3, false, out).unwrap_err().message.contains("broadcast"));
        let vi = h.i64(&[2], &[1, 2]);
        assert!(put(&mut h, x, &[Some(ok)], vi, false, out).is_err());
        let fidx = h.f32(&[1], &[0.]);
        assert!(put(&mut h, x, &[Some(fidx)], v, false, out).is_err());
        assert!(put(&mut h, x, &[Some(ok), Some(ok), Some(ok)], v, false, out).is_err());
        let badmask = h.bool_tensor(&[2], &[true, false]);
        assert!(put(&mut h, x, &[Some(badmask)], v, false, out).is_err());
        let a = h.i64(&[2], &[0, 1]);
        let b = h.i64(&[3], &[0, 1, 0]);
        assert!(put(&mut h, x, &[Some(a), Some(b)], v, false, out).is_err());
    }

    #[test]
    fn index_put_in_place_kv_cache_rows() {
        let mut h = OpHarness::new();
        let cache = h.out(ScalarType::Float, &[1, 4, 2]);
        let pos = h.i64(&[2], &[1, 3]);
        let v = h.f32(&[1, 2, 2], &[1., 2., 3., 4.]);
        let list = h.opt_tensor_list(&[None, Some(pos)]);
        let f = h.bool(false);
        h.call(index_put_, &[cache, list, v, f, cache]).unwrap();
        assert_eq!(h.read::<f32>(cache), vec![0., 0., 1., 2., 0., 0., 3., 4.]);
        let t = h.bool(true);
        h.call(index_put_, &[cache, list, v, t, cache]).unwrap();
        assert_eq!(h.read::<f32>(cache), vec![0., 0., 2., 4., 0., 0., 6., 8.]);
        let bad = h.i64(&[1], &[4]);
        let list = h.opt_tensor_list(&[None, Some(bad)]);
        let v1 = h.f32(&[2], &[1., 2.]);
        assert!(h.call(index_put_, &[cache, list, v1, f, cache]).is_err());
    }
}
