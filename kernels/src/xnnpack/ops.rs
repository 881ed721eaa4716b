//! The XNNPACK nodes that are not convolutions: elementwise math with broadcasting, pooling,
//! softmax, batch matrix multiply, and data movement (transpose, slice, pad, concatenate).
//! Plain loops: these are a few percent of a CNN's time.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::nhwc::Conv2dGeom;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Prelu,
}

impl BinOp {
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => a / b,
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::Prelu => {
                if a < 0.0 {
                    a * b
                } else {
                    a
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnOp {
    Identity,
    Hardswish,
    Sigmoid,
    Tanh,
    Gelu,
    Abs,
    Neg,
    Square,
    Sqrt,
    Rsqrt,
    Floor,
    Ceil,
    Log,
    Exp,
    Sin,
    Cos,
    Elu(f32),
    LeakyRelu(f32),
}

impl UnOp {
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            UnOp::Identity => x,
            UnOp::Hardswish => x * ((x + 3.0).max(0.0).min(6.0) / 6.0),
            UnOp::Sigmoid => 1.0 / (1.0 + libm::expf(-x)),
            UnOp::Tanh => libm::tanhf(x),
            UnOp::Gelu => 0.5 * x * (1.0 + libm::erff(x * core::f32::consts::FRAC_1_SQRT_2)),
            UnOp::Abs => x.abs(),
            UnOp::Neg => -x,
            UnOp::Square => x * x,
            UnOp::Sqrt => libm::sqrtf(x),
            UnOp::Rsqrt => 1.0 / libm::sqrtf(x),
            UnOp::Floor => libm::floorf(x),
            UnOp::Ceil => libm::ceilf(x),
            UnOp::Log => libm::logf(x),
            UnOp::Exp => libm::expf(x),
            UnOp::Sin => libm::sinf(x),
            UnOp::Cos => libm::cosf(x),
            UnOp::Elu(alpha) => {
                if x > 0.0 {
                    x
                } else {
                    alpha * libm::expm1f(x)
                }
            }
            UnOp::LeakyRelu(slope) => {
                if x >= 0.0 {
                    x
                } else {
                    x * slope
                }
            }
        }
    }
}

/// NumPy-style broadcasting of two operands into an output, collapsed into runs: the output is
/// `outer` rows of `inner` elements, and along a row each operand is either contiguous or one
/// repeated element.
#[derive(Clone, Debug, PartialEq)]
pub struct Broadcast {
    /// Collapsed output dims (last = the row).
    dims: Vec<usize>,
    a_strides: Vec<usize>,
    b_strides: Vec<usize>,
    pub a_len: usize,
    pub b_len: usize,
}

impl Broadcast {
    pub fn new(a: &[usize], b: &[usize], out: &[usize]) -> Result<Broadcast, String> {
        let rank = out.len();
        if a.len() > rank || b.len() > rank {
            return Err(format!("operands {a:?} and {b:?} do not broadcast to {out:?}"));
        }
        let pad = |d: &[usize]| -> Vec<usize> { core::iter::repeat_n(1, rank - d.len()).chain(d.iter().copied()).collect() };
        let (a, b) = (pad(a), pad(b));
        for i in 0..rank {
            let ok = |x: usize| x == out[i] || x == 1;
            if !ok(a[i]) || !ok(b[i]) || (out[i] != a[i].max(b[i]) && out[i] != 0) {
                return Err(format!("operands {a:?} and {b:?} do not broadcast to {out:?}"));
            }
        }
        // Merge adjacent dims where each operand is in the same state (full or broadcast).
        let mut dims: Vec<usize> = Vec::new();
        let mut states: Vec<(bool, bool)> = Vec::new();
        for i in 0..rank {
            if out[i] == 1 {
                continue;
            }
            let st = (a[i] == out[i], b[i] == out[i]);
            match (states.last(), dims.last_mut()) {
                (Some(&last), Some(d)) if last == st => *d *= out[i],
                _ => {
                    dims.push(out[i]);
                    states.push(st);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            states.push((true, true));
        }
        let strides = |full: &dyn Fn(usize) -> bool| {
            let mut s = vec![0; dims.len()];
            let mut acc = 1;
            for i in (0..dims.len()).rev() {
                if full(i) {
                    s[i] = acc;
                    acc *= dims[i];
                }
            }
            s
        };
        let a_strides = strides(&|i| states[i].0);
        let b_strides = strides(&|i| states[i].1);
        Ok(Broadcast { dims, a_strides, b_strides, a_len: a.iter().product(), b_len: b.iter().product() })
    }

    /// `Some((rows, n, b_repeated))` when one operand is the whole output (`rows × n`) and the
    /// other a single row of `n` repeated for every row (`b_repeated`: which one), e.g. a
    /// per-channel scale over pixels. Such ops run as one tight loop instead of a call per row.
    pub fn repeated_row(&self) -> Option<(usize, usize, bool)> {
        if self.dims.len() != 2 {
            return None;
        }
        let (rows, n) = (self.dims[0], self.dims[1]);
        match (&self.a_strides[..], &self.b_strides[..]) {
            (&[ra, 1], &[0, 1]) if ra == n => Some((rows, n, true)),
            (&[0, 1], &[rb, 1]) if rb == n => Some((rows, n, false)),
            _ => None,
        }
    }

    /// Calls `row(out_start, a_start, a_step, b_start, b_step, len)` for each output row
    /// (steps are 1 = contiguous or 0 = repeated).
    pub fn for_each_row(&self, mut row: impl FnMut(usize, usize, usize, usize, usize, usize)) {
        let r = self.dims.len();
        let inner = self.dims[r - 1];
        let (sa, sb) = (self.a_strides[r - 1], self.b_strides[r - 1]);
        let outer: usize = self.dims[..r - 1].iter().product();
        let mut idx = vec![0usize; r - 1];
        for o in 0..outer {
            let (mut ao, mut bo) = (0, 0);
            for d in 0..r - 1 {
                ao += idx[d] * self.a_strides[d];
                bo += idx[d] * self.b_strides[d];
            }
            row(o * inner, ao, sa, bo, sb, inner);
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                if idx[d] < self.dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

/// Runs `$body` (a call of an `#[inline(always)]` function) compiled for AVX-512F or AVX2+FMA
/// when the CPU has them (the crate's baseline is SSE2; these loops are memory-light and
/// vectorize wider), else as is. Single IEEE operations only, so every variant gives the same
/// bits.
macro_rules! with_avx2 {
    ($body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn wide<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn wide512<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if crate::nhwc::gemm_f32::has_avx512() {
                // SAFETY: the CPU has AVX-512F, AVX2 and FMA (has_avx512 checks all three);
                // `wide512` only runs safe code.
                return unsafe { wide512(#[inline(always)] || $body) };
            }
            if crate::nhwc::gemm_f32::has_avx2_fma() {
                // SAFETY: the CPU has AVX2 and FMA (just checked); `wide` only runs safe code.
                return unsafe { wide(#[inline(always)] || $body) };
            }
        }
        $body
    }};
}

pub fn binary_f32(op: BinOp, bc: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32], min: f32, max: f32) {
    with_avx2!(binary_f32_body(op, bc, a, b, y, min, max))
}

#[inline(always)]
fn binary_f32_body(op: BinOp, bc: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32], min: f32, max: f32) {
    // One monomorphized loop per operator, so each vectorizes.
    match op {
        BinOp::Add => binary_with(bc, a, b, y, min, max, |x, z| x + z),
        BinOp::Sub => binary_with(bc, a, b, y, min, max, |x, z| x - z),
        BinOp::Mul => binary_with(bc, a, b, y, min, max, |x, z| x * z),
        BinOp::Div => binary_with(bc, a, b, y, min, max, |x, z| x / z),
        BinOp::Min => binary_with(bc, a, b, y, min, max, f32::min),
        BinOp::Max => binary_with(bc, a, b, y, min, max, f32::max),
        BinOp::Prelu => binary_with(bc, a, b, y, min, max, |x, z| BinOp::Prelu.apply(x, z)),
    }
}

/// Whether `[min, max]` clamps nothing (then the loops skip it: NaN-correct `max`/`min` cost
/// three instructions each; a NaN then stays NaN, as in PyTorch, where the clamp made it `min`).
#[inline(always)]
fn no_clamp(min: f32, max: f32) -> bool {
    min == f32::NEG_INFINITY && max == f32::INFINITY
}

#[inline(always)]
fn binary_with(bc: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32], min: f32, max: f32, f: impl Fn(f32, f32) -> f32 + Copy) {
    if no_clamp(min, max) {
        binary_rows(bc, a, b, y, f);
    } else {
        binary_rows(bc, a, b, y, move |x, z| f(x, z).max(min).min(max));
    }
}

#[inline(always)]
fn binary_rows(bc: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32], f: impl Fn(f32, f32) -> f32 + Copy) {
    if let Some((rows, n, b_repeated)) = bc.repeated_row() {
        let y = &mut y[..rows * n];
        if b_repeated {
            let (a, b) = (&a[..rows * n], &b[..n]);
            for (yr, ar) in y.chunks_exact_mut(n).zip(a.chunks_exact(n)) {
                for ((y, &x), &z) in yr.iter_mut().zip(ar).zip(b) {
                    *y = f(x, z);
                }
            }
        } else {
            let (a, b) = (&a[..n], &b[..rows * n]);
            for (yr, br) in y.chunks_exact_mut(n).zip(b.chunks_exact(n)) {
                for ((y, &x), &z) in yr.iter_mut().zip(a).zip(br) {
                    *y = f(x, z);
                }
            }
        }
        return;
    }
    bc.for_each_row(|o, ao, sa, bo, sb, len| {
        let out = &mut y[o..o + len];
        match (sa, sb) {
            (1, 1) => {
                for ((y, &x), &z) in out.iter_mut().zip(&a[ao..ao + len]).zip(&b[bo..bo + len]) {
                    *y = f(x, z);
                }
            }
            (1, _) => {
                let z = b[bo];
                for (y, &x) in out.iter_mut().zip(&a[ao..ao + len]) {
                    *y = f(x, z);
                }
            }
            (_, 1) => {
                let x = a[ao];
                for (y, &z) in out.iter_mut().zip(&b[bo..bo + len]) {
                    *y = f(x, z);
                }
            }
            _ => {
                let v = f(a[ao], b[bo]);
                out.fill(v);
            }
        }
    });
}

/// [`crate::xnnpack`]'s fused pointwise → depthwise step: for each band of output rows, the
/// input rows it reads are expanded into `band` (rows the previous band already expanded are
/// moved, not recomputed), then the depthwise convolution runs on them. `band` must hold the
/// whole expanded tensor (it is the unfused plan's buffer for it); about 512 KiB of it is used.
/// With `project` (convolution, bounds, and a scratch the size of the depthwise output), each
/// band's depthwise rows go through that pointwise convolution into `y` as well.
#[allow(clippy::too_many_arguments)]
pub fn expand_depthwise_f32(
    par: &dyn crate::nhwc::Parallel,
    expand: &crate::nhwc::conv_f32::ConvF32,
    (e_min, e_max): (f32, f32),
    dw: &crate::nhwc::dwconv_f32::DepthwiseF32,
    (min, max): (f32, f32),
    mut project: Option<(&crate::nhwc::conv_f32::ConvF32, f32, f32, &mut [f32])>,
    x: &[f32],
    band: &mut [f32],
    y: &mut [f32],
) -> Result<(), String> {
    let g = *dw.geom();
    let (w, c) = (g.in_w, g.groups);
    let (row, dw_row) = (w * c, g.out_w * g.out_channels());
    let y_row = project.as_ref().map_or(dw_row, |(p, ..)| g.out_w * p.geom().out_channels());
    let scratch_ok = project.as_ref().is_none_or(|(.., s)| s.len() >= g.out_h * dw_row);
    let e = expand.geom();
    if (e.batch, e.out_h, e.out_w, e.out_channels()) != (1, g.in_h, g.in_w, c) {
        return Err(format!("expand/depthwise: the expansion's output {}x{}x{} is not the depthwise input {}x{}x{c}", e.out_h, e.out_w, e.out_channels(), g.in_h, g.in_w));
    }
    if band.len() < g.in_h * row || x.len() != e.in_len() || y.len() < g.out_h * y_row || !scratch_ok {
        return Err(format!("expand/depthwise: buffers of {} / {} / {} values are too small", x.len(), band.len(), y.len()));
    }
    let span = (g.kernel_h - 1) * g.dilation_h + 1;
    let dims = BandDims { row, dw_row, y_row, span };
    // Several threads: each takes a contiguous run of output rows with its own share of the
    // scratch and runs its bands on one thread (a band's kernels are too small to split well);
    // rows at the runs' seams are expanded twice.
    let threads = par.threads();
    let tasks = threads.min(g.out_h);
    let band_share = band.len() / tasks.max(1) / row.max(1);
    let mid_share = project.as_ref().map_or(usize::MAX, |(.., m)| m.len() / tasks.max(1) / dw_row.max(1));
    if tasks > 1 && band_share >= span && mid_share >= 1 {
        let per = g.out_h.div_ceil(tasks);
        let (bp, yp) = (SyncF32(band.as_mut_ptr()), SyncF32(y.as_mut_ptr()));
        let mp = project.as_mut().map(|(.., m)| SyncF32(m.as_mut_ptr()));
        let proj = project.as_ref().map(|(p, lo, hi, _)| (*p, *lo, *hi));
        let results: alloc::vec::Vec<core::cell::Cell<Option<String>>> = (0..tasks).map(|_| core::cell::Cell::new(None)).collect();
        let results = SyncCells(&results);
        par.for_each(tasks, &|t| {
            let (bp, yp, mp, results) = (&bp, &yp, &mp, &results);
            let (o0, o1) = (t * per, ((t + 1) * per).min(g.out_h));
            if o0 >= o1 {
                return;
            }
            // SAFETY: task t alone uses band[t·S..(t+1)·S] (S = band_share·row), the mid
            // scratch's share t likewise, and output rows o0..o1 of `y` (per·t.. ranges are
            // disjoint; all inside the lengths checked above); the slices die with the task.
            let (band_t, mid_t, y_t) = unsafe {
                (
                    core::slice::from_raw_parts_mut(bp.0.add(t * band_share * row), band_share * row),
                    mp.as_ref().map(|m| core::slice::from_raw_parts_mut(m.0.add(t * mid_share * dw_row), mid_share * dw_row)),
                    core::slice::from_raw_parts_mut(yp.0.add(o0 * y_row), (o1 - o0) * y_row),
                )
            };
            let project = proj.map(|(p, lo, hi)| (p, lo, hi, mid_t.unwrap_or(&mut [])));
            if let Err(e) = bands(&crate::nhwc::Serial, expand, (e_min, e_max), dw, (min, max), project, x, band_t, y_t, o0..o1, &dims) {
                // SAFETY: cell t is only touched by task t.
                unsafe { results.set(t, e) };
            }
        });
        return match results.0.iter().find_map(|c| c.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        };
    }
    bands(par, expand, (e_min, e_max), dw, (min, max), project, x, band, y, 0..g.out_h, &dims)
}

/// Row sizes of a fused step: expanded row, depthwise output row, output row; rows a depthwise
/// output row reads.
struct BandDims {
    row: usize,
    dw_row: usize,
    y_row: usize,
    span: usize,
}

/// A raw pointer handed to parallel tasks that use disjoint parts of its slice.
struct SyncF32(*mut f32);
// SAFETY: only used to give tasks disjoint sub-slices (see `expand_depthwise_f32`).
unsafe impl Sync for SyncF32 {}

/// Per-task error slots (each task writes only its own).
struct SyncCells<'a>(&'a [core::cell::Cell<Option<String>>]);
// SAFETY: task t only touches cell t.
unsafe impl Sync for SyncCells<'_> {}
impl SyncCells<'_> {
    /// # Safety
    /// Only task `t` may call this with `t`.
    unsafe fn set(&self, t: usize, e: String) {
        self.0[t].set(Some(e));
    }
}

/// The band loop of [`expand_depthwise_f32`] over output rows `rows` (`y` holds just those rows;
/// `band`, and the projection's scratch, hold at least `span` expanded rows / one output row).
#[allow(clippy::too_many_arguments)]
fn bands(
    par: &dyn crate::nhwc::Parallel,
    expand: &crate::nhwc::conv_f32::ConvF32,
    (e_min, e_max): (f32, f32),
    dw: &crate::nhwc::dwconv_f32::DepthwiseF32,
    (min, max): (f32, f32),
    mut project: Option<(&crate::nhwc::conv_f32::ConvF32, f32, f32, &mut [f32])>,
    x: &[f32],
    band: &mut [f32],
    y: &mut [f32],
    rows: core::ops::Range<usize>,
    d: &BandDims,
) -> Result<(), String> {
    let g = *dw.geom();
    let (row, dw_row, y_row, span) = (d.row, d.dw_row, d.y_row, d.span);
    // Expanded rows held at once: about 512 KiB, at most what `band` holds.
    let budget = ((512 * 1024 / 4) / row.max(1)).min(band.len() / row.max(1)).max(span);
    let mut per_band = (budget - span) / g.stride_h + 1;
    if let Some((.., mid)) = project.as_ref() {
        per_band = per_band.min(mid.len() / dw_row.max(1)).max(1);
    }
    // Input rows [held.0, held.1) are expanded at the start of `band`.
    let mut held = (0usize, 0usize);
    let mut o0 = rows.start;
    while o0 < rows.end {
        let o1 = (o0 + per_band).min(rows.end);
        let a = (o0 * g.stride_h).saturating_sub(g.pad_top);
        let b = ((o1 - 1) * g.stride_h + span).saturating_sub(g.pad_top).min(g.in_h).max(a);
        let start = if held.0 <= a && a < held.1 {
            band.copy_within((a - held.0) * row..(held.1 - held.0) * row, 0);
            held.1.min(b)
        } else {
            a
        };
        if b > start {
            expand.run_rows(par, start, b, x, &mut band[(start - a) * row..(b - a) * row], e_min, e_max)?;
        }
        held = (a, b);
        let y_band = &mut y[(o0 - rows.start) * y_row..(o1 - rows.start) * y_row];
        match project.as_mut() {
            None => dw.run_rows(par, o0, o1, &band[..(b - a) * row], y_band, min, max)?,
            Some((p, p_min, p_max, mid)) => {
                let mid = &mut mid[..(o1 - o0) * dw_row];
                dw.run_rows(par, o0, o1, &band[..(b - a) * row], mid, min, max)?;
                p.run_pixels(par, (o1 - o0) * g.out_w, mid, y_band, *p_min, *p_max)?;
            }
        }
        o0 = o1;
    }
    Ok(())
}

pub fn unary_f32(op: UnOp, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    with_avx2!(unary_f32_body(op, x, y, min, max))
}

#[inline(always)]
fn unary_f32_body(op: UnOp, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    match op {
        // The cheap, common ones get their own vectorizable loop.
        UnOp::Identity => unary_with(x, y, min, max, |v| v),
        // XNNPACK's form: a multiply by 1/6 instead of a division (within a rounding of
        // `UnOp::apply`), and `max(·, 0)` / `min(·, 6)` against constants are single
        // instructions.
        UnOp::Hardswish => unary_with(x, y, min, max, crate::nhwc::hardswish),
        UnOp::Abs => unary_with(x, y, min, max, f32::abs),
        UnOp::Neg => unary_with(x, y, min, max, |v| -v),
        UnOp::Square => unary_with(x, y, min, max, |v| v * v),
        UnOp::LeakyRelu(s) => unary_with(x, y, min, max, move |v| if v >= 0.0 { v } else { v * s }),
        other => unary_with(x, y, min, max, move |v| other.apply(v)),
    }
}

#[inline(always)]
fn unary_with(x: &[f32], y: &mut [f32], min: f32, max: f32, f: impl Fn(f32) -> f32) {
    if no_clamp(min, max) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = f(x);
        }
    } else {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = f(x).max(min).min(max);
        }
    }
}

