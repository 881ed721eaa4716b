//! `_embedding_bag.out`: bags of embedding rows reduced by sum, mean or max, with the four
//! outputs PyTorch's CPU forward fills.
//!
//! `offsets` starts each bag in `indices` (with `include_last_offset` its last entry ends the
//! last bag). The outputs, as PyTorch's CPU kernel and its meta function shape them:
//! - out0 `[bags, dim]`: the reduced rows (0 for an empty bag);
//! - out1 `offset2bag`: the bag of each index, `[indices]`, except for the fast sum path (a
//!   Float/Half/BFloat16 sum without padding_idx), which leaves it empty (`[0]`);
//! - out2 `bag_size`: indices per bag less the padding ones (mean, max); all 0 for sum;
//! - out3 `max_indices`: for max the embedding row that won each element, `[bags, dim]`;
//!   otherwise a copy of `bag_size`, `[bags]`.
//!
//! Float, Half and BFloat16 accumulate in f32 in index order (Half and BFloat16 round once at
//! the end; a mean divides the rounded sum), Double in f64. Entries equal to a non-negative
//! `padding_idx` are skipped and do not count in the bag size.

use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::_embedding_bag.out" => embedding_bag_out,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Sum,
    Mean,
    Max,
}

/// Reads an Int/Long 1-D tensor's values.
fn index_values(t: &TensorRef<'_>, what: &str) -> KernelResult<Vec<i64>> {
    if !matches!(t.dtype, ScalarType::Int | ScalarType::Long) {
        return Err(kerr!("_embedding_bag: {what} must be Int or Long, got {}", t.dtype));
    }
    if t.dim() != 1 {
        return Err(kerr!("_embedding_bag: {what} must be 1-D, got {:?}", t.sizes()));
    }
    require_contiguous(t, what)?;
    let e = Elems::of(t)?;
    Ok((0..t.numel()).map(|i| e.i64(i)).collect())
}

