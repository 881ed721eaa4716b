//! f32 depthwise convolution over NHWC tensors.
//!
//! Geometry: `g.group_in == 1`, `g.groups` = input channels `C`, `g.group_out` = multiplier `M`;
//! output channel `c·M + m` reads input channel `c`. Filter `[kernel_h, kernel_w, C·M]`.
//!
//! Multiplier 1 (the common case) runs the channel-vectorized kernel: weights are packed per
//! block of 16 channels as `[bias; taps…]` (64-byte aligned rows), and for every output pixel
//! the kernel gathers one input-pixel pointer per tap (taps in the padding point at a zero row,
//! the XNNPACK "indirection + zero buffer" trick), then walks the channel blocks with the
//! accumulators in registers (AVX2+FMA: 2 ymm per block, NEON: 4 q registers, plain Rust
//! otherwise). 3×3 and 5×5 kernels get tap loops unrolled at compile time; any other size uses
//! the same code with a run-time tap count. On AVX-512 CPUs, 3×3 and 5×5 kernels with stride 1
//! or 2 (no horizontal dilation) run the `avx512` rows instead: weights in registers, P output
//! pixels per step (P independent sums in flight; groups at the image's edges skip the columns
//! in the padding), groups of up to 8 rows at a time: channel block by channel block over the
//! rows when a block's input lines of the group fit in L1 (narrow images), pixel group by
//! pixel group over all blocks (memory in address order) otherwise. Other multipliers use a
//! plain generic loop. Rows of output pixels are the parallel tasks; a convolution's
//! [`PostOp`] runs on each row group just written.

use super::conv_f32::check_geom;
use super::gemm_f32::{Lanes, SyncPtr, Ukernel, MIN_TASK_MACS};
use super::{Conv2dGeom, Parallel, PostOp};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Channels per packed weight block.
const CB: usize = 16;
/// Channels per L1-resident chunk of a row (a multiple of `CB`).
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
const CHUNK: usize = 128;

/// A depthwise convolution with packed weights.
#[derive(Clone)]
pub struct DepthwiseF32 {
    g: Conv2dGeom,
    taps: usize,
    /// Multiplier 1: per 16-channel block, the bias row then one row per tap (zero-padded).
    packed: Vec<Lanes>,
    /// Other multipliers: the filter `[taps, C·M]` and bias `[C·M]` as given.
    filter: Vec<f32>,
    bias: Vec<f32>,
    /// `C` zeros: what taps in the padding read.
    zero: Vec<f32>,
    /// Applied to each output row after the clamp ([`Self::with_post`]).
    post: PostOp,
}

/// What a row of output pixels needs (raw pointers checked by `run`).
struct Ctx {
    x: *const f32,
    zero: *const f32,
    w: *const f32,
    in_h: usize,
    in_w: usize,
    c: usize,
    out_w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    dh: usize,
    dw: usize,
    pt: usize,
    pl: usize,
    taps: usize,
    min: f32,
    max: f32,
}

// SAFETY: a `Ctx` only carries read-only pointers (input, zero row, weights) that every task
// may read at the same time; nothing is written through them.
unsafe impl Sync for Ctx {}

impl DepthwiseF32 {
    /// `filter` is `[kernel_h, kernel_w, C·M]` (XNNPACK's `[1, KH, KW, C·M]`), `bias` `[C·M]`.
    pub fn new(g: &Conv2dGeom, filter: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        check_geom(g, "depthwise conv2d")?;
        if g.group_in != 1 {
            return Err(format!("depthwise conv2d: group_in must be 1, got {}", g.group_in));
        }
        let taps = g.kernel_h * g.kernel_w;
        let (c, co) = (g.groups, g.out_channels());
        if filter.len() != taps * co {
            return Err(format!(
                "depthwise conv2d: filter has {} elements, [{}, {}, {co}] needs {}",
                filter.len(),
                g.kernel_h,
                g.kernel_w,
                taps * co
            ));
        }
        if let Some(b) = bias {
            if b.len() != co {
                return Err(format!("depthwise conv2d: bias has {} elements, expected {co}", b.len()));
            }
        }
        let bias_v: Vec<f32> = bias.map_or_else(|| vec![0.0; co], |b| b.to_vec());
        let (packed, filter, bias) = if g.group_out == 1 {
            let blocks = c.div_ceil(CB);
            let mut p = vec![Lanes([0.0; CB]); blocks * (taps + 1)];
            for ch in 0..c {
                let (blk, lane) = (ch / CB, ch % CB);
                let base = blk * (taps + 1);
                p[base].0[lane] = bias_v[ch];
                for t in 0..taps {
                    p[base + 1 + t].0[lane] = filter[t * c + ch];
                }
            }
            (p, Vec::new(), Vec::new())
        } else {
            (Vec::new(), filter.to_vec(), bias_v)
        };
        Ok(DepthwiseF32 { g: *g, taps, packed, filter, bias, zero: vec![0.0; c], post: PostOp::None })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.g
    }

    /// This convolution with `post` applied to its outputs (after the clamp), row by row.
    pub fn with_post(self, post: PostOp) -> Self {
        DepthwiseF32 { post, ..self }
    }

    pub fn post(&self) -> PostOp {
        self.post
    }

    /// `x` has `g.in_len()` elements, `y` `g.out_len()`; the output is clamped to `[min, max]`.
    pub fn run(&self, par: &dyn Parallel, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        self.run_with(Ukernel::best(), par, x, y, min, max)
    }