pub fn softmax_f32(rows: usize, cols: usize, x: &[f32], y: &mut [f32]) {
    for r in 0..rows {
        let (xr, yr) = (&x[r * cols..(r + 1) * cols], &mut y[r * cols..(r + 1) * cols]);
        let m = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (y, &x) in yr.iter_mut().zip(xr) {
            *y = libm::expf(x - m);
            sum += *y;
        }
        let inv = 1.0 / sum;
        for y in yr.iter_mut() {
            *y *= inv;
        }
    }
}

pub fn global_avg_pool_f32(batch: usize, pixels: usize, channels: usize, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    with_avx2!(global_avg_pool_body(batch, pixels, channels, x, y, min, max))
}

#[inline(always)]
fn global_avg_pool_body(batch: usize, pixels: usize, channels: usize, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    let scale = 1.0 / pixels.max(1) as f32;
    for n in 0..batch {
        let out = &mut y[n * channels..(n + 1) * channels];
        out.fill(0.0);
        for p in 0..pixels {
            let row = &x[(n * pixels + p) * channels..][..channels];
            for (o, &v) in out.iter_mut().zip(row) {
                *o += v;
            }
        }
        for o in out.iter_mut() {
            *o = (*o * scale).max(min).min(max);
        }
    }
}

/// Average (padding excluded from the count, as XNNPACK does) or max pooling over NHWC.
pub fn pool_f32(max_pool: bool, g: &Conv2dGeom, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    let c = g.groups;
    let mut acc = vec![0.0f32; c];
    for n in 0..g.batch {
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                acc.fill(if max_pool { f32::NEG_INFINITY } else { 0.0 });
                let mut count = 0usize;
                for ky in crate::nhwc::window_taps(oy, g.stride_h, g.dilation_h, g.pad_top, g.in_h, g.kernel_h) {
                    let iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
                    for kx in crate::nhwc::window_taps(ox, g.stride_w, g.dilation_w, g.pad_left, g.in_w, g.kernel_w) {
                        let ix = ox * g.stride_w + kx * g.dilation_w - g.pad_left;
                        count += 1;
                        let row = &x[((n * g.in_h + iy) * g.in_w + ix) * c..][..c];
                        for (a, &v) in acc.iter_mut().zip(row) {
                            *a = if max_pool { a.max(v) } else { *a + v };
                        }
                    }
                }
                let out = &mut y[((n * g.out_h + oy) * g.out_w + ox) * c..][..c];
                let scale = if max_pool { 1.0 } else { 1.0 / count.max(1) as f32 };
                for (o, &a) in out.iter_mut().zip(&acc) {
                    *o = if max_pool { a } else { a * scale }.max(min).min(max);
                }
            }
        }
    }
}

