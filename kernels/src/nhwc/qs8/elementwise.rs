//! int8 add / multiply (XNNPACK's qs8 vadd fixed-point and qs8 vmul fp32 arithmetic), global
//! average pooling (XNNPACK's qs8 mean) and f32 ↔ qs8 conversion.
//!
//! The loops are plain Rust; on x86-64 with AVX2 the same `#[inline(always)]` bodies are
//! compiled a second time with AVX2 enabled (so the vectorizer uses it), which cannot change
//! the results: every operation is integer or a single IEEE f32 operation.

use super::{round_magic, QParams};
use alloc::format;
use alloc::string::String;
use alloc::vec;

fn check_len(what: &str, a: usize, b: usize) -> Result<(), String> {
    if a != b {
        return Err(format!("{what}: {a} values where {b} are expected"));
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    super::Isa::best().has_avx2()
}

/// Runs `$body` (an `#[inline(always)]` closure call) compiled with AVX-512 F/BW (or AVX2)
/// enabled when available, so the vectorizer uses the wider registers.
macro_rules! with_avx2 {
    ($name:ident, ($($arg:ident : $ty:ty),*), $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            unsafe fn $name($($arg: $ty),*) {
                $body
            }
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
            unsafe fn wide512($($arg: $ty),*) {
                $body
            }
            if super::Isa::best() == super::Isa::Avx512Vnni {
                // SAFETY: AVX-512 F/BW/VL are present (checked at run time with the VNNI
                // choice); the body is safe code.
                unsafe { wide512($($arg),*) };
            } else if has_avx2() {
                // SAFETY: AVX2 is present (checked at run time); the body is safe code.
                unsafe { $name($($arg),*) };
            } else {
                $body
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $body
        }
    }};
}

/// `y[i] = table[x[i] + 128]`: an int8 → int8 function given by its 256 values (XNNPACK's
/// lookup-table ops, and float unary ops between a dequantize and a quantize). 64 values per
/// step with AVX-512 VBMI (`vpermi2b` over each 128-entry half, blended on the index's top
/// bit), else one at a time.
pub fn lookup_table(table: &[i8; 256], x: &[i8], y: &mut [i8]) -> Result<(), String> {
    check_len("table lookup y", y.len(), x.len())?;
    #[cfg(target_arch = "x86_64")]
    if has_avx512_vbmi() {
        // SAFETY: AVX-512 F/BW/VBMI present (checked); lengths equal (checked).
        unsafe { lookup_vbmi(table, x, y) };
        return Ok(());
    }
    lookup_plain(table, x, y);
    Ok(())
}

#[inline]
fn lookup_plain(table: &[i8; 256], x: &[i8], y: &mut [i8]) {
    for (y, &x) in y.iter_mut().zip(x) {
        // A u8 index into 256 entries needs no bounds check: `q + 128` is `q as u8 ^ 0x80`.
        *y = table[(x as u8 ^ 0x80) as usize];
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx512_vbmi() -> bool {
    #[cfg(feature = "std")]
    {
        super::Isa::best() == super::Isa::Avx512Vnni && std::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "avx512bw", target_feature = "avx512vbmi"))
    }
}

/// # Safety
/// AVX-512 F/BW/VBMI must be available; `y.len() == x.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn lookup_vbmi(table: &[i8; 256], x: &[i8], y: &mut [i8]) {
    use core::arch::x86_64::*;
    let t = table.as_ptr();
    let (t0, t1) = (_mm512_loadu_si512(t as *const _), _mm512_loadu_si512(t.add(64) as *const _));
    let (t2, t3) = (_mm512_loadu_si512(t.add(128) as *const _), _mm512_loadu_si512(t.add(192) as *const _));
    let flip = _mm512_set1_epi8(-128);
    let n = x.len();
    let mut i = 0;
    while i < n {
        let m: __mmask64 = if n - i >= 64 { u64::MAX } else { (1u64 << (n - i)) - 1 };
        let idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x.as_ptr().add(i)), flip);
        let lo = _mm512_permutex2var_epi8(t0, idx, t1);
        let hi = _mm512_permutex2var_epi8(t2, idx, t3);
        let v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
        _mm512_mask_storeu_epi8(y.as_mut_ptr().add(i), m, v);
        i += 64;
    }
}

