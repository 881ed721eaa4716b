//! int8 convolution and fully-connected operators over the packed GEMM micro-kernels.
//!
//! 1×1 stride-1 unpadded single-group convolutions and fully-connected layers read their rows
//! in place; other convolutions gather each row's patch (im2col) with the input zero point in
//! the padding, as XNNPACK's IGEMM does with its zero buffer. Either way a tile's rows are then
//! converted once to the micro-kernel's form (widened to i16, or offset to u8 for VNNI) and
//! reused across all output-channel blocks.

use super::gemm::{run_tile, run_tile_quads, Act, Layout, PackedGemm, MR, NR};
use super::{channel_scales, task_count, Isa, OutParams, QParams, SyncPtr};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Where the GEMM's activation rows come from: `rows` writes rows `r..r + m` of group `g`
/// (`k` values each, row `i` at `dst[i·ld..]`) in the micro-kernel family's element type.
trait RowSource: Sync {
    fn rows_i16(&self, r: usize, m: usize, g: usize, dst: &mut [i16], ld: usize);
    fn rows_u8(&self, r: usize, m: usize, g: usize, dst: &mut [u8], ld: usize);
}

/// Implements [`RowSource`] through one generic `rows::<T>` method.
macro_rules! row_source {
    ($t:ty) => {
        impl RowSource for $t {
            fn rows_i16(&self, r: usize, m: usize, g: usize, dst: &mut [i16], ld: usize) {
                self.rows(r, m, g, dst, ld)
            }
            fn rows_u8(&self, r: usize, m: usize, g: usize, dst: &mut [u8], ld: usize) {
                self.rows(r, m, g, dst, ld)
            }
        }
    };
}

/// Row `r` is `x[r·k .. (r+1)·k]` (1×1 stride-1 convolutions, fully-connected layers).
struct InPlace<'a> {
    x: &'a [i8],
    k: usize,
}

impl InPlace<'_> {
    fn rows<T: Act>(&self, r: usize, m: usize, _g: usize, dst: &mut [T], ld: usize) {
        let k = self.k;
        for i in 0..m {
            T::convert(&mut dst[i * ld..i * ld + k], &self.x[(r + i) * k..(r + i + 1) * k]);
        }
    }
}
row_source!(InPlace<'_>);

/// Row `r` is output pixel `r`'s patch (im2col), the input zero point in the padding.
struct Im2col<'a> {
    g: &'a Conv2dGeom,
    x: &'a [i8],
    zp: i8,
}

