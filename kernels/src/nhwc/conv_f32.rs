//! f32 2-D convolution over NHWC tensors (any groups, stride, dilation, padding).
//!
//! - 1×1, stride 1, no padding: a direct GEMM over the pixels (`m = batch·H·W`, `k` = the
//!   group's input channels read in place with row stride `C_in`, `n` = the group's output
//!   channels), no copying.
//! - Everything else: im2col of a block of output pixels into a small per-task buffer
//!   (`[rows, kernel_h·kernel_w·group_in]`, zeros for padding), then the same GEMM; blocks are
//!   the parallel tasks. On AVX-512 (one group, no horizontal dilation) the pixels whose
//!   receptive field is inside the image skip im2col: the micro-kernel reads each kernel row's
//!   span of the input in place (`ConvF32::run_spans`).
//!
//! The filter `[groups·group_out, kernel_h, kernel_w, group_in]` already has each output
//! channel's reduction contiguous in im2col order, so each group packs straight into
//! [`PackedWeightsF32`].

use super::gemm_f32::{gemm_block, gemm_f32_with, split, PackedWeightsF32, SyncPtr, Ukernel, MIN_TASK_MACS, MR};
use super::{Conv2dGeom, Parallel, PostOp};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Checks a convolution geometry (shared with the depthwise operator).
pub(crate) fn check_geom(g: &Conv2dGeom, what: &str) -> Result<(), String> {
    let dims = [g.batch, g.in_h, g.in_w, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.groups, g.group_in, g.group_out];
    if dims.contains(&0) {
        return Err(format!("{what}: every size must be nonzero: {g:?}"));
    }
    if g.stride_h == 0 || g.stride_w == 0 || g.dilation_h == 0 || g.dilation_w == 0 {
        return Err(format!("{what}: strides and dilations must be nonzero: {g:?}"));
    }
    for (axis, inp, out, k, s, d, pad) in [
        ("height", g.in_h, g.out_h, g.kernel_h, g.stride_h, g.dilation_h, g.pad_top),
        ("width", g.in_w, g.out_w, g.kernel_w, g.stride_w, g.dilation_w, g.pad_left),
    ] {
        let ek = d * (k - 1) + 1;
        // The last window must start inside the input (or its leading padding) and the implied
        // trailing padding must be less than the dilated kernel.
        let last_start = (out - 1) * s;
        let end = last_start + ek;
        if last_start >= inp + pad || end > inp + pad + ek - 1 || pad >= ek {
            return Err(format!(
                "{what}: output {axis} {out} is inconsistent with input {inp}, padding {pad}, \
                 kernel {k} (dilation {d}), stride {s}"
            ));
        }
    }
    let total = g.in_len().max(g.out_len());
    if total > isize::MAX as usize / 8 {
        return Err(format!("{what}: tensors too large"));
    }
    Ok(())
}

/// A 2-D convolution with packed weights.
#[derive(Clone)]
pub struct ConvF32 {
    g: Conv2dGeom,
    /// One packed weight matrix per group: `n = group_out`, `k = kernel_h·kernel_w·group_in`.
    w: Vec<PackedWeightsF32>,
    direct: bool,
    /// One group, no horizontal dilation: each kernel row's taps are one contiguous span of the
    /// input, so the AVX-512 path reads them in place (no im2col) inside the image.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    spans: bool,
    /// Applied to each output tile after the clamp ([`Self::with_post`]).
    post: PostOp,
}

