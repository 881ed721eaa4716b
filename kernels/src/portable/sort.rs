//! Ordering: `topk` and `sort` (plain and stable) along a dim, NaN ordered as the largest
//! value. Where PyTorch's CPU kernel uses the C++ standard library (libstdc++'s
//! `nth_element` / `partial_sort` / `sort`), [`cxx_order`] repeats the same steps so that the
//! indices of equal values come out in the same order.

use alloc::vec::Vec;
use core::cmp::Ordering;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems};

rbuild_runtime::kernel_table! {
    "aten::topk.values" => topk_values,
    "aten::sort.values" => sort_values,
    "aten::sort.values_stable" => sort_values_stable,
}

/// An element's ordering key: floats as f64 (exact for every float dtype), other types as
/// integers (UInt64 as u64). Only floats have NaN.
trait Key: Copy + PartialOrd {
    fn is_nan(self) -> bool;
}
impl Key for f64 {
    fn is_nan(self) -> bool {
        self.is_nan()
    }
}
impl Key for i64 {
    fn is_nan(self) -> bool {
        false
    }
}
impl Key for u64 {
    fn is_nan(self) -> bool {
        false
    }
}

/// (key, position along the dim): what PyTorch's kernels sort.
type Entry<K> = (K, i64);

/// Ascending order with NaN last (as the largest value).
fn ascending<K: Key>(a: &Entry<K>, b: &Entry<K>) -> bool {
    (!a.0.is_nan() && b.0.is_nan()) || a.0 < b.0
}

/// Descending order with NaN first.
fn descending<K: Key>(a: &Entry<K>, b: &Entry<K>) -> bool {
    (a.0.is_nan() && !b.0.is_nan()) || a.0 > b.0
}

/// A tensor viewed as slices along one dim: `outer` x `len` x `inner` (contiguous).
#[derive(Clone, Copy)]
struct Lanes {
    outer: usize,
    len: usize,
    inner: usize,
}

impl Lanes {
    /// `dim` of `sizes` (rank 0 is one lane of one element).
    fn new(sizes: &[usize], dim: usize) -> Lanes {
        if sizes.is_empty() {
            return Lanes { outer: 1, len: 1, inner: 1 };
        }
        Lanes { outer: sizes[..dim].iter().product(), len: sizes[dim], inner: sizes[dim + 1..].iter().product() }
    }

    /// Calls `f(element offset of position 0, stride along the dim)` for every lane.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        for o in 0..self.outer {
            for i in 0..self.inner {
                f(o * self.len * self.inner + i, self.inner);
            }
        }
    }
}

/// Runs `$body` with `$key` a fn(&Elems, usize) -> K suited to `$dtype`.
macro_rules! with_key {
    ($dtype:expr, $key:ident => $body:expr) => {
        match $dtype {
            d if d.is_floating() => {
                let $key = |e: &Elems<'_>, i: usize| -> f64 { e.f64(i) };
                $body
            }
            ScalarType::UInt64 => {
                let $key = |e: &Elems<'_>, i: usize| -> u64 {
                    match e {
                        Elems::U64(s) => s[i],
                        _ => e.i64(i) as u64,
                    }
                };
                $body
            }
            _ => {
                let $key = |e: &Elems<'_>, i: usize| -> i64 { e.i64(i) };
                $body
            }
        }
    };
}

/// Checks the two outputs of a sort-like op and sizes them to `sizes`.
fn prepare_outputs(
    what: &str,
    inp: &TensorRef<'_>,
    values: &mut TensorMut<'_>,
    indices: &mut TensorMut<'_>,
    sizes: &[usize],
) -> KernelResult {
    require_contiguous(inp, what)?;
    if values.dtype != inp.dtype {
        return Err(kerr!("{what}: values dtype {} differs from self dtype {}", values.dtype, inp.dtype));
    }
    if indices.dtype != ScalarType::Long {
        return Err(kerr!("{what}: indices must be a Long tensor, got {}", indices.dtype));
    }
    for t in [&*values, &*indices] {
        if !t.dim_order.is_contiguous() {
            return Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", t.dim_order));
        }
    }
    values.resize(sizes)?;
    indices.resize(sizes)?;
    Ok(())
}