/// Transposed convolution, NHWC, filter `[groups·group_out, kh, kw, group_in]`.
#[allow(clippy::too_many_arguments)]
pub fn deconv_f32(g: &Conv2dGeom, filter: &[f32], bias: Option<&[f32]>, x: &[f32], y: &mut [f32], min: f32, max: f32) {
    let (ci, co) = (g.in_channels(), g.out_channels());
    for n in 0..g.batch {
        for p in 0..g.out_h * g.out_w {
            let out = &mut y[(n * g.out_h * g.out_w + p) * co..][..co];
            match bias {
                Some(b) => out.copy_from_slice(b),
                None => out.fill(0.0),
            }
        }
        for iy in 0..g.in_h {
            for ix in 0..g.in_w {
                let xin = &x[((n * g.in_h + iy) * g.in_w + ix) * ci..][..ci];
                for ky in 0..g.kernel_h {
                    let oy = (iy * g.stride_h + ky * g.dilation_h) as isize - g.pad_top as isize;
                    if oy < 0 || oy as usize >= g.out_h {
                        continue;
                    }
                    for kx in 0..g.kernel_w {
                        let ox = (ix * g.stride_w + kx * g.dilation_w) as isize - g.pad_left as isize;
                        if ox < 0 || ox as usize >= g.out_w {
                            continue;
                        }
                        let out = &mut y[((n * g.out_h + oy as usize) * g.out_w + ox as usize) * co..][..co];
                        for grp in 0..g.groups {
                            for o in 0..g.group_out {
                                let oc = grp * g.group_out + o;
                                let w = &filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in..][..g.group_in];
                                let xs = &xin[grp * g.group_in..][..g.group_in];
                                out[oc] += w.iter().zip(xs).map(|(a, b)| a * b).sum::<f32>();
                            }
                        }
                    }
                }
            }
        }
    }
    for v in y.iter_mut() {
        *v = v.max(min).min(max);
    }
}