impl ConvF32 {
    /// `filter` is `[groups·group_out, kernel_h, kernel_w, group_in]` (XNNPACK's Conv2d
    /// layout); `bias` `[groups·group_out]` or `None` (zeros).
    pub fn new(g: &Conv2dGeom, filter: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        check_geom(g, "conv2d")?;
        let kk = g.kernel_h * g.kernel_w * g.group_in;
        let co = g.out_channels();
        if filter.len() != co * kk {
            return Err(format!(
                "conv2d: filter has {} elements, [{co}, {}, {}, {}] needs {}",
                filter.len(),
                g.kernel_h,
                g.kernel_w,
                g.group_in,
                co * kk
            ));
        }
        if let Some(b) = bias {
            if b.len() != co {
                return Err(format!("conv2d: bias has {} elements, expected {co}", b.len()));
            }
        }
        let w = (0..g.groups)
            .map(|gr| {
                let o0 = gr * g.group_out;
                PackedWeightsF32::new(
                    g.group_out,
                    kk,
                    &filter[o0 * kk..(o0 + g.group_out) * kk],
                    bias.map(|b| &b[o0..o0 + g.group_out]),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let direct = g.kernel_h == 1
            && g.kernel_w == 1
            && g.stride_h == 1
            && g.stride_w == 1
            && g.pad_top == 0
            && g.pad_left == 0
            && g.out_h == g.in_h
            && g.out_w == g.in_w;
        let spans = !direct && g.groups == 1 && g.dilation_w == 1;
        Ok(ConvF32 { g: *g, w, direct, spans, post: PostOp::None })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.g
    }

    /// This convolution with `post` applied to its outputs (after the clamp), tile by tile.
    pub fn with_post(self, post: PostOp) -> Self {
        ConvF32 { post, ..self }
    }

    pub fn post(&self) -> PostOp {
        self.post
    }

    /// `x` has `g.in_len()` elements, `y` `g.out_len()`; the output is clamped to `[min, max]`.
    pub fn run(&self, par: &dyn Parallel, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        self.run_with(Ukernel::best(), par, x, y, min, max)
    }

    /// Whether this is a 1×1, stride-1, unpadded convolution: a GEMM over pixels.
    pub fn is_pointwise(&self) -> bool {
        self.direct
    }

    /// For a pointwise convolution ([`Self::is_pointwise`]): `pixels` pixels of `x` (each
    /// `in_channels` values) into `y` (each `out_channels`), the same arithmetic per pixel as
    /// [`Self::run`] (so a run split into pixel ranges gives the same bits).
    pub fn run_pixels(&self, par: &dyn Parallel, pixels: usize, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let g = &self.g;
        if !self.direct {
            return Err(String::from("conv2d: run_pixels needs a 1x1, stride-1, unpadded convolution"));
        }
        let (ci, co) = (g.in_channels(), g.out_channels());
        if x.len() < pixels * ci || y.len() < pixels * co {
            return Err(format!("conv2d: {pixels} pixels need {} / {} values, got {} / {}", pixels * ci, pixels * co, x.len(), y.len()));
        }
        let (x, y) = (&x[..pixels * ci], &mut y[..pixels * co]);
        for (gr, w) in self.w.iter().enumerate() {
            let (i0, o0) = (gr * g.group_in, gr * g.group_out);
            gemm_f32_with(Ukernel::best(), par, pixels, &x[i0..], ci, w, &mut y[o0..], co, min, max, self.post)?;
        }
        Ok(())
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
        let g = &self.g;
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!(
                "conv2d: x has {} elements and y {}, expected {} and {}",
                x.len(),
                y.len(),
                g.in_len(),
                g.out_len()
            ));
        }
        self.run_range(uk, par, x, y, 0..g.batch * g.out_h, min, max)
    }

    /// Output rows `o0..o1` (batch 1) into `y_rows` (`(o1 − o0)·out_w·C_out` values) from the
    /// whole input `x`: the same arithmetic per output pixel as [`Self::run`] (a fused step
    /// computes a convolution's output a band of rows at a time).
    #[allow(clippy::too_many_arguments)]
    pub fn run_rows(&self, par: &dyn Parallel, o0: usize, o1: usize, x: &[f32], y_rows: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let g = &self.g;
        let row = g.out_w * g.out_channels();
        if g.batch != 1 || o0 > o1 || o1 > g.out_h || x.len() != g.in_len() || y_rows.len() < (o1 - o0) * row {
            return Err(format!("conv2d: rows {o0}..{o1} of {} (batch {}) from {} input values into {}", g.out_h, g.batch, x.len(), y_rows.len()));
        }
        self.run_range(Ukernel::best(), par, x, &mut y_rows[..(o1 - o0) * row], o0..o1, min, max)
    }

    /// Output rows `out_rows` (of all `batch·out_h`) into `y` (exactly those rows); sizes
    /// checked by the callers.
    #[allow(clippy::too_many_arguments)]
    fn run_range(&self, uk: Ukernel, par: &dyn Parallel, x: &[f32], y: &mut [f32], out_rows: core::ops::Range<usize>, min: f32, max: f32) -> Result<(), String> {
        let g = &self.g;
        if out_rows.is_empty() {
            return Ok(());
        }
        let (ci, co) = (g.in_channels(), g.out_channels());
        // Output pixels p_lo..p_lo + m; `y` starts at pixel p_lo.
        let p_lo = out_rows.start * g.out_w;
        let m = out_rows.len() * g.out_w;
        if self.direct {
            let x = &x[p_lo * ci..];
            for (gr, w) in self.w.iter().enumerate() {
                let (i0, o0) = (gr * g.group_in, gr * g.group_out);
                gemm_f32_with(uk, par, m, &x[i0..], ci, w, &mut y[o0..], co, min, max, self.post)?;
            }
            return Ok(());
        }
        if !uk.supported() {
            return Err(format!("conv2d: this CPU cannot run {uk:?}"));
        }
        #[cfg(target_arch = "x86_64")]
        if uk == Ukernel::Avx512 && self.spans {
            self.run_spans(par, x, y, out_rows, min, max);
            return Ok(());
        }
        // im2col in blocks of output pixels.
        let kk = g.kernel_h * g.kernel_w * g.group_in;
        let panels = self.w[0].panels();
        let mr = uk.mr();
        let rows_cap = ((16 * 1024) / kk).clamp(mr, 40 * MR) / mr * mr;
        let (rb, _) = split(m, panels * g.groups, kk, par.threads());
        let rows = rb.min(rows_cap).max(mr.min(m));
        let tasks = m.div_ceil(rows);
        let yp = SyncPtr(y.as_mut_ptr());
        let task = |t: usize| {
            // Capture the whole (Sync) wrapper, not its raw-pointer field.
            let yp = &yp;
            let r0 = t * rows;
            let r1 = (r0 + rows).min(m);
            let mut buf = vec![0.0f32; (r1 - r0) * kk];
            for (gr, w) in self.w.iter().enumerate() {
                im2col(g, x, gr, p_lo + r0..p_lo + r1, &mut buf);
                // SAFETY: `buf` holds r1 - r0 rows of kk = w.k() floats (stride kk); output rows
                // r0..r1 of `y` (m · co values, checked by the callers) hold this group's
                // group_out ≤ co - o0 columns at offset o0; tasks write disjoint row ranges,
                // and `uk` was checked to run on this CPU.
                unsafe {
                    gemm_block(
                        uk,
                        false,
                        0..r1 - r0,
                        0..w.panels(),
                        buf.as_ptr(),
                        kk,
                        w,
                        yp.0.add(r0 * co + gr * g.group_out),
                        co,
                        min,
                        max,
                        self.post,
                    )
                };
            }
        };
        if tasks == 1 || m * co * kk < 2 * MIN_TASK_MACS {
            (0..tasks).for_each(task);
        } else {
            par.for_each(tasks, &task);
        }
        Ok(())
    }
}

impl ConvF32 {
    /// The AVX-512 path for one group without horizontal dilation, by output rows: pixels whose
    /// whole receptive field is inside the image read their `kernel_h` spans (`kernel_w ·
    /// C_in` floats each) straight from `x` ([`avx512::tile_seg`]); the others (padding) go
    /// through im2col as usual. Both sum in the same order, so results do not depend on which
    /// path a pixel took. Sizes were checked by `run_with`; the CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    fn run_spans(&self, par: &dyn Parallel, x: &[f32], y: &mut [f32], out_rows: core::ops::Range<usize>, min: f32, max: f32) {
        use super::gemm_f32::{avx512, MR_MAX, NR};
        let g = &self.g;
        let w = &self.w[0];
        let (ci, co) = (g.in_channels(), g.out_channels());
        let seg = g.kernel_w * ci;
        let kk = g.kernel_h * seg;
        // Rows r0 + 0..rows; `y` starts at row r0.
        let (r0, rows) = (out_rows.start, out_rows.len());
        let per_task = (MIN_TASK_MACS / (g.out_w * co * kk).max(1)).max(1);
        let tasks = if par.threads() <= 1 { 1 } else { rows.div_ceil(per_task).min(par.threads() * 4).max(1) };
        let rows_per_task = rows.div_ceil(tasks);
        let tasks = rows.div_ceil(rows_per_task);
        // Interior output columns [lo, hi): ox·sw - pl >= 0 and ox·sw + kw - 1 - pl < in_w.
        let span = g.kernel_w - 1;
        let lo = g.pad_left.div_ceil(g.stride_w).min(g.out_w);
        let hi = if g.in_w + g.pad_left > span { ((g.in_w + g.pad_left - span - 1) / g.stride_w + 1).min(g.out_w) } else { 0 };
        let hi = hi.max(lo);
        // im2col chunk (pixels) for the border pixels and rows in the vertical padding.
        const CHUNK: usize = 48;
        let yp = SyncPtr(y.as_mut_ptr());
        let task = |t: usize| {
            // Capture the whole (Sync) wrapper, not its raw-pointer field.
            let yp = &yp;
            let mut buf = vec![0.0f32; CHUNK.min(g.out_w) * kk];
            let mut segs = vec![core::ptr::null::<f32>(); g.kernel_h];
            let mut tsegs = segs.clone();
            for lr in t * rows_per_task..((t + 1) * rows_per_task).min(rows) {
                // Absolute output row r (input side); `y` row lr.
                let r = r0 + lr;
                let (b, oy) = (r / g.out_h, r % g.out_h);
                let full = (0..g.kernel_h).all(|ky| (oy * g.stride_h + ky * g.dilation_h).wrapping_sub(g.pad_top) < g.in_h);
                let (ilo, ihi) = if full { (lo, hi) } else { (g.out_w, g.out_w) };
                for part in [0..ilo, ihi..g.out_w] {
                    let mut a = part.start;
                    while a < part.end {
                        let e = (a + CHUNK).min(part.end);
                        let p0 = r * g.out_w;
                        im2col(g, x, 0, p0 + a..p0 + e, &mut buf);
                        // SAFETY: `buf` holds e - a rows of kk = w.k() floats; output pixels
                        // a .. e of row lr of `y` (rows·out_w pixels of co floats, checked by
                        // the callers) have co floats each; tasks write disjoint rows; the CPU
                        // has AVX-512F.
                        unsafe {
                            gemm_block(Ukernel::Avx512, false, 0..e - a, 0..w.panels(), buf.as_ptr(), kk, w, yp.0.add((lr * g.out_w + a) * co), co, min, max, self.post)
                        };
                        a = e;
                    }
                }
                if ihi <= ilo {
                    continue;
                }
                for (ky, sp) in segs.iter_mut().enumerate() {
                    let iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
                    let ix = ilo * g.stride_w - g.pad_left;
                    // SAFETY: the row is `full`, so iy < in_h; ix < in_w (ilo is interior).
                    *sp = unsafe { x.as_ptr().add(((b * g.in_h + iy) * g.in_w + ix) * ci) };
                }
                let n = ihi - ilo;
                let a_stride = g.stride_w * ci;
                let mut i = 0;
                let mut tiles_left = n.div_ceil(MR_MAX);
                while i < n {
                    let mr = (n - i).div_ceil(tiles_left);
                    tiles_left -= 1;
                    for (d, &s) in tsegs.iter_mut().zip(&segs) {
                        // SAFETY: pixel ilo + i is interior, so its spans are inside `x`.
                        *d = unsafe { s.add(i * a_stride) };
                    }
                    // Panels in pairs (two 16-column panels per tile), a last odd one alone.
                    let mut p = 0;
                    while p < w.panels() {
                        let two = p + 1 < w.panels();
                        let last = if two { p + 1 } else { p };
                        let nr = NR.min(co - last * NR);
                        // SAFETY: pixels ilo + i .. + mr are interior: each kernel row's span of
                        // seg floats (columns ox·sw - pl .. + kw, all < in_w) lies in row iy of
                        // `x`; output pixel (r, ilo + i + j) has co floats of which these
                        // panels' columns p·16 .. last·16 + nr are written; panel p is full
                        // when paired; mr <= MR_MAX; tasks write disjoint rows; AVX-512F
                        // (checked by the caller's Ukernel).
                        unsafe {
                            avx512::tile_seg(
                                mr,
                                nr,
                                &tsegs,
                                seg,
                                a_stride,
                                w.panel_ptr(p),
                                two.then(|| w.panel_ptr(p + 1)),
                                yp.0.add((lr * g.out_w + ilo + i) * co + p * NR),
                                co,
                                min,
                                max,
                            )
                        };
                        p = last + 1;
                    }
                    // SAFETY: the mr pixels just written (co floats each, contiguous rows of
                    // this task's output).
                    unsafe { self.post.apply(yp.0.add((lr * g.out_w + ilo + i) * co), mr, co, co) };
                    i += mr;
                }
            }
        };
        if tasks == 1 {
            task(0);
        } else {
            par.for_each(tasks, &task);
        }
    }
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for the short spans im2col copies.
#[inline(always)]
fn copy_small(dst: &mut [f32], src: &[f32]) {
    if dst.len() > 64 || dst.len() != src.len() {
        dst.copy_from_slice(src);
        return;
    }
    let mut d = dst.chunks_exact_mut(4);
    let mut s = src.chunks_exact(4);
    for (dc, sc) in (&mut d).zip(&mut s) {
        dc.copy_from_slice(sc);
    }
    for (dv, sv) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *dv = *sv;
    }
}

