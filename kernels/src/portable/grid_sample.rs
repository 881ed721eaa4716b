//! `grid_sampler_2d.out`: sampling an NCHW input at the normalized `(x, y)` points of a
//! `[N, H_out, W_out, 2]` grid, bilinear, nearest or bicubic, with zeros, border or reflection
//! padding.
//!
//! The arithmetic is that of PyTorch's vectorized CPU kernel (the eager oracle), step by step:
//! `(g + 1) * (size - 1) / 2` or `(g + 1) * size / 2 - 0.5` to unnormalize, reflection by
//! `min(extra, twice_span - extra)` after removing whole periods, NaN coordinates clipped to 0,
//! nearest rounding half to even, bilinear weights from the distances to the north-west corner,
//! and bicubic taps with A = -0.75 whose coordinates are padded one by one. Float and Double
//! compute in their own precision; Half and BFloat16 compute in f32 (PyTorch's CPU kernel takes
//! neither; ExecuTorch's computes them in f32 too).

use core::ops::{Add, Div, Mul, Sub};

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::grid_sampler_2d.out" => grid_sampler_2d_out,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Interpolation {
    Bilinear,
    Nearest,
    Bicubic,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// The precision a sampling runs in (f32 or f64), with the few operations it needs.
trait Real: Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> {
    fn of(v: f64) -> Self;
    fn load(e: &Elems<'_>, i: usize) -> Self;
    fn to_f64(self) -> f64;
    fn floor(self) -> Self;
    fn trunc(self) -> Self;
    /// Round half to even (the current rounding mode of `nearbyint`).
    fn rint(self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    /// Truncating conversion to an index; NaN becomes an out-of-range index, as the
    /// vectorized conversion's "integer indefinite" value is.
    fn index(self) -> i64;
}

impl Real for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn load(e: &Elems<'_>, i: usize) -> f32 {
        e.f64(i) as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn floor(self) -> f32 {
        libm::floorf(self)
    }
    fn trunc(self) -> f32 {
        libm::truncf(self)
    }
    fn rint(self) -> f32 {
        libm::rintf(self)
    }
    fn abs(self) -> f32 {
        libm::fabsf(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn index(self) -> i64 {
        if self.is_nan() {
            i64::MIN
        } else {
            self as i64
        }
    }
}

impl Real for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn load(e: &Elems<'_>, i: usize) -> f64 {
        e.f64(i)
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn floor(self) -> f64 {
        libm::floor(self)
    }
    fn trunc(self) -> f64 {
        libm::trunc(self)
    }
    fn rint(self) -> f64 {
        libm::rint(self)
    }
    fn abs(self) -> f64 {
        libm::fabs(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn index(self) -> i64 {
        if self.is_nan() {
            i64::MIN
        } else {
            self as i64
        }
    }
}

/// `a < b ? a : b` with NaN propagating from either side (the vectorized `minimum`).
fn minimum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::of(f64::NAN)
    } else if a < b {
        a
    } else {
        b
    }
}

/// Maps normalized coordinates to pixel coordinates along one axis of `size` pixels.
struct Axis<T> {
    size: usize,
    align_corners: bool,
    padding: Padding,
    scale: T,
    max: T,
}

impl<T: Real> Axis<T> {
    fn new(size: usize, align_corners: bool, padding: Padding) -> Self {
        let span = if align_corners { size - 1 } else { size };
        Axis { size, align_corners, padding, scale: T::of(span as f64) / T::of(2.0), max: T::of((size - 1) as f64) }
    }

    /// `[-1, 1]` to pixel units: corner pixel centres, or the outer pixel edges.
    fn unnormalize(&self, g: T) -> T {
        let v = (g + T::of(1.0)) * self.scale;
        if self.align_corners {
            v
        } else {
            v - T::of(0.5)
        }
    }

    /// Clamps to `[0, size - 1]`; NaN becomes 0.
    fn clip(&self, v: T) -> T {
        if !(v > T::of(0.0)) {
            T::of(0.0)
        } else if v > self.max {
            self.max
        } else {
            v
        }
    }

    /// Folds `v` into `[low, low + span]` by mirroring at both ends.
    fn reflect(&self, v: T) -> T {
        let (low, twice_span) = if self.align_corners {
            if self.size <= 1 {
                return T::of(0.0);
            }
            (0.0, 2.0 * (self.size - 1) as f64)
        } else {
            (-0.5, 2.0 * self.size as f64)
        };
        let (low, twice_span) = (T::of(low), T::of(twice_span));
        let distance = (v - low).abs();
        let extra = distance - (distance / twice_span).trunc() * twice_span;
        minimum(extra, twice_span - extra) + low
    }

    /// Applies the padding mode to a pixel coordinate.
    fn pad(&self, v: T) -> T {
        match self.padding {
            Padding::Zeros => v,
            Padding::Border => self.clip(v),
            Padding::Reflection => self.clip(self.reflect(v)),
        }
    }

    /// The pixel an integer-valued coordinate names, if it lies inside the axis.
    fn pixel(&self, i: i64) -> Option<usize> {
        usize::try_from(i).ok().filter(|&i| i < self.size)
    }
}

/// The four bicubic weights for a fractional offset `t` in `[0, 1)`.
fn cubic_weights<T: Real>(t: T) -> [T; 4] {
    let a = T::of(-0.75);
    let (one, two, three) = (T::of(1.0), T::of(2.0), T::of(3.0));
    let (five, eight, four) = (T::of(5.0), T::of(8.0), T::of(4.0));
    let far = |x: T| ((a * x - five * a) * x + eight * a) * x - four * a;
    let near = |x: T| ((a + two) * x - (a + three)) * x * x + one;
    [far(t + one), near(t), near(one - t), far(two - t)]
}

/// One sampling call's geometry: input planes `[N, C, H, W]`, grid points `[N, P]`.
struct Sampler<T> {
    batch: usize,
    channels: usize,
    points: usize,
    rows: Axis<T>,
    cols: Axis<T>,
    mode: Interpolation,
}

impl<T: Real> Sampler<T> {
    /// Samples every (batch, channel, point) into `out` (NCHW order of the output).
    fn run(&self, x: &Elems<'_>, grid: &Elems<'_>, out: &mut ElemsMut<'_>) {
        let plane = self.rows.size * self.cols.size;
        for n in 0..self.batch {
            for p in 0..self.points {
                let g = (n * self.points + p) * 2;
                let (gx, gy) = (T::load(grid, g), T::load(grid, g + 1));
                for c in 0..self.channels {
                    let base = (n * self.channels + c) * plane;
                    let at = |row: Option<usize>, col: Option<usize>| match (row, col) {
                        (Some(r), Some(k)) => T::load(x, base + r * self.cols.size + k),
                        _ => T::of(0.0),
                    };
                    let v = match self.mode {
                        Interpolation::Bilinear => self.bilinear(gx, gy, at),
                        Interpolation::Nearest => self.nearest(gx, gy, at),
                        Interpolation::Bicubic => self.bicubic(gx, gy, at),
                    };
                    out.set_f64((n * self.channels + c) * self.points + p, v.to_f64());
                }
            }
        }
    }

    fn bilinear(&self, gx: T, gy: T, at: impl Fn(Option<usize>, Option<usize>) -> T) -> T {
        let (x, y) = (self.cols.pad(self.cols.unnormalize(gx)), self.rows.pad(self.rows.unnormalize(gy)));
        let (west, north) = (x.floor(), y.floor());
        let (w, n) = (x - west, y - north);
        let (e, s) = (T::of(1.0) - w, T::of(1.0) - n);
        let (col_w, row_n) = (west.index(), north.index());
        let (cw, ce) = (self.cols.pixel(col_w), self.cols.pixel(col_w.saturating_add(1)));
        let (rn, rs) = (self.rows.pixel(row_n), self.rows.pixel(row_n.saturating_add(1)));
        at(rn, cw) * (s * e) + at(rn, ce) * (s * w) + at(rs, cw) * (n * e) + at(rs, ce) * (n * w)
    }

    fn nearest(&self, gx: T, gy: T, at: impl Fn(Option<usize>, Option<usize>) -> T) -> T {
        let (x, y) = (self.cols.pad(self.cols.unnormalize(gx)), self.rows.pad(self.rows.unnormalize(gy)));
        at(self.rows.pixel(y.rint().index()), self.cols.pixel(x.rint().index()))
    }

    fn bicubic(&self, gx: T, gy: T, at: impl Fn(Option<usize>, Option<usize>) -> T) -> T {
        // Unpadded coordinates: each of the 4x4 taps is padded on its own.
        let (x, y) = (self.cols.unnormalize(gx), self.rows.unnormalize(gy));
        let (x0, y0) = (x.floor(), y.floor());
        let (wx, wy) = (cubic_weights(x - x0), cubic_weights(y - y0));
        let tap = |axis: &Axis<T>, start: T, k: usize| axis.pixel(axis.pad(start + T::of(k as f64 - 1.0)).index());
        let row = |i: usize| {
            let r = tap(&self.rows, y0, i);
            let v = |k: usize| at(r, tap(&self.cols, x0, k));
            wx[0] * v(0) + wx[1] * v(1) + wx[2] * v(2) + wx[3] * v(3)
        };
        wy[0] * row(0) + wy[1] * row(1) + wy[2] * row(2) + wy[3] * row(3)
    }
}

/// `grid_sampler_2d.out(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
/// bool align_corners, *, Tensor(a!) out)`: args = [input, grid, interpolation_mode,
/// padding_mode, align_corners, out, out]. Modes: 0 bilinear, 1 nearest, 2 bicubic; padding:
/// 0 zeros, 1 border, 2 reflection.
pub fn grid_sampler_2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "grid_sampler_2d";
    let input = args.tensor(0)?;
    let grid = args.tensor(1)?;
    let mode = match args.int(2)? {
        0 => Interpolation::Bilinear,
        1 => Interpolation::Nearest,
        2 => Interpolation::Bicubic,
        m => return Err(kerr!("{OP}: interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got {m}")),
    };
    let padding = match args.int(3)? {
        0 => Padding::Zeros,
        1 => Padding::Border,
        2 => Padding::Reflection,
        m => return Err(kerr!("{OP}: padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got {m}")),
    };
    let align_corners = args.bool(4)?;
    let &[n, c, h, w] = input.sizes() else {
        return Err(kerr!("{OP}: input must be 4-D [N, C, H, W], got {:?}", input.sizes()));
    };
    let &[gn, oh, ow, 2] = grid.sizes() else {
        return Err(kerr!("{OP}: grid must be [N, H_out, W_out, 2], got {:?}", grid.sizes()));
    };
    if gn != n {
        return Err(kerr!("{OP}: grid batch {gn} differs from input batch {n}"));
    }
    if h == 0 || w == 0 {
        return Err(kerr!("{OP}: input {:?} has an empty spatial dimension", input.sizes()));
    }
    if !input.dtype.is_floating() {
        return Err(kerr!("{OP}: input must be a floating tensor, got {}", input.dtype));
    }
    if grid.dtype != input.dtype {
        return Err(kerr!("{OP}: grid dtype {} differs from input dtype {}", grid.dtype, input.dtype));
    }
    require_contiguous(&input, "grid_sampler_2d input")?;
    require_contiguous(&grid, "grid_sampler_2d grid")?;
    let mut out = args.out(5)?;
    if out.dtype != input.dtype {
        return Err(kerr!("{OP}: out dtype {} differs from input dtype {}", out.dtype, input.dtype));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{OP}: out must be contiguous"));
    }
    out.resize(&[n, c, oh, ow])?;
    let (x, g) = (Elems::of(&input)?, Elems::of(&grid)?);
    let mut o = ElemsMut::of(&mut out)?;
    let points = oh * ow;
    if input.dtype == ScalarType::Double {
        let rows = Axis::new(h, align_corners, padding);
        let cols = Axis::new(w, align_corners, padding);
        Sampler::<f64> { batch: n, channels: c, points, rows, cols, mode }.run(&x, &g, &mut o);
    } else {
        let rows = Axis::new(h, align_corners, padding);
        let cols = Axis::new(w, align_corners, padding);
        Sampler::<f32> { batch: n, channels: c, points, rows, cols, mode }.run(&x, &g, &mut o);
    }
    Ok(())
}

/// The normalized coordinate of pixel `i` of `size` (for tests and callers building grids).
#[cfg(test)]
fn normalized(i: f64, size: usize, align_corners: bool) -> f64 {
    if align_corners {
        2.0 * i / (size as f64 - 1.0) - 1.0
    } else {
        (2.0 * i + 1.0) / size as f64 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    /// Samples a [1, 1, H, W] f32 image at `points` (x, y); returns the values.
    fn sample(image: &[f32], hw: [usize; 2], points: &[(f32, f32)], mode: i64, padding: i64, align: bool) -> Vec<f32> {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, hw[0], hw[1]], image);
        let flat: Vec<f32> = points.iter().flat_map(|&(a, b)| [a, b]).collect();
        let g = h.f32(&[1, 1, points.len(), 2], &flat);
        let (m, p, a) = (h.int(mode), h.int(padding), h.bool(align));
        let out = h.out(ScalarType::Float, &[1, 1, 1, points.len()]);
        h.call(grid_sampler_2d_out, &[x, g, m, p, a, out, out]).unwrap();
        h.read::<f32>(out)
    }

    const IMG: [f32; 6] = [1., 2., 3., 4., 5., 6.]; // 2 rows x 3 columns

    #[test]
    fn pixel_centres_reproduce_the_input() {
        for align in [false, true] {
            let pts: Vec<(f32, f32)> = (0..6)
                .map(|i| (normalized((i % 3) as f64, 3, align) as f32, normalized((i / 3) as f64, 2, align) as f32))
                .collect();
            for mode in 0..3 {
                let got = sample(&IMG, [2, 3], &pts, mode, 0, align);
                for (g, want) in got.iter().zip(IMG) {
                    assert!((g - want).abs() < 1e-5, "mode {mode} align {align}: {got:?}");
                }
            }
        }
    }

    #[test]
    fn bilinear_midpoints_and_zero_padding() {
        // align_corners: x = 0 is the middle column, y = 0 halfway between the rows.
        let got = sample(&IMG, [2, 3], &[(0.0, 0.0), (-0.5, -1.0)], 0, 0, true);
        assert_eq!(got, vec![3.5, 1.5]);
        // Without align_corners, x = -1 is the left edge of column 0: half of it, half zero.
        let got = sample(&IMG, [2, 3], &[(-1.0, -0.5)], 0, 0, false);
        assert_eq!(got, vec![0.5]);
        // Border clamps the same point to column 0.
        let got = sample(&IMG, [2, 3], &[(-1.0, -0.5)], 0, 1, false);
        assert_eq!(got, vec![1.0]);
        // Far outside: zeros gives 0, border the corner, reflection folds back inside.
        assert_eq!(sample(&IMG, [2, 3], &[(5.0, 5.0)], 0, 0, true), vec![0.0]);
        assert_eq!(sample(&IMG, [2, 3], &[(5.0, 5.0)], 0, 1, true), vec![6.0]);
        // align_corners reflection: x = 1.5 -> column 2.5 -> mirrored at 2 to 1.5; y = 1 -> row 1.
        assert_eq!(sample(&IMG, [2, 3], &[(1.5, 1.0)], 0, 2, true), vec![5.5]);
    }

    #[test]
    fn nearest_rounds_half_to_even() {
        // 1 x 5 row, align_corners (scale 2): x = 0.25, -0.25, 0.75, -0.75 land exactly on
        // columns 2.5, 1.5, 3.5, 0.5, which round to the even 2, 2, 4, 0.
        let row = [10., 20., 30., 40., 50.];
        let got = sample(&row, [1, 5], &[(0.25, 0.0), (-0.25, 0.0), (0.75, 0.0), (-0.75, 0.0)], 1, 0, true);
        assert_eq!(got, vec![30., 30., 50., 10.]);
        let row = [10., 20., 30., 40.];
        // Reflection without align_corners: x = 1.25 is column 4.0, mirrored at 3.5 to 3.0.
        assert_eq!(sample(&row, [1, 4], &[(1.25, 0.0)], 1, 2, false), vec![40.]);
        // Zeros padding drops a point rounded outside; NaN coordinates read nothing.
        assert_eq!(sample(&row, [1, 4], &[(1.3, 0.0), (f32::NAN, 0.0)], 1, 0, false), vec![0., 0.]);
        // Border and reflection clip NaN to pixel 0.
        assert_eq!(sample(&row, [1, 4], &[(f32::NAN, 0.0)], 1, 1, false), vec![10.]);
        assert_eq!(sample(&row, [1, 4], &[(f32::NAN, 0.0)], 1, 2, true), vec![10.]);
    }

    #[test]
    fn bicubic_weights_on_a_ramp() {
        // At column 3.25 the A = -0.75 weights of columns 2..5 are (-0.10546875, 0.87890625,
        // 0.26171875, -0.03515625): on a ramp 3 + 0.296875 (this A does not keep lines exact).
        let ramp: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let x = normalized(3.25, 8, true) as f32;
        let got = sample(&ramp, [1, 8], &[(x, 0.0)], 2, 1, true);
        assert!((got[0] - 3.296875).abs() < 1e-5, "{got:?}");
        // Border padding repeats the edge pixel for taps left of column 0: at column 0.5 the
        // taps read [0, 0, 1, 2] with weights (-0.09375, 0.59375, 0.59375, -0.09375).
        let x = normalized(0.5, 8, true) as f32;
        let got = sample(&ramp, [1, 8], &[(x, 0.0)], 2, 1, true);
        assert!((got[0] - 0.40625).abs() < 1e-5, "{got:?}");
        // At column 6.5 the last tap (column 8) is outside: zeros read 0 there, border column 7.
        let x = normalized(6.5, 8, true) as f32;
        let zeros = sample(&ramp, [1, 8], &[(x, 0.0)], 2, 0, true);
        let border = sample(&ramp, [1, 8], &[(x, 0.0)], 2, 1, true);
        assert!((zeros[0] - (6.5 + 0.09375 * 8.0)).abs() < 1e-5, "{zeros:?}");
        assert!((border[0] - (6.5 + 0.09375)).abs() < 1e-5, "{border:?}");
    }

    #[test]
    fn double_and_half_and_batches() {
        let mut h = OpHarness::new();
        // Two batches of 1x1x2 images, each sampled at its own grid point (align_corners).
        let x = h.tensor(ScalarType::Double, &[2, 1, 1, 2], &[0.0f64, 1.0, 10.0, 20.0]);
        let g = h.tensor(ScalarType::Double, &[2, 1, 1, 2], &[0.0f64, 0.0, 0.5, 0.0]);
        let (m, p, a) = (h.int(0), h.int(0), h.bool(true));
        let out = h.out(ScalarType::Double, &[2, 1, 1, 1]);
        h.call(grid_sampler_2d_out, &[x, g, m, p, a, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), vec![0.5, 17.5]);
        let hf = |v: f32| half::f16::from_f32(v);
        let x = h.tensor(ScalarType::Half, &[1, 1, 1, 2], &[hf(0.0), hf(1.0)]);
        let g = h.tensor(ScalarType::Half, &[1, 1, 1, 2], &[hf(0.5), hf(0.0)]);
        let out = h.out(ScalarType::Half, &[1, 1, 1, 1]);
        h.call(grid_sampler_2d_out, &[x, g, m, p, a, out, out]).unwrap();
        assert_eq!(h.read::<half::f16>(out), vec![hf(0.75)]);
        // Empty batch and channels give empty outputs.
        let x = h.f32(&[0, 1, 2, 2], &[]);
        let g = h.f32(&[0, 3, 3, 2], &[]);
        let out = h.out(ScalarType::Float, &[0, 1, 3, 3]);
        h.call(grid_sampler_2d_out, &[x, g, m, p, a, out, out]).unwrap();
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2, 2], &[0.; 4]);
        let g = h.f32(&[1, 1, 1, 2], &[0.; 2]);
        let (zero, a) = (h.int(0), h.bool(false));
        let out = h.out(ScalarType::Float, &[1, 1, 1, 1]);
        let call = |h: &mut OpHarness, x: u32, g: u32, m: u32, p: u32, out: u32| {
            h.call(grid_sampler_2d_out, &[x, g, m, p, a, out, out]).unwrap_err().message
        };
        let three = h.int(3);
        assert!(call(&mut h, x, g, three, zero, out).contains("interpolation_mode"));
        assert!(call(&mut h, x, g, zero, three, out).contains("padding_mode"));
        let g3 = h.f32(&[1, 1, 1, 3], &[0.; 3]);
        assert!(call(&mut h, x, g3, zero, zero, out).contains("grid must be"));
        let g2 = h.f32(&[2, 1, 1, 2], &[0.; 4]);
        assert!(call(&mut h, x, g2, zero, zero, out).contains("batch"));
        let flat = h.f32(&[1, 4], &[0.; 4]);
        assert!(call(&mut h, flat, g, zero, zero, out).contains("4-D"));
        let empty = h.f32(&[1, 1, 0, 2], &[]);
        assert!(call(&mut h, empty, g, zero, zero, out).contains("empty"));
        let gd = h.tensor(ScalarType::Double, &[1, 1, 1, 2], &[0f64; 2]);
        assert!(call(&mut h, x, gd, zero, zero, out).contains("grid dtype"));
        let xi = h.i64(&[1, 1, 2, 2], &[0; 4]);
        let gi = h.i64(&[1, 1, 1, 2], &[0; 2]);
        assert!(call(&mut h, xi, gi, zero, zero, out).contains("floating"));
        let od = h.out(ScalarType::Double, &[1, 1, 1, 1]);
        assert!(call(&mut h, x, g, zero, zero, od).contains("out dtype"));
        let wrong = h.out(ScalarType::Float, &[1, 1, 2, 1]);
        assert!(call(&mut h, x, g, zero, zero, wrong).contains("static shape"));
    }
}
