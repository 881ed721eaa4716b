//! Rearrangements that move every element somewhere else: `flip`, `roll`, `pixel_shuffle` and
//! `pixel_unshuffle`; plus the two dtype-agnostic byte movers they share with `pad` and `copy`:
//! a gather through per-dim offset tables and a strided-to-strided copy.
//!
//! Inputs may have any dim order (their strides come from it); outputs are written in their
//! own dim order.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::kerr;

use super::shape::{check_dtype, dim_order_strides, gather_bytes, strides_of};
use super::util::{for_each_broadcast, normalize_dims};

rbuild_runtime::kernel_table! {
    "aten::flip.out" => flip_out,
    "aten::roll.out" => roll_out,
    "aten::pixel_shuffle.out" => pixel_shuffle_out,
    "aten::pixel_unshuffle.out" => pixel_unshuffle_out,
}

// ---------------------------------------------------------------------------------------------
// Byte movers
// ---------------------------------------------------------------------------------------------

/// Source and destination viewed as machine words of one element each, when the element size
/// is a word size and both buffers are aligned for it.
enum Words<'s, 'd> {
    W1(&'s [u8], &'d mut [u8]),
    W2(&'s [u16], &'d mut [u16]),
    W4(&'s [u32], &'d mut [u32]),
    W8(&'s [u64], &'d mut [u64]),
}

fn words<'s, 'd>(esize: usize, src: &'s [u8], dst: &'d mut [u8]) -> Option<Words<'s, 'd>> {
    fn pair<'s, 'd, T: bytemuck::Pod>(src: &'s [u8], dst: &'d mut [u8]) -> Option<(&'s [T], &'d mut [T])> {
        Some((bytemuck::try_cast_slice(src).ok()?, bytemuck::try_cast_slice_mut(dst).ok()?))
    }
    match esize {
        1 => Some(Words::W1(src, dst)),
        2 => pair(src, dst).map(|(s, d)| Words::W2(s, d)),
        4 => pair(src, dst).map(|(s, d)| Words::W4(s, d)),
        8 => pair(src, dst).map(|(s, d)| Words::W8(s, d)),
        _ => None,
    }
}

/// Fills the contiguous `dst` (elements of `esize` bytes) with `src[t_0[i_0] + .. + t_r[i_r]]`
/// for every index (i_0, .., i_r) in row-major order, where `tables[d]` maps an index along
/// output dim d to an element offset in `src`. Pads, flips and rolls are such tables.
pub(super) fn gather_tables(src: &[u8], dst: &mut [u8], esize: usize, tables: &[Vec<usize>]) -> KernelResult {
    let n = tables.iter().try_fold(1usize, |acc, t| acc.checked_mul(t.len())).ok_or_else(|| kerr!("gather size overflows"))?;
    if n == 0 {
        return Ok(());
    }
    if n.checked_mul(esize) != Some(dst.len()) {
        return Err(kerr!("output holds {} bytes but the gather writes {n} elements of {esize}", dst.len()));
    }
    let last = tables
        .iter()
        .try_fold(0usize, |acc, t| acc.checked_add(t.iter().copied().max().unwrap_or(0)))
        .ok_or_else(|| kerr!("gather offsets overflow"))?;
    if last >= src.len() / esize.max(1) {
        return Err(kerr!("gather reads element {last} of a source of {} elements", src.len() / esize.max(1)));
    }
    match words(esize, src, dst) {
        Some(Words::W1(s, d)) => gather_tables_typed(s, d, tables),
        Some(Words::W2(s, d)) => gather_tables_typed(s, d, tables),
        Some(Words::W4(s, d)) => gather_tables_typed(s, d, tables),
        Some(Words::W8(s, d)) => gather_tables_typed(s, d, tables),
        None => {
            // Any other element size: each element is `esize` consecutive bytes.
            let mut bytes: Vec<Vec<usize>> = tables.iter().map(|t| t.iter().map(|&o| o * esize).collect()).collect();
            bytes.push((0..esize).collect());
            gather_tables_typed(src, dst, &bytes)
        }
    }
    Ok(())
}

/// Maximal runs of consecutive offsets in a table: (start in the row, first offset, length).
fn runs_of(table: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (k, &off) in table.iter().enumerate() {
        match runs.last_mut() {
            Some((_, first, len)) if *first + *len == off => *len += 1,
            _ => runs.push((k, off, 1)),
        }
    }
    runs
}