/// Fills `buf` (`[rows.len(), kernel_h·kernel_w·group_in]`) with the receptive fields of output
/// pixels `rows` (flattened over batch·out_h·out_w) for group `gr`, zeros in the padding.
fn im2col(g: &Conv2dGeom, x: &[f32], gr: usize, rows: core::ops::Range<usize>, buf: &mut [f32]) {
    let ci = g.in_channels();
    let gi = g.group_in;
    let kk = g.kernel_h * g.kernel_w * gi;
    let row_span = g.kernel_w * gi;
    // Taps of one kernel row are contiguous in x when there is one group and no dilation.
    let contiguous = g.groups == 1 && g.dilation_w == 1;
    let r0 = rows.start;
    let (mut b, mut oy, mut ox) = (r0 / (g.out_w * g.out_h), (r0 / g.out_w) % g.out_h, r0 % g.out_w);
    for out in buf.chunks_exact_mut(kk).take(rows.len()) {
        if ox == g.out_w {
            ox = 0;
            oy += 1;
            if oy == g.out_h {
                oy = 0;
                b += 1;
            }
        }
        for ky in 0..g.kernel_h {
            let dst = &mut out[ky * row_span..(ky + 1) * row_span];
            let iy = (oy * g.stride_h + ky * g.dilation_h).wrapping_sub(g.pad_top);
            if iy >= g.in_h {
                dst.fill(0.0);
                continue;
            }
            let xrow = &x[(b * g.in_h + iy) * g.in_w * ci..(b * g.in_h + iy + 1) * g.in_w * ci];
            let x0 = ox * g.stride_w;
            if contiguous {
                // Taps kx with 0 <= x0 + kx - pad_left < in_w.
                let lo = g.pad_left.saturating_sub(x0).min(g.kernel_w);
                let hi = (g.in_w + g.pad_left).saturating_sub(x0).clamp(lo, g.kernel_w);
                if lo > 0 {
                    dst[..lo * gi].fill(0.0);
                }
                if hi > lo {
                    let ix = x0 + lo - g.pad_left;
                    copy_small(&mut dst[lo * gi..hi * gi], &xrow[ix * ci..(ix + hi - lo) * ci]);
                }
                if hi < g.kernel_w {
                    dst[hi * gi..].fill(0.0);
                }
            } else {
                for kx in 0..g.kernel_w {
                    let d = &mut dst[kx * gi..(kx + 1) * gi];
                    let ix = (x0 + kx * g.dilation_w).wrapping_sub(g.pad_left);
                    if ix >= g.in_w {
                        d.fill(0.0);
                    } else {
                        copy_small(d, &xrow[ix * ci + gr * gi..ix * ci + gr * gi + gi]);
                    }
                }
            }
        }
        ox += 1;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nhwc::reference::conv2d_f32;
    use crate::nhwc::Serial;
    use crate::optimized::test_util::{assert_close, Lcg};

    /// A geometry with the output size implied by symmetric-or-given padding.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn geom(
        batch: usize,
        (in_h, in_w): (usize, usize),
        (kh, kw): (usize, usize),
        (sh, sw): (usize, usize),
        (dh, dw): (usize, usize),
        (pt, pb, pl, pr): (usize, usize, usize, usize),
        (groups, gi, go): (usize, usize, usize),
    ) -> Conv2dGeom {
        let out = |i: usize, k: usize, s: usize, d: usize, p0: usize, p1: usize| (i + p0 + p1 - d * (k - 1) - 1) / s + 1;
        Conv2dGeom {
            batch,
            in_h,
            in_w,
            out_h: out(in_h, kh, sh, dh, pt, pb),
            out_w: out(in_w, kw, sw, dw, pl, pr),
            kernel_h: kh,
            kernel_w: kw,
            stride_h: sh,
            stride_w: sw,
            dilation_h: dh,
            dilation_w: dw,
            pad_top: pt,
            pad_left: pl,
            groups,
            group_in: gi,
            group_out: go,
        }
    }

    fn check(g: &Conv2dGeom, seed: u64) {
        let mut r = Lcg::new(seed);
        let x = r.vec(g.in_len());
        let f = r.vec(g.out_channels() * g.kernel_h * g.kernel_w * g.group_in);
        let b = r.vec(g.out_channels());
        let (min, max) = match seed % 3 {
            0 => (f32::NEG_INFINITY, f32::INFINITY),
            1 => (0.0, 6.0),
            _ => (-0.3, f32::INFINITY),
        };
        let bias = (seed % 4 != 3).then_some(&b[..]);
        let conv = ConvF32::new(g, &f, bias).unwrap();
        let want = conv2d_f32(g, &x, &f, bias, min, max);
        let tol = 1e-5 * ((g.kernel_h * g.kernel_w * g.group_in) as f32).sqrt();
        let posted = ConvF32::new(g, &f, bias).unwrap().with_post(PostOp::Hardswish);
        for uk in Ukernel::all_supported() {
            let mut y = vec![f32::NAN; g.out_len()];
            conv.run_with(uk, &Serial, &x, &mut y, min, max).unwrap();
            assert_close(&y, &want, tol, &format!("{uk:?} conv {g:?}"));
            // The fused activation: the same bits as hardswish over the finished output.
            let mut z = vec![f32::NAN; g.out_len()];
            posted.run_with(uk, &Serial, &x, &mut z, min, max).unwrap();
            if g.batch == 1 && uk == Ukernel::best() {
                // Output rows in two bands (what a fused step does): the same bits.
                let split = g.out_h / 2;
                let row = g.out_w * g.out_channels();
                let mut bands = vec![f32::NAN; g.out_len()];
                let (top, bottom) = bands.split_at_mut(split * row);
                conv.run_rows(&Serial, 0, split, &x, top, min, max).unwrap();
                conv.run_rows(&Serial, split, g.out_h, &x, bottom, min, max).unwrap();
                assert!(y.iter().zip(&bands).all(|(a, b)| a.to_bits() == b.to_bits()), "{uk:?} conv rows {g:?}");
            }
            crate::nhwc::hardswish_in_place(&mut y);
            assert!(y.iter().zip(&z).all(|(a, b)| a.to_bits() == b.to_bits()), "{uk:?} conv + hardswish {g:?}");
        }
    }

    #[test]
    fn conv_matches_reference_on_many_shapes() {
        let cases = [
            // MobileNetV2's first layer (smaller image).
            geom(1, (15, 16), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (1, 3, 32)),
            // Pointwise, direct GEMM path; groups; batch 2.
            geom(1, (5, 7), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 13, 17)),
            geom(2, (3, 4), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (3, 5, 7)),
            // Strided 1×1 (im2col path).
            geom(1, (7, 6), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), (1, 9, 20)),
            // 3×3 same, odd channels, asymmetric padding.
            geom(2, (6, 5), (3, 3), (1, 1), (1, 1), (1, 0, 0, 2), (1, 7, 19)),
            // Dilation 2, stride 2.
            geom(1, (9, 11), (3, 3), (2, 1), (2, 2), (2, 2, 1, 2), (1, 4, 33)),
            // Groups (non-depthwise) with stride.
            geom(1, (8, 8), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (4, 3, 5)),
            // 5×5 and tiny images.
            geom(1, (7, 7), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (1, 6, 16)),
            geom(1, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 5, 6)),
            geom(2, (2, 3), (3, 3), (1, 2), (1, 1), (1, 1, 1, 1), (2, 2, 3)),
            geom(1, (2, 3), (2, 3), (1, 1), (1, 1), (0, 0, 0, 0), (1, 3, 1)),
            // Rows wide enough for several interior tiles (AVX-512 in-place spans), vertical
            // dilation, width 1, no padding, stem-like 3 input channels with stride 2.
            geom(1, (9, 61), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (1, 3, 32)),
            geom(2, (6, 30), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (1, 5, 20)),
            geom(1, (8, 27), (3, 3), (1, 1), (2, 1), (2, 1, 1, 1), (1, 4, 17)),
            geom(1, (5, 1), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 3, 16)),
            geom(1, (7, 33), (3, 2), (2, 3), (1, 1), (0, 0, 0, 0), (1, 6, 40)),
        ];
        for (i, g) in cases.iter().enumerate() {
            check(g, i as u64);
        }
    }

    #[test]
    fn conv_large_threaded_matches_serial() {
        // Big enough for several im2col tasks and GEMM tasks.
        let g = geom(1, (40, 40), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (1, 3, 32));
        let g1 = geom(1, (30, 30), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 64, 48));
        #[cfg(feature = "std")]
        let pool = crate::nhwc::pool::ThreadPool::new(3);
        for g in [g, g1] {
            let mut r = Lcg::new(3);
            let x = r.vec(g.in_len());
            let f = r.vec(g.out_channels() * g.kernel_h * g.kernel_w * g.group_in);
            let conv = ConvF32::new(&g, &f, None).unwrap();
            let want = conv2d_f32(&g, &x, &f, None, f32::NEG_INFINITY, f32::INFINITY);
            let mut y = vec![0.0; g.out_len()];
            conv.run(&Serial, &x, &mut y, f32::NEG_INFINITY, f32::INFINITY).unwrap();
            assert_close(&y, &want, 1e-4, "conv serial");
            #[cfg(feature = "std")]
            {
                let mut y3 = vec![0.0; g.out_len()];
                conv.run(&pool, &x, &mut y3, f32::NEG_INFINITY, f32::INFINITY).unwrap();
                assert_eq!(y, y3);
            }
        }
    }

    #[test]
    fn conv_bad_sizes_are_errors() {
        let g = geom(1, (5, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 2, 4));
        let f = vec![0.0; 4 * 9 * 2];
        assert!(ConvF32::new(&g, &f[1..], None).is_err());
        assert!(ConvF32::new(&g, &f, Some(&[0.0; 3])).is_err());
        assert!(ConvF32::new(&Conv2dGeom { stride_h: 0, ..g }, &f, None).is_err());
        assert!(ConvF32::new(&Conv2dGeom { dilation_w: 0, ..g }, &f, None).is_err());
        assert!(ConvF32::new(&Conv2dGeom { out_h: 9, ..g }, &f, None).is_err());
        assert!(ConvF32::new(&Conv2dGeom { out_w: 0, ..g }, &f, None).is_err());
        let conv = ConvF32::new(&g, &f, None).unwrap();
        let mut y = vec![0.0; g.out_len()];
        assert!(conv.run(&Serial, &vec![0.0; g.in_len() - 1], &mut y, 0.0, 1.0).is_err());
        assert!(conv.run(&Serial, &vec![0.0; g.in_len()], &mut y[1..], 0.0, 1.0).is_err());
        assert!(conv.run(&Serial, &vec![0.0; g.in_len()], &mut y, 0.0, 1.0).is_ok());
    }
}