    /// Output rows `o0..o1` (batch 1) from `x_rows`: input rows `a..a + x_rows.len() / (in_w·C)`
    /// of the whole input, where `a = max(0, o0·stride − pad_top)` and the rows reach every row
    /// those outputs read (or the input's end). `y_rows` gets `o1 − o0` output rows. The same
    /// arithmetic per output pixel as [`Self::run`].
    #[allow(clippy::too_many_arguments)]
    pub fn run_rows(&self, par: &dyn Parallel, o0: usize, o1: usize, x_rows: &[f32], y_rows: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let g = &self.g;
        let row_in = g.in_w * g.groups;
        if g.batch != 1 || o0 >= o1 || o1 > g.out_h || row_in == 0 || !x_rows.len().is_multiple_of(row_in) {
            return Err(format!("depthwise conv2d: rows {o0}..{o1} of {} (batch {}) from {} values", g.out_h, g.batch, x_rows.len()));
        }
        let a = (o0 * g.stride_h).saturating_sub(g.pad_top);
        let in_rows = x_rows.len() / row_in;
        let need = ((o1 - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1).saturating_sub(g.pad_top).min(g.in_h);
        if a + in_rows < need || a + in_rows > g.in_h {
            return Err(format!("depthwise conv2d: rows {o0}..{o1} read input rows {a}..{need}, given {in_rows} from {a}"));
        }
        // The band as a convolution of its own: output row o' = o − o0 reads input row
        // o'·s + ky·d − pad' of the band, pad' = pad_top + a − o0·s (≥ 0 by the choice of a);
        // rows past the band's end are past the input's end (or never read).
        let band = Conv2dGeom { in_h: in_rows, out_h: o1 - o0, pad_top: g.pad_top + a - o0 * g.stride_h, ..*g };
        self.run_geom(Ukernel::best(), &band, par, x_rows, y_rows, min, max)
    }

    pub(crate) fn run_with(
        &self,
        uk: Ukernel,
        par: &dyn Parallel,
        x: &[f32],
        y: &mut [f32],
        min: f32,
        max: f32,
    ) -> Result<(), String> {
        self.run_geom(uk, &self.g, par, x, y, min, max)
    }

    /// [`Self::run_with`] on geometry `g` (this one's, or a band of it: same channels, kernel,
    /// strides and widths).
    #[allow(clippy::too_many_arguments)]
    fn run_geom(
        &self,
        uk: Ukernel,
        g: &Conv2dGeom,
        par: &dyn Parallel,
        x: &[f32],
        y: &mut [f32],
        min: f32,
        max: f32,
    ) -> Result<(), String> {
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!(
                "depthwise conv2d: x has {} elements and y {}, expected {} and {}",
                x.len(),
                y.len(),
                g.in_len(),
                g.out_len()
            ));
        }
        if !uk.supported() {
            return Err(format!("depthwise conv2d: this CPU cannot run {uk:?}"));
        }
        let co = g.out_channels();
        let rows = g.batch * g.out_h;
        let row_macs = g.out_w * co * self.taps;
        let per_task = (MIN_TASK_MACS / row_macs.max(1)).max(1);
        let tasks = if par.threads() <= 1 {
            1
        } else {
            rows.div_ceil(per_task).min(par.threads() * 4).max(1)
        };
        let rows_per_task = rows.div_ceil(tasks);
        let tasks = rows.div_ceil(rows_per_task);
        let ctx = Ctx {
            x: x.as_ptr(),
            zero: self.zero.as_ptr(),
            w: if self.packed.is_empty() { self.filter.as_ptr() } else { self.packed.as_ptr() as *const f32 },
            in_h: g.in_h,
            in_w: g.in_w,
            c: g.groups,
            out_w: g.out_w,
            kh: g.kernel_h,
            kw: g.kernel_w,
            sh: g.stride_h,
            sw: g.stride_w,
            dh: g.dilation_h,
            dw: g.dilation_w,
            pt: g.pad_top,
            pl: g.pad_left,
            taps: self.taps,
            min,
            max,
        };
        let ctx = &ctx;
        let yp = SyncPtr(y.as_mut_ptr());
        let task = |t: usize| {
            // Capture the whole (Sync) wrapper, not its raw-pointer field.
            let yp = &yp;
            let mut dyn_ptrs = vec![core::ptr::null::<f32>(); self.taps];
            let end = ((t + 1) * rows_per_task).min(rows);
            let mut r = t * rows_per_task;
            while r < end {
                let (b, oy) = (r / g.out_h, r % g.out_h);
                let n = (end - r).min(g.out_h - oy).min(ROW_GROUP);
                // SAFETY: `x` and `y` have exactly in_len/out_len elements (checked above), so
                // every pointer `fill_ptrs` makes (in-bounds taps) and the output rows
                // `r · out_w · co .. (r + n) · out_w · co` are in bounds; `zero` has C elements;
                // packed weights have ceil(C/16)·(taps+1) rows (or the generic filter taps·C·M);
                // tasks write disjoint rows (the post-op too: only these rows); `uk` was checked
                // to run on this CPU.
                unsafe {
                    let out = yp.0.add(r * g.out_w * co);
                    if !self.packed.is_empty() {
                        rows_dispatch(uk, ctx, b, oy, n, &mut dyn_ptrs, out)
                    } else {
                        for i in 0..n {
                            row_generic(ctx, g.group_out, &self.bias, b, oy + i, &mut dyn_ptrs, out.add(i * g.out_w * co))
                        }
                    }
                    // The rows just written (still in cache).
                    self.post.apply(out, n, g.out_w * co, g.out_w * co);
                }
                r += n;
            }
        };
        if tasks == 1 {
            task(0);
        } else {
            par.for_each(tasks, &task);
        }
        Ok(())
    }
}

/// Points `ptrs[t]` (t < kh·kw) at the input pixel tap `t` of output pixel `(b, oy, ox)` reads
/// (channel 0), or at the zero row in the padding.
///
/// # Safety
/// `ctx.x` holds the whole input (batch > b), so in-bounds pixel offsets are valid.
#[inline(always)]
unsafe fn fill_ptrs(ctx: &Ctx, b: usize, oy: usize, ox: usize, ptrs: &mut [*const f32]) {
    let mut t = 0;
    for ky in 0..ctx.kh {
        let iy = (oy * ctx.sh + ky * ctx.dh).wrapping_sub(ctx.pt);
        if iy >= ctx.in_h {
            for p in &mut ptrs[t..t + ctx.kw] {
                *p = ctx.zero;
            }
            t += ctx.kw;
            continue;
        }
        let row = (b * ctx.in_h + iy) * ctx.in_w;
        let x0 = ox * ctx.sw;
        for kx in 0..ctx.kw {
            let ix = (x0 + kx * ctx.dw).wrapping_sub(ctx.pl);
            ptrs[t] = if ix < ctx.in_w {
                // SAFETY: b < batch, iy < in_h, ix < in_w: pixel inside the input.
                unsafe { ctx.x.add((row + ix) * ctx.c) }
            } else {
                ctx.zero
            };
            t += 1;
        }
    }
}