/// A short repeated row tiled to at least 256 values (whole rows, at most `full`), so the inner
/// loop of a repeated-row op is long enough to vectorize; `full` is a multiple of `row.len()`.
fn long_row(row: &[i8], full: usize) -> alloc::borrow::Cow<'_, [i8]> {
    let n = row.len();
    let reps = 256usize.div_ceil(n).min(full / n.max(1)).max(1);
    if reps == 1 {
        return alloc::borrow::Cow::Borrowed(row);
    }
    alloc::borrow::Cow::Owned(row.iter().copied().cycle().take(reps * n).collect())
}

fn check_repeat(what: &str, full: usize, row: usize, y: usize) -> Result<(), String> {
    if row == 0 || !full.is_multiple_of(row) || y != full {
        return Err(format!("{what}: a row of {row} values repeated over {full} into {y}"));
    }
    Ok(())
}

/// An elementwise int8 binary operator (one output from two inputs).
trait Qs8Binary: Copy {
    fn one(&self, a: i8, b: i8) -> i8;
}

/// `row` repeated along `full` into `y`: `y = op(full, row)` when `ROW_B` (the row is the
/// second operand), else `op(row, full)`. Compiled for AVX-512 / AVX2 when present (as
/// `with_avx2!`), so the loop over the (lengthened, [`long_row`]) row vectorizes wide.
fn apply_repeated<P: Qs8Binary, const ROW_B: bool>(p: P, what: &str, full: &[i8], row: &[i8], y: &mut [i8]) -> Result<(), String> {
    check_repeat(what, full.len(), row.len(), y.len())?;
    let row = long_row(row, full.len());
    let row: &[i8] = &row;
    #[inline(always)]
    fn body<P: Qs8Binary, const ROW_B: bool>(p: P, full: &[i8], row: &[i8], y: &mut [i8]) {
        for (yr, fr) in y.chunks_mut(row.len()).zip(full.chunks(row.len())) {
            for ((yv, &f), &r) in yr.iter_mut().zip(fr).zip(row) {
                *yv = if ROW_B { p.one(f, r) } else { p.one(r, f) };
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<P: Qs8Binary, const ROW_B: bool>(p: P, full: &[i8], row: &[i8], y: &mut [i8]) {
            body::<P, ROW_B>(p, full, row, y)
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
        unsafe fn avx512<P: Qs8Binary, const ROW_B: bool>(p: P, full: &[i8], row: &[i8], y: &mut [i8]) {
            body::<P, ROW_B>(p, full, row, y)
        }
        if super::Isa::best() == super::Isa::Avx512Vnni {
            // SAFETY: AVX-512 F/BW/VL are present (checked at run time with the VNNI choice);
            // the body is safe code.
            unsafe { avx512::<P, ROW_B>(p, full, row, y) };
            return Ok(());
        } else if has_avx2() {
            // SAFETY: AVX2 is present (checked at run time); the body is safe code.
            unsafe { avx2::<P, ROW_B>(p, full, row, y) };
            return Ok(());
        }
    }
    body::<P, ROW_B>(p, full, row, y);
    Ok(())
}

/// `y = a + b` requantized (XNNPACK qs8 add: fixed-point multipliers, arithmetic shift).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AddQs8 {
    a_mult: i32,
    b_mult: i32,
    bias: i32,
    shift: u32,
    zp: i32,
    min: i32,
    max: i32,
}

impl AddQs8 {
    /// `xnn_init_qs8_add_minmax_scalar_params`.
    pub fn new(a: QParams, b: QParams, y: QParams, out_min: i8, out_max: i8) -> Result<Self, String> {
        Self::with_b_sign(a, b, y, out_min, out_max, false)
    }

    /// `y = a − b`: XNNPACK runs a qs8 Subtract as this add with `b`'s scale negated (the
    /// multipliers come from the absolute scales, then take the scale's sign).
    pub fn new_subtract(a: QParams, b: QParams, y: QParams, out_min: i8, out_max: i8) -> Result<Self, String> {
        Self::with_b_sign(a, b, y, out_min, out_max, true)
    }

    fn with_b_sign(a: QParams, b: QParams, y: QParams, out_min: i8, out_max: i8, negate_b: bool) -> Result<Self, String> {
        a.check("add input a")?;
        b.check("add input b")?;
        y.check("add output")?;
        if out_min > out_max {
            return Err(format!("add: output bounds [{out_min}, {out_max}] are empty"));
        }
        let sa = a.scale / y.scale;
        let sb = b.scale / y.scale;
        for s in [sa, sb] {
            if !(1.0 / 1024.0..256.0).contains(&s) {
                return Err(format!("add: input/output scale ratio {s} outside XNNPACK's [2^-10, 2^8)"));
            }
        }
        let max_s = sa.max(sb);
        let exp = (max_s.to_bits() >> 23) as i32 - 127;
        let shift = 20 - exp;
        if !(12..=30).contains(&shift) {
            return Err(format!("add: shift {shift} outside [12, 30]"));
        }
        let mult = |s: f32| libm::rintf(f32::from_bits(s.to_bits() + ((shift as u32) << 23))) as i32;
        let (a_mult, b_mult) = (mult(sa), if negate_b { -mult(sb) } else { mult(sb) });
        let bias = (1i32 << (shift - 1))
            .wrapping_sub(a_mult.wrapping_mul(a.zero_point))
            .wrapping_sub(b_mult.wrapping_mul(b.zero_point));
        Ok(AddQs8 {
            a_mult,
            b_mult,
            bias,
            shift: shift as u32,
            zp: y.zero_point,
            min: out_min as i32,
            max: out_max as i32,
        })
    }

    #[inline(always)]
    fn finish(&self, acc: i32) -> i8 {
        ((acc >> self.shift) + self.zp).clamp(self.min, self.max) as i8
    }

    #[inline(always)]
    fn one(&self, a: i8, b: i8) -> i8 {
        self.finish(
            self.bias
                .wrapping_add((a as i32).wrapping_mul(self.a_mult))
                .wrapping_add((b as i32).wrapping_mul(self.b_mult)),
        )
    }

    /// Element-wise over equal lengths.
    pub fn apply(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        check_len("add b", b.len(), a.len())?;
        check_len("add y", y.len(), a.len())?;
        let p = *self;
        with_avx2!(add_avx2, (p: AddQs8, a: &[i8], b: &[i8], y: &mut [i8]), {
            for ((yv, &av), &bv) in y.iter_mut().zip(a).zip(b) {
                *yv = p.one(av, bv);
            }
        });
        Ok(())
    }

    /// `b` broadcast (XNNPACK's vaddc: `b·mb + bias` folded into one constant).
    pub fn apply_scalar_b(&self, a: &[i8], b: i8, y: &mut [i8]) -> Result<(), String> {
        check_len("add y", y.len(), a.len())?;
        let p = *self;
        let c = self.bias.wrapping_add((b as i32).wrapping_mul(self.b_mult));
        let m = self.a_mult;
        with_avx2!(addc_avx2, (p: AddQs8, c: i32, m: i32, a: &[i8], y: &mut [i8]), {
            for (yv, &av) in y.iter_mut().zip(a) {
                *yv = p.finish(c.wrapping_add((av as i32).wrapping_mul(m)));
            }
        });
        Ok(())
    }

    /// `a` broadcast (XNNPACK swaps the operands and their params: same values).
    pub fn apply_scalar_a(&self, a: i8, b: &[i8], y: &mut [i8]) -> Result<(), String> {
        check_len("add y", y.len(), b.len())?;
        let p = *self;
        let c = self.bias.wrapping_add((a as i32).wrapping_mul(self.a_mult));
        let m = self.b_mult;
        with_avx2!(addc_avx2, (p: AddQs8, c: i32, m: i32, b: &[i8], y: &mut [i8]), {
            for (yv, &bv) in y.iter_mut().zip(b) {
                *yv = p.finish(c.wrapping_add((bv as i32).wrapping_mul(m)));
            }
        });
        Ok(())
    }

    /// `b` (one row) repeated along `a` (`a.len()` a multiple of `b_row.len()`): the per-channel
    /// broadcast of a squeeze-and-excitation block, in one call instead of one per pixel.
    pub fn apply_repeated_b(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        apply_repeated::<_, true>(*self, "add", a, b, y)
    }

    /// `a` (one row) repeated along `b` (the mirror of [`Self::apply_repeated_b`]).
    pub fn apply_repeated_a(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        apply_repeated::<_, false>(*self, "add", b, a, y)
    }
}

impl Qs8Binary for AddQs8 {
    #[inline(always)]
    fn one(&self, a: i8, b: i8) -> i8 {
        AddQs8::one(self, a, b)
    }
}

/// `y = a · b` requantized (XNNPACK qs8 vmul, fp32 variant as on x86).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MulQs8 {
    a_zp: i32,
    b_zp: i32,
    scale: f32,
    zp: i32,
    fmin: f32,
    fmax: f32,
}

impl MulQs8 {
    /// `xnn_init_qs8_mul_minmax_scalar_params`: `scale = (a_scale · b_scale) / y_scale`.
    pub fn new(a: QParams, b: QParams, y: QParams, out_min: i8, out_max: i8) -> Result<Self, String> {
        a.check("mul input a")?;
        b.check("mul input b")?;
        y.check("mul output")?;
        if out_min > out_max {
            return Err(format!("mul: output bounds [{out_min}, {out_max}] are empty"));
        }
        let scale = a.scale * b.scale / y.scale;
        if !(1.0 / 65536.0..256.0).contains(&scale) {
            return Err(format!("mul: product/output scale {scale} outside XNNPACK's [2^-16, 2^8)"));
        }
        Ok(MulQs8 {
            a_zp: a.zero_point,
            b_zp: b.zero_point,
            scale,
            zp: y.zero_point,
            fmin: (out_min as i32 - y.zero_point) as f32,
            fmax: (out_max as i32 - y.zero_point) as f32,
        })
    }

    #[inline(always)]
    fn one(&self, a: i8, b: i8) -> i8 {
        let prod = (a as i32 - self.a_zp) * (b as i32 - self.b_zp);
        let f = (prod as f32 * self.scale).max(self.fmin).min(self.fmax);
        (round_magic(f) + self.zp) as i8
    }

    pub fn apply(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        check_len("mul b", b.len(), a.len())?;
        check_len("mul y", y.len(), a.len())?;
        let p = *self;
        with_avx2!(mul_avx2, (p: MulQs8, a: &[i8], b: &[i8], y: &mut [i8]), {
            for ((yv, &av), &bv) in y.iter_mut().zip(a).zip(b) {
                *yv = p.one(av, bv);
            }
        });
        Ok(())
    }

    pub fn apply_scalar_b(&self, a: &[i8], b: i8, y: &mut [i8]) -> Result<(), String> {
        check_len("mul y", y.len(), a.len())?;
        let p = *self;
        with_avx2!(mulc_avx2, (p: MulQs8, a: &[i8], b: i8, y: &mut [i8]), {
            for (yv, &av) in y.iter_mut().zip(a) {
                *yv = p.one(av, b);
            }
        });
        Ok(())
    }

    pub fn apply_scalar_a(&self, a: i8, b: &[i8], y: &mut [i8]) -> Result<(), String> {
        check_len("mul y", y.len(), b.len())?;
        let p = *self;
        with_avx2!(rmulc_avx2, (p: MulQs8, a: i8, b: &[i8], y: &mut [i8]), {
            for (yv, &bv) in y.iter_mut().zip(b) {
                *yv = p.one(a, bv);
            }
        });
        Ok(())
    }

    /// `b` (one row) repeated along `a` (see [`AddQs8::apply_repeated_b`]).
    pub fn apply_repeated_b(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        apply_repeated::<_, true>(*self, "mul", a, b, y)
    }

    /// `a` (one row) repeated along `b`.
    pub fn apply_repeated_a(&self, a: &[i8], b: &[i8], y: &mut [i8]) -> Result<(), String> {
        apply_repeated::<_, false>(*self, "mul", b, a, y)
    }
}

/// `y[n, c]` = mean over the `pixels` rows of `x[n, p, c]`, requantized as XNNPACK's qs8 mean
/// (static reduce): `s = (in_scale / out_scale) · (1/N)`,
/// `zpf = out_zp − (N · in_zp) · s`, `y = clamp(rint(sum · s + zpf), −128, 127)`, then the
/// (separate) clamp to `[out_min, out_max]`.
#[allow(clippy::too_many_arguments)]
pub fn global_avg_pool_qs8(
    batch: usize,
    pixels: usize,
    channels: usize,
    x: &[i8],
    input: QParams,
    y: &mut [i8],
    output: QParams,
    out_min: i8,
    out_max: i8,
) -> Result<(), String> {
    input.check("average pooling input")?;
    output.check("average pooling output")?;
    if pixels == 0 {
        return Err("average pooling over 0 pixels".into());
    }
    if out_min > out_max {
        return Err(format!("average pooling: output bounds [{out_min}, {out_max}] are empty"));
    }
    check_len("average pooling x", x.len(), batch * pixels * channels)?;
    check_len("average pooling y", y.len(), batch * channels)?;
    let n = pixels as f32;
    let s = (input.scale / output.scale) * (1.0f32 / n);
    let zpf = output.zero_point as f32 - ((pixels as i32) as f32 * input.zero_point as f32) * s;
    let mut acc = vec![0i32; channels];
    for b in 0..batch {
        acc.fill(0);
        for p in 0..pixels {
            let row = &x[(b * pixels + p) * channels..(b * pixels + p + 1) * channels];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(v as i32);
            }
        }
        for (yv, &a) in y[b * channels..(b + 1) * channels].iter_mut().zip(&acc) {
            let t = a as f32 * s + zpf; // two roundings, as XNNPACK's reference convert (no FMA)
            let q = libm::rintf(t).clamp(-128.0, 127.0) as i8;
            *yv = q.clamp(out_min, out_max);
        }
    }
    Ok(())
}