/// Writes the first `k` entries of a lane: values copied from the input element they came from.
fn write_lane<K>(
    lane: &[Entry<K>],
    src: &[u8],
    es: usize,
    (in_base, stride): (usize, usize),
    out_base: usize,
    values: &mut [u8],
    indices: &mut [i64],
) {
    for (j, &(_, pos)) in lane.iter().enumerate() {
        let s = in_base + pos as usize * stride;
        let o = out_base + j * stride;
        values[o * es..(o + 1) * es].copy_from_slice(&src[s * es..(s + 1) * es]);
        indices[o] = pos;
    }
}

// ---------------------------------------------------------------------------------------------
// topk
// ---------------------------------------------------------------------------------------------

/// `topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *,
/// Tensor(a!) values, Tensor(b!) indices)`: args = [self, k, dim, largest, sorted, values,
/// indices, values, indices]. The k largest (or smallest) elements of every lane along `dim`
/// and their positions; NaN counts as the largest. PyTorch's CPU order: a partial sort when
/// k * 64 <= size, else nth_element (then a sort of the first k - 1 when `sorted`).
pub fn topk_values(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "topk.values";
    let inp = args.tensor(0)?;
    let k = args.int(1)?;
    let dim = normalize_dim(args.int(2)?, inp.dim())?;
    let (largest, sorted) = (args.bool(3)?, args.bool(4)?);
    let (mut values, mut indices) = (args.out(5)?, args.out(6)?);
    let lanes = Lanes::new(inp.sizes(), dim);
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= lanes.len)
        .ok_or_else(|| kerr!("{WHAT}: k = {k} is out of range for dim {dim} of size {}", lanes.len))?;
    let mut sizes = inp.sizes().to_vec();
    if let Some(s) = sizes.get_mut(dim) {
        *s = k;
    }
    prepare_outputs(WHAT, &inp, &mut values, &mut indices, &sizes)?;
    if inp.dim() == 0 {
        // PyTorch copies a 0-dim self whatever k is (0 or 1).
        values.bytes_mut().copy_from_slice(inp.bytes());
        indices.data_mut::<i64>()?.fill(0);
        return Ok(());
    }
    if k == 0 || lanes.outer == 0 || lanes.inner == 0 {
        return Ok(());
    }
    let e = Elems::of(&inp)?;
    let (src, es) = (inp.bytes(), inp.dtype.size());
    let (vals, idx) = (values.bytes_mut(), indices.data_mut::<i64>()?);
    with_key!(inp.dtype, key => {
        let mut lane = Vec::with_capacity(lanes.len);
        let mut out_lane = 0usize;
        lanes.for_each(|base, stride| {
            lane.clear();
            lane.extend((0..lanes.len).map(|j| (key(&e, base + j * stride), j as i64)));
            if largest {
                select_top(&mut lane, k, sorted, &descending);
            } else {
                select_top(&mut lane, k, sorted, &ascending);
            }
            // Output lane `n` starts at (outer index, inner index) with dim size k.
            let (o, i) = (out_lane / lanes.inner, out_lane % lanes.inner);
            write_lane(&lane[..k], src, es, (base, stride), o * k * lanes.inner + i, vals, idx);
            out_lane += 1;
        });
    });
    Ok(())
}