/// Kernel side for the unrolled paths (`K` = 3 or 5), or the run-time size (`K` = 0).
#[inline(always)]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
fn kernel_dims<const K: usize>(ctx: &Ctx) -> (usize, usize) {
    if K > 0 {
        (K, K)
    } else {
        (ctx.kh, ctx.kw)
    }
}

/// Start of the input row each kernel row `ky` reads for output row `(b, oy)`, or null in the
/// padding.
///
/// # Safety
/// `ctx.x` holds the whole input (batch > b); `bases.len() >= kh`.
#[inline(always)]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
unsafe fn row_bases(ctx: &Ctx, kh: usize, b: usize, oy: usize, bases: &mut [*const f32]) {
    for (ky, base) in bases.iter_mut().enumerate().take(kh) {
        let iy = (oy * ctx.sh + ky * ctx.dh).wrapping_sub(ctx.pt);
        *base = if iy < ctx.in_h {
            // SAFETY: b < batch and iy < in_h: the row is inside the input.
            unsafe { ctx.x.add((b * ctx.in_h + iy) * ctx.in_w * ctx.c) }
        } else {
            core::ptr::null()
        };
    }
}

/// [`fill_ptrs`] from precomputed [`row_bases`] (`kh`, `kw` constants in the unrolled paths).
///
/// # Safety
/// `bases` came from [`row_bases`] for this output row; `ptrs.len() >= kh · kw`.
#[inline(always)]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
unsafe fn fill_from_bases(ctx: &Ctx, kh: usize, kw: usize, bases: &[*const f32], ox: usize, ptrs: &mut [*const f32]) {
    let x0 = ox * ctx.sw;
    for ky in 0..kh {
        let base = bases[ky];
        for kx in 0..kw {
            let ix = (x0 + kx * ctx.dw).wrapping_sub(ctx.pl);
            ptrs[ky * kw + kx] = if !base.is_null() && ix < ctx.in_w {
                // SAFETY: ix < in_w inside a row of the input.
                unsafe { base.add(ix * ctx.c) }
            } else {
                ctx.zero
            };
        }
    }
}

/// Most output rows [`rows_dispatch`] takes at once.
const ROW_GROUP: usize = 8;

/// Output rows `oy0 .. oy0 + n` (`n <= ROW_GROUP`) of image `b` with the packed kernel of `uk`,
/// row `i` at `out + i · out_w · C`.
///
/// # Safety
/// As [`row_dispatch`] for each of the rows (all inside image `b`).
unsafe fn rows_dispatch(uk: Ukernel, ctx: &Ctx, b: usize, oy0: usize, n: usize, ptrs: &mut [*const f32], out: *mut f32) {
    // SAFETY: forwarded from this function's contract; the const tap counts match ctx.taps.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        if uk == Ukernel::Avx512 {
            // Block-major keeps a channel block's input lines of the whole row group in L1
            // (narrow images, many channels); wider rows would spill it, and pixel-major
            // (walking memory in address order) is faster there.
            let pixel_major = ctx.in_w * (ROW_GROUP + ctx.kh - 1) * 64 > 32 * 1024;
            match (ctx.kh, ctx.kw, ctx.sw, ctx.dw, pixel_major) {
                (3, 3, 1, 1, true) => return avx512::rows_px::<3, 1, 4>(ctx, b, oy0, n, out),
                (3, 3, 2, 1, true) => return avx512::rows_px::<3, 2, 4>(ctx, b, oy0, n, out),
                (5, 5, 1, 1, true) => return avx512::rows_px::<5, 1, 2>(ctx, b, oy0, n, out),
                (5, 5, 2, 1, true) => return avx512::rows_px::<5, 2, 2>(ctx, b, oy0, n, out),
                (3, 3, 1, 1, false) => return avx512::rows::<3, 1, 4>(ctx, b, oy0, n, out),
                (3, 3, 2, 1, false) => return avx512::rows::<3, 2, 4>(ctx, b, oy0, n, out),
                (5, 5, 1, 1, false) => return avx512::rows::<5, 1, 2>(ctx, b, oy0, n, out),
                (5, 5, 2, 1, false) => return avx512::rows::<5, 2, 2>(ctx, b, oy0, n, out),
                _ => {}
            }
        }
        for i in 0..n {
            row_dispatch(uk, ctx, b, oy0 + i, ptrs, out.add(i * ctx.out_w * ctx.c));
        }
    }
}

/// One output row with the packed kernel of `uk`, specialized for 3×3 and 5×5.
///
/// # Safety
/// As in `run` (see the call site): valid ctx, `out` has `out_w · C` writable floats, `uk` runs
/// on this CPU, `ptrs.len() == taps`.
unsafe fn row_dispatch(uk: Ukernel, ctx: &Ctx, b: usize, oy: usize, ptrs: &mut [*const f32], out: *mut f32) {
    // SAFETY: forwarded from this function's contract; the const tap counts match ctx.taps.
    unsafe {
        match uk {
            #[cfg(target_arch = "x86_64")]
            // AVX-512's 3×3 / 5×5 rows without horizontal dilation went to `avx512::rows*`
            // in `rows_dispatch`; the other shapes run the AVX2 kernels.
            Ukernel::Avx512 | Ukernel::Avx2Fma => match (ctx.kh, ctx.kw) {
                (3, 3) => avx2::row::<3>(ctx, b, oy, ptrs, out),
                (5, 5) => avx2::row::<5>(ctx, b, oy, ptrs, out),
                _ => avx2::row::<0>(ctx, b, oy, ptrs, out),
            },
            #[cfg(target_arch = "aarch64")]
            Ukernel::Neon => match (ctx.kh, ctx.kw) {
                (3, 3) => neon::row::<3>(ctx, b, oy, ptrs, out),
                (5, 5) => neon::row::<5>(ctx, b, oy, ptrs, out),
                _ => neon::row::<0>(ctx, b, oy, ptrs, out),
            },
            Ukernel::Scalar => row_scalar(ctx, b, oy, ptrs, out),
        }
    }
}

