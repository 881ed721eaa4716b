//! rbuild's fused int8 operators: the integer twins of `dequantize → float op → quantize`
//! patterns that `tool/export/src/passes/fuse_int8.rs` rewrites.
//!
//! Conventions (TFLite / CMSIS-NN, so a Cortex-M SIMD twin can be bit-exact):
//! - activations int8, per-tensor affine: `real = scale · (q − zero_point)`;
//! - weights int8, per output channel, symmetric (zero point 0); bias int32 in units of
//!   `input_scale · weight_scale[c]`;
//! - requantization of an int32 accumulator by a fixed-point multiplier `m` (Q31) and a shift
//!   `s` (real multiplier `m · 2^(s − 31)`): CMSIS-NN's single-rounding `arm_nn_requantize`
//!   (64-bit product, one rounding shift, midpoints toward +∞), see [`requantize`];
//! - fused activations (relu, relu6, hardtanh) are the clamp `[activation_min, activation_max]`
//!   of the quantized output;
//! - layouts are contiguous NCHW, as in the float program they replace.
//!
//! All arithmetic is integer; only [`quantize_multiplier`] (run at export time) uses floats.

use alloc::vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::require_contiguous;

rbuild_runtime::kernel_table! {
    "rbuild::qconv2d.out" => qconv2d_out,
    "rbuild::qlinear.out" => qlinear_out,
    "rbuild::qadd.out" => qadd_out,
    "rbuild::qmul.out" => qmul_out,
    "rbuild::qmean_hw.out" => qmean_hw_out,
    "rbuild::qlookup.out" => qlookup_out,
    "rbuild::qmax_pool2d.out" => qmax_pool2d_out,
    "rbuild::qavg_pool2d.out" => qavg_pool2d_out,
}

// ---------------------------------------------------------------------------------------------
// Requantization arithmetic
// ---------------------------------------------------------------------------------------------

/// `x · m · 2^(shift − 31)` rounded once, midpoints toward +∞: CMSIS-NN's `arm_nn_requantize`
/// with `CMSIS_NN_USE_SINGLE_ROUNDING` (TFLite's `TFLITE_SINGLE_ROUNDING`). A 64-bit product, an
/// arithmetic shift by `30 − shift`, then `(r + 1) >> 1`; on Cortex-M one SMLAL-class multiply and
/// shifts. The result saturates to i32 (it is clamped to int8 right after anyway).
#[inline]
pub fn requantize(x: i32, multiplier: i32, shift: i32) -> i32 {
    let total_shift = 31 - shift;
    let r = ((x as i64) * (multiplier as i64)) >> (total_shift - 1);
    ((r + 1) >> 1).clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// TFLite's `QuantizeMultiplier`: a real multiplier as (Q31 multiplier in [2^30, 2^31), shift)
/// with `real ≈ multiplier · 2^(shift − 31)`. Zero (or below 2^−31) gives (0, 0); the shift is
/// capped at 30.
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    if !(real > 0.0) || !real.is_finite() {
        return (0, 0);
    }
    // frexp: real = frac · 2^exp with frac in [0.5, 1).
    let mut exp = 0i32;
    let mut frac = real;
    while frac >= 1.0 {
        frac *= 0.5;
        exp += 1;
    }
    while frac < 0.5 {
        frac *= 2.0;
        exp -= 1;
    }
    // f64::round: halves away from zero, as TFLite's std::round.
    let mut q = libm::round(frac * (1i64 << 31) as f64) as i64;
    if q == 1i64 << 31 {
        q /= 2;
        exp += 1;
    }
    if exp < -31 {
        return (0, 0);
    }
    if exp > 30 {
        return (i32::MAX, 30);
    }
    (q as i32, exp)
}

/// `clamp(requantize(acc) + zero_point, lo, hi)` as int8.
#[inline]
pub(crate) fn to_int8(acc: i32, multiplier: i32, shift: i32, zero_point: i32, lo: i32, hi: i32) -> i8 {
    (requantize(acc, multiplier, shift).saturating_add(zero_point)).clamp(lo, hi) as i8
}

// ---------------------------------------------------------------------------------------------
// Argument checks
// ---------------------------------------------------------------------------------------------