/// Rounds an f64 to the value the weight dtype holds (the f32 family computes in f32).
fn round_to(dtype: ScalarType, v: f64) -> f64 {
    match dtype {
        ScalarType::Double => v,
        ScalarType::Half => f16::from_f64(v).to_f64(),
        ScalarType::BFloat16 => bf16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// Checks an index output's dtype, resizes it and writes `values`.
fn store_indices(out: &mut TensorMut<'_>, sizes: &[usize], values: &[i64], what: &str) -> KernelResult {
    if !matches!(out.dtype, ScalarType::Int | ScalarType::Long) {
        return Err(kerr!("_embedding_bag: {what} must be Int or Long, got {}", out.dtype));
    }
    out.resize(sizes)?;
    let mut o = ElemsMut::of(out)?;
    for (i, &v) in values.iter().enumerate() {
        o.set_i64(i, v);
    }
    Ok(())
}

/// `_embedding_bag.out(weight, indices, offsets, scale_grad_by_freq=False, mode=0,
/// sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=-1, *, out0,
/// out1, out2, out3)`: args = [.., out0 (9), out1, out2, out3, [out0, out1, out2, out3]].
/// `scale_grad_by_freq` and `sparse` only matter for the backward pass.
pub fn embedding_bag_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "_embedding_bag";
    let weight = args.tensor(0)?;
    let mode = match args.int(4)? {
        0 => Mode::Sum,
        1 => Mode::Mean,
        2 => Mode::Max,
        m => return Err(kerr!("{OP}: mode must be 0 (sum), 1 (mean) or 2 (max), got {m}")),
    };
    let include_last = args.bool(7)?;
    let padding_idx = args.int(8)?;
    let dtype = weight.dtype;
    if !dtype.is_floating() {
        return Err(kerr!("{OP}: weight must be Float, Double, Half or BFloat16, got {dtype}"));
    }
    let &[rows, dim] = weight.sizes() else {
        return Err(kerr!("{OP}: weight must be 2-D, got {:?}", weight.sizes()));
    };
    require_contiguous(&weight, "weight")?;
    let indices = index_values(&args.tensor(1)?, "indices")?;
    let offsets = index_values(&args.tensor(2)?, "offsets")?;
    let n = indices.len();
    if include_last && offsets.is_empty() {
        return Err(kerr!("{OP}: include_last_offset needs at least one offset"));
    }
    if offsets.first().is_some_and(|&o| o != 0) {
        return Err(kerr!("{OP}: offsets[0] has to be 0 (the first bag starts at index 0), got {}", offsets[0]));
    }
    if let Some(&bad) = offsets.iter().find(|&&o| o < 0 || o > n as i64) {
        return Err(kerr!("{OP}: offset {bad} is outside the {n} indices"));
    }
    if let Some(&bad) = indices.iter().find(|&&i| i < 0 || i >= rows as i64) {
        return Err(kerr!("{OP}: index {bad} is outside the {rows} embeddings"));
    }
    let scales = match args.opt_tensor(6)? {
        None => None,
        Some(p) => {
            if mode != Mode::Sum {
                return Err(kerr!("{OP}: per_sample_weights is only supported with mode sum"));
            }
            if p.dtype != dtype || p.dim() != 1 || p.numel() != n {
                return Err(kerr!(
                    "{OP}: per_sample_weights must be a 1-D {dtype} tensor of {n} values, got {} {:?}",
                    p.dtype,
                    p.sizes()
                ));
            }
            require_contiguous(&p, "per_sample_weights")?;
            let e = Elems::of(&p)?;
            Some((0..n).map(|i| e.f64(i)).collect::<Vec<f64>>())
        }
    };
    let bags = offsets.len() - include_last as usize;
    let fast_sum = mode == Mode::Sum && dtype != ScalarType::Double && padding_idx < 0;

    // The bag of each index: by offset ranges on the fast sum path, otherwise `offset2bag`
    // (the number of bag starts at or before the index, less one).
    let mut bag_of: Vec<Option<usize>> = vec![None; n];
    if fast_sum {
        for b in 0..bags {
            let start = offsets[b] as usize;
            let end = offsets.get(b + 1).map_or(n, |&e| e as usize);
            for slot in bag_of.iter_mut().take(end).skip(start) {
                *slot = Some(b);
            }
        }
    } else {
        let mut starts = vec![0i64; n + 1];
        for &o in &offsets[..bags] {
            starts[o as usize] += 1;
        }
        let mut bag = -1i64;
        for (i, slot) in bag_of.iter_mut().enumerate() {
            bag += starts[i];
            *slot = usize::try_from(bag).ok().filter(|&b| b < bags);
            if slot.is_none() {
                return Err(kerr!("{OP}: index position {i} falls in no bag (offsets {offsets:?})"));
            }
        }
    }
    let offset2bag: Vec<i64> = if fast_sum { Vec::new() } else { bag_of.iter().map(|b| b.map_or(-1, |b| b as i64)).collect() };

    let mut bag_size: Vec<i64> = (0..bags)
        .map(|b| offsets.get(b + 1).filter(|_| b + 1 < bags).map_or(n as i64, |&e| e) - offsets[b])
        .collect();
    let w = Elems::of(&weight)?;
    let mut values = vec![0.0f64; bags * dim];
    let mut max_indices = vec![0i64; if mode == Mode::Max { bags * dim } else { 0 }];
    let mut filled = vec![false; bags];
    for (i, (&idx, bag)) in indices.iter().zip(&bag_of).enumerate() {
        let Some(b) = *bag else { continue };
        if idx == padding_idx {
            bag_size[b] -= 1;
            continue;
        }
        let row = idx as usize * dim;
        let acc = &mut values[b * dim..(b + 1) * dim];
        match mode {
            Mode::Sum | Mode::Mean => {
                let scale = scales.as_ref().map(|s| s[i]);
                for (d, a) in acc.iter_mut().enumerate() {
                    let v = w.f64(row + d);
                    let term = match scale {
                        Some(s) => round_to_acc(dtype, v * s),
                        None => v,
                    };
                    *a = round_to_acc(dtype, *a + term);
                }
            }
            Mode::Max => {
                for (d, a) in acc.iter_mut().enumerate() {
                    let v = w.f64(row + d);
                    if !filled[b] || v > *a {
                        *a = v;
                        max_indices[b * dim + d] = idx;
                    }
                }
                filled[b] = true;
            }
        }
    }
    if mode == Mode::Mean {
        for (b, chunk) in values.chunks_mut(dim.max(1)).enumerate() {
            let count = round_to(dtype, bag_size[b].max(1) as f64);
            for v in chunk {
                *v = round_to_acc(dtype, round_to(dtype, *v) / count);
            }
        }
    }
    if mode == Mode::Sum {
        bag_size.iter_mut().for_each(|s| *s = 0);
    }

    let mut out0 = args.out(9)?;
    if out0.dtype != dtype {
        return Err(kerr!("{OP}: out0 dtype {} differs from weight dtype {dtype}", out0.dtype));
    }
    out0.resize(&[bags, dim])?;
    let mut o = ElemsMut::of(&mut out0)?;
    for (i, &v) in values.iter().enumerate() {
        o.set_f64(i, v);
    }
    store_indices(&mut args.out(10)?, &[offset2bag.len()], &offset2bag, "out1 (offset2bag)")?;
    store_indices(&mut args.out(11)?, &[bags], &bag_size, "out2 (bag_size)")?;
    if mode == Mode::Max {
        store_indices(&mut args.out(12)?, &[bags, dim], &max_indices, "out3 (max_indices)")?;
    } else {
        store_indices(&mut args.out(12)?, &[bags], &bag_size, "out3 (max_indices)")?;
    }
    Ok(())
}

/// Rounds to the accumulator precision: f32 for the f32 family, f64 for Double.
fn round_to_acc(dtype: ScalarType, v: f64) -> f64 {
    if dtype == ScalarType::Double {
        v
    } else {
        v as f32 as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    /// Inputs of one call: weight [rows, dim] (f32 values, stored as `dtype`), Long indices
    /// and offsets.
    struct Bag<'a> {
        weight: (&'a [f32], [usize; 2], ScalarType),
        indices: &'a [i64],
        offsets: &'a [i64],
        mode: i64,
        include_last: bool,
        padding_idx: i64,
        per_sample: Option<&'a [f32]>,
    }

    /// Runs the kernel with outputs of the given sizes; returns (out0 as f64, out1, out2, out3).
    fn run(b: &Bag<'_>, sizes: [&[usize]; 4]) -> Result<(Vec<f64>, Vec<i64>, Vec<i64>, Vec<i64>), alloc::string::String> {
        let mut h = OpHarness::new();
        let (vals, wsz, dtype) = b.weight;
        let typed = |h: &mut OpHarness, v: &[f32], sizes: &[usize]| match dtype {
            ScalarType::Double => h.tensor(dtype, sizes, &v.iter().map(|&x| x as f64).collect::<Vec<_>>()),
            ScalarType::Half => h.tensor(dtype, sizes, &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()),
            ScalarType::Long => h.tensor(dtype, sizes, &v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
            _ => h.tensor(dtype, sizes, v),
        };
        let w = typed(&mut h, vals, &wsz);
        let i = h.i64(&[b.indices.len()], b.indices);
        let o = h.i64(&[b.offsets.len()], b.offsets);
        let (f, m, sp) = (h.bool(false), h.int(b.mode), h.bool(false));
        let p = match b.per_sample {
            Some(v) => typed(&mut h, v, &[v.len()]),
            None => h.none(),
        };
        let (il, pi) = (h.bool(b.include_last), h.int(b.padding_idx));
        let outs = [h.out(dtype, sizes[0]), h.out(ScalarType::Long, sizes[1]), h.out(ScalarType::Long, sizes[2]), h.out(ScalarType::Long, sizes[3])];
        let list = h.tensor_list(&outs);
        h.call(embedding_bag_out, &[w, i, o, f, m, sp, p, il, pi, outs[0], outs[1], outs[2], outs[3], list])
            .map_err(|e| e.message)?;
        let out0 = match dtype {
            ScalarType::Double => h.read::<f64>(outs[0]),
            ScalarType::Half => h.read::<f16>(outs[0]).iter().map(|v| v.to_f64()).collect(),
            _ => h.read::<f32>(outs[0]).iter().map(|&v| v as f64).collect(),
        };
        Ok((out0, h.read::<i64>(outs[1]), h.read::<i64>(outs[2]), h.read::<i64>(outs[3])))
    }

    /// 4 embeddings of dim 2: row r = [r, 10 - r].
    const W: [f32; 8] = [0., 10., 1., 9., 2., 8., 3., 7.];

    fn bag(mode: i64, indices: &'static [i64], offsets: &'static [i64]) -> Bag<'static> {
        Bag {
            weight: (&W, [4, 2], ScalarType::Float),
            indices,
            offsets,
            mode,
            include_last: false,
            padding_idx: -1,
            per_sample: None,
        }
    }

    #[test]
    fn sum_fast_path_leaves_offset2bag_empty() {
        // Bags [1, 2], [] and [3, 3, 0].
        let b = bag(0, &[1, 2, 3, 3, 0], &[0, 2, 2]);
        let (out, o2b, size, maxi) = run(&b, [&[3, 2], &[0], &[3], &[3]]).unwrap();
        assert_eq!(out, vec![3., 17., 0., 0., 6., 24.]);
        assert!(o2b.is_empty());
        assert_eq!((size, maxi), (vec![0, 0, 0], vec![0, 0, 0]));
        // Per-sample weights scale each row.
        let b = Bag { per_sample: Some(&[2., 0.5, 1., 1., -1.]), ..bag(0, &[1, 2, 3, 3, 0], &[0, 2, 2]) };
        let (out, ..) = run(&b, [&[3, 2], &[0], &[3], &[3]]).unwrap();
        assert_eq!(out, vec![3., 22., 0., 0., 6., 4.]);
    }

    #[test]
    fn mean_and_padding_idx() {
        // Mean with padding_idx 3: bag [1, 3] averages row 1 only; bag [3] is empty.
        let b = Bag { padding_idx: 3, ..bag(1, &[1, 3, 2, 0, 3], &[0, 2, 4]) };
        let (out, o2b, size, maxi) = run(&b, [&[3, 2], &[5], &[3], &[3]]).unwrap();
        assert_eq!(out, vec![1., 9., 1., 9., 0., 0.]);
        assert_eq!(o2b, vec![0, 0, 1, 1, 2]);
        assert_eq!(size, vec![1, 2, 0]);
        assert_eq!(maxi, size);
        // A sum with padding_idx takes the slow path: offset2bag is filled, bag_size zeroed.
        let b = Bag { padding_idx: 3, ..bag(0, &[1, 3, 2, 0, 3], &[0, 2, 4]) };
        let (out, o2b, size, _) = run(&b, [&[3, 2], &[5], &[3], &[3]]).unwrap();
        assert_eq!(out, vec![1., 9., 2., 18., 0., 0.]);
        assert_eq!((o2b, size), (vec![0, 0, 1, 1, 2], vec![0, 0, 0]));
    }

    #[test]
    fn max_with_indices_and_include_last_offset() {
        // include_last_offset: offsets [0, 2, 2, 5] make bags [1, 2], [], [3, 0, 2].
        let b = Bag { include_last: true, ..bag(2, &[1, 2, 3, 0, 2], &[0, 2, 2, 5]) };
        let (out, o2b, size, maxi) = run(&b, [&[3, 2], &[5], &[3], &[3, 2]]).unwrap();
        assert_eq!(out, vec![2., 9., 0., 0., 3., 10.]);
        assert_eq!(o2b, vec![0, 0, 2, 2, 2]);
        assert_eq!(size, vec![2, 0, 3]);
        assert_eq!(maxi, vec![2, 1, 0, 0, 3, 0]);
    }

    #[test]
    fn double_and_half_weights() {
        // Double sums go the slow path (offset2bag filled); the mean divides by the bag size.
        let b = Bag { weight: (&W, [4, 2], ScalarType::Double), ..bag(1, &[0, 1, 2], &[0, 1]) };
        let (out, o2b, size, _) = run(&b, [&[2, 2], &[3], &[2], &[2]]).unwrap();
        assert_eq!(out, vec![0., 10., 1.5, 8.5]);
        assert_eq!((o2b, size), (vec![0, 1, 1], vec![1, 2]));
        let b = Bag { weight: (&W, [4, 2], ScalarType::Half), ..bag(0, &[3, 2], &[0]) };
        let (out, o2b, ..) = run(&b, [&[1, 2], &[0], &[1], &[1]]).unwrap();
        assert_eq!((out, o2b), (vec![5., 15.], vec![]));
    }

    #[test]
    fn bad_arguments_are_errors() {
        let sizes: [&[usize]; 4] = [&[2, 2], &[0], &[2], &[2]];
        let err = |b: Bag<'_>| run(&b, sizes).unwrap_err();
        assert!(err(bag(3, &[0], &[0, 1])).contains("mode"));
        assert!(err(bag(0, &[0, 4], &[0, 1])).contains("outside the 4 embeddings"));
        assert!(err(bag(0, &[0, -1], &[0, 1])).contains("outside the 4 embeddings"));
        assert!(err(bag(0, &[0, 1], &[1, 1])).contains("offsets[0]"));
        assert!(err(bag(0, &[0, 1], &[0, 3])).contains("outside the 2 indices"));
        assert!(err(Bag { include_last: true, ..bag(0, &[0], &[]) }).contains("include_last_offset"));
        assert!(err(Bag { per_sample: Some(&[1.]), ..bag(0, &[0, 1], &[0, 1]) }).contains("per_sample_weights"));
        assert!(err(Bag { per_sample: Some(&[1., 1.]), ..bag(1, &[0, 1], &[0, 1]) }).contains("mode sum"));
        assert!(err(Bag { weight: (&W, [8, 1], ScalarType::Long), ..bag(0, &[0], &[0]) }).contains("weight must be"));
        // No bag at all while indices exist (mean needs offset2bag).
        assert!(run(&bag(1, &[0], &[]), [&[0, 2], &[1], &[0], &[0]]).unwrap_err().contains("no bag"));
        // Wrong static out sizes are rejected by resize.
        assert!(run(&bag(0, &[0, 1], &[0, 1]), [&[2, 2], &[2], &[2], &[2]]).unwrap_err().contains("static shape"));
    }
}