/// Plain-Rust packed kernel for one output row (multiplier 1).
///
/// # Safety
/// As [`row_dispatch`].
unsafe fn row_scalar(ctx: &Ctx, b: usize, oy: usize, ptrs: &mut [*const f32], out: *mut f32) {
    let taps = ctx.taps;
    for ox in 0..ctx.out_w {
        // SAFETY: see the contract; tap pointers have C readable floats, the weight block
        // `blk` has taps + 1 rows of CB floats, and out pixel ox has C writable floats.
        unsafe {
            fill_ptrs(ctx, b, oy, ox, ptrs);
            let o = out.add(ox * ctx.c);
            for blk in 0..ctx.c.div_ceil(CB) {
                let wb = ctx.w.add(blk * (taps + 1) * CB);
                let lanes = CB.min(ctx.c - blk * CB);
                let mut acc = [0.0f32; CB];
                acc[..lanes].copy_from_slice(core::slice::from_raw_parts(wb, lanes));
                for (t, p) in ptrs.iter().enumerate() {
                    let xs = core::slice::from_raw_parts(p.add(blk * CB), lanes);
                    let ws = core::slice::from_raw_parts(wb.add((t + 1) * CB), lanes);
                    for ((a, &xv), &wv) in acc.iter_mut().zip(xs).zip(ws) {
                        *a += xv * wv;
                    }
                }
                for (l, a) in acc[..lanes].iter().enumerate() {
                    *o.add(blk * CB + l) = a.max(ctx.min).min(ctx.max);
                }
            }
        }
    }
}

/// Any multiplier: output channel `c·M + m` from input channel `c`, filter `[taps, C·M]`.
///
/// # Safety
/// As [`row_dispatch`], with `ctx.w` the unpacked filter and `out` holding `out_w · C · M`.
unsafe fn row_generic(
    ctx: &Ctx,
    mult: usize,
    bias: &[f32],
    b: usize,
    oy: usize,
    ptrs: &mut [*const f32],
    out: *mut f32,
) {
    let co = ctx.c * mult;
    for ox in 0..ctx.out_w {
        // SAFETY: see the contract: tap pointers have C readable floats (oc / mult < C), the
        // filter has taps · co floats, and the output pixel has co writable floats.
        unsafe {
            fill_ptrs(ctx, b, oy, ox, ptrs);
            let o = out.add(ox * co);
            for (oc, &bv) in bias.iter().enumerate() {
                let ic = oc / mult;
                let mut acc = bv;
                for (t, p) in ptrs.iter().enumerate() {
                    acc += *p.add(ic) * *ctx.w.add(t * co + oc);
                }
                *o.add(oc) = acc.max(ctx.min).min(ctx.max);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{fill_from_bases, kernel_dims, row_bases, Ctx, CB, CHUNK};
    use alloc::vec;
    use alloc::vec::Vec;
    use core::arch::x86_64::*;

    /// One output row; kernel `K`×`K` fixed at compile time (0: `ctx.kh`×`ctx.kw` at run time).
    ///
    /// # Safety
    /// As [`super::row_dispatch`], and the CPU has AVX2 and FMA.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row<const K: usize>(ctx: &Ctx, b: usize, oy: usize, dyn_ptrs: &mut [*const f32], out: *mut f32) {
        let (kh, kw) = kernel_dims::<K>(ctx);
        let taps = kh * kw;
        let mut fixed = [core::ptr::null::<f32>(); 25];
        let ptrs: &mut [*const f32] = if K > 0 { &mut fixed[..taps] } else { dyn_ptrs };
        let mut fixed_bases = [core::ptr::null::<f32>(); 5];
        let mut dyn_bases = if K > 0 { Vec::new() } else { vec![core::ptr::null::<f32>(); kh] };
        let bases: &mut [*const f32] = if K > 0 { &mut fixed_bases[..kh] } else { &mut dyn_bases };
        let c = ctx.c;
        // SAFETY: tap pointers address C readable floats (input pixels or the zero row); the
        // weight block starting at `wb` has taps + 1 aligned rows of CB floats; output pixel
        // `ox` has C writable floats. Loads stay below channel C: full blocks need cb+16 <= C,
        // the 8-lane tail cb+8 <= C, the scalar tail is per channel.
        unsafe {
            let vmin = _mm256_set1_ps(ctx.min);
            let vmax = _mm256_set1_ps(ctx.max);
            row_bases(ctx, kh, b, oy, bases);
            // Channel chunks keep a chunk's weights and input taps in L1 across the row.
            let mut cs = 0;
            while cs < c {
            let ce = (cs + CHUNK).min(c);
            for ox in 0..ctx.out_w {
                fill_from_bases(ctx, kh, kw, bases, ox, ptrs);
                let o = out.add(ox * c);
                let mut wb = ctx.w.add(cs / CB * (taps + 1) * CB);
                let mut cb = cs;
                while cb + CB <= ce {
                    // Even and odd taps in separate accumulators: shorter FMA chains.
                    let mut a0 = _mm256_load_ps(wb);
                    let mut a1 = _mm256_load_ps(wb.add(8));
                    let mut b0 = _mm256_setzero_ps();
                    let mut b1 = _mm256_setzero_ps();
                    let mut t = 0;
                    while t + 2 <= taps {
                        let xp = ptrs[t].add(cb);
                        let wt = wb.add((t + 1) * CB);
                        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xp), _mm256_load_ps(wt), a0);
                        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(8)), _mm256_load_ps(wt.add(8)), a1);
                        let xp = ptrs[t + 1].add(cb);
                        let wt = wb.add((t + 2) * CB);
                        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(xp), _mm256_load_ps(wt), b0);
                        b1 = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(8)), _mm256_load_ps(wt.add(8)), b1);
                        t += 2;
                    }
                    if t < taps {
                        let xp = ptrs[t].add(cb);
                        let wt = wb.add((t + 1) * CB);
                        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xp), _mm256_load_ps(wt), a0);
                        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(8)), _mm256_load_ps(wt.add(8)), a1);
                    }
                    let a0 = _mm256_add_ps(a0, b0);
                    let a1 = _mm256_add_ps(a1, b1);
                    _mm256_storeu_ps(o.add(cb), _mm256_min_ps(_mm256_max_ps(a0, vmin), vmax));
                    _mm256_storeu_ps(o.add(cb + 8), _mm256_min_ps(_mm256_max_ps(a1, vmin), vmax));
                    wb = wb.add((taps + 1) * CB);
                    cb += CB;
                }
                let mut lane = 0;
                if cb + 8 <= ce {
                    let mut a0 = _mm256_load_ps(wb);
                    for t in 0..taps {
                        let wt = wb.add((t + 1) * CB);
                        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(ptrs[t].add(cb)), _mm256_load_ps(wt), a0);
                    }
                    _mm256_storeu_ps(o.add(cb), _mm256_min_ps(_mm256_max_ps(a0, vmin), vmax));
                    lane = 8;
                }
                while cb + lane < ce {
                    let mut a = *wb.add(lane);
                    for t in 0..taps {
                        a += *ptrs[t].add(cb + lane) * *wb.add((t + 1) * CB + lane);
                    }
                    *o.add(cb + lane) = a.max(ctx.min).min(ctx.max);
                    lane += 1;
                }
            }
            cs = ce;
            }
        }
    }
}