/// f32 → qs8 as XNNPACK's convert: `clamp(rne(min(x · (1/scale), 32767)) + zp, −128, 127)`.
pub fn quantize_f32(x: &[f32], q: QParams, y: &mut [i8]) -> Result<(), String> {
    q.check("quantize")?;
    check_len("quantize y", y.len(), x.len())?;
    let inv = 1.0f32 / q.scale;
    let zp = q.zero_point;
    with_avx2!(quant_avx2, (x: &[f32], inv: f32, zp: i32, y: &mut [i8]), {
        for (yv, &xv) in y.iter_mut().zip(x) {
            // `min` returns 32767 for NaN, as `minps(x, 32767)` does; −inf ends at −32768.
            #[allow(clippy::manual_clamp)]
            let f = (xv * inv).min(32767.0).max(-32768.0);
            *yv = (round_magic(f) + zp).clamp(-128, 127) as i8;
        }
    });
    Ok(())
}

/// qs8 → f32: `(q − zp) · scale`.
pub fn dequantize_f32(x: &[i8], q: QParams, y: &mut [f32]) -> Result<(), String> {
    q.check("dequantize")?;
    check_len("dequantize y", y.len(), x.len())?;
    let (zp, s) = (q.zero_point, q.scale);
    with_avx2!(dequant_avx2, (x: &[i8], zp: i32, s: f32, y: &mut [f32]), {
        for (yv, &xv) in y.iter_mut().zip(x) {
            *yv = (xv as i32 - zp) as f32 * s;
        }
    });
    Ok(())
}

