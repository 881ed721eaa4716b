//! NHWC kernels: the fast CPU path behind the `XnnpackBackend` delegate (and rbuild's own CNNs).
//!
//! Layout is channels-last (`[N, H, W, C]`) throughout, as in XNNPACK. Each operator packs its
//! constant weights once (at delegate init) into the layout its micro-kernels read, and each
//! micro-kernel (AVX-512F or AVX2+FMA on x86-64, chosen at run time; NEON on aarch64; plain Rust
//! elsewhere) has a plain
//! reference twin in [`reference`] / [`qs8::reference`] that the tests compare it against.
//!
//! - f32: [`gemm_f32`] (packed-weight GEMM micro-kernels with fused bias and clamp),
//!   [`conv_f32`], [`dwconv_f32`], [`fc_f32`].
//! - int8 (XNNPACK's qs8/qc8 arithmetic, so programs quantized for XNNPACK reproduce its
//!   results): [`qs8`].
//! - [`resize`]: bilinear resizing (f32 and int8).
//! - [`Parallel`]: how an operator splits its work over threads; [`pool`] is a persistent
//!   thread pool whose idle workers block (no spinning), for shared machines.

pub mod conv_f32;
pub mod dwconv_f32;
pub mod fc_f32;
pub mod gemm_f32;
#[cfg(feature = "std")]
pub mod pool;
pub mod qs8;
pub mod reference;
pub mod resize;

/// Geometry of a 2-D convolution over NHWC tensors.
///
/// Input `[batch, in_h, in_w, groups·group_in]`, output `[batch, out_h, out_w, groups·group_out]`.
/// Padding below/right is implied by `out_h`/`out_w`. A depthwise convolution is `groups` =
/// input channels, `group_in` = 1, `group_out` = the channel multiplier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dGeom {
    pub batch: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel_h: usize,
    pub kernel_w: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub dilation_h: usize,
    pub dilation_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub groups: usize,
    pub group_in: usize,
    pub group_out: usize,
}

impl Conv2dGeom {
    pub fn in_channels(&self) -> usize {
        self.groups * self.group_in
    }
    pub fn out_channels(&self) -> usize {
        self.groups * self.group_out
    }
    pub fn in_len(&self) -> usize {
        self.batch * self.in_h * self.in_w * self.in_channels()
    }
    pub fn out_len(&self) -> usize {
        self.batch * self.out_h * self.out_w * self.out_channels()
    }
}

/// The taps `t < kernel` of a window whose input position `o·stride + t·dilation − pad` lies in
/// `0..size` (a contiguous range; empty when none does), so loops over a window skip its
/// padding without visiting it.
pub fn window_taps(o: usize, stride: usize, dilation: usize, pad: usize, size: usize, kernel: usize) -> core::ops::Range<usize> {
    let base = o.saturating_mul(stride);
    let d = dilation.max(1);
    let first = pad.saturating_sub(base).div_ceil(d);
    let end = pad.saturating_add(size).saturating_sub(base).div_ceil(d);
    first.min(kernel)..end.min(kernel).max(first.min(kernel))
}

/// MobileNetV3's activation: `x · min(max(x + 3, 0), 6) / 6`, as XNNPACK computes it (a
/// multiply by 1/6). The one definition the fused and the standalone paths share, so a
/// convolution with its hardswish fused gives the same bits as the two run apart.
#[inline(always)]
pub fn hardswish(v: f32) -> f32 {
    v * ((v + 3.0).max(0.0).min(6.0) * (1.0 / 6.0))
}

/// What a convolution applies to its outputs after the bias and clamp, while they are still in
/// L1 (the tile or row it just wrote): a float activation the graph had as its own node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PostOp {
    #[default]
    None,
    Hardswish,
}

impl PostOp {
    /// Applies the activation to `rows` rows of `cols` values, row `i` at `c + i * stride`.
    ///
    /// # Safety
    /// `c + i * stride + j` is valid for reads and writes for `i < rows`, `j < cols`, and no
    /// other thread touches those elements during the call.
    #[inline]
    pub(crate) unsafe fn apply(self, c: *mut f32, rows: usize, cols: usize, stride: usize) {
        if self == PostOp::None || rows == 0 {
            return;
        }
        if stride == cols {
            // SAFETY: rows of `cols` values back to back: one span (caller's contract).
            return hardswish_in_place(unsafe { core::slice::from_raw_parts_mut(c, rows * cols) });
        }
        for i in 0..rows {
            // SAFETY: row i's `cols` values are valid and exclusively ours (caller's contract).
            let row = unsafe { core::slice::from_raw_parts_mut(c.add(i * stride), cols) };
            hardswish_in_place(row);
        }
    }
}