/// AVX-512F rows for 3×3 and 5×5 kernels: one 16-channel block (one zmm) at a time with the
/// block's `K·K` weights held in registers, `P` output pixels per step along the row. Inside
/// the row's interior (every tap column in the image) consecutive pixels' taps are a fixed
/// stride apart, so a step costs one load per FMA and no pointer setup; the border pixels test
/// each tap. Kernel rows in the padding are skipped; a channel tail uses masked loads/stores.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{row_bases, Ctx, CB};
    use core::arch::x86_64::*;

    /// Output rows `oy0 .. oy0 + n` of image `b`, row `i` at `out + i · out_w · C`: channel block
    /// by channel block, each block over all the rows, so a block's input lines (one 64-byte
    /// line per pixel) are still in L1 when the next output row reads them again (row by row,
    /// with every block in between, a row's lines of all blocks exceed L1 and each input line
    /// came from L2 `K` times).
    ///
    /// # Safety
    /// As [`super::rows_dispatch`] with `ctx.kh == ctx.kw == K` (3 or 5), `ctx.sw == S`,
    /// `ctx.dw == 1`, and the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn rows<const K: usize, const S: usize, const P: usize>(ctx: &Ctx, b: usize, oy0: usize, n: usize, out: *mut f32) {
        let c = ctx.c;
        // Interior output columns [lo, hi): ox·sw - pl >= 0 and ox·sw + (K-1)·dw - pl < in_w.
        let span = K - 1;
        let lo = ctx.pl.div_ceil(ctx.sw).min(ctx.out_w);
        let hi = if ctx.in_w + ctx.pl > span { ((ctx.in_w + ctx.pl - span - 1) / ctx.sw + 1).min(ctx.out_w) } else { 0 };
        let hi = hi.max(lo);
        let mut bases = [[core::ptr::null::<f32>(); 5]; super::ROW_GROUP];
        for (i, rb) in bases.iter_mut().enumerate().take(n) {
            // SAFETY: as the caller's contract; each entry has 5 >= K bases.
            unsafe { row_bases(ctx, K, b, oy0 + i, &mut rb[..K]) };
        }
        for blk in 0..c.div_ceil(CB) {
            let cb = blk * CB;
            // SAFETY: the caller's contract (see `block`): rows oy0..oy0 + n are in bounds.
            unsafe {
                if cb + CB <= c {
                    block::<K, S, P, false>(ctx, &bases[..n], lo, hi, cb, out);
                } else {
                    block::<K, S, P, true>(ctx, &bases[..n], lo, hi, cb, out);
                }
            }
        }
    }

    /// [`rows`] pixel-major: for each group of P output pixels, every channel block (its
    /// weights reloaded from L1 per group; the two load ports have room for them under the FMAs),
    /// so the input and output are walked in address order.
    ///
    /// # Safety
    /// As [`rows`].
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn rows_px<const K: usize, const S: usize, const P: usize>(ctx: &Ctx, b: usize, oy0: usize, n: usize, out: *mut f32) {
        let (c, out_w) = (ctx.c, ctx.out_w);
        let span = K - 1;
        let lo = ctx.pl.div_ceil(ctx.sw).min(out_w);
        let hi = if ctx.in_w + ctx.pl > span { ((ctx.in_w + ctx.pl - span - 1) / ctx.sw + 1).min(out_w) } else { 0 };
        let hi = hi.max(lo);
        for i in 0..n {
            let mut bases = [core::ptr::null::<f32>(); 5];
            // SAFETY: as the caller's contract; 5 >= K bases; row i's output is in bounds.
            unsafe {
                row_bases(ctx, K, b, oy0 + i, &mut bases[..K]);
                let o = out.add(i * out_w * c);
                let mut ox = 0;
                while ox < out_w {
                    let (at, np) = if out_w < P { (0, out_w) } else { (ox.min(out_w - P), P) };
                    let checked = at < lo || at + P > hi;
                    let mut cb = 0;
                    while cb + CB <= c {
                        pixels::<K, S, P, false>(ctx, &bases, at, np, checked, cb, o);
                        cb += CB;
                    }
                    if cb < c {
                        pixels::<K, S, P, true>(ctx, &bases, at, np, checked, cb, o);
                    }
                    ox = at + np;
                }
            }
        }
    }

    /// Channels `cb .. min(cb + 16, C)` of output pixels `ox .. ox + n` (`n <= P`; the sums of
    /// all P are formed) of one row; `checked`: some of the P pixels' columns may lie outside
    /// the input row (those taps are skipped).
    ///
    /// # Safety
    /// As [`block`] for this row; columns are checked unless all P pixels are interior.
    #[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn pixels<const K: usize, const S: usize, const P: usize, const MASKED: bool>(
        ctx: &Ctx,
        bases: &[*const f32; 5],
        ox: usize,
        n: usize,
        checked: bool,
        cb: usize,
        out: *mut f32,
    ) {
        let c = ctx.c;
        let taps = K * K;
        let mask: __mmask16 = if MASKED { ((1u32 << (c - cb)) - 1) as __mmask16 } else { 0xffff };
        // SAFETY: as in `block`: aligned weight rows of block cb / 16, input pointers only for
        // non-null rows and columns inside the row (checked, or interior), output pixels
        // ox..ox + n < out_w of this row.
        unsafe {
            let wb = ctx.w.add(cb / CB * (taps + 1) * CB);
            let bias = _mm512_load_ps(wb);
            let mut wv = [_mm512_setzero_ps(); 25];
            for t in 0..taps {
                wv[t] = _mm512_load_ps(wb.add((t + 1) * CB));
            }
            let acc = sums::<K, S, P, MASKED>(ctx, bases, ox, checked, cb, &wv, bias, mask);
            let vmin = _mm512_set1_ps(ctx.min);
            let vmax = _mm512_set1_ps(ctx.max);
            for j in 0..n {
                store::<MASKED>(out.add((ox + j) * c + cb), mask, acc[j], vmin, vmax);
            }
        }
    }

    /// The P sums (bias included, unclamped) of output pixels `ox .. ox + P` of one row, channels
    /// `cb..cb + 16`: their taps in kernel row ky are input columns x0 .. x0 + (P-1)·S + K - 1,
    /// each loaded once and used by every (pixel, tap) pair that reads it; with `checked`, the
    /// columns outside the row are skipped (the same taps in the same order otherwise).
    ///
    /// # Safety
    /// `bases` from `row_bases` for this row; unless `checked`, every column of the P pixels is
    /// inside the row; `cb < C` (`cb + 16 <= C` unless `MASKED`); AVX-512F.
    #[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn sums<const K: usize, const S: usize, const P: usize, const MASKED: bool>(
        ctx: &Ctx,
        bases: &[*const f32; 5],
        ox: usize,
        checked: bool,
        cb: usize,
        wv: &[__m512; 25],
        bias: __m512,
        mask: __mmask16,
    ) -> [__m512; P] {
        let c = ctx.c;
        let ncol = (P - 1) * S + K;
        let x0 = (ox * S).wrapping_sub(ctx.pl);
        let mut acc = [bias; P];
        for ky in 0..K {
            let base = bases[ky];
            if base.is_null() {
                continue;
            }
            // One pointer stepped a pixel per column (an add, not a multiply per load); it is
            // only dereferenced for columns inside the row.
            let mut q = base.wrapping_add(x0.wrapping_mul(c).wrapping_add(cb));
            for col in 0..ncol {
                let ix = x0.wrapping_add(col);
                let here = q;
                q = q.wrapping_add(c);
                if checked && ix >= ctx.in_w {
                    continue;
                }
                // SAFETY: column ix is inside the non-null row (checked, or the caller's
                // interior guarantee); channels cb.. of that pixel, masked to C when MASKED.
                let xv = unsafe { load::<MASKED>(here, mask) };
                for j in 0..P {
                    let kx = col.wrapping_sub(j * S);
                    if kx < K {
                        acc[j] = _mm512_fmadd_ps(xv, wv[ky * K + kx], acc[j]);
                    }
                }
            }
        }
        acc
    }

    /// Loads 16 floats at `p`, or only the lanes `< c - cb` (zeros elsewhere) when `MASKED`.
    ///
    /// # Safety
    /// `p .. p + 16` (or the unmasked lanes) is readable; AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load<const MASKED: bool>(p: *const f32, mask: __mmask16) -> __m512 {
        // SAFETY: caller's contract; masked-off lanes are not accessed.
        unsafe {
            if MASKED {
                _mm512_maskz_loadu_ps(mask, p)
            } else {
                _mm512_loadu_ps(p)
            }
        }
    }

    /// Clamps `v` and stores it at `p` (masked as [`load`]).
    ///
    /// # Safety
    /// `p .. p + 16` (or the unmasked lanes) is writable; AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store<const MASKED: bool>(p: *mut f32, mask: __mmask16, v: __m512, vmin: __m512, vmax: __m512) {
        let v = _mm512_min_ps(_mm512_max_ps(v, vmin), vmax);
        // SAFETY: caller's contract; masked-off lanes are not accessed.
        unsafe {
            if MASKED {
                _mm512_mask_storeu_ps(p, mask, v)
            } else {
                _mm512_storeu_ps(p, v)
            }
        }
    }

    /// Channels `cb .. min(cb + 16, C)` of every output pixel of the rows `rows` (their
    /// `row_bases`), row `i` at `out + i · out_w · C`; interior columns `lo..hi`. The block's
    /// weights are loaded once for all the rows.
    ///
    /// # Safety
    /// As [`rows`]; `cb < C`, and `cb + 16 <= C` unless `MASKED`.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn block<const K: usize, const S: usize, const P: usize, const MASKED: bool>(
        ctx: &Ctx,
        rows: &[[*const f32; 5]],
        lo: usize,
        hi: usize,
        cb: usize,
        out: *mut f32,
    ) {
        let (c, out_w) = (ctx.c, ctx.out_w);
        let taps = K * K;
        let mask: __mmask16 = if MASKED { ((1u32 << (c - cb)) - 1) as __mmask16 } else { 0xffff };
        let vmin = _mm512_set1_ps(ctx.min);
        let vmax = _mm512_set1_ps(ctx.max);
        // SAFETY: the weight block `cb / 16` has taps + 1 aligned rows of 16 floats (lanes past
        // C are zero padding, so reading them is fine); input pointers are formed only for
        // rows with a non-null base (inside the input) and columns checked to lie in
        // 0..in_w (groups reaching the padding, single border pixels) or known to (groups
        // inside lo..hi); every load/store covers channels cb.. of one pixel, masked to C when
        // MASKED; output pixels ox < out_w of row i have C writable floats at
        // out + (i · out_w + ox) · C.
        unsafe {
            let wb = ctx.w.add(cb / CB * (taps + 1) * CB);
            let bias = _mm512_load_ps(wb);
            let mut wv = [_mm512_setzero_ps(); 25];
            for t in 0..taps {
                wv[t] = _mm512_load_ps(wb.add((t + 1) * CB));
            }
            // P pixels per step ([`sums`]). Groups inside [lo, hi) read every column
            // unchecked; groups reaching into the padding skip the columns outside the row, so a
            // narrow image's edges keep P independent sums in flight instead of one pixel's K·K
            // dependent FMAs. The last group of a row ends at the row's end (overlapping the one
            // before: those pixels get the same bits twice).
            for (i, bases) in rows.iter().enumerate() {
                let out = out.add(i * out_w * c);
                let group = |ox: usize, n: usize| {
                    // All P pixels' columns are read (n < P only when the row is narrower).
                    let checked = ox < lo || ox + P > hi;
                    let acc = sums::<K, S, P, MASKED>(ctx, bases, ox, checked, cb, &wv, bias, mask);
                    for j in 0..n {
                        store::<MASKED>(out.add((ox + j) * c + cb), mask, acc[j], vmin, vmax);
                    }
                };
                if out_w < P {
                    // A row narrower than a group: one group, stores cut to the row (the
                    // sums of the pixels past it read only checked columns).
                    group(0, out_w);
                    continue;
                }
                let mut ox = 0;
                while ox < out_w {
                    let at = ox.min(out_w - P);
                    group(at, P);
                    ox = at + P;
                }
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{fill_from_bases, kernel_dims, row_bases, Ctx, CB, CHUNK};
    use alloc::vec;
    use alloc::vec::Vec;
    use core::arch::aarch64::*;

    /// One output row; kernel `K`×`K` fixed at compile time (0: `ctx.kh`×`ctx.kw` at run time).
    ///
    /// # Safety
    /// As [`super::row_dispatch`].
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn row<const K: usize>(ctx: &Ctx, b: usize, oy: usize, dyn_ptrs: &mut [*const f32], out: *mut f32) {
        let (kh, kw) = kernel_dims::<K>(ctx);
        let taps = kh * kw;
        let mut fixed = [core::ptr::null::<f32>(); 25];
        let ptrs: &mut [*const f32] = if K > 0 { &mut fixed[..taps] } else { dyn_ptrs };
        let mut fixed_bases = [core::ptr::null::<f32>(); 5];
        let mut dyn_bases = if K > 0 { Vec::new() } else { vec![core::ptr::null::<f32>(); kh] };
        let bases: &mut [*const f32] = if K > 0 { &mut fixed_bases[..kh] } else { &mut dyn_bases };
        let c = ctx.c;
        // SAFETY: as in the AVX2 twin, with 4-lane steps (cb + 16 <= C for full blocks,
        // cb + lane + 4 <= C for the 4-lane tail).
        unsafe {
            let vmin = vdupq_n_f32(ctx.min);
            let vmax = vdupq_n_f32(ctx.max);
            row_bases(ctx, kh, b, oy, bases);
            // Channel chunks keep a chunk's weights and input taps in L1 across the row.
            let mut cs = 0;
            while cs < c {
            let ce = (cs + CHUNK).min(c);
            for ox in 0..ctx.out_w {
                fill_from_bases(ctx, kh, kw, bases, ox, ptrs);
                let o = out.add(ox * c);
                let mut wb = ctx.w.add(cs / CB * (taps + 1) * CB);
                let mut cb = cs;
                while cb + CB <= ce {
                    let mut a = [vld1q_f32(wb), vld1q_f32(wb.add(4)), vld1q_f32(wb.add(8)), vld1q_f32(wb.add(12))];
                    for t in 0..taps {
                        let xp = ptrs[t].add(cb);
                        let wt = wb.add((t + 1) * CB);
                        for (j, q) in a.iter_mut().enumerate() {
                            *q = vfmaq_f32(*q, vld1q_f32(xp.add(4 * j)), vld1q_f32(wt.add(4 * j)));
                        }
                    }
                    for (j, q) in a.iter().enumerate() {
                        vst1q_f32(o.add(cb + 4 * j), vminq_f32(vmaxq_f32(*q, vmin), vmax));
                    }
                    wb = wb.add((taps + 1) * CB);
                    cb += CB;
                }
                let mut lane = 0;
                while cb + lane + 4 <= ce {
                    let mut a = vld1q_f32(wb.add(lane));
                    for t in 0..taps {
                        a = vfmaq_f32(a, vld1q_f32(ptrs[t].add(cb + lane)), vld1q_f32(wb.add((t + 1) * CB + lane)));
                    }
                    vst1q_f32(o.add(cb + lane), vminq_f32(vmaxq_f32(a, vmin), vmax));
                    lane += 4;
                }
                while cb + lane < ce {
                    let mut a = *wb.add(lane);
                    for t in 0..taps {
                        a += *ptrs[t].add(cb + lane) * *wb.add((t + 1) * CB + lane);
                    }
                    *o.add(cb + lane) = a.max(ctx.min).min(ctx.max);
                    lane += 1;
                }
            }
            cs = ce;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::conv_f32::tests::geom;
    use crate::nhwc::reference::depthwise_f32;
    use crate::nhwc::Serial;
    use crate::optimized::test_util::{assert_close, Lcg};

    #[allow(clippy::too_many_arguments)]
    fn dw(
        batch: usize,
        hw: (usize, usize),
        k: (usize, usize),
        s: (usize, usize),
        d: (usize, usize),
        pad: (usize, usize, usize, usize),
        c: usize,
        m: usize,
    ) -> Conv2dGeom {
        geom(batch, hw, k, s, d, pad, (c, 1, m))
    }

    fn check(g: &Conv2dGeom, seed: u64, par: &dyn Parallel) {
        let mut r = Lcg::new(seed);
        let x = r.vec(g.in_len());
        let f = r.vec(g.kernel_h * g.kernel_w * g.out_channels());
        let b = r.vec(g.out_channels());
        let (min, max) = match seed % 3 {
            0 => (f32::NEG_INFINITY, f32::INFINITY),
            1 => (0.0, 6.0),
            _ => (f32::NEG_INFINITY, 0.25),
        };
        let bias = (seed % 4 != 2).then_some(&b[..]);
        let op = DepthwiseF32::new(g, &f, bias).unwrap();
        let want = depthwise_f32(g, &x, &f, bias, min, max);
        let tol = 1e-5 * ((g.kernel_h * g.kernel_w) as f32).sqrt();
        let posted = op.clone().with_post(PostOp::Hardswish);
        for uk in Ukernel::all_supported() {
            let mut y = vec![f32::NAN; g.out_len()];
            op.run_with(uk, par, &x, &mut y, min, max).unwrap();
            assert_close(&y, &want, tol, &format!("{uk:?} depthwise {g:?}"));
            // The fused activation: the same bits as hardswish over the finished output.
            let mut z = vec![f32::NAN; g.out_len()];
            posted.run_with(uk, par, &x, &mut z, min, max).unwrap();
            crate::nhwc::hardswish_in_place(&mut y);
            assert!(y.iter().zip(&z).all(|(a, b)| a.to_bits() == b.to_bits()), "{uk:?} depthwise + hardswish {g:?}");
        }
    }

    #[test]
    fn depthwise_matches_reference_on_many_shapes() {
        let cases = [
            // MobileNetV2-like 3×3, stride 1 and 2, channel counts with and without tails.
            dw(1, (9, 10), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 32, 1),
            dw(1, (9, 10), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 96, 1),
            dw(2, (6, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 27, 1),
            dw(1, (8, 8), (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 13, 1),
            // 5×5, stride 1 and 2.
            dw(1, (11, 9), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 24, 1),
            dw(1, (11, 9), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), 40, 1),
            // Dilation, asymmetric padding, generic kernel sizes.
            dw(1, (10, 12), (3, 3), (1, 2), (2, 2), (2, 0, 1, 2), 17, 1),
            dw(1, (7, 7), (2, 4), (1, 1), (1, 1), (0, 1, 2, 1), 9, 1),
            dw(2, (5, 6), (7, 7), (1, 1), (1, 1), (3, 3, 3, 3), 5, 1),
            // Multiplier 2 (generic path).
            dw(1, (6, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 7, 2),
            dw(2, (5, 5), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 4, 3),
            // Tiny images.
            dw(1, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 20, 1),
            dw(2, (2, 3), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3, 1),
            dw(1, (2, 3), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), 33, 1),
            // Width 1, and rows long enough for several interior steps plus a remainder
            // (the AVX-512 paths), channels exactly 16 / 48 and with tails, stride 2 on odd
            // widths, no padding.
            dw(1, (5, 1), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 16, 1),
            dw(1, (7, 1), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), 19, 1),
            dw(1, (4, 23), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 48, 1),
            dw(1, (5, 27), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 40, 1),
            dw(1, (6, 26), (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 72, 1),
            dw(1, (6, 19), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 88, 1),
            dw(2, (9, 21), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), 7, 1),
            dw(1, (5, 13), (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 31, 1),
            dw(1, (5, 14), (5, 5), (1, 1), (1, 1), (0, 0, 0, 0), 16, 1),
            // Rows narrower than a pixel group without padding (every column checked), and
            // row groups crossing an image boundary (batch 3, 9 rows).
            dw(1, (4, 4), (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 16, 1),
            dw(1, (6, 6), (5, 5), (1, 1), (1, 1), (0, 0, 0, 0), 20, 1),
            dw(3, (9, 7), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 17, 1),
            // Rows wide enough for the pixel-major AVX-512 order, with channel tails.
            dw(1, (5, 60), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 40, 1),
            dw(2, (6, 61), (3, 3), (2, 2), (1, 1), (0, 1, 0, 1), 24, 1),
            dw(1, (4, 55), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 19, 1),
            dw(1, (5, 53), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), 33, 1),
            dw(1, (3, 70), (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 16, 1),
        ];
        for (i, g) in cases.iter().enumerate() {
            check(g, i as u64, &Serial);
        }
    }

    #[cfg(feature = "std")]
    #[test]
    fn depthwise_threaded_matches_serial() {
        let pool = crate::nhwc::pool::ThreadPool::new(3);
        for (i, g) in [
            dw(1, (56, 56), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 144, 1),
            dw(2, (30, 30), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 21, 2),
        ]
        .iter()
        .enumerate()
        {
            check(g, 10 + i as u64, &pool);
            let mut r = Lcg::new(1);
            let x = r.vec(g.in_len());
            let f = r.vec(g.kernel_h * g.kernel_w * g.out_channels());
            let op = DepthwiseF32::new(g, &f, None).unwrap();
            let (mut y1, mut y3) = (vec![0.0; g.out_len()], vec![0.0; g.out_len()]);
            op.run(&Serial, &x, &mut y1, -1.0, 1.0).unwrap();
            op.run(&pool, &x, &mut y3, -1.0, 1.0).unwrap();
            assert_eq!(y1, y3);
        }
    }

    #[test]
    fn depthwise_bad_sizes_are_errors() {
        let g = dw(1, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 8, 1);
        let f = vec![0.0; 9 * 8];
        assert!(DepthwiseF32::new(&g, &f[1..], None).is_err());
        assert!(DepthwiseF32::new(&g, &f, Some(&[0.0; 7])).is_err());
        assert!(DepthwiseF32::new(&Conv2dGeom { group_in: 2, ..g }, &f, None).is_err());
        assert!(DepthwiseF32::new(&Conv2dGeom { stride_w: 0, ..g }, &f, None).is_err());
        assert!(DepthwiseF32::new(&Conv2dGeom { out_w: 8, ..g }, &f, None).is_err());
        let op = DepthwiseF32::new(&g, &f, None).unwrap();
        let mut y = vec![0.0; g.out_len()];
        assert!(op.run(&Serial, &vec![0.0; g.in_len() + 1], &mut y, 0.0, 1.0).is_err());
        assert!(op.run(&Serial, &vec![0.0; g.in_len()], &mut y[..5], 0.0, 1.0).is_err());
        assert!(op.run(&Serial, &vec![0.0; g.in_len()], &mut y, 0.0, 1.0).is_ok());
    }
}