fn gather_tables_typed<T: Copy>(src: &[T], dst: &mut [T], tables: &[Vec<usize>]) {
    let Some((inner, outer)) = tables.split_last() else {
        dst[0] = src[0];
        return;
    };
    let runs = runs_of(inner);
    let mut idx = vec![0usize; outer.len()];
    let mut base: usize = outer.iter().map(|t| t[0]).sum();
    for row in dst.chunks_exact_mut(inner.len()) {
        for &(at, off, len) in &runs {
            let from = base + off;
            if len == 1 {
                row[at] = src[from];
            } else {
                row[at..at + len].copy_from_slice(&src[from..from + len]);
            }
        }
        // Next outer index, keeping `base` equal to the sum of the outer tables' entries.
        for k in (0..outer.len()).rev() {
            base -= outer[k][idx[k]];
            idx[k] += 1;
            if idx[k] < outer[k].len() {
                base += outer[k][idx[k]];
                break;
            }
            idx[k] = 0;
            base += outer[k][0];
        }
    }
}

/// A strided view into a flat buffer, in elements: the offset of index 0 and one stride per dim.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub base: usize,
    pub strides: &'a [usize],
}

impl View<'_> {
    /// The largest element offset the view touches over `sizes` (all nonzero), if it fits.
    fn last(&self, sizes: &[usize]) -> Option<usize> {
        sizes.iter().zip(self.strides).try_fold(self.base, |acc, (&s, &t)| acc.checked_add((s - 1).checked_mul(t)?))
    }
}

/// Copies the elements of `src` seen through `from` onto `dst` seen through `to`, both over
/// `sizes`. Every offset is checked against the buffers first.
pub(super) fn copy_strided(src: &[u8], from: View<'_>, dst: &mut [u8], to: View<'_>, sizes: &[usize], esize: usize) -> KernelResult {
    if sizes.contains(&0) {
        return Ok(());
    }
    if from.strides.len() != sizes.len() || to.strides.len() != sizes.len() {
        return Err(kerr!("strided copy: {} sizes but {} and {} strides", sizes.len(), from.strides.len(), to.strides.len()));
    }
    let (src_n, dst_n) = (src.len() / esize.max(1), dst.len() / esize.max(1));
    if !from.last(sizes).is_some_and(|l| l < src_n) {
        return Err(kerr!("strided copy reads past its source of {src_n} elements"));
    }
    if !to.last(sizes).is_some_and(|l| l < dst_n) {
        return Err(kerr!("strided copy writes past its destination of {dst_n} elements"));
    }
    match words(esize, src, dst) {
        Some(Words::W1(s, d)) => copy_strided_typed(s, from, d, to, sizes),
        Some(Words::W2(s, d)) => copy_strided_typed(s, from, d, to, sizes),
        Some(Words::W4(s, d)) => copy_strided_typed(s, from, d, to, sizes),
        Some(Words::W8(s, d)) => copy_strided_typed(s, from, d, to, sizes),
        None => {
            let scale = |v: View<'_>| -> (usize, Vec<usize>) {
                let mut st: Vec<usize> = v.strides.iter().map(|&t| t * esize).collect();
                st.push(1);
                (v.base * esize, st)
            };
            let ((sb, ss), (db, ds)) = (scale(from), scale(to));
            let mut bsizes = sizes.to_vec();
            bsizes.push(esize);
            copy_strided_typed(src, View { base: sb, strides: &ss }, dst, View { base: db, strides: &ds }, &bsizes);
        }
    }
    Ok(())
}

fn copy_strided_typed<T: Copy>(src: &[T], from: View<'_>, dst: &mut [T], to: View<'_>, sizes: &[usize]) {
    let Some((&inner, outer)) = sizes.split_last() else {
        dst[to.base] = src[from.base];
        return;
    };
    let r = outer.len();
    let (fs, ts) = (from.strides[r], to.strides[r]);
    for_each_broadcast(outer, [&from.strides[..r], &to.strides[..r]], |_, [f, t]| {
        let (f, t) = (from.base + f, to.base + t);
        if fs == 1 && ts == 1 {
            dst[t..t + inner].copy_from_slice(&src[f..f + inner]);
        } else {
            for k in 0..inner {
                dst[t + k * ts] = src[f + k * fs];
            }
        }
    });
}