/// int8 → int8 with other quantization parameters (XNNPACK's qs8 `Convert`,
/// `xnn_init_qs8_cvt_scalar_params` and the scalar `qs8-vcvt` kernel, which the AVX2 one's
/// rounding multiply-high equals): `m = lrintf(256 · in_scale / out_scale)` (in [1, 2¹⁵]),
/// `y = clamp(((out_zp << 8) − m·in_zp + 0x80 + x·m) >> 8, −128, 127)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequantizeQs8 {
    bias: i32,
    mult: i32,
}

impl RequantizeQs8 {
    pub fn new(input: QParams, output: QParams) -> Result<Self, String> {
        input.check("convert input")?;
        output.check("convert output")?;
        let ratio = input.scale / output.scale;
        if !(1.0 / 256.0..=128.0).contains(&ratio) {
            return Err(format!("convert: input/output scale ratio {ratio} outside XNNPACK's [2^-8, 2^7]"));
        }
        let mult = libm::rintf(256.0 * ratio) as i32;
        Ok(RequantizeQs8 { bias: (output.zero_point << 8) - mult * input.zero_point + 0x80, mult })
    }

    pub fn apply(&self, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        check_len("convert y", y.len(), x.len())?;
        for (o, &v) in y.iter_mut().zip(x) {
            *o = ((self.bias + v as i32 * self.mult) >> 8).clamp(-128, 127) as i8;
        }
        Ok(())
    }
}