/// [`hardswish`] over a slice, compiled for AVX-512F / AVX2 when the CPU has them (single IEEE
/// operations only: every variant gives the same bits).
pub(crate) fn hardswish_in_place(v: &mut [f32]) {
    #[inline(always)]
    fn body(v: &mut [f32]) {
        for x in v.iter_mut() {
            *x = hardswish(*x);
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn wide512(v: &mut [f32]) {
            body(v)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn wide(v: &mut [f32]) {
            body(v)
        }
        if gemm_f32::has_avx512() {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA; `wide512` runs only safe code.
            return unsafe { wide512(v) };
        }
        if gemm_f32::has_avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA; `wide` runs only safe code.
            return unsafe { wide(v) };
        }
    }
    body(v)
}

/// Splits an operator's work into independent tasks and runs them, maybe on several threads.
pub trait Parallel: Sync {
    /// Threads `for_each` may use (1 = the caller's only).
    fn threads(&self) -> usize;
    /// Calls `f(i)` once for every `i < tasks`, in any order, and returns when all are done.
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync));
}

impl Conv2dGeom {
    /// Runs `row(n, image, oy, out_row)` for every output row `oy` of every image `n`, rows
    /// spread over `par`'s threads: `image` is that input image (of `x`, NHWC), `out_row` the
    /// row's `out_w · out_channels` outputs (of `y`). The lengths must be the geometry's.
    pub fn for_each_output_row<X: Sync, Y: Send>(
        &self,
        par: &dyn Parallel,
        x: &[X],
        y: &mut [Y],
        row: &(dyn Fn(usize, &[X], usize, &mut [Y]) + Sync),
    ) -> Result<(), alloc::string::String> {
        if x.len() != self.in_len() || y.len() != self.out_len() {
            return Err(alloc::format!("convolution: {} inputs / {} outputs, expected {} / {}", x.len(), y.len(), self.in_len(), self.out_len()));
        }
        let image = self.in_h * self.in_w * self.in_channels();
        let row_len = self.out_w * self.out_channels();
        let yp = gemm_f32::SyncPtr(y.as_mut_ptr());
        par.for_each(self.batch * self.out_h, &|r| {
            let yp = &yp;
            // SAFETY: row r's `row_len` outputs lie inside `y` (batch·out_h·row_len = y.len(),
            // checked above) and only task r writes them.
            let out = unsafe { core::slice::from_raw_parts_mut(yp.0.add(r * row_len), row_len) };
            let n = r / self.out_h;
            row(n, &x[n * image..(n + 1) * image], r % self.out_h, out);
        });
        Ok(())
    }
}

/// Everything on the calling thread.
pub struct Serial;

impl Parallel for Serial {
    fn threads(&self) -> usize {
        1
    }
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        for i in 0..tasks {
            f(i);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn window_taps_are_the_taps_inside_the_input() {
        for (o, s, d, pad, size, k) in [(0usize, 1usize, 1usize, 1usize, 5usize, 3usize), (4, 1, 1, 1, 5, 3), (2, 2, 2, 3, 7, 4), (0, 3, 1, 10, 4, 5), (9, 1, 1, 0, 4, 3), (1, 2, 3, 0, 100, 6)] {
            let want: alloc::vec::Vec<usize> = (0..k).filter(|&t| (o * s + t * d).checked_sub(pad).is_some_and(|p| p < size)).collect();
            let got: alloc::vec::Vec<usize> = super::window_taps(o, s, d, pad, size, k).collect();
            assert_eq!(got, want, "o {o} s {s} d {d} pad {pad} size {size} k {k}");
        }
        // Huge windows: only the valid taps are visited.
        assert_eq!(super::window_taps(0, 1, 1, 1 << 30, 2, 1 << 31), (1 << 30)..((1 << 30) + 2));
    }
}