/// Resizes `out` to `sizes` and fills it through per-logical-dim offset `tables` into `inp`
/// (see [`gather_tables`]), honouring the output's dim order. Dtypes must match.
pub(super) fn write_tables(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, sizes: &[usize], tables: Vec<Vec<usize>>) -> KernelResult {
    check_dtype(inp, out)?;
    out.resize(sizes)?;
    let order = out.dim_order.as_slice();
    let tables = if order.len() == tables.len() && !out.dim_order.is_contiguous() {
        let mut slots: Vec<Option<Vec<usize>>> = tables.into_iter().map(Some).collect();
        order.iter().map(|&d| slots[d as usize].take().unwrap_or_default()).collect()
    } else {
        tables
    };
    let esize = out.dtype.size();
    gather_tables(inp.bytes(), out.bytes_mut(), esize, &tables)
}

/// Resizes `out` to `sizes` and fills it with a view of `inp` given per output dim as a list of
/// (size, element stride) sub-dims, outermost first, whose sizes multiply to that dim's size.
/// Used where one output dim interleaves several input dims (pixel shuffle).
fn write_grouped_view(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, sizes: &[usize], groups: &[Vec<(usize, usize)>]) -> KernelResult {
    check_dtype(inp, out)?;
    out.resize(sizes)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let order: Vec<usize> = if out.dim_order.as_slice().len() == sizes.len() {
        out.dim_order.as_slice().iter().map(|&d| d as usize).collect()
    } else {
        (0..sizes.len()).collect()
    };
    let (vsizes, vstrides): (Vec<usize>, Vec<usize>) = order.iter().flat_map(|&d| groups[d].iter().copied()).unzip();
    let esize = out.dtype.size();
    gather_bytes(inp.bytes(), out.bytes_mut(), esize, &vsizes, &vstrides)
}

// ---------------------------------------------------------------------------------------------
// flip and roll
// ---------------------------------------------------------------------------------------------

/// `flip.out(Tensor self, int[] dims, *, Tensor(a!) out)`: args = [self, dims, out, out].
pub fn flip_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let dims = normalize_dims(&args.int_list(1)?, inp.dim())?;
    let sizes = inp.sizes().to_vec();
    let strides = strides_of(&inp);
    let mut out = args.out(2)?;
    let tables = (0..sizes.len())
        .map(|d| {
            let (n, st) = (sizes[d], strides[d]);
            if dims.contains(&d) {
                (0..n).map(|i| (n - 1 - i) * st).collect()
            } else {
                (0..n).map(|i| i * st).collect()
            }
        })
        .collect();
    write_tables(&inp, &mut out, &sizes, tables)
}

/// `roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out)`: args =
/// [self, shifts, dims, out, out]. With no dims the tensor is rolled as if flattened (one
/// shift); otherwise each (shift, dim) pair rolls that dim, and repeated dims add up.
pub fn roll_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let shifts = args.int_list(1)?;
    let dims = args.int_list(2)?;
    let mut out = args.out(3)?;
    check_dtype(&inp, &out)?;
    let sizes = inp.sizes().to_vec();
    if dims.is_empty() {
        if shifts.len() != 1 {
            return Err(kerr!("roll: shifts {shifts:?} and dims [] must align (one shift rolls the flattened tensor)"));
        }
        return roll_flat(&inp, &mut out, shifts[0]);
    }
    if shifts.len() != dims.len() {
        return Err(kerr!("roll: shifts {shifts:?} and dims {dims:?} must have the same length"));
    }
    let mut total = vec![0usize; sizes.len()];
    for (&s, &d) in shifts.iter().zip(&dims) {
        let d = normalize_dim(d, sizes.len())?;
        if let Some(&n) = sizes.get(d).filter(|&&n| n > 0) {
            total[d] = (total[d] + s.rem_euclid(n as i64) as usize) % n;
        }
    }
    let strides = strides_of(&inp);
    // Output index i along a dim of size n reads input index (i - shift) mod n.
    let tables = (0..sizes.len())
        .map(|d| {
            let (n, st, sh) = (sizes[d], strides[d], total[d]);
            (0..n).map(|i| (i + n - sh) % n * st).collect()
        })
        .collect();
    write_tables(&inp, &mut out, &sizes, tables)
}