pub fn transpose<T: Copy>(dims: &[usize], perm: &[usize], x: &[T], y: &mut [T]) {
    let (dims, perm) = collapse_transpose(dims, perm);
    let r = dims.len();
    // The boundary layout changes (NCHW ↔ NHWC) are batched 2-D transposes: blocked copies.
    if r == 2 && perm == [1, 0] {
        transpose_2d(dims[0], dims[1], x, y);
        return;
    }
    if r == 3 && perm == [0, 2, 1] {
        let n = dims[1] * dims[2];
        for b in 0..dims[0] {
            transpose_2d(dims[1], dims[2], &x[b * n..(b + 1) * n], &mut y[b * n..(b + 1) * n]);
        }
        return;
    }
    let mut in_strides = vec![1usize; r];
    for i in (0..r.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * dims[i + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    if r <= 1 {
        y.copy_from_slice(x);
        return;
    }
    let inner = out_dims[r - 1];
    let step = strides[r - 1];
    let mut idx = vec![0usize; r - 1];
    let outer: usize = out_dims[..r - 1].iter().product();
    for o in 0..outer {
        let base: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        let out = &mut y[o * inner..(o + 1) * inner];
        for (k, v) in out.iter_mut().enumerate() {
            *v = x[base + k * step];
        }
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            if idx[d] < out_dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Drops size-1 dims and merges input dims that stay adjacent and in order in the output.
fn collapse_transpose(dims: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let keep: Vec<usize> = (0..dims.len()).filter(|&d| dims[d] != 1).collect();
    // perm restricted to kept dims, renumbered.
    let rank_of = |d: usize| keep.iter().position(|&k| k == d);
    let p: Vec<usize> = perm.iter().filter_map(|&d| rank_of(d)).collect();
    let kd: Vec<usize> = keep.iter().map(|&d| dims[d]).collect();
    // Merge runs where output order has input dims i, i+1 consecutively.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &d in &p {
        match groups.last_mut() {
            Some(g) if *g.last().unwrap() + 1 == d => g.push(d),
            _ => groups.push(vec![d]),
        }
    }
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| groups[g][0]);
    let new_dims: Vec<usize> = order.iter().map(|&g| groups[g].iter().map(|&d| kd[d]).product()).collect();
    let mut new_perm = vec![0; groups.len()];
    for (rank, &g) in order.iter().enumerate() {
        new_perm[g] = rank;
    }
    (new_dims, new_perm)
}

/// `y[c, r] = x[r, c]` for `x` of `rows × cols`, in cache-sized tiles (few rows, as in an
/// image's NCHW → NHWC with 3 channels: one interleaving pass).
fn transpose_2d<T: Copy>(rows: usize, cols: usize, x: &[T], y: &mut [T]) {
    match rows {
        3 => return interleave::<T, 3>(cols, x, y),
        4 => return interleave::<T, 4>(cols, x, y),
        _ => {}
    }
    const TILE: usize = 32;
    for r0 in (0..rows).step_by(TILE) {
        let r1 = (r0 + TILE).min(rows);
        for c0 in (0..cols).step_by(TILE) {
            let c1 = (c0 + TILE).min(cols);
            for r in r0..r1 {
                let row = &x[r * cols..(r + 1) * cols];
                for c in c0..c1 {
                    y[c * rows + r] = row[c];
                }
            }
        }
    }
}

/// [`transpose_2d`] for `R` rows: `y[c·R + r] = x[r·cols + c]`, each output pixel written whole.
fn interleave<T: Copy, const R: usize>(cols: usize, x: &[T], y: &mut [T]) {
    let rows: [&[T]; R] = core::array::from_fn(|r| &x[r * cols..(r + 1) * cols]);
    for (c, out) in y[..R * cols].chunks_exact_mut(R).enumerate() {
        for (o, row) in out.iter_mut().zip(&rows) {
            *o = row[c];
        }
    }
}

/// Row-major index walk shared by slice and pad: calls `f(in_offset, out_offset, len)` for
/// each innermost run of the `sizes` box placed at `in_origin` in `in_dims` and `out_origin`
/// in `out_dims`.
fn box_runs(in_dims: &[usize], in_origin: &[usize], out_dims: &[usize], out_origin: &[usize], sizes: &[usize], mut f: impl FnMut(usize, usize, usize)) {
    let r = sizes.len();
    if r == 0 {
        f(0, 0, 1);
        return;
    }
    if sizes.contains(&0) {
        return;
    }
    let strides = |d: &[usize]| {
        let mut s = vec![1usize; r];
        for i in (0..r - 1).rev() {
            s[i] = s[i + 1] * d[i + 1];
        }
        s
    };
    let (si, so) = (strides(in_dims), strides(out_dims));
    let mut idx = vec![0usize; r - 1];
    let outer: usize = sizes[..r - 1].iter().product();
    for _ in 0..outer {
        let mut io = in_origin[r - 1];
        let mut oo = out_origin[r - 1];
        for d in 0..r - 1 {
            io += (in_origin[d] + idx[d]) * si[d];
            oo += (out_origin[d] + idx[d]) * so[d];
        }
        f(io, oo, sizes[r - 1]);
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub fn slice<T: Copy>(dims: &[usize], offsets: &[usize], sizes: &[usize], x: &[T], y: &mut [T]) {
    let zeros = vec![0; sizes.len()];
    box_runs(dims, offsets, sizes, &zeros, sizes, |i, o, n| y[o..o + n].copy_from_slice(&x[i..i + n]));
}

pub fn pad<T: Copy>(dims: &[usize], pre: &[usize], post: &[usize], value: T, x: &[T], y: &mut [T]) {
    let out_dims: Vec<usize> = (0..dims.len()).map(|i| dims[i] + pre[i] + post[i]).collect();
    y.fill(value);
    let zeros = vec![0; dims.len()];
    box_runs(dims, &zeros, &out_dims, pre, dims, |i, o, n| y[o..o + n].copy_from_slice(&x[i..i + n]));
}

/// `inputs[k]` is `outer` blocks of `inner_sizes[k]` elements; the output interleaves them.
pub fn concat<T: Copy>(outer: usize, inner_sizes: &[usize], inputs: &[&[T]], y: &mut [T]) {
    let row: usize = inner_sizes.iter().sum();
    for o in 0..outer {
        let mut at = o * row;
        for (x, &n) in inputs.iter().zip(inner_sizes) {
            y[at..at + n].copy_from_slice(&x[o * n..(o + 1) * n]);
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three "threads" that run the tasks one after another, in reverse order.
    struct ThreeThreads;
    impl crate::nhwc::Parallel for ThreeThreads {
        fn threads(&self) -> usize {
            3
        }
        fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
            for i in (0..tasks).rev() {
                f(i);
            }
        }
    }

    #[test]
    fn fused_expand_depthwise_equals_the_two_steps() {
        use crate::nhwc::conv_f32::ConvF32;
        use crate::nhwc::dwconv_f32::DepthwiseF32;
        use crate::nhwc::{Conv2dGeom, Serial};
        use crate::optimized::test_util::Lcg;
        let mut r = Lcg::new(31);
        // (h, w, cin, cexp, k, stride, pad, stem): MobileNet-like shapes, big enough for several
        // bands, odd sizes, stride 2, 5×5, no padding; `stem`: the expansion is a 3×3 stride-2
        // convolution from a 2h×2w image (a network's first layer), with hardswish after it.
        for &(h, w, cin, ce, k, s, p, stem) in &[
            (112usize, 112usize, 16usize, 96usize, 3usize, 2usize, 1usize, false),
            (57, 23, 24, 144, 3, 1, 1, false),
            (30, 31, 8, 40, 5, 2, 2, false),
            (40, 40, 16, 600, 3, 1, 0, false),
            (9, 9, 4, 16, 3, 2, 1, false),
            (56, 56, 3, 32, 3, 1, 1, true),
            (29, 21, 3, 16, 3, 2, 1, true),
        ] {
            let pw = Conv2dGeom { batch: 1, in_h: h, in_w: w, out_h: h, out_w: w, kernel_h: 1, kernel_w: 1, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: 0, pad_left: 0, groups: 1, group_in: cin, group_out: ce };
            let eg = if stem { Conv2dGeom { in_h: 2 * h, in_w: 2 * w, kernel_h: 3, kernel_w: 3, stride_h: 2, stride_w: 2, pad_top: 1, pad_left: 1, ..pw } } else { pw };
            let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
            let dg = Conv2dGeom { batch: 1, in_h: h, in_w: w, out_h: oh, out_w: ow, kernel_h: k, kernel_w: k, stride_h: s, stride_w: s, dilation_h: 1, dilation_w: 1, pad_top: p, pad_left: p, groups: ce, group_in: 1, group_out: 1 };
            let kk = eg.kernel_h * eg.kernel_w * cin;
            let mut expand = ConvF32::new(&eg, &r.vec(ce * kk), Some(&r.vec(ce))).unwrap();
            if stem {
                expand = expand.with_post(crate::nhwc::PostOp::Hardswish);
            }
            let dw = DepthwiseF32::new(&dg, &r.vec(k * k * ce), Some(&r.vec(ce))).unwrap();
            let x = r.vec(eg.in_len());
            let mut mid = vec![0.0f32; h * w * ce];
            let mut want = vec![0.0f32; dg.out_len()];
            expand.run(&Serial, &x, &mut mid, 0.0, 6.0).unwrap();
            dw.run(&Serial, &mid, &mut want, 0.0, 6.0).unwrap();
            let mut band = vec![f32::NAN; h * w * ce];
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for par in [&Serial as &dyn crate::nhwc::Parallel, &ThreeThreads] {
                let mut got = vec![f32::NAN; dg.out_len()];
                expand_depthwise_f32(par, &expand, (0.0, 6.0), &dw, (0.0, 6.0), None, &x, &mut band, &mut got).unwrap();
                assert!(bits(&got) == bits(&want), "{h}x{w}x{cin}->{ce} k{k} s{s} p{p}, {} thread(s)", par.threads());
            }
            // With the projection joined.
            let cp = 1 + cin * 3 / 2;
            let pg = Conv2dGeom { in_h: oh, in_w: ow, out_h: oh, out_w: ow, group_in: ce, group_out: cp, ..pw };
            let project = ConvF32::new(&pg, &r.vec(cp * ce), Some(&r.vec(cp))).unwrap();
            let mut want_p = vec![0.0f32; pg.out_len()];
            project.run(&Serial, &want, &mut want_p, f32::NEG_INFINITY, f32::INFINITY).unwrap();
            let mut mid = vec![f32::NAN; dg.out_len()];
            for par in [&Serial as &dyn crate::nhwc::Parallel, &ThreeThreads] {
                let mut got_p = vec![f32::NAN; pg.out_len()];
                let proj = Some((&project, f32::NEG_INFINITY, f32::INFINITY, &mut mid[..]));
                expand_depthwise_f32(par, &expand, (0.0, 6.0), &dw, (0.0, 6.0), proj, &x, &mut band, &mut got_p).unwrap();
                assert!(bits(&got_p) == bits(&want_p), "projected {h}x{w}x{cin}->{ce}->{cp} k{k} s{s} p{p}, {} thread(s)", par.threads());
            }
        }
    }

    /// Plain index arithmetic, the twin of [`transpose`].
    fn transpose_naive(dims: &[usize], perm: &[usize], x: &[u32]) -> Vec<u32> {
        let r = dims.len();
        let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        let n: usize = dims.iter().product();
        let mut y = vec![0; n];
        for (o, v) in y.iter_mut().enumerate() {
            let mut rem = o;
            let mut idx = vec![0; r];
            for d in (0..r).rev() {
                idx[d] = rem % out_dims[d];
                rem /= out_dims[d];
            }
            let mut i = 0;
            for d in 0..r {
                // output dim d is input dim perm[d]
                let stride: usize = dims[perm[d] + 1..].iter().product();
                i += idx[d] * stride;
            }
            *v = x[i];
        }
        y
    }

    #[test]
    fn transpose_matches_index_arithmetic() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[1, 3, 224, 4], &[0, 2, 3, 1]),
            (&[1, 5, 7, 3], &[0, 3, 1, 2]),
            (&[2, 3, 4], &[0, 2, 1]),
            (&[2, 3, 4], &[2, 0, 1]),
            (&[4, 1, 6], &[1, 2, 0]),
            (&[1, 1, 1], &[2, 1, 0]),
            (&[3, 70], &[1, 0]),
            // An image's NCHW → NHWC with 3 channels.
            (&[1, 3, 4, 8], &[0, 2, 3, 1]),
            (&[2, 3, 7, 5], &[0, 2, 3, 1]),
            (&[3, 16], &[1, 0]),
            (&[4, 33], &[1, 0]),
            (&[2, 4, 5, 3], &[0, 2, 3, 1]),
            (&[2, 3, 4, 5], &[3, 1, 0, 2]),
            (&[6], &[0]),
        ];
        for (dims, perm) in cases {
            let n: usize = dims.iter().product();
            let x: Vec<u32> = (0..n as u32).collect();
            let mut y = vec![0; n];
            transpose(dims, perm, &x, &mut y);
            assert_eq!(y, transpose_naive(dims, perm, &x), "{dims:?} {perm:?}");
        }
    }

    #[test]
    fn unary_and_binary_fast_loops_match_scalar_formulas() {
        let x: Vec<f32> = (0..203).map(|i| (i as f32 - 101.0) * 0.071).chain([f32::NAN, -0.0]).collect();
        for (min, max) in [(f32::NEG_INFINITY, f32::INFINITY), (-0.5, 1.5)] {
            for op in [UnOp::Hardswish, UnOp::Identity, UnOp::Abs, UnOp::Square, UnOp::LeakyRelu(0.1)] {
                let mut y = vec![0.0; x.len()];
                unary_f32(op, &x, &mut y, min, max);
                for (&xv, &yv) in x.iter().zip(&y) {
                    // No clamp: NaN stays NaN (as in PyTorch) instead of becoming -inf.
                    let want = if no_clamp(min, max) { op.apply(xv) } else { op.apply(xv).max(min).min(max) };
                    assert!(
                        (yv - want).abs() <= 1e-6 * want.abs().max(1.0) || (yv.is_nan() && want.is_nan()),
                        "{op:?} {xv} -> {yv}, want {want}"
                    );
                }
            }
            let bc = Broadcast::new(&[x.len()], &[1], &[x.len()]).unwrap();
            let mut y = vec![0.0; x.len()];
            binary_f32(BinOp::Mul, &bc, &x, &[0.75], &mut y, min, max);
            for (&xv, &yv) in x.iter().zip(&y) {
                let want = if no_clamp(min, max) { xv * 0.75 } else { (xv * 0.75).max(min).min(max) };
                assert!(yv == want || (yv.is_nan() && want.is_nan()), "{xv} * 0.75 -> {yv}, want {want}");
            }
        }
    }

    #[test]
    fn broadcast_rows_cover_numpy_semantics() {
        // [1,1,1,C] · [1,H,W,C], [N,1] · [1,M], scalar · tensor.
        let cases: &[(&[usize], &[usize], &[usize])] = &[(&[1, 1, 1, 4], &[1, 3, 2, 4], &[1, 3, 2, 4]), (&[3, 1], &[1, 5], &[3, 5]), (&[1], &[2, 3], &[2, 3]), (&[2, 3], &[2, 3], &[2, 3]), (&[2, 3, 4], &[1, 1, 4], &[2, 3, 4])];
        for (a, b, out) in cases {
            let bc = Broadcast::new(a, b, out).unwrap();
            let (na, nb): (usize, usize) = (a.iter().product(), b.iter().product());
            let av: Vec<f32> = (0..na).map(|i| i as f32).collect();
            let bv: Vec<f32> = (0..nb).map(|i| 100.0 * i as f32).collect();
            let n: usize = out.iter().product();
            let mut y = vec![0.0; n];
            binary_f32(BinOp::Sub, &bc, &av, &bv, &mut y, f32::NEG_INFINITY, f32::INFINITY);
            // Reference: index each operand with broadcast strides.
            let r = out.len();
            for (o, &got) in y.iter().enumerate() {
                let mut rem = o;
                let mut idx = vec![0; r];
                for d in (0..r).rev() {
                    idx[d] = rem % out[d];
                    rem /= out[d];
                }
                let at = |dims: &[usize]| {
                    let pad = r - dims.len();
                    let mut i = 0;
                    for d in 0..dims.len() {
                        i = i * dims[d] + if dims[d] == 1 { 0 } else { idx[d + pad] };
                    }
                    i
                };
                assert_eq!(got, av[at(a)] - bv[at(b)], "{a:?}-{b:?} at {o}");
            }
        }
        assert!(Broadcast::new(&[2, 3], &[3, 2], &[2, 3]).is_err());
    }

    #[test]
    fn slice_pad_and_concat_move_the_right_elements() {
        let x: Vec<i32> = (0..24).collect();
        let mut y = vec![0; 6];
        slice(&[2, 3, 4], &[1, 1, 1], &[1, 2, 3], &x, &mut y);
        assert_eq!(y, [17, 18, 19, 21, 22, 23]);
        let mut p = vec![0; 4 * 5];
        pad(&[2, 3], &[1, 1], &[1, 1], -1, &[1, 2, 3, 4, 5, 6], &mut p);
        assert_eq!(p, [-1, -1, -1, -1, -1, -1, 1, 2, 3, -1, -1, 4, 5, 6, -1, -1, -1, -1, -1, -1]);
        let mut c = vec![0; 10];
        concat(2, &[2, 3], &[&[1, 2, 3, 4], &[5, 6, 7, 8, 9, 10]], &mut c);
        assert_eq!(c, [1, 2, 5, 6, 7, 3, 4, 8, 9, 10]);
    }
}