pub(crate) fn int8_input<'a>(args: &KernelArgs<'a>, i: usize, what: &str) -> KernelResult<(TensorRef<'a>, &'a [i8])> {
    let t = args.tensor(i)?;
    if t.dtype != ScalarType::Char {
        return Err(kerr!("{what}: must be int8, got {}", t.dtype));
    }
    require_contiguous(&t, what)?;
    Ok((t, t.data::<i8>()?))
}

pub(crate) fn i32_per_channel<'a>(args: &KernelArgs<'a>, i: usize, n: usize, what: &str) -> KernelResult<&'a [i32]> {
    let t = args.tensor(i)?;
    if t.dtype != ScalarType::Int || t.numel() != n {
        return Err(kerr!("{what}: must be int32 with {n} elements, got {} {:?}", t.dtype, t.sizes()));
    }
    t.data::<i32>()
}

/// A zero point in int8 range.
pub(crate) fn zero_point(args: &KernelArgs<'_>, i: usize, what: &str) -> KernelResult<i32> {
    let z = args.int(i)?;
    if !(-128..=127).contains(&z) {
        return Err(kerr!("{what}: zero point {z} is outside int8"));
    }
    Ok(z as i32)
}

/// The output clamp `[lo, hi]` within int8.
pub(crate) fn activation_range(args: &KernelArgs<'_>, i: usize, what: &str) -> KernelResult<(i32, i32)> {
    let (lo, hi) = (args.int(i)?, args.int(i + 1)?);
    if lo > hi || lo < -128 || hi > 127 {
        return Err(kerr!("{what}: activation range [{lo}, {hi}] is not within int8"));
    }
    Ok((lo as i32, hi as i32))
}

/// A (multiplier, shift) pair of int arguments.
fn multiplier(args: &KernelArgs<'_>, i: usize, what: &str) -> KernelResult<(i32, i32)> {
    let (m, s) = (args.int(i)?, args.int(i + 1)?);
    if !(0..=i32::MAX as i64).contains(&m) || !(-31..=30).contains(&s) {
        return Err(kerr!("{what}: requantization multiplier {m} / shift {s} out of range"));
    }
    Ok((m as i32, s as i32))
}

/// The per-output-channel requantization of `qconv2d` / `qlinear` (arguments 2..=8): int32
/// bias, multiplier and shift per channel (shifts in [-31, 30]), the input and output zero
/// points and the int8 output clamp.
pub(crate) struct ChannelRequant<'a> {
    pub bias: &'a [i32],
    pub mult: &'a [i32],
    pub shift: &'a [i32],
    pub zin: i32,
    pub zout: i32,
    pub lo: i32,
    pub hi: i32,
}

pub(crate) fn channel_requant<'a>(args: &KernelArgs<'a>, channels: usize, what: &str) -> KernelResult<ChannelRequant<'a>> {
    let bias = i32_per_channel(args, 2, channels, what)?;
    let mult = i32_per_channel(args, 3, channels, what)?;
    let shift = i32_per_channel(args, 4, channels, what)?;
    let (zin, zout) = (zero_point(args, 5, what)?, zero_point(args, 6, what)?);
    let (lo, hi) = activation_range(args, 7, what)?;
    if let Some(&s) = shift.iter().find(|s| !(-31..=30).contains(*s)) {
        return Err(kerr!("{what}: shift {s} out of range [-31, 30]"));
    }
    Ok(ChannelRequant { bias, mult, shift, zin, zout, lo, hi })
}

pub(crate) fn int8_out<'a>(args: &KernelArgs<'a>, i: usize, sizes: &[usize], what: &str) -> KernelResult<TensorMut<'a>> {
    let mut out = args.out(i)?;
    if out.dtype != ScalarType::Char {
        return Err(kerr!("{what}: output must be int8, got {}", out.dtype));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order));
    }
    out.resize(sizes)?;
    Ok(out)
}