/// Rolls the row-major flattening of `inp` by `shift` into `out` (same shape).
fn roll_flat(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, shift: i64) -> KernelResult {
    let sizes = inp.sizes().to_vec();
    out.resize(&sizes)?;
    let n = inp.numel();
    if n == 0 {
        return Ok(());
    }
    // Flat output index i reads flat input index (i - shift) mod n: one table.
    let sh = shift.rem_euclid(n as i64) as usize;
    let esize = out.dtype.size();
    let flat: Vec<usize> = (0..n).map(|i| (i + n - sh) % n).collect();
    let contiguous_in = inp.dim_order.is_contiguous();
    let contiguous_out = out.dim_order.is_contiguous();
    if contiguous_in && contiguous_out {
        return gather_tables(inp.bytes(), out.bytes_mut(), esize, &[flat]);
    }
    // Other layouts: go through row-major copies of the input and of the result.
    let mut logical = vec![0u8; n * esize];
    gather_bytes(inp.bytes(), &mut logical, esize, &sizes, &strides_of(inp))?;
    let mut rolled = vec![0u8; n * esize];
    gather_tables(&logical, &mut rolled, esize, &[flat])?;
    let row_major = dim_order_strides(&sizes, &[]);
    let (psizes, pstrides) = super::shape::physical_view(&sizes, &row_major, out.dim_order.as_slice());
    gather_bytes(&rolled, out.bytes_mut(), esize, &psizes, &pstrides)
}

// ---------------------------------------------------------------------------------------------
// pixel_shuffle / pixel_unshuffle
// ---------------------------------------------------------------------------------------------

/// The (leading dims, C, H, W) of a pixel (un)shuffle input, and the factor as usize.
fn pixel_args(inp: &TensorRef<'_>, factor: i64, what: &str) -> KernelResult<(usize, usize, usize, usize)> {
    if inp.dim() < 3 {
        return Err(kerr!("{what}: input of shape {:?} needs at least 3 dims (.., C, H, W)", inp.sizes()));
    }
    if factor <= 0 {
        return Err(kerr!("{what}: factor {factor} must be positive"));
    }
    let r = usize::try_from(factor).map_err(|_| kerr!("{what}: factor {factor} is too large"))?;
    let s = inp.sizes();
    let k = s.len();
    Ok((r, s[k - 3], s[k - 2], s[k - 1]))
}

/// `pixel_shuffle.out(Tensor self, int upscale_factor, *, Tensor(a!) out)`: [.., C·r², H, W]
/// becomes [.., C, H·r, W·r] with out[.., c, h·r+i, w·r+j] = in[.., c·r²+i·r+j, h, w].
pub fn pixel_shuffle_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let (r, c, h, w) = pixel_args(&inp, args.int(1)?, "pixel_shuffle")?;
    let rr = r.checked_mul(r).ok_or_else(|| kerr!("pixel_shuffle: upscale_factor {r} is too large"))?;
    if c % rr != 0 {
        return Err(kerr!("pixel_shuffle: channels {c} are not divisible by upscale_factor² = {rr}"));
    }
    let too_big = || kerr!("pixel_shuffle: output size overflows");
    let (hr, wr) = (h.checked_mul(r).ok_or_else(too_big)?, w.checked_mul(r).ok_or_else(too_big)?);
    let st = strides_of(&inp);
    let k = st.len();
    let (sc, sh, sw) = (st[k - 3], st[k - 2], st[k - 1]);
    let mut sizes = inp.sizes()[..k - 3].to_vec();
    let mut groups: Vec<Vec<(usize, usize)>> = sizes.iter().zip(&st).map(|(&n, &t)| vec![(n, t)]).collect();
    sizes.extend([c / rr, hr, wr]);
    groups.push(vec![(c / rr, rr.saturating_mul(sc))]);
    groups.push(vec![(h, sh), (r, r.saturating_mul(sc))]);
    groups.push(vec![(w, sw), (r, sc)]);
    let mut out = args.out(2)?;
    write_grouped_view(&inp, &mut out, &sizes, &groups)
}