impl Qs8Binary for MulQs8 {
    #[inline(always)]
    fn one(&self, a: i8, b: i8) -> i8 {
        MulQs8::one(self, a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::Lcg;
    use super::*;
    use alloc::vec::Vec;

    fn q(scale: f32, zero_point: i32) -> QParams {
        QParams { scale, zero_point }
    }

    #[test]
    fn add_hand_computed() {
        // sa = 0.5, sb = 0.25 → exponent −1 → shift 21; ma = 2^20, mb = 2^19; rounding 2^20.
        let op = AddQs8::new(q(0.5, 0), q(0.25, 0), q(1.0, 0), -128, 127).unwrap();
        assert_eq!((op.a_mult, op.b_mult, op.shift, op.bias), (1 << 20, 1 << 19, 21, 1 << 20));
        let mut y = [0i8; 6];
        op.apply(&[1, -1, -3, 3, 100, -128], &[0, 0, 0, 2, 100, -128], &mut y).unwrap();
        // 0.5 → 1 and −0.5 → 0, −1.5 → −1 (ties toward +∞), 1.5 + 0.5 = 2, 50 + 25 = 75, −64 − 32 = −96.
        assert_eq!(y, [1, 0, -1, 2, 75, -96]);
        // Zero points enter the bias: bias = 2^20 − 2^20·4 − 2^19·(−6) = 2^20 − 2^22 + 3·2^20.
        let op = AddQs8::new(q(0.5, 4), q(0.25, -6), q(1.0, 10), -128, 20).unwrap();
        assert_eq!(op.bias, (1 << 20) - (1 << 22) + 3 * (1 << 20));
        op.apply(&[5, 40], &[-6, 100], &mut y[..2]).unwrap();
        // (5−4)·0.5 = 0.5 → 1 → 11; (36·0.5 + 106·0.25) = 44.5 → 45 + 10 = 55 → clamp 20.
        assert_eq!(&y[..2], &[11, 20]);
        // Non-power-of-two multiplier: sa = 0.3/0.7, lrintf(sa·2^21) (exponent −2 → shift 22).
        let op = AddQs8::new(q(0.3, 0), q(0.1, 0), q(0.7, 0), -128, 127).unwrap();
        let sa = 0.3f32 / 0.7f32;
        assert_eq!(op.shift, 22);
        assert_eq!(op.a_mult, libm::rintf(sa * 4194304.0) as i32);
        assert!(AddQs8::new(q(1e-4, 0), q(1.0, 0), q(1.0, 0), -128, 127).is_err());
    }

    #[test]
    fn add_broadcast_equals_elementwise() {
        let mut r = Lcg(9);
        for _ in 0..50 {
            let (a, b, yq) = (q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.02, 0.2), r.i8() as i32));
            let (lo, hi) = (r.i8().min(0), r.i8().max(0));
            let op = AddQs8::new(a, b, yq, lo, hi).unwrap();
            let mul = MulQs8::new(a, b, yq, lo, hi).unwrap();
            let n = 1 + r.below(70);
            let xa = r.i8s(n);
            let s = r.i8();
            let bb = vec![s; n];
            let (mut y1, mut y2, mut y3) = (vec![0i8; n], vec![0i8; n], vec![0i8; n]);
            op.apply(&xa, &bb, &mut y1).unwrap();
            op.apply_scalar_b(&xa, s, &mut y2).unwrap();
            assert_eq!(y1, y2);
            op.apply(&bb, &xa, &mut y1).unwrap();
            op.apply_scalar_a(s, &xa, &mut y3).unwrap();
            assert_eq!(y1, y3);
            // Scalar formula check (wide arithmetic).
            for i in 0..n {
                let acc = op.bias as i64 + xa[i] as i64 * op.a_mult as i64 + s as i64 * op.b_mult as i64;
                let want = ((acc >> op.shift) + op.zp as i64).clamp(lo as i64, hi as i64);
                assert_eq!(y2[i] as i64, want);
            }
            mul.apply(&xa, &bb, &mut y1).unwrap();
            mul.apply_scalar_b(&xa, s, &mut y2).unwrap();
            assert_eq!(y1, y2);
            mul.apply(&bb, &xa, &mut y1).unwrap();
            mul.apply_scalar_a(s, &xa, &mut y3).unwrap();
            assert_eq!(y1, y3);
            for i in 0..n {
                let prod = (xa[i] as i32 - a.zero_point) * (s as i32 - b.zero_point);
                let f = (prod as f32 * mul.scale).min(hi as f32 - yq.zero_point as f32);
                let want = (libm::rintf(f) as i32 + yq.zero_point).clamp(lo as i32, hi as i32);
                assert_eq!(y2[i] as i32, want);
            }
        }
    }