impl Im2col<'_> {
    fn rows<T: Act>(&self, r: usize, m: usize, grp: usize, dst: &mut [T], ld: usize) {
        let (g, x) = (self.g, self.x);
        let (ci, gi) = (g.in_channels(), g.group_in);
        let zp = T::from_i8(self.zp);
        // One group with undilated columns: a kernel row's taps are one contiguous run of
        // `kw·ci` input values whenever the whole run is inside the input row.
        let contiguous = g.groups == 1 && g.dilation_w == 1;
        let run_len = g.kernel_w * gi;
        let (mut b, rem) = (r / (g.out_h * g.out_w), r % (g.out_h * g.out_w));
        let (mut oy, mut ox) = (rem / g.out_w, rem % g.out_w);
        for i in 0..m {
            let dst = &mut dst[i * ld..];
            for ky in 0..g.kernel_h {
                let iy = (oy * g.stride_h + ky * g.dilation_h).checked_sub(g.pad_top).filter(|&v| v < g.in_h);
                let d = &mut dst[ky * run_len..(ky + 1) * run_len];
                let Some(iy) = iy else {
                    d.fill(zp);
                    continue;
                };
                let x0 = ox * g.stride_w;
                if contiguous && x0 >= g.pad_left && x0 - g.pad_left + g.kernel_w <= g.in_w {
                    let at = ((b * g.in_h + iy) * g.in_w + x0 - g.pad_left) * ci;
                    T::convert(d, &x[at..at + run_len]);
                    continue;
                }
                for kx in 0..g.kernel_w {
                    let d = &mut d[kx * gi..(kx + 1) * gi];
                    let ix = (ox * g.stride_w + kx * g.dilation_w).checked_sub(g.pad_left).filter(|&v| v < g.in_w);
                    match ix {
                        Some(ix) => {
                            let at = ((b * g.in_h + iy) * g.in_w + ix) * ci + grp * gi;
                            T::convert(d, &x[at..at + gi]);
                        }
                        None => d.fill(zp),
                    }
                }
            }
            ox += 1;
            if ox == g.out_w {
                ox = 0;
                oy += 1;
                if oy == g.out_h {
                    oy = 0;
                    b += 1;
                }
            }
        }
    }
}
row_source!(Im2col<'_>);

/// Runs `rows` GEMM rows through the packed groups (all packed with one layout). Output row `i`
/// is `y[i·ldy..]`, group `g`'s channels at `g·group_n`.
#[allow(clippy::too_many_arguments)]
fn drive(par: &dyn Parallel, isa: Isa, rows: usize, packs: &[PackedGemm], group_n: usize, o: &OutParams, src: &dyn RowSource, y: &mut [i8]) {
    let ldy = group_n * packs.len();
    debug_assert_eq!(y.len(), rows * ldy);
    if rows == 0 || ldy == 0 {
        return;
    }
    let layout = packs[0].layout;
    let mr = layout.rows();
    let tiles = rows.div_ceil(mr);
    let (k, kp) = (packs[0].k, packs[0].kp);
    let macs = rows * ldy * k;
    let tasks = task_count(par, macs, tiles);
    let per = tiles.div_ceil(tasks);
    let yp = SyncPtr(y.as_mut_ptr());
    let run = |t: usize| {
        let (t0, t1) = (t * per, ((t + 1) * per).min(tiles));
        if t0 >= t1 {
            return;
        }
        let (r0, r1) = (t0 * mr, (t1 * mr).min(rows));
        // SAFETY: tasks own disjoint row ranges [r0, r1) of `y` (whose length is rows·ldy, as
        // every caller checks), so these slices never overlap and stay in bounds.
        let yt = unsafe { core::slice::from_raw_parts_mut(yp.get().add(r0 * ldy), (r1 - r0) * ldy) };
        match layout {
            Layout::Pairs => {
                let mut a = vec![0i16; MR * kp];
                let mut out = [[0i8; NR]; MR];
                let mut r = r0;
                while r < r1 {
                    let m = MR.min(r1 - r);
                    for (g, p) in packs.iter().enumerate() {
                        src.rows_i16(r, m, g, &mut a, kp);
                        for b in 0..p.blocks() {
                            run_tile(isa, &a, p.block(b), kp, o, &mut out);
                            let nc = NR.min(p.n - b * NR);
                            for (i, out_row) in out.iter().enumerate().take(m) {
                                let at = (r - r0 + i) * ldy + g * group_n + b * NR;
                                yt[at..at + nc].copy_from_slice(&out_row[..nc]);
                            }
                        }
                    }
                    r += m;
                }
            }
            Layout::Quads => {
                let mut a = vec![0u8; mr * kp];
                let mut r = r0;
                while r < r1 {
                    let m = mr.min(r1 - r);
                    for (g, p) in packs.iter().enumerate() {
                        src.rows_u8(r, m, g, &mut a, kp);
                        for b in 0..p.blocks() {
                            let nc = NR.min(p.n - b * NR);
                            let at = (r - r0) * ldy + g * group_n + b * NR;
                            run_tile_quads(isa, &a, m, p.block(b), kp, o, &mut yt[at..], ldy, nc);
                        }
                    }
                    r += m;
                }
            }
        }
    };
    if tasks == 1 {
        run(0);
    } else {
        par.for_each(tasks, &run);
    }
}

pub(crate) fn check_geom(g: &Conv2dGeom) -> Result<(), String> {
    let dims = [
        ("in_h", g.in_h),
        ("in_w", g.in_w),
        ("out_h", g.out_h),
        ("out_w", g.out_w),
        ("kernel_h", g.kernel_h),
        ("kernel_w", g.kernel_w),
        ("stride_h", g.stride_h),
        ("stride_w", g.stride_w),
        ("dilation_h", g.dilation_h),
        ("dilation_w", g.dilation_w),
        ("groups", g.groups),
        ("group_in", g.group_in),
        ("group_out", g.group_out),
    ];
    for (name, v) in dims {
        if v == 0 {
            return Err(format!("convolution geometry: {name} is 0 ({g:?})"));
        }
    }
    let span = |o: usize, s: usize, k: usize, d: usize| (o - 1) * s + (k - 1) * d + 1;
    if span(g.out_h, g.stride_h, g.kernel_h, g.dilation_h) > g.in_h + g.pad_top + g.kernel_h * g.dilation_h
        || span(g.out_w, g.stride_w, g.kernel_w, g.dilation_w) > g.in_w + g.pad_left + g.kernel_w * g.dilation_w
    {
        return Err(format!("convolution geometry: output larger than the padded input allows ({g:?})"));
    }
    Ok(())
}

pub(crate) use check_geom as check_geom_pub;

fn check_bias(bias: Option<&[i32]>, n: usize) -> Result<(), String> {
    match bias {
        Some(b) if b.len() != n => Err(format!("bias has {} values for {n} output channels", b.len())),
        _ => Ok(()),
    }
}

/// int8 2-D convolution (qs8 activations, qc8 weights, int32 bias), NHWC.
#[derive(Clone, Debug)]
pub struct ConvQs8 {
    geom: Conv2dGeom,
    packs: Vec<PackedGemm>,
    out: OutParams,
    input_zp: i32,
    direct: bool,
    isa: Isa,
}

impl ConvQs8 {
    /// `filter` `[groups·group_out, kh, kw, group_in]` int8 (zero point 0), `filter_scales` one
    /// per output channel (or one for all), `bias` int32 per output channel or none.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        g: &Conv2dGeom,
        input: QParams,
        filter: &[i8],
        filter_scales: &[f32],
        bias: Option<&[i32]>,
        output: QParams,
        out_min: i8,
        out_max: i8,
    ) -> Result<Self, String> {
        Self::new_with_layout(Isa::best().gemm_layout(), g, input, filter, filter_scales, bias, output, out_min, out_max)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new_with_layout(
        layout: Layout,
        g: &Conv2dGeom,
        input: QParams,
        filter: &[i8],
        filter_scales: &[f32],
        bias: Option<&[i32]>,
        output: QParams,
        out_min: i8,
        out_max: i8,
    ) -> Result<Self, String> {
        check_geom(g)?;
        let co = g.out_channels();
        let k = g.kernel_h * g.kernel_w * g.group_in;
        if filter.len() != co * k {
            return Err(format!("filter has {} values, expected {}", filter.len(), co * k));
        }
        check_bias(bias, co)?;
        let scales = channel_scales(co, input, filter_scales, output)?;
        let out = OutParams::new(output, out_min, out_max)?;
        let packs = (0..g.groups)
            .map(|gr| {
                let base = gr * g.group_out;
                PackedGemm::pack(
                    layout,
                    g.group_out,
                    k,
                    |j, kk| filter[(base + j) * k + kk],
                    |j| bias.map_or(0, |b| b[base + j]),
                    &scales[base..base + g.group_out],
                    input.zero_point,
                )
            })
            .collect();
        let direct = g.kernel_h == 1
            && g.kernel_w == 1
            && g.stride_h == 1
            && g.stride_w == 1
            && g.pad_top == 0
            && g.pad_left == 0
            && g.groups == 1
            && g.out_h == g.in_h
            && g.out_w == g.in_w;
        Ok(ConvQs8 { geom: *g, packs, out, input_zp: input.zero_point, direct, isa: Isa::best() })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    /// Runs on `x` `[batch, in_h, in_w, in_c]` into `y` `[batch, out_h, out_w, out_c]`.
    pub fn run(&self, par: &dyn Parallel, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        self.run_with(par, self.isa, x, y)
    }

    pub(crate) fn run_with(&self, par: &dyn Parallel, isa: Isa, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        let g = &self.geom;
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!(
                "conv: input {} / output {} values, expected {} / {}",
                x.len(),
                y.len(),
                g.in_len(),
                g.out_len()
            ));
        }
        let rows = g.batch * g.out_h * g.out_w;
        if self.direct {
            let src = InPlace { x, k: g.in_channels() };
            drive(par, isa, rows, &self.packs, g.group_out, &self.out, &src, y);
        } else {
            let src = Im2col { g, x, zp: self.input_zp as i8 };
            drive(par, isa, rows, &self.packs, g.group_out, &self.out, &src, y);
        }
        Ok(())
    }
}