fn pair(args: &KernelArgs<'_>, i: usize, what: &str, name: &str, min: i64) -> KernelResult<[usize; 2]> {
    let v = args.int_list(i)?;
    match v.as_slice() {
        &[a, b] if a >= min && b >= min => Ok([a as usize, b as usize]),
        _ => Err(kerr!("{what}: {name} {v:?} must be two values >= {min}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Convolution and linear
// ---------------------------------------------------------------------------------------------

/// `qconv2d.out(input, weight, bias, multiplier, shift, input_zero_point, output_zero_point,
/// activation_min, activation_max, stride, padding, dilation, groups, *, out)`: int8 NCHW
/// input, int8 `[C_out, C_in/groups, kh, kw]` weight, int32 bias / multiplier / shift per
/// output channel. Padding contributes real zero (the input zero point).
pub fn qconv2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qconv2d";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let (w, wd) = int8_input(args, 1, WHAT)?;
    let (&[n, c_in, h, wi], &[c_out, cig, kh, kw]) = (x.sizes(), w.sizes()) else {
        return Err(kerr!("{WHAT}: input {:?} and weight {:?} must be 4-D", x.sizes(), w.sizes()));
    };
    let ChannelRequant { bias, mult, shift, zin, zout, lo, hi } = channel_requant(args, c_out, WHAT)?;
    let stride = pair(args, 9, WHAT, "stride", 1)?;
    let padding = pair(args, 10, WHAT, "padding", 0)?;
    let dilation = pair(args, 11, WHAT, "dilation", 1)?;
    let groups = args.int(12)?;
    if groups <= 0 || c_in != cig * groups as usize || c_out % groups as usize != 0 {
        return Err(kerr!("{WHAT}: input {:?} does not match weight {:?} with groups {groups}", x.sizes(), w.sizes()));
    }
    let cog = c_out / groups as usize;
    let out_dim = |i: usize, k: usize| -> KernelResult<usize> {
        let eff = dilation[i] * (k - 1) + 1;
        let span = [h, wi][i] + 2 * padding[i];
        if span < eff {
            return Err(kerr!("{WHAT}: input {:?} too small for kernel {kh}x{kw}", x.sizes()));
        }
        Ok((span - eff) / stride[i] + 1)
    };
    let (oh, ow) = (out_dim(0, kh)?, out_dim(1, kw)?);
    let mut out = int8_out(args, 13, &[n, c_out, oh, ow], WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    // Output positions along axis `i` whose input index for tap `t` is inside the image:
    // 0 <= o·stride + t·dilation − padding < size.
    let valid = |i: usize, t: usize, size: usize, out_size: usize| -> (usize, usize) {
        let offset = (t * dilation[i]) as isize - padding[i] as isize;
        let s = stride[i] as isize;
        let first = if offset >= 0 { 0 } else { ((-offset + s - 1) / s) as usize };
        let end = ((size as isize - offset + s - 1) / s).max(0) as usize;
        (first.min(out_size), end.min(out_size).max(first.min(out_size)))
    };
    // One output plane of int32 accumulators: each weight tap adds its shifted input plane,
    // an inner loop over contiguous columns (integer sums: the order does not change them).
    let plane = h * wi;
    let mut acc = vec![0i32; oh * ow];
    for b in 0..n {
        for oc in 0..c_out {
            let ic0 = (oc / cog) * cig;
            acc.fill(bias[oc]);
            for ic in 0..cig {
                let xplane = &xd[(b * c_in + ic0 + ic) * plane..][..plane];
                for ky in 0..kh {
                    let (oy0, oy1) = valid(0, ky, h, oh);
                    for kx in 0..kw {
                        let wv = wd[((oc * cig + ic) * kh + ky) * kw + kx] as i32;
                        let (ox0, ox1) = valid(1, kx, wi, ow);
                        if wv == 0 || ox0 >= ox1 {
                            continue;
                        }
                        for oy in oy0..oy1 {
                            let iy = oy * stride[0] + ky * dilation[0] - padding[0];
                            let xrow = &xplane[iy * wi..][..wi];
                            let arow = &mut acc[oy * ow + ox0..oy * ow + ox1];
                            let ix0 = ox0 * stride[1] + kx * dilation[1] - padding[1];
                            if stride[1] == 1 {
                                for (a, &x) in arow.iter_mut().zip(&xrow[ix0..ix0 + (ox1 - ox0)]) {
                                    *a = a.wrapping_add(wv * (x as i32 - zin));
                                }
                            } else {
                                for (j, a) in arow.iter_mut().enumerate() {
                                    *a = a.wrapping_add(wv * (xrow[ix0 + j * stride[1]] as i32 - zin));
                                }
                            }
                        }
                    }
                }
            }
            let obase = (b * c_out + oc) * oh * ow;
            for (o, &a) in od[obase..obase + oh * ow].iter_mut().zip(&acc) {
                *o = to_int8(a, mult[oc], shift[oc], zout, lo, hi);
            }
        }
    }
    Ok(())
}

/// `qlinear.out(input, weight, bias, multiplier, shift, input_zero_point, output_zero_point,
/// activation_min, activation_max, *, out)`: int8 `[.., K]` input, int8 `[N, K]` weight.
pub fn qlinear_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qlinear";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let (w, wd) = int8_input(args, 1, WHAT)?;
    let (&[n_out, k], Some(&xk)) = (w.sizes(), x.sizes().last()) else {
        return Err(kerr!("{WHAT}: weight {:?} must be [N, K] and the input {:?} at least 1-D", w.sizes(), x.sizes()));
    };
    if xk != k {
        return Err(kerr!("{WHAT}: input {:?} does not match weight {:?}", x.sizes(), w.sizes()));
    }
    let ChannelRequant { bias, mult, shift, zin, zout, lo, hi } = channel_requant(args, n_out, WHAT)?;
    let mut sizes = x.sizes().to_vec();
    *sizes.last_mut().expect("checked above") = n_out;
    let mut out = int8_out(args, 9, &sizes, WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    let rows = if k == 0 { x.numel() } else { x.numel() / k };
    for r in 0..rows {
        let xr = &xd[r * k..(r + 1) * k];
        for j in 0..n_out {
            let wr = &wd[j * k..(j + 1) * k];
            let acc = xr.iter().zip(wr).fold(bias[j], |a, (&xv, &wv)| a.wrapping_add((xv as i32 - zin) * wv as i32));
            od[r * n_out + j] = to_int8(acc, mult[j], shift[j], zout, lo, hi);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

fn same_shape<'a>(args: &KernelArgs<'a>, what: &str) -> KernelResult<(TensorRef<'a>, &'a [i8], &'a [i8])> {
    let (a, ad) = int8_input(args, 0, what)?;
    let (b, bd) = int8_input(args, 1, what)?;
    if a.sizes() != b.sizes() {
        return Err(kerr!("{what}: operands {:?} and {:?} must have the same shape", a.sizes(), b.sizes()));
    }
    Ok((a, ad, bd))
}

/// `qadd.out(self, other, self_zero_point, self_multiplier, self_shift, other_zero_point,
/// other_multiplier, other_shift, left_shift, output_zero_point, output_multiplier,
/// output_shift, activation_min, activation_max, *, out)`: TFLite's int8 add — both operands
/// shifted left by `left_shift`, rescaled to a common scale, summed, requantized.
pub fn qadd_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qadd";
    let (a, ad, bd) = same_shape(args, WHAT)?;
    let za = zero_point(args, 2, WHAT)?;
    let (ma, sa) = multiplier(args, 3, WHAT)?;
    let zb = zero_point(args, 5, WHAT)?;
    let (mb, sb) = multiplier(args, 6, WHAT)?;
    let left = args.int(8)?;
    if !(0..=24).contains(&left) {
        return Err(kerr!("{WHAT}: left_shift {left} must be in [0, 24]"));
    }
    let zo = zero_point(args, 9, WHAT)?;
    let (mo, so) = multiplier(args, 10, WHAT)?;
    let (lo, hi) = activation_range(args, 12, WHAT)?;
    let mut out = int8_out(args, 14, a.sizes(), WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    for ((o, &x), &y) in od.iter_mut().zip(ad).zip(bd) {
        let xs = requantize((x as i32 - za) << left, ma, sa);
        let ys = requantize((y as i32 - zb) << left, mb, sb);
        *o = to_int8(xs.wrapping_add(ys), mo, so, zo, lo, hi);
    }
    Ok(())
}

/// `qmul.out(self, other, self_zero_point, other_zero_point, output_zero_point,
/// output_multiplier, output_shift, activation_min, activation_max, *, out)`: `other` has
/// `self`'s shape, or is `[N, C, 1, 1]` against an `[N, C, H, W]` `self` (one factor per
/// channel: squeeze-and-excitation).
pub fn qmul_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qmul";
    let (a, ad) = int8_input(args, 0, WHAT)?;
    let (b, bd) = int8_input(args, 1, WHAT)?;
    let inner = match (a.sizes(), b.sizes()) {
        (x, y) if x == y => 1,
        (&[n, c, h, w], &[bn, bc, 1, 1]) if n == bn && c == bc => h * w,
        _ => return Err(kerr!("{WHAT}: operands {:?} and {:?} must match, or the second be [N, C, 1, 1]", a.sizes(), b.sizes())),
    };
    let (za, zb, zo) = (zero_point(args, 2, WHAT)?, zero_point(args, 3, WHAT)?, zero_point(args, 4, WHAT)?);
    let (mo, so) = multiplier(args, 5, WHAT)?;
    let (lo, hi) = activation_range(args, 7, WHAT)?;
    let mut out = int8_out(args, 9, a.sizes(), WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    for (i, (o, &x)) in od.iter_mut().zip(ad).enumerate() {
        *o = to_int8((x as i32 - za) * (bd[i / inner.max(1)] as i32 - zb), mo, so, zo, lo, hi);
    }
    Ok(())
}

/// `qlookup.out(input, table, *, out)`: `out = table[input + 128]` with a 256-entry int8
/// table made at export time (hardswish, sigmoid, … of one quantized input: exact to the
/// rounding of the table).
pub fn qlookup_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qlookup";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let (t, td) = int8_input(args, 1, WHAT)?;
    if t.numel() != 256 {
        return Err(kerr!("{WHAT}: table must have 256 entries, has {}", t.numel()));
    }
    let mut out = int8_out(args, 2, x.sizes(), WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    for (o, &v) in od.iter_mut().zip(xd) {
        *o = td[(v as i32 + 128) as usize];
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reductions and pooling
// ---------------------------------------------------------------------------------------------

fn nchw(t: &TensorRef<'_>, what: &str) -> KernelResult<[usize; 4]> {
    match *t.sizes() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(kerr!("{what}: input {:?} must be [N, C, H, W]", t.sizes())),
    }
}

/// `qmean_hw.out(input, input_zero_point, output_zero_point, multiplier, shift,
/// activation_min, activation_max, *, out)`: mean over H and W (keepdim) of an NCHW tensor;
/// the multiplier carries `input_scale / (output_scale · H · W)`.
pub fn qmean_hw_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qmean_hw";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let [n, c, h, w] = nchw(&x, WHAT)?;
    let (zin, zout) = (zero_point(args, 1, WHAT)?, zero_point(args, 2, WHAT)?);
    let (m, s) = multiplier(args, 3, WHAT)?;
    let (lo, hi) = activation_range(args, 5, WHAT)?;
    if h * w > (1 << 23) {
        return Err(kerr!("{WHAT}: {h}x{w} elements per channel would overflow the int32 sum"));
    }
    let mut out = int8_out(args, 7, &[n, c, 1, 1], WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    for (o, plane) in od.iter_mut().zip(xd.chunks_exact((h * w).max(1))) {
        let sum: i32 = plane.iter().map(|&v| v as i32 - zin).sum();
        *o = to_int8(sum, m, s, zout, lo, hi);
    }
    Ok(())
}

/// The output size and per-output valid window of a 2-D pool.
struct PoolGeom {
    out: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
}

impl PoolGeom {
    fn parse(args: &KernelArgs<'_>, in_hw: [usize; 2], what: &str) -> KernelResult<PoolGeom> {
        let kernel = pair(args, 1, what, "kernel_size", 1)?;
        let stride = pair(args, 2, what, "stride", 1)?;
        let padding = pair(args, 3, what, "padding", 0)?;
        let mut out = [0; 2];
        for i in 0..2 {
            if 2 * padding[i] > kernel[i] || in_hw[i] + 2 * padding[i] < kernel[i] {
                return Err(kerr!("{what}: input {in_hw:?} with kernel {kernel:?} and padding {padding:?} is invalid"));
            }
            out[i] = (in_hw[i] + 2 * padding[i] - kernel[i]) / stride[i] + 1;
        }
        Ok(PoolGeom { out, kernel, stride, padding })
    }

    /// Input index range of output position `o` along axis `i` (clipped to the input).
    fn window(&self, o: usize, i: usize, size: usize) -> (usize, usize) {
        let start = (o * self.stride[i]) as isize - self.padding[i] as isize;
        let end = start + self.kernel[i] as isize;
        (start.max(0) as usize, (end.min(size as isize)).max(0) as usize)
    }

    /// Writes each output of the `planes` `h × w` planes of `xd` as `reduce` of the input
    /// values inside its window (padding contributes nothing).
    fn reduce_windows(&self, xd: &[i8], planes: usize, [h, w]: [usize; 2], od: &mut [i8], reduce: impl Fn(&mut dyn Iterator<Item = i32>) -> i8) {
        for (p, plane) in xd.chunks_exact((h * w).max(1)).enumerate().take(planes) {
            for oy in 0..self.out[0] {
                let (y0, y1) = self.window(oy, 0, h);
                for ox in 0..self.out[1] {
                    let (x0, x1) = self.window(ox, 1, w);
                    let mut values = (y0..y1).flat_map(|y| &plane[y * w + x0..y * w + x1]).map(|&v| v as i32);
                    od[(p * self.out[0] + oy) * self.out[1] + ox] = reduce(&mut values);
                }
            }
        }
    }
}

/// `qmax_pool2d.out(input, kernel_size, stride, padding, activation_min, activation_max, *,
/// out)`: max over each window (padding never wins, as PyTorch pads with −inf); the output
/// shares the input's quantization.
pub fn qmax_pool2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qmax_pool2d";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let [n, c, h, w] = nchw(&x, WHAT)?;
    let g = PoolGeom::parse(args, [h, w], WHAT)?;
    let (lo, hi) = activation_range(args, 4, WHAT)?;
    let mut out = int8_out(args, 6, &[n, c, g.out[0], g.out[1]], WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    g.reduce_windows(xd, n * c, [h, w], od, |v| v.fold(i8::MIN as i32, i32::max).clamp(lo, hi) as i8);
    Ok(())
}

/// `qavg_pool2d.out(input, kernel_size, stride, padding, input_zero_point, output_zero_point,
/// multiplier, shift, activation_min, activation_max, *, out)`: PyTorch's `avg_pool2d` with
/// `count_include_pad=True` (padding counts as real zero; the multiplier carries
/// `input_scale / (output_scale · kh · kw)`).
pub fn qavg_pool2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "rbuild::qavg_pool2d";
    let (x, xd) = int8_input(args, 0, WHAT)?;
    let [n, c, h, w] = nchw(&x, WHAT)?;
    let g = PoolGeom::parse(args, [h, w], WHAT)?;
    let (zin, zout) = (zero_point(args, 4, WHAT)?, zero_point(args, 5, WHAT)?);
    let (m, s) = multiplier(args, 6, WHAT)?;
    let (lo, hi) = activation_range(args, 8, WHAT)?;
    let mut out = int8_out(args, 10, &[n, c, g.out[0], g.out[1]], WHAT)?;
    let od: &mut [i8] = out.data_mut()?;
    g.reduce_windows(xd, n * c, [h, w], od, |v| to_int8(v.map(|x| x - zin).sum(), m, s, zout, lo, hi));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requantize_matches_the_real_multiplier() {
        for &real in &[0.0003, 0.0123, 0.25, 0.5, 0.75, 0.999_999, 1.0, 1.7, 3.9] {
            let (m, s) = quantize_multiplier(real);
            for &x in &[-100_000, -12345, -7, -1, 0, 1, 3, 999, 65_432, 1_000_000] {
                let want = x as f64 * real;
                let got = requantize(x, m, s) as f64;
                assert!((got - want).abs() <= 0.5 + 1e-6 * want.abs(), "real {real} x {x}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn requantize_rounds_once_midpoints_up() {
        // real multiplier 0.5: 5 · 0.5 = 2.5 → 3, −5 · 0.5 = −2.5 → −2, 7 · 0.5 = 3.5 → 4.
        let (m, s) = quantize_multiplier(0.5);
        assert_eq!([requantize(5, m, s), requantize(-5, m, s), requantize(7, m, s), requantize(-6, m, s)], [3, -2, 4, -3]);
        // A small accumulator with a multiplier near 1/3 is not rounded twice: 10 / 3 → 3.
        let (m, s) = quantize_multiplier(1.0 / 3.0);
        assert_eq!(requantize(10, m, s), 3);
        // Saturation instead of wrapping.
        let (m, s) = quantize_multiplier(1000.0);
        assert_eq!(requantize(i32::MAX, m, s), i32::MAX);
    }

    #[test]
    fn quantize_multiplier_edges() {
        assert_eq!(quantize_multiplier(0.0), (0, 0));
        assert_eq!(quantize_multiplier(-1.0), (0, 0));
        assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
        assert_eq!(quantize_multiplier(1.0), (1 << 30, 1));
        // Rounds up to 2^31: renormalized.
        assert_eq!(quantize_multiplier(1.0 - 1e-12), (1 << 30, 1));
        assert_eq!(quantize_multiplier(1e-12), (0, 0));
    }
}