    #[test]
    fn subtract_is_add_with_b_negated() {
        let mut r = Lcg(31);
        for _ in 0..40 {
            let (a, b, yq) = (q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.02, 0.2), r.i8() as i32));
            let (lo, hi) = (r.i8().min(0), r.i8().max(0));
            let add = AddQs8::new(a, b, yq, lo, hi).unwrap();
            let sub = AddQs8::new_subtract(a, b, yq, lo, hi).unwrap();
            assert_eq!((sub.a_mult, sub.b_mult, sub.shift), (add.a_mult, -add.b_mult, add.shift));
            let n = 1 + r.below(50);
            let (xa, xb) = (r.i8s(n), r.i8s(n));
            let mut y = vec![0i8; n];
            sub.apply(&xa, &xb, &mut y).unwrap();
            for i in 0..n {
                // Wide arithmetic; against real values, within a step of the rounding.
                let acc = sub.bias as i64 + xa[i] as i64 * sub.a_mult as i64 + xb[i] as i64 * sub.b_mult as i64;
                assert_eq!(y[i] as i64, ((acc >> sub.shift) + yq.zero_point as i64).clamp(lo as i64, hi as i64));
                let real = (xa[i] as i32 - a.zero_point) as f32 * a.scale - (xb[i] as i32 - b.zero_point) as f32 * b.scale;
                let want = (real / yq.scale + yq.zero_point as f32).clamp(lo as f32, hi as f32);
                assert!((y[i] as f32 - want).abs() <= 0.51, "{} vs {want}", y[i]);
            }
        }
    }

    #[test]
    fn requantize_follows_qs8_vcvt() {
        // m = 256·0.5/0.25 = 512: y = ((zo << 8) − 512·zi + 128 + 512x) >> 8 = 2(x − zi) + zo.
        let op = RequantizeQs8::new(q(0.5, 3), q(0.25, -7)).unwrap();
        let mut y = [0i8; 4];
        op.apply(&[3, 4, 100, -128], &mut y).unwrap();
        assert_eq!(y, [-7, -5, 127, -128]);
        // Halves round up: m = 128 (ratio 0.5): 1·128 + 128 = 256 → 1; −1·128 + 128 = 0 → 0.
        let op = RequantizeQs8::new(q(0.5, 0), q(1.0, 0)).unwrap();
        op.apply(&[1, -1, 3, -3], &mut y).unwrap();
        assert_eq!(y, [1, 0, 2, -1]);
        assert!(RequantizeQs8::new(q(1.0, 0), q(1000.0, 0)).is_err());
        assert!(RequantizeQs8::new(q(1.0, 0), q(-1.0, 0)).is_err());
        assert!(op.apply(&[1, 2], &mut y[..1]).is_err());
    }

    #[test]
    fn table_lookup_matches_plain_indexing() {
        let mut r = Lcg(23);
        let table: [i8; 256] = core::array::from_fn(|_| r.i8());
        for n in [0usize, 1, 63, 64, 65, 200, 1000] {
            let x = r.i8s(n);
            let mut got = vec![0i8; n];
            lookup_table(&table, &x, &mut got).unwrap();
            let want: Vec<i8> = x.iter().map(|&v| table[(v as i32 + 128) as usize]).collect();
            assert_eq!(got, want, "n = {n}");
        }
        assert!(lookup_table(&table, &[0; 3], &mut [0; 2]).is_err());
    }

    #[test]
    fn repeated_rows_equal_elementwise() {
        let mut r = Lcg(17);
        for _ in 0..30 {
            let (a, b, yq) = (q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.01, 0.1), r.i8() as i32), q(r.f32(0.02, 0.2), r.i8() as i32));
            let (lo, hi) = (r.i8().min(0), r.i8().max(0));
            let (add, mul) = (AddQs8::new(a, b, yq, lo, hi).unwrap(), MulQs8::new(a, b, yq, lo, hi).unwrap());
            let (n, rows) = (1 + r.below(40), 1 + r.below(9));
            let full = r.i8s(n * rows);
            let row = r.i8s(n);
            let tiled: Vec<i8> = (0..rows).flat_map(|_| row.iter().copied()).collect();
            let (mut want, mut got) = (vec![0i8; n * rows], vec![0i8; n * rows]);
            add.apply(&full, &tiled, &mut want).unwrap();
            add.apply_repeated_b(&full, &row, &mut got).unwrap();
            assert_eq!(got, want);
            add.apply(&tiled, &full, &mut want).unwrap();
            add.apply_repeated_a(&row, &full, &mut got).unwrap();
            assert_eq!(got, want);
            mul.apply(&full, &tiled, &mut want).unwrap();
            mul.apply_repeated_b(&full, &row, &mut got).unwrap();
            assert_eq!(got, want);
            mul.apply(&tiled, &full, &mut want).unwrap();
            mul.apply_repeated_a(&row, &full, &mut got).unwrap();
            assert_eq!(got, want);
        }
        let op = MulQs8::new(q(0.1, 0), q(0.1, 0), q(0.1, 0), -128, 127).unwrap();
        assert!(op.apply_repeated_b(&[0; 10], &[0; 3], &mut [0; 10]).is_err());
        assert!(op.apply_repeated_b(&[0; 9], &[], &mut [0; 9]).is_err());
        assert!(op.apply_repeated_a(&[0; 3], &[0; 9], &mut [0; 6]).is_err());
    }

    #[test]
    fn mul_hand_computed() {
        // scale = (0.5·0.5)/1 = 0.25: (a−1)(b+2)·0.25.
        let op = MulQs8::new(q(0.5, 1), q(0.5, -2), q(1.0, 3), -128, 127).unwrap();
        let mut y = [0i8; 4];
        op.apply(&[3, 3, 7, -128], &[0, 1, 0, 127], &mut y).unwrap();
        // 2·2/4 = 1 → 4; 2·3/4 = 1.5 → 2 → 5; 6·2/4 = 3 → 6; (−129)(129)/4 = −4160.25 → −128.
        assert_eq!(y, [4, 5, 6, -128]);
        let op = MulQs8::new(q(0.5, 0), q(0.5, 0), q(1.0, 0), -128, 127).unwrap();
        op.apply(&[2, 10, -2, 1], &[5, 1, 5, 2], &mut y).unwrap();
        // 2.5 → 2, 2.5 → 2, −2.5 → −2, 0.5 → 0 (half to even).
        assert_eq!(y, [2, 2, -2, 0]);
        assert!(MulQs8::new(q(1e-3, 0), q(1e-3, 0), q(1.0, 0), -128, 127).is_err());
        assert!(op.apply(&[1], &[1, 2], &mut y[..1]).is_err());
    }

    #[test]
    fn avg_pool_hand_computed() {
        // N = 4, in_scale/out_scale = 1, in_zp = 2, out_zp = −1: s = 0.25, zpf = −1 − 8·0.25 = −3.
        let x = [2i8, 10, 3, 20, 4, 30, 5, 41];
        let mut y = [0i8; 2];
        global_avg_pool_qs8(1, 4, 2, &x, q(0.1, 2), &mut y, q(0.1, -1), -128, 127).unwrap();
        // ch0: 14·0.25 − 3 = 0.5 → 0; ch1: 101·0.25 − 3 = 22.25 → 22.
        assert_eq!(y, [0, 22]);
        global_avg_pool_qs8(1, 4, 2, &x, q(0.1, 2), &mut y, q(0.1, -1), 1, 20).unwrap();
        assert_eq!(y, [1, 20]);
        // Batch 2, 49 pixels, against an f64 check that only differs away from ties.
        let mut r = Lcg(4);
        let (b, p, c) = (2, 49, 37);
        let x = r.i8s(b * p * c);
        let (qi, qo) = (q(0.0235, -128), q(0.0117, -120));
        let mut y = vec![0i8; b * c];
        global_avg_pool_qs8(b, p, c, &x, qi, &mut y, qo, -128, 127).unwrap();
        for bi in 0..b {
            for ci in 0..c {
                let sum: i32 = (0..p).map(|pi| x[(bi * p + pi) * c + ci] as i32).sum();
                let s = (qi.scale / qo.scale) * (1.0 / p as f32);
                let zpf = qo.zero_point as f32 - (p as f32 * qi.zero_point as f32) * s;
                let want = libm::rintf(sum as f32 * s + zpf).clamp(-128.0, 127.0) as i8;
                assert_eq!(y[bi * c + ci], want);
            }
        }
        assert!(global_avg_pool_qs8(1, 0, 2, &[], qi, &mut y[..2], qo, -128, 127).is_err());
        assert!(global_avg_pool_qs8(1, 4, 2, &x[..7], qi, &mut y[..2], qo, -128, 127).is_err());
    }

    #[test]
    fn convert_hand_computed() {
        let qp = q(0.5, -3);
        let x = [0.0f32, 0.25, 0.75, -0.25, 1000.0, -1000.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.2];
        let mut y = [0i8; 10];
        quantize_f32(&x, qp, &mut y).unwrap();
        // 0.5 → 0 (even), 1.5 → 2, −0.5 → 0; NaN → 127 as XNNPACK's AVX2 kernel; 2.4 → 2.
        assert_eq!(y, [-3, -3, -1, -3, 127, -128, 127, 127, -128, -1]);
        let mut f = [0f32; 3];
        dequantize_f32(&[-3, 0, 127], qp, &mut f).unwrap();
        assert_eq!(f, [0.0, 1.5, 65.0]);
        assert!(quantize_f32(&x, qp, &mut y[..3]).is_err());
        // Many values: same as the plain rintf formulation.
        let mut r = Lcg(2);
        let xs: Vec<f32> = (0..5000).map(|_| r.f32(-80.0, 80.0)).collect();
        let mut ys = vec![0i8; xs.len()];
        let qp = q(0.37, 12);
        quantize_f32(&xs, qp, &mut ys).unwrap();
        for (xv, yv) in xs.iter().zip(&ys) {
            let want = (libm::rintf(xv * (1.0 / 0.37f32)) as i32 + 12).clamp(-128, 127);
            assert_eq!(*yv as i32, want);
        }
    }
}