/// int8 fully-connected layer: `y[m, n] = requant(bias[n] + Σ_k (x[m, k] − zp)·w[n, k])`.
#[derive(Clone, Debug)]
pub struct FullyConnectedQs8 {
    pack: [PackedGemm; 1],
    out: OutParams,
    isa: Isa,
}

impl FullyConnectedQs8 {
    /// `filter` `[n, k]` int8, `filter_scales` per output (or one), `bias` `[n]` or none.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        n: usize,
        k: usize,
        input: QParams,
        filter: &[i8],
        filter_scales: &[f32],
        bias: Option<&[i32]>,
        output: QParams,
        out_min: i8,
        out_max: i8,
    ) -> Result<Self, String> {
        Self::new_with_layout(Isa::best().gemm_layout(), n, k, input, filter, filter_scales, bias, output, out_min, out_max)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new_with_layout(
        layout: Layout,
        n: usize,
        k: usize,
        input: QParams,
        filter: &[i8],
        filter_scales: &[f32],
        bias: Option<&[i32]>,
        output: QParams,
        out_min: i8,
        out_max: i8,
    ) -> Result<Self, String> {
        if n == 0 || k == 0 {
            return Err(format!("fully connected: n = {n}, k = {k} must be > 0"));
        }
        if filter.len() != n * k {
            return Err(format!("filter has {} values, expected {}", filter.len(), n * k));
        }
        check_bias(bias, n)?;
        let scales = channel_scales(n, input, filter_scales, output)?;
        let out = OutParams::new(output, out_min, out_max)?;
        let pack = PackedGemm::pack(
            layout,
            n,
            k,
            |j, kk| filter[j * k + kk],
            |j| bias.map_or(0, |b| b[j]),
            &scales,
            input.zero_point,
        );
        Ok(FullyConnectedQs8 { pack: [pack], out, isa: Isa::best() })
    }

    pub fn n(&self) -> usize {
        self.pack[0].n
    }

    pub fn k(&self) -> usize {
        self.pack[0].k
    }

    /// `x` `[m, k]` → `y` `[m, n]`.
    pub fn run(&self, par: &dyn Parallel, m: usize, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        self.run_with(par, self.isa, m, x, y)
    }

    pub(crate) fn run_with(&self, par: &dyn Parallel, isa: Isa, m: usize, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        let (n, k) = (self.n(), self.k());
        if x.len() != m * k || y.len() != m * n {
            return Err(format!(
                "fully connected: input {} / output {} values, expected {} / {}",
                x.len(),
                y.len(),
                m * k,
                m * n
            ));
        }
        drive(par, isa, m, &self.pack, n, &self.out, &InPlace { x, k }, y);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::super::test_util::{FakePar, Lcg};
    use super::*;
    use crate::nhwc::Serial;


    /// Every (packing, micro-kernel) pair this CPU runs: the plain twins of both packings, and
    /// the fast kernels available here.
    fn kernels() -> Vec<(Layout, Isa)> {
        // The quad packing's plain twin runs everywhere; each family with its own packing.
        let mut v = vec![(Layout::Quads, Isa::Scalar)];
        v.extend(super::super::test_util::isas().into_iter().map(|isa| (isa.gemm_layout(), isa)));
        v
    }

    fn out_size(i: usize, k: usize, s: usize, d: usize, pad_lo: usize, pad_hi: usize) -> usize {
        (i + pad_lo + pad_hi - (k - 1) * d - 1) / s + 1
    }

    #[allow(clippy::too_many_arguments)]
    fn geom(b: usize, h: usize, w: usize, k: usize, s: usize, d: usize, p: usize, groups: usize, gi: usize, go: usize) -> Conv2dGeom {
        Conv2dGeom {
            batch: b,
            in_h: h,
            in_w: w,
            out_h: out_size(h, k, s, d, p, p),
            out_w: out_size(w, k, s, d, p, p),
            kernel_h: k,
            kernel_w: k,
            stride_h: s,
            stride_w: s,
            dilation_h: d,
            dilation_w: d,
            pad_top: p,
            pad_left: p,
            groups,
            group_in: gi,
            group_out: go,
        }
    }

    #[test]
    fn conv_matches_reference() {
        let mut r = Lcg(11);
        let cases = [
            geom(1, 5, 7, 1, 1, 1, 0, 1, 8, 24),   // direct 1×1
            geom(2, 3, 3, 1, 1, 1, 0, 1, 37, 17),  // direct, batch 2, odd sizes
            geom(1, 9, 9, 3, 2, 1, 1, 1, 3, 16),   // MobileNet stem
            geom(1, 8, 6, 3, 1, 1, 1, 1, 5, 19),   // 3×3 s1 p1
            geom(1, 7, 7, 1, 2, 1, 0, 1, 12, 20),  // 1×1 stride 2
            geom(2, 9, 8, 3, 1, 2, 2, 2, 3, 5),    // dilation 2, groups 2
            geom(1, 6, 6, 5, 2, 1, 2, 3, 4, 4),    // 5×5, groups 3
            geom(1, 1, 1, 1, 1, 1, 0, 1, 96, 40),  // single pixel
        ];
        for (ci, g) in cases.iter().enumerate() {
            let co = g.out_channels();
            let k = g.kernel_h * g.kernel_w * g.group_in;
            let x = r.i8s(g.in_len());
            let w = r.i8s(co * k);
            let scales: Vec<f32> = (0..co).map(|_| r.f32(0.001, 0.02)).collect();
            let bias: Vec<i32> = (0..co).map(|_| (r.next() as i32) >> 16).collect();
            let input = QParams { scale: r.f32(0.01, 0.1), zero_point: r.i8() as i32 };
            let output = QParams { scale: r.f32(0.02, 0.2), zero_point: r.i8() as i32 };
            for (lo, hi) in [(-128i8, 127i8), (-20, 90)] {
                for use_bias in [true, false] {
                    let b = use_bias.then_some(&bias[..]);
                    let want = reference::conv2d_qs8(g, input, &x, &w, &scales, b, output, lo, hi);
                    for (layout, isa) in kernels() {
                        let op = ConvQs8::new_with_layout(layout, g, input, &w, &scales, b, output, lo, hi).unwrap();
                        for par in [&Serial as &dyn Parallel, &FakePar] {
                            let mut y = vec![0i8; g.out_len()];
                            op.run_with(par, isa, &x, &mut y).unwrap();
                            assert_eq!(y, want, "case {ci} {layout:?} {isa:?} clamp ({lo},{hi}) bias {use_bias}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn per_tensor_scale_and_large_task_split() {
        let mut r = Lcg(5);
        let g = geom(1, 20, 20, 1, 1, 1, 0, 1, 64, 48); // 400·48·64 = 1.2M MACs: several tasks
        let x = r.i8s(g.in_len());
        let w = r.i8s(48 * 64);
        let input = QParams { scale: 0.05, zero_point: -3 };
        let output = QParams { scale: 0.3, zero_point: 7 };
        let op = ConvQs8::new(&g, input, &w, &[0.004], None, output, -128, 127).unwrap();
        let want = reference::conv2d_qs8(&g, input, &x, &w, &[0.004], None, output, -128, 127);
        let mut y = vec![0i8; g.out_len()];
        op.run(&FakePar, &x, &mut y).unwrap();
        assert_eq!(y, want);
    }

    #[test]
    fn fc_matches_reference() {
        let mut r = Lcg(3);
        for &(m, n, k) in &[(1, 10, 64), (3, 33, 17), (5, 16, 1), (9, 1000, 40), (1, 1000, 1280), (2, 40, 9), (17, 24, 300)] {
            let x = r.i8s(m * k);
            let w = r.i8s(n * k);
            let scales: Vec<f32> = (0..n).map(|_| r.f32(0.001, 0.02)).collect();
            let bias: Vec<i32> = (0..n).map(|_| (r.next() as i32) >> 14).collect();
            let input = QParams { scale: 0.03, zero_point: r.i8() as i32 };
            let output = QParams { scale: 0.1, zero_point: r.i8() as i32 };
            let want = reference::fully_connected_qs8(m, n, k, input, &x, &w, &scales, Some(&bias), output, -128, 100);
            for (layout, isa) in kernels() {
                let op = FullyConnectedQs8::new_with_layout(layout, n, k, input, &w, &scales, Some(&bias), output, -128, 100)
                    .unwrap();
                let mut y = vec![0i8; m * n];
                op.run_with(&Serial, isa, m, &x, &mut y).unwrap();
                assert_eq!(y, want, "{layout:?} {isa:?} m={m} n={n} k={k}");
            }
        }
    }

    #[test]
    fn bad_sizes_are_errors() {
        let q = QParams { scale: 0.1, zero_point: 0 };
        let g = geom(1, 4, 4, 3, 1, 1, 1, 1, 2, 3);
        let w = vec![0i8; 3 * 9 * 2];
        assert!(ConvQs8::new(&g, q, &w[1..], &[0.1], None, q, -128, 127).is_err());
        assert!(ConvQs8::new(&g, q, &w, &[0.1, 0.1], None, q, -128, 127).is_err());
        assert!(ConvQs8::new(&g, q, &w, &[0.1], Some(&[1, 2]), q, -128, 127).is_err());
        assert!(ConvQs8::new(&g, q, &w, &[0.1], None, q, 5, 4).is_err());
        assert!(ConvQs8::new(&g, QParams { scale: f32::INFINITY, zero_point: 0 }, &w, &[0.1], None, q, -128, 127).is_err());
        let mut bad = g;
        bad.stride_h = 0;
        assert!(ConvQs8::new(&bad, q, &w, &[0.1], None, q, -128, 127).is_err());
        let mut bad = g;
        bad.out_h = 40;
        assert!(ConvQs8::new(&bad, q, &w, &[0.1], None, q, -128, 127).is_err());
        let op = ConvQs8::new(&g, q, &w, &[0.1], None, q, -128, 127).unwrap();
        let mut y = vec![0i8; g.out_len()];
        assert!(op.run(&Serial, &vec![0; g.in_len() - 1], &mut y).is_err());
        assert!(op.run(&Serial, &vec![0; g.in_len()], &mut y[1..]).is_err());
        assert!(FullyConnectedQs8::new(2, 3, q, &[0; 5], &[0.1], None, q, -128, 127).is_err());
        let fc = FullyConnectedQs8::new(2, 3, q, &[0; 6], &[0.1], None, q, -128, 127).unwrap();
        assert!(fc.run(&Serial, 2, &[0; 6], &mut [0; 3]).is_err());
        assert!(fc.run(&Serial, 2, &[0; 6], &mut [0; 4]).is_ok());
    }
}