/// Moves the top `k` of `lane` under `before` to its front, in PyTorch's CPU order.
fn select_top<T: Copy>(lane: &mut [T], k: usize, sorted: bool, before: &impl Fn(&T, &T) -> bool) {
    if k.saturating_mul(64) <= lane.len() {
        cxx_order::partial_sort(lane, k, before);
    } else {
        cxx_order::nth_element(lane, k - 1, before);
        if sorted {
            cxx_order::sort(&mut lane[..k - 1], before);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sort
// ---------------------------------------------------------------------------------------------

/// `sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values,
/// Tensor(b!) indices)`: args = [self, dim, descending, values, indices, values, indices].
pub fn sort_values(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    sort_impl(args, "sort.values", false, 1)
}

/// `sort.values_stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False,
/// Tensor(a!) values, Tensor(b!) indices)`: args = [self, stable, dim, descending, values,
/// indices, values, indices].
pub fn sort_values_stable(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let stable = args.opt_bool(1)?.unwrap_or(false);
    sort_impl(args, "sort.values_stable", stable, 2)
}

/// Sorts every lane along `dim` (args[at]; descending at args[at + 1], outputs after),
/// NaN as the largest value. Stable sorts keep equal values in position order. Unstable sorts
/// follow PyTorch's CPU kernel: libstdc++'s `std::sort` for the dtypes it uses that for;
/// Float/Double/Int/Long (vectorized quicksort in PyTorch) and large 1-D ascending integer
/// sorts (radix sort) are done stably here, which is a valid order there too.
fn sort_impl(args: &KernelArgs<'_>, what: &str, stable: bool, at: usize) -> KernelResult {
    let inp = args.tensor(0)?;
    let dim = normalize_dim(args.int(at)?, inp.dim())?;
    let desc = args.bool(at + 1)?;
    let (mut values, mut indices) = (args.out(at + 2)?, args.out(at + 3)?);
    prepare_outputs(what, &inp, &mut values, &mut indices, inp.sizes())?;
    let lanes = Lanes::new(inp.sizes(), dim);
    if inp.numel() == 0 {
        return Ok(());
    }
    let vectorized = matches!(inp.dtype, ScalarType::Float | ScalarType::Double | ScalarType::Int | ScalarType::Long);
    let radix = inp.dim() == 1 && !desc && inp.dtype.is_integral(false) && inp.numel() >= 32768;
    let cxx_sort = !(stable || vectorized || radix);
    let e = Elems::of(&inp)?;
    let (src, es) = (inp.bytes(), inp.dtype.size());
    let (vals, idx) = (values.bytes_mut(), indices.data_mut::<i64>()?);
    with_key!(inp.dtype, key => {
        let mut lane = Vec::with_capacity(lanes.len);
        lanes.for_each(|base, stride| {
            lane.clear();
            lane.extend((0..lanes.len).map(|j| (key(&e, base + j * stride), j as i64)));
            match (cxx_sort, desc) {
                (true, false) => cxx_order::sort(&mut lane, &ascending),
                (true, true) => cxx_order::sort(&mut lane, &descending),
                (false, false) => lane.sort_by(|a, b| order_of(a, b, ascending)),
                (false, true) => lane.sort_by(|a, b| order_of(a, b, descending)),
            }
            write_lane(&lane, src, es, (base, stride), base, vals, idx);
        });
    });
    Ok(())
}

/// A strict weak "comes before" as an Ordering (equal when neither comes first).
fn order_of<T>(a: &T, b: &T, before: impl Fn(&T, &T) -> bool) -> Ordering {
    if before(a, b) {
        Ordering::Less
    } else if before(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// libstdc++'s (GCC) introselect, introsort and heap-based partial sort, step for step, so
/// that equal keys end in the same positions as in PyTorch's CPU kernels. `before` must be a
/// strict weak order; bounds checks stand in for the "unguarded" loops' sentinels and never
/// change the result under that contract.
mod cxx_order {
    /// libstdc++'s `_S_threshold`: ranges up to this size are left to insertion sort.
    const THRESHOLD: usize = 16;

    /// floor(log2(n)) for n > 0.
    fn lg(n: usize) -> usize {
        (usize::BITS - 1 - n.leading_zeros()) as usize
    }

    /// `std::sort`.
    pub fn sort<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) {
        if v.is_empty() {
            return;
        }
        introsort_loop(v, 2 * lg(v.len()), before);
        final_insertion_sort(v, before);
    }

    /// `std::nth_element`: v[nth] is the element a full sort puts there, with no element
    /// before it that `before` puts after it and vice versa.
    pub fn nth_element<T: Copy>(v: &mut [T], nth: usize, before: &impl Fn(&T, &T) -> bool) {
        if nth >= v.len() {
            return;
        }
        let (mut first, mut last) = (0, v.len());
        let mut depth = 2 * lg(v.len());
        while last - first > 3 {
            if depth == 0 {
                heap_select(&mut v[first..last], nth - first + 1, before);
                // Place the nth element in its final position.
                v.swap(first, nth);
                return;
            }
            depth -= 1;
            let cut = first + partition_pivot(&mut v[first..last], before);
            if cut <= nth {
                first = cut;
            } else {
                last = cut;
            }
        }
        insertion_sort(&mut v[first..last], before);
    }

    /// `std::partial_sort`: the `middle` first elements of a full sort, in order, at the front.
    pub fn partial_sort<T: Copy>(v: &mut [T], middle: usize, before: &impl Fn(&T, &T) -> bool) {
        let middle = middle.min(v.len());
        heap_select(v, middle, before);
        sort_heap(&mut v[..middle], before);
    }

    fn introsort_loop<T: Copy>(mut v: &mut [T], mut depth: usize, before: &impl Fn(&T, &T) -> bool) {
        while v.len() > THRESHOLD {
            if depth == 0 {
                let n = v.len();
                partial_sort(v, n, before);
                return;
            }
            depth -= 1;
            let cut = partition_pivot(v, before);
            let (left, right) = v.split_at_mut(cut);
            introsort_loop(right, depth, before);
            v = left;
        }
    }

    fn final_insertion_sort<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) {
        if v.len() > THRESHOLD {
            insertion_sort(&mut v[..THRESHOLD], before);
            for i in THRESHOLD..v.len() {
                linear_insert(v, i, before);
            }
        } else {
            insertion_sort(v, before);
        }
    }

    fn insertion_sort<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) {
        for i in 1..v.len() {
            if before(&v[i], &v[0]) {
                let val = v[i];
                v.copy_within(0..i, 1);
                v[0] = val;
            } else {
                linear_insert(v, i, before);
            }
        }
    }

    /// Moves v[last] left past the elements it comes before.
    fn linear_insert<T: Copy>(v: &mut [T], mut last: usize, before: &impl Fn(&T, &T) -> bool) {
        let val = v[last];
        while last > 0 && before(&val, &v[last - 1]) {
            v[last] = v[last - 1];
            last -= 1;
        }
        v[last] = val;
    }

    /// Median of v[1], v[mid], v[len - 1] to v[0] as the pivot, then Hoare partition of
    /// v[1..]; returns the cut. Needs len >= 4 (callers guarantee more).
    fn partition_pivot<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) -> usize {
        let len = v.len();
        let mid = len / 2;
        move_median_to_first(v, 1, mid, len - 1, before);
        let pivot = v[0];
        let (mut first, mut last) = (1, len);
        loop {
            while first < len && before(&v[first], &pivot) {
                first += 1;
            }
            last -= 1;
            while last > 0 && before(&pivot, &v[last]) {
                last -= 1;
            }
            if first >= last {
                return first;
            }
            v.swap(first, last);
            first += 1;
        }
    }

    fn move_median_to_first<T: Copy>(v: &mut [T], a: usize, b: usize, c: usize, before: &impl Fn(&T, &T) -> bool) {
        let median = if before(&v[a], &v[b]) {
            if before(&v[b], &v[c]) {
                b
            } else if before(&v[a], &v[c]) {
                c
            } else {
                a
            }
        } else if before(&v[a], &v[c]) {
            a
        } else if before(&v[b], &v[c]) {
            c
        } else {
            b
        };
        v.swap(0, median);
    }

    /// Makes v[..middle] a max-heap of the `middle` elements that come first.
    fn heap_select<T: Copy>(v: &mut [T], middle: usize, before: &impl Fn(&T, &T) -> bool) {
        make_heap(&mut v[..middle], before);
        for i in middle..v.len() {
            if before(&v[i], &v[0]) {
                pop_heap(v, middle, i, before);
            }
        }
    }

    fn make_heap<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) {
        let len = v.len();
        if len < 2 {
            return;
        }
        let mut parent = (len - 2) / 2;
        loop {
            let value = v[parent];
            adjust_heap(v, parent, len, value, before);
            if parent == 0 {
                return;
            }
            parent -= 1;
        }
    }

    fn sort_heap<T: Copy>(v: &mut [T], before: &impl Fn(&T, &T) -> bool) {
        let mut last = v.len();
        while last > 1 {
            last -= 1;
            pop_heap(v, last, last, before);
        }
    }

    /// Moves the heap top (of v[..len]) to v[result] and re-heaps with v[result]'s old value.
    fn pop_heap<T: Copy>(v: &mut [T], len: usize, result: usize, before: &impl Fn(&T, &T) -> bool) {
        let value = v[result];
        v[result] = v[0];
        adjust_heap(v, 0, len, value, before);
    }

    fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, len: usize, value: T, before: &impl Fn(&T, &T) -> bool) {
        if len == 0 {
            return;
        }
        let top = hole;
        let mut child = hole;
        while child < (len - 1) / 2 {
            child = 2 * (child + 1);
            if before(&v[child], &v[child - 1]) {
                child -= 1;
            }
            v[hole] = v[child];
            hole = child;
        }
        if len.is_multiple_of(2) && child == (len - 2) / 2 {
            child = 2 * (child + 1);
            v[hole] = v[child - 1];
            hole = child - 1;
        }
        // push_heap: bubble `value` up from the hole, no higher than `top`.
        let mut parent = hole.saturating_sub(1) / 2;
        while hole > top && before(&v[parent], &value) {
            v[hole] = v[parent];
            hole = parent;
            parent = hole.saturating_sub(1) / 2;
        }
        v[hole] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use rbuild_runtime::harness::OpHarness;

    /// Tie-heavy values from an LCG; 7 stands for NaN. The expected orders below come from
    /// PyTorch's topk/sort order logic compiled against libstdc++ (GCC 12) on the same values.
    fn lcg_values(seed: u64, n: usize, range: u64) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match (x >> 33) % range {
                    7 => f32::NAN,
                    r => r as f32,
                }
            })
            .collect()
    }

    fn topk_f32(x: &[f32], sizes: &[usize], k: i64, dim: i64, largest: bool, sorted: bool) -> (Vec<f32>, Vec<i64>) {
        let mut h = OpHarness::new();
        let t = h.f32(sizes, x);
        let (kk, d, l, s) = (h.int(k), h.int(dim), h.bool(largest), h.bool(sorted));
        let mut osz = sizes.to_vec();
        if !osz.is_empty() {
            let dd = if dim < 0 { dim + sizes.len() as i64 } else { dim } as usize;
            osz[dd] = k as usize;
        }
        let (vo, io) = (h.out(ScalarType::Float, &osz), h.out(ScalarType::Long, &osz));
        h.call(topk_values, &[t, kk, d, l, s, vo, io, vo, io]).unwrap();
        (h.read::<f32>(vo), h.read::<i64>(io))
    }

    #[test]
    fn topk_index_order_of_ties_matches_libstdcxx() {
        // (seed, n, value range, k, largest, sorted, expected indices)
        type Case = (u64, usize, u64, i64, bool, bool, &'static [i64]);
        let cases: [Case; 5] = [
            (1, 30, 5, 7, true, true, &[4, 14, 24, 8, 26, 0, 1]),
            (2, 30, 9, 12, false, true, &[2, 8, 25, 6, 29, 0, 12, 4, 21, 23, 9, 15]),
            (3, 25, 9, 10, true, false, &[12, 8, 6, 3, 16, 9, 4, 23, 0, 24]),
            // k * 64 <= n: the partial-sort path.
            (4, 200, 8, 3, true, true, &[21, 10, 15]),
            (5, 200, 8, 2, false, true, &[9, 0]),
        ];
        for (seed, n, range, k, largest, sorted, want) in cases {
            let x = lcg_values(seed, n, range);
            let (v, i) = topk_f32(&x, &[n], k, -1, largest, sorted);
            assert_eq!(i, want, "seed {seed}");
            for (a, &j) in v.iter().zip(&i) {
                assert_eq!(a.to_bits(), x[j as usize].to_bits());
            }
        }
    }

    #[test]
    fn unstable_sort_of_half_matches_libstdcxx() {
        let asc: [i64; 40] = [
            18, 14, 28, 24, 20, 19, 38, 0, 5, 17, 29, 2, 32, 3, 9, 7, 12, 11, 31, 25, 8, 15, 33, 37, 39, 35, 36, 30, 26,
            22, 6, 27, 10, 4, 1, 23, 21, 16, 34, 13,
        ];
        let desc: [i64; 40] = [
            33, 30, 22, 9, 21, 20, 1, 35, 34, 32, 27, 26, 5, 0, 39, 28, 36, 18, 14, 3, 37, 10, 8, 15, 31, 17, 11, 25, 13,
            24, 19, 12, 29, 6, 4, 38, 7, 2, 23, 16,
        ];
        for (seed, descending, want) in [(6, false, asc), (7, true, desc)] {
            let x: Vec<f16> = lcg_values(seed, 40, 9).iter().map(|&v| f16::from_f32(v)).collect();
            let mut h = OpHarness::new();
            let t = h.tensor(ScalarType::Half, &[40], &x);
            let (d, ds) = (h.int(0), h.bool(descending));
            let (vo, io) = (h.out(ScalarType::Half, &[40]), h.out(ScalarType::Long, &[40]));
            h.call(sort_values, &[t, d, ds, vo, io, vo, io]).unwrap();
            assert_eq!(h.read::<i64>(io), want);
        }
    }

    #[test]
    fn topk_last_and_first_dim() {
        let x = [1., 5., 3., 4., 2., 9., 0., 7., 8., 6.];
        let (v, i) = topk_f32(&x, &[2, 5], 2, -1, true, true);
        assert_eq!(v, vec![5., 4., 9., 8.]);
        assert_eq!(i, vec![1, 3, 0, 3]);
        let (v, i) = topk_f32(&x, &[2, 5], 1, 0, false, true);
        assert_eq!(v, vec![1., 0., 3., 4., 2.]);
        assert_eq!(i, vec![0, 1, 0, 0, 0]);
    }

    #[test]
    fn topk_nan_is_largest() {
        let x = [1., f32::NAN, 3.];
        let (v, i) = topk_f32(&x, &[3], 2, 0, true, true);
        assert!(v[0].is_nan() && v[1] == 3.);
        assert_eq!(i, vec![1, 2]);
        let (v, i) = topk_f32(&x, &[3], 3, 0, false, true);
        assert_eq!((v[0], v[1]), (1., 3.));
        assert!(v[2].is_nan());
        assert_eq!(i, vec![0, 2, 1]);
    }

    #[test]
    fn topk_other_dtypes() {
        let mut h = OpHarness::new();
        let x = h.i64(&[5], &[3, -1, 7, 7, 0]);
        let (k, d, l, s) = (h.int(3), h.int(0), h.bool(true), h.bool(true));
        let (vo, io) = (h.out(ScalarType::Long, &[3]), h.out(ScalarType::Long, &[3]));
        h.call(topk_values, &[x, k, d, l, s, vo, io, vo, io]).unwrap();
        assert_eq!(h.read::<i64>(vo), vec![7, 7, 3]);
        assert_eq!(h.read::<i64>(io), vec![2, 3, 0]);

        let xb: Vec<f16> = [0.5f32, -2., 8.].iter().map(|&v| f16::from_f32(v)).collect();
        let x = h.tensor(ScalarType::Half, &[3], &xb);
        let (k1, sm) = (h.int(1), h.bool(false));
        let (vo, io) = (h.out(ScalarType::Half, &[1]), h.out(ScalarType::Long, &[1]));
        h.call(topk_values, &[x, k1, d, sm, s, vo, io, vo, io]).unwrap();
        assert_eq!(h.read::<f16>(vo), vec![f16::from_f32(-2.)]);
        assert_eq!(h.read::<i64>(io), vec![1]);

        let x = h.bool_tensor(&[4], &[false, true, false, true]);
        let k2 = h.int(2);
        let (vo, io) = (h.out(ScalarType::Bool, &[2]), h.out(ScalarType::Long, &[2]));
        h.call(topk_values, &[x, k2, d, l, s, vo, io, vo, io]).unwrap();
        assert_eq!(h.read_bool(vo), vec![true, true]);
        assert_eq!(h.read::<i64>(io), vec![1, 3]);
    }

    #[test]
    fn topk_rank0_and_k0() {
        let mut h = OpHarness::new();
        let x = h.f32(&[], &[4.5]);
        let (k, d, t) = (h.int(1), h.int(-1), h.bool(true));
        let (vo, io) = (h.out(ScalarType::Float, &[]), h.out(ScalarType::Long, &[]));
        h.call(topk_values, &[x, k, d, t, t, vo, io, vo, io]).unwrap();
        assert_eq!((h.read::<f32>(vo), h.read::<i64>(io)), (vec![4.5], vec![0]));

        let x = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let k0 = h.int(0);
        let (vo, io) = (h.out(ScalarType::Float, &[2, 0]), h.out(ScalarType::Long, &[2, 0]));
        h.call(topk_values, &[x, k0, d, t, t, vo, io, vo, io]).unwrap();
        assert_eq!(h.sizes(vo), vec![2, 0]);
    }

    #[test]
    fn topk_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let t = h.bool(true);
        let (vo, io) = (h.out(ScalarType::Float, &[2, 2]), h.out(ScalarType::Long, &[2, 2]));
        let (k2, k4, kneg, d1, d2) = (h.int(2), h.int(4), h.int(-1), h.int(1), h.int(2));
        let e = h.call(topk_values, &[x, k4, d1, t, t, vo, io, vo, io]).unwrap_err();
        assert!(e.message.contains("k = 4"), "{e}");
        assert!(h.call(topk_values, &[x, kneg, d1, t, t, vo, io, vo, io]).is_err());
        assert!(h.call(topk_values, &[x, k2, d2, t, t, vo, io, vo, io]).is_err());
        let bad_idx = h.out(ScalarType::Int, &[2, 2]);
        assert!(h.call(topk_values, &[x, k2, d1, t, t, vo, bad_idx, vo, bad_idx]).is_err());
        let bad_vals = h.out(ScalarType::Double, &[2, 2]);
        assert!(h.call(topk_values, &[x, k2, d1, t, t, bad_vals, io, bad_vals, io]).is_err());
        let wrong_shape = h.out(ScalarType::Float, &[2, 3]);
        assert!(h.call(topk_values, &[x, k2, d1, t, t, wrong_shape, io, wrong_shape, io]).is_err());
    }

    fn sort_f32(x: &[f32], sizes: &[usize], dim: i64, descending: bool, stable: Option<bool>) -> (Vec<f32>, Vec<i64>) {
        let mut h = OpHarness::new();
        let t = h.f32(sizes, x);
        let (d, ds) = (h.int(dim), h.bool(descending));
        let (vo, io) = (h.out(ScalarType::Float, sizes), h.out(ScalarType::Long, sizes));
        match stable {
            None => h.call(sort_values, &[t, d, ds, vo, io, vo, io]).unwrap(),
            Some(s) => {
                let s = h.bool(s);
                h.call(sort_values_stable, &[t, s, d, ds, vo, io, vo, io]).unwrap()
            }
        }
        (h.read::<f32>(vo), h.read::<i64>(io))
    }

    #[test]
    fn sort_stable_keeps_ties_in_order_and_nan_largest() {
        let x = [2., f32::NAN, 1., 2., -0.5, 1.];
        let (v, i) = sort_f32(&x, &[6], 0, false, Some(true));
        assert_eq!(i, vec![4, 2, 5, 0, 3, 1]);
        assert_eq!(&v[..5], &[-0.5, 1., 1., 2., 2.]);
        assert!(v[5].is_nan());
        let (v, i) = sort_f32(&x, &[6], -1, true, Some(true));
        assert_eq!(i, vec![1, 0, 3, 2, 5, 4]);
        assert!(v[0].is_nan());
        // Float's unstable sort is stable here too.
        assert_eq!(sort_f32(&x, &[6], 0, false, None).1, vec![4, 2, 5, 0, 3, 1]);
    }

    #[test]
    fn sort_along_dim0_and_rank0() {
        let (v, i) = sort_f32(&[3., 1., 2., 0., 5., 4.], &[2, 3], 0, false, None);
        assert_eq!(v, vec![0., 1., 2., 3., 5., 4.]);
        assert_eq!(i, vec![1, 0, 0, 0, 1, 1]);
        let (v, i) = sort_f32(&[7.], &[], 0, true, Some(false));
        assert_eq!((v, i), (vec![7.], vec![0]));
    }

    #[test]
    fn sort_integers_and_bool() {
        let mut h = OpHarness::new();
        let x = h.tensor::<i16>(ScalarType::Short, &[5], &[3, -7, 3, 0, 9]);
        let (d, f) = (h.int(0), h.bool(false));
        let (vo, io) = (h.out(ScalarType::Short, &[5]), h.out(ScalarType::Long, &[5]));
        h.call(sort_values, &[x, d, f, vo, io, vo, io]).unwrap();
        assert_eq!(h.read::<i16>(vo), vec![-7, 0, 3, 3, 9]);
        assert_eq!(h.read::<i64>(io), vec![1, 3, 0, 2, 4]);

        let x = h.bool_tensor(&[3], &[true, false, true]);
        let t = h.bool(true);
        let (vo, io) = (h.out(ScalarType::Bool, &[3]), h.out(ScalarType::Long, &[3]));
        h.call(sort_values_stable, &[x, t, d, t, vo, io, vo, io]).unwrap();
        assert_eq!(h.read_bool(vo), vec![true, true, false]);
        assert_eq!(h.read::<i64>(io), vec![0, 2, 1]);
    }

    #[test]
    fn sort_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1., 2., 3.]);
        let (d, bad_d, f) = (h.int(0), h.int(1), h.bool(false));
        let (vo, io) = (h.out(ScalarType::Float, &[3]), h.out(ScalarType::Long, &[3]));
        assert!(h.call(sort_values, &[x, bad_d, f, vo, io, vo, io]).is_err());
        let bad_idx = h.out(ScalarType::Float, &[3]);
        assert!(h.call(sort_values, &[x, d, f, vo, bad_idx, vo, bad_idx]).is_err());
        let small = h.out(ScalarType::Float, &[2]);
        assert!(h.call(sort_values, &[x, d, f, small, io, small, io]).is_err());
    }
}