/// `pixel_unshuffle.out(Tensor self, int downscale_factor, *, Tensor(a!) out)`: the inverse,
/// [.., C, H·r, W·r] to [.., C·r², H, W].
pub fn pixel_unshuffle_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let (r, c, h, w) = pixel_args(&inp, args.int(1)?, "pixel_unshuffle")?;
    if h % r != 0 || w % r != 0 {
        return Err(kerr!("pixel_unshuffle: height {h} and width {w} must be divisible by downscale_factor {r}"));
    }
    let crr = r.checked_mul(r).and_then(|rr| rr.checked_mul(c)).ok_or_else(|| kerr!("pixel_unshuffle: output size overflows"))?;
    let st = strides_of(&inp);
    let k = st.len();
    let (sc, sh, sw) = (st[k - 3], st[k - 2], st[k - 1]);
    let mut sizes = inp.sizes()[..k - 3].to_vec();
    let mut groups: Vec<Vec<(usize, usize)>> = sizes.iter().zip(&st).map(|(&n, &t)| vec![(n, t)]).collect();
    sizes.extend([crr, h / r, w / r]);
    groups.push(vec![(c, sc), (r, sh), (r, sw)]);
    groups.push(vec![(h / r, r.saturating_mul(sh))]);
    groups.push(vec![(w / r, r.saturating_mul(sw))]);
    let mut out = args.out(2)?;
    write_grouped_view(&inp, &mut out, &sizes, &groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::{iota, set_dim_order};
    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn byte_movers_handle_odd_element_sizes() {
        // 3-byte elements take the byte-wise fallback.
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![0u8; 9];
        gather_tables(&src, &mut dst, 3, &[vec![3, 0, 2]]).unwrap();
        assert_eq!(dst, [9, 10, 11, 0, 1, 2, 6, 7, 8]);
        assert!(gather_tables(&src, &mut dst, 3, &[vec![4, 0, 0]]).is_err());
        let mut dst2 = vec![0u8; 12];
        let from = View { base: 1, strides: &[2] };
        let to = View { base: 0, strides: &[3] };
        copy_strided(&src, from, &mut dst2, to, &[2], 3).unwrap();
        assert_eq!(&dst2[..3], &[3, 4, 5]);
        assert_eq!(&dst2[9..], &[9, 10, 11]);
        let past = View { base: 2, strides: &[2] };
        assert!(copy_strided(&src, past, &mut dst2, to, &[2], 3).is_err());
    }

    #[test]
    fn flip_several_dims_and_dtypes() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let dims = h.int_list(&[0, -1]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(flip_out, &[x, dims, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![5., 4., 3., 2., 1., 0.]);

        let b = h.bool_tensor(&[4], &[true, false, false, false]);
        let d0 = h.int_list(&[0]);
        let ob = h.out(ScalarType::Bool, &[4]);
        h.call(flip_out, &[b, d0, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![false, false, false, true]);

        let none = h.int_list(&[]);
        let oc = h.out(ScalarType::Float, &[2, 3]);
        h.call(flip_out, &[x, none, oc, oc]).unwrap();
        assert_eq!(h.read::<f32>(oc), iota(6));

        let dup = h.int_list(&[1, -1]);
        assert!(h.call(flip_out, &[x, dup, out, out]).is_err());
        let far = h.int_list(&[2]);
        assert!(h.call(flip_out, &[x, far, out, out]).is_err());
        let wrong = h.out(ScalarType::Long, &[2, 3]);
        assert!(h.call(flip_out, &[x, dims, wrong, wrong]).is_err());
    }

    #[test]
    fn flip_into_channels_last_output() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2, 1, 3], &iota(6));
        let dims = h.int_list(&[3]);
        let out = h.out(ScalarType::Float, &[1, 2, 1, 3]);
        set_dim_order(&mut h, out, &[0, 2, 3, 1]);
        h.call(flip_out, &[x, dims, out, out]).unwrap();
        // Logical result [[2,1,0],[5,4,3]] stored (w, c): 2,5,1,4,0,3.
        assert_eq!(h.read::<f32>(out), vec![2., 5., 1., 4., 0., 3.]);
    }

    #[test]
    fn roll_flat_and_per_dim() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 3], &[0, 1, 2, 3, 4, 5]);
        let (s, none) = (h.int_list(&[2]), h.int_list(&[]));
        let out = h.out(ScalarType::Long, &[2, 3]);
        h.call(roll_out, &[x, s, none, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![4, 5, 0, 1, 2, 3]);

        let neg = h.int_list(&[-7]);
        h.call(roll_out, &[x, neg, none, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 2, 3, 4, 5, 0]);

        // Repeated dims add their shifts: 1 + 1 along dim 1.
        let (s2, d2) = (h.int_list(&[1, 1, 1]), h.int_list(&[1, -1, 0]));
        h.call(roll_out, &[x, s2, d2, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![4, 5, 3, 1, 2, 0]);

        let half = h.tensor(ScalarType::Half, &[3], &[f16::from_f32(1.0), f16::from_f32(2.0), f16::from_f32(3.0)]);
        let (one, d0) = (h.int_list(&[1]), h.int_list(&[0]));
        let oh = h.out(ScalarType::Half, &[3]);
        h.call(roll_out, &[half, one, d0, oh, oh]).unwrap();
        assert_eq!(h.read::<f16>(oh), vec![f16::from_f32(3.0), f16::from_f32(1.0), f16::from_f32(2.0)]);

        let empty = h.f32(&[0, 3], &[]);
        let oe = h.out(ScalarType::Float, &[0, 3]);
        h.call(roll_out, &[empty, s, none, oe, oe]).unwrap();
        h.call(roll_out, &[empty, one, d0, oe, oe]).unwrap();
    }

    #[test]
    fn roll_rejects_misaligned_shifts() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let out = h.out(ScalarType::Float, &[2, 3]);
        let (two, none, one_dim) = (h.int_list(&[1, 2]), h.int_list(&[]), h.int_list(&[0]));
        assert!(h.call(roll_out, &[x, two, none, out, out]).is_err());
        assert!(h.call(roll_out, &[x, two, one_dim, out, out]).is_err());
        let (s, bad) = (h.int_list(&[1]), h.int_list(&[5]));
        assert!(h.call(roll_out, &[x, s, bad, out, out]).is_err());
    }

    #[test]
    fn roll_flat_with_channels_last_input() {
        let mut h = OpHarness::new();
        // Logical [1, 2, 1, 2] = [[a, b], [c, d]] over (c, w), stored (w, c): a, c, b, d.
        let x = h.f32(&[1, 2, 1, 2], &[0., 2., 1., 3.]);
        set_dim_order(&mut h, x, &[0, 2, 3, 1]);
        let (s, none) = (h.int_list(&[1]), h.int_list(&[]));
        let out = h.out(ScalarType::Float, &[1, 2, 1, 2]);
        h.call(roll_out, &[x, s, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![3., 0., 1., 2.]);
    }

    #[test]
    fn pixel_shuffle_round_trip() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 4, 1, 2], &iota(8));
        let r = h.int(2);
        let out = h.out(ScalarType::Float, &[1, 1, 2, 4]);
        h.call(pixel_shuffle_out, &[x, r, out, out]).unwrap();
        // out[0, 0, i, w*2+j] = in[0, i*2+j, 0, w]
        assert_eq!(h.read::<f32>(out), vec![0., 2., 1., 3., 4., 6., 5., 7.]);
        let back = h.out(ScalarType::Float, &[1, 4, 1, 2]);
        h.call(pixel_unshuffle_out, &[out, r, back, back]).unwrap();
        assert_eq!(h.read::<f32>(back), iota(8));

        // Unbatched (rank 3) int64.
        let y = h.i64(&[4, 1, 1], &[1, 2, 3, 4]);
        let oy = h.out(ScalarType::Long, &[1, 2, 2]);
        h.call(pixel_shuffle_out, &[y, r, oy, oy]).unwrap();
        assert_eq!(h.read::<i64>(oy), vec![1, 2, 3, 4]);
    }

    #[test]
    fn pixel_shuffle_rejects_bad_factors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 3, 2, 2], &iota(12));
        let out = h.out(ScalarType::Float, &[1, 3, 2, 2]);
        let (zero, two, big) = (h.int(0), h.int(2), h.int(i64::MAX));
        assert!(h.call(pixel_shuffle_out, &[x, zero, out, out]).is_err());
        assert!(h.call(pixel_shuffle_out, &[x, two, out, out]).is_err());
        assert!(h.call(pixel_shuffle_out, &[x, big, out, out]).is_err());
        let odd = h.f32(&[1, 1, 3, 2], &iota(6));
        assert!(h.call(pixel_unshuffle_out, &[odd, two, out, out]).is_err());
        assert!(h.call(pixel_unshuffle_out, &[odd, big, out, out]).is_err());
        let flat = h.f32(&[4, 4], &iota(16));
        assert!(h.call(pixel_shuffle_out, &[flat, two, out, out]).is_err());
    }
}
