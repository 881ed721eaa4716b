//! int8 depthwise convolution (multiplier 1) on AVX-512 VNNI: 32 channels per step, i16 pairs
//! summed by `vpdpwssd`.
//!
//! Each input row is widened to i16 once (into a small ring of rows per task, padded left and
//! right with the input zero point), so a tap costs one 64-byte load and one unpack instead of a
//! sign extension per use. Within every 32-channel group the widened row stores the channels in
//! the order `0–3, 16–19, 4–7, 20–23, 8–11, 24–27, 12–15, 28–31`: `vpunpck{l,h}wd` of two taps
//! then yields the (tap a, tap b) pairs of channels 0–15 and 16–31 in natural order, and one
//! `vpdpwssd` per half adds both taps' products (|x·w| ≤ 2¹⁴; wrapping i32 sums, exactly the
//! plain path's). Packed weights per 32-channel group (`u32` words): 32 biases
//! (`bias − izp·Σ_taps w`), then per tap pair 16 words `[w_a[c], w_b[c]]` (i16) for channels
//! 0–15 and 16 for 16–31 (an odd last tap pairs with weight 0), then 32 scales (f32). The
//! requantization is the GEMM's ([`super::requantize`] in vector form).

use super::{OutParams, SyncPtr};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::vec;
use alloc::vec::Vec;
use core::arch::x86_64::*;

/// Channels per group.
const G: usize = 32;

/// Words per packed group for `taps` taps.
pub(super) fn group_words(taps: usize) -> usize {
    2 * G + taps.div_ceil(2) * G
}

/// Packs from the filter `[taps, c]` (weights `w(t, ch)`), biases and scales already adjusted.
pub(super) fn pack(c: usize, taps: usize, w: impl Fn(usize, usize) -> i8, bias: &[i32], scales: &[f32]) -> Vec<u32> {
    let groups = c.div_ceil(G);
    let words = group_words(taps);
    let pairs = taps.div_ceil(2);
    let mut out = vec![0u32; groups * words];
    for gi in 0..groups {
        let d = &mut out[gi * words..(gi + 1) * words];
        for j in 0..G.min(c - gi * G) {
            let ch = gi * G + j;
            d[j] = bias[ch] as u32;
            d[G + pairs * G + j] = scales[ch].to_bits();
            for p in 0..pairs {
                let wa = w(2 * p, ch) as i16;
                let wb = if 2 * p + 1 < taps { w(2 * p + 1, ch) as i16 } else { 0 };
                d[G + p * G + j] = (wa as u16 as u32) | ((wb as u16 as u32) << 16);
            }
        }
    }
    out
}

/// Position of natural channel `j` (0..32) inside a widened 32-channel group.
#[inline]
const fn permuted(j: usize) -> usize {
    let (half, q, r) = (j / 16, (j % 16) / 4, j % 4);
    q * 8 + half * 4 + r
}

/// `vpermw` indices of the widening: `out[i] = in[WIDEN_PERM[i]]`, i.e. `out[permuted(j)] = in[j]`.
static WIDEN_PERM: [i16; 32] = {
    let mut idx = [0i16; 32];
    let mut j = 0;
    while j < 32 {
        idx[permuted(j)] = j as i16;
        j += 1;
    }
    idx
};

/// Runs the whole layer (sizes of `x`/`y` checked by the caller; the CPU has AVX-512
/// F/BW/VL + VNNI, checked when the caller chose this path).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    g: &Conv2dGeom,
    packed: &[u32],
    o: &OutParams,
    input_zp: i32,
    par: &dyn Parallel,
    tasks: usize,
    x: &[i8],
    y: &mut [i8],
) {
    let c = g.groups;
    let (kh, kw) = (g.kernel_h, g.kernel_w);
    let taps = kh * kw;
    let cpad = c.div_ceil(G) * G;
    let groups = cpad / G;
    let words = group_words(taps);
    assert!(packed.len() == groups * words && x.len() == g.in_len() && y.len() == g.out_len());
    // Widened row width (pixels), zero-point padding included on both sides.
    let span = (g.out_w - 1) * g.stride_w + (kw - 1) * g.dilation_w + 1;
    let wp = span.max(g.pad_left + g.in_w);
    let row_len = wp * cpad;
    let slots = (kh - 1) * g.dilation_h + 1;
    let rows = g.batch * g.out_h;
    let per = rows.div_ceil(tasks);
    let ldy = g.out_w * c;
    let yp = SyncPtr(y.as_mut_ptr());
    let zp = input_zp as i16;
    let run = |t: usize| {
        let (r0, r1) = (t * per, ((t + 1) * per).min(rows));
        if r0 >= r1 {
            return;
        }
        // Rows start on 64-byte boundaries (row_len is a multiple of 32 i16), so the kernel's
        // 64-byte loads never split a cache line.
        let mut zp_buf = vec![zp; row_len + 32];
        let zp_row = aligned64(&mut zp_buf, row_len);
        let mut ring_buf = vec![zp; slots * row_len + 32];
        let ring = aligned64(&mut ring_buf, slots * row_len);
        // Which input row (batch·in_h + iy) each slot holds.
        let mut tag = vec![usize::MAX; slots];
        let mut tap_ptrs: Vec<*const i16> = vec![core::ptr::null(); taps];
        let mut row_ptrs: Vec<*const i16> = vec![core::ptr::null(); kh];
        for row in r0..r1 {
            let (b, oy) = (row / g.out_h, row % g.out_h);
            for (ky, row_ptr) in row_ptrs.iter_mut().enumerate() {
                let iy = (oy * g.stride_h + ky * g.dilation_h).wrapping_sub(g.pad_top);
                let p = if iy < g.in_h {
                    let id = b * g.in_h + iy;
                    let s = iy % slots;
                    let dst = &mut ring[s * row_len..(s + 1) * row_len];
                    if tag[s] != id {
                        widen_row(&x[id * g.in_w * c..(id + 1) * g.in_w * c], c, cpad, g.pad_left, dst);
                        tag[s] = id;
                    }
                    dst.as_ptr()
                } else {
                    zp_row.as_ptr()
                };
                *row_ptr = p;
            }
            for (ky, &rp) in row_ptrs.iter().enumerate() {
                for kx in 0..kw {
                    // In bounds: kx·dilation < span ≤ wp pixels of the row.
                    tap_ptrs[ky * kw + kx] = rp.wrapping_add(kx * g.dilation_w * cpad);
                }
            }
            // SAFETY: tasks own disjoint output rows; `row < batch·out_h`, so the row's `ldy`
            // bytes lie inside `y` (length asserted above).
            let yrow = unsafe { yp.get().add(row * ldy) };
            for gi in 0..groups {
                let nvalid = (c - gi * G).min(G);
                // SAFETY: the CPU has AVX-512 F/BW/VL + VNNI (caller's check). Every tap pointer
                // addresses a widened row of `wp` pixels × `cpad` i16; pixel `ox·stride + kx·dil`
                // < span ≤ wp for every ox < out_w, and group `gi` lies inside `cpad`. The packed
                // group `gi` lies inside `packed` (asserted). Output pixel `ox`'s channels
                // `gi·32 .. gi·32 + nvalid` lie inside this row of `y`.
                unsafe {
                    let w = packed.as_ptr().add(gi * words);
                    let args = Args {
                        taps: tap_ptrs.as_ptr(),
                        n_taps: taps,
                        off: gi * G,
                        step: g.stride_w * cpad,
                        w,
                        o,
                        y: yrow.add(gi * G),
                        ystride: c,
                        nvalid,
                    };
                    match taps {
                        9 => pixels::<9>(&args, g.out_w),
                        25 => pixels::<25>(&args, g.out_w),
                        _ => pixels::<0>(&args, g.out_w),
                    }
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

/// The 64-byte-aligned `len` elements inside `buf` (`buf.len() ≥ len + 32`).
fn aligned64(buf: &mut [i16], len: usize) -> &mut [i16] {
    let skip = buf.as_ptr().align_offset(64).min(32);
    &mut buf[skip..skip + len]
}

/// Widens one input row (`in_w` pixels × `c` int8) into `dst` (`wp` pixels × `cpad` i16, the
/// first `pad_left` and the last pixels left as they are: the zero point).
fn widen_row(src: &[i8], c: usize, cpad: usize, pad_left: usize, dst: &mut [i16]) {
    let pixels = src.len() / c;
    assert!(src.len() == pixels * c && dst.len() >= (pad_left + pixels) * cpad);
    // SAFETY: AVX-512 F/BW/VL was checked by the caller of `run`; every read is a masked load
    // of at most `c − 32·gi` bytes of a pixel inside `src`, every write 64 bytes of group `gi`
    // of pixel `pad_left + px` inside `dst` (asserted above).
    unsafe { widen_row_avx512(src.as_ptr(), pixels, c, cpad, dst.as_mut_ptr().add(pad_left * cpad)) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn widen_row_avx512(src: *const i8, pixels: usize, c: usize, cpad: usize, dst: *mut i16) {
    let perm = _mm512_loadu_si512(WIDEN_PERM.as_ptr() as *const _);
    let groups = cpad / G;
    for px in 0..pixels {
        let s = src.add(px * c);
        let d = dst.add(px * cpad);
        for gi in 0..groups {
            let n = (c - gi * G).min(G);
            let mask: __mmask32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
            let v = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, s.add(gi * G)));
            _mm512_storeu_si512(d.add(gi * G) as *mut _, _mm512_permutexvar_epi16(perm, v));
        }
    }
}

/// One output row's pixels for one 32-channel group.
struct Args<'a> {
    /// Tap `t`'s pointer for output pixel 0 (group offset not yet added).
    taps: *const *const i16,
    n_taps: usize,
    /// Group offset (i16 elements).
    off: usize,
    /// Elements between consecutive output pixels' taps (`stride_w · cpad`).
    step: usize,
    w: *const u32,
    o: &'a OutParams,
    y: *mut i8,
    ystride: usize,
    nvalid: usize,
}

/// `T`: the tap count when fixed at compile time (must equal `a.n_taps`), or 0.
///
/// # Safety
/// AVX-512 F/BW/VL + VNNI; the pointers of `a` valid for `n` output pixels as `run` describes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn pixels<const T: usize>(a: &Args, n: usize) {
    let taps = if T > 0 { T } else { a.n_taps };
    let pairs = taps.div_ceil(2);
    let w = a.w;
    let b0 = _mm512_loadu_si512(w as *const _);
    let b1 = _mm512_loadu_si512(w.add(16) as *const _);
    let s0 = _mm512_loadu_ps(w.add(G + pairs * G) as *const f32);
    let s1 = _mm512_loadu_ps(w.add(G + pairs * G + 16) as *const f32);
    let lo = _mm512_set1_ps(a.o.fmin);
    let hi = _mm512_set1_ps(a.o.fmax);
    let zp = _mm512_set1_epi32(a.o.zp);
    let mask: __mmask32 = if a.nvalid >= 32 { u32::MAX } else { (1u32 << a.nvalid) - 1 };
    let wq = w.add(G) as *const __m512i;
    // A fixed tap count of at most 9 keeps the weights and tap pointers in registers.
    if T > 0 && T <= 9 {
        let mut wr = [_mm512_setzero_si512(); 10];
        let mut tp = [core::ptr::null::<i16>(); 10];
        for p in 0..pairs {
            wr[2 * p] = _mm512_loadu_si512(wq.add(2 * p) as *const _);
            wr[2 * p + 1] = _mm512_loadu_si512(wq.add(2 * p + 1) as *const _);
        }
        for (t, p) in tp.iter_mut().enumerate().take(taps) {
            *p = (*a.taps.add(t)).add(a.off);
        }
        for px in 0..n {
            let at = px * a.step;
            let mut acc0 = b0;
            let mut acc1 = b1;
            for p in 0..pairs {
                let xa = _mm512_loadu_si512(tp[2 * p].add(at) as *const _);
                let xb = if 2 * p + 1 < taps { _mm512_loadu_si512(tp[2 * p + 1].add(at) as *const _) } else { _mm512_setzero_si512() };
                acc0 = _mm512_dpwssd_epi32(acc0, _mm512_unpacklo_epi16(xa, xb), wr[2 * p]);
                acc1 = _mm512_dpwssd_epi32(acc1, _mm512_unpackhi_epi16(xa, xb), wr[2 * p + 1]);
            }
            let q0 = requant16(acc0, s0, lo, hi, zp);
            let q1 = requant16(acc1, s1, lo, hi, zp);
            _mm256_mask_storeu_epi8(a.y.add(px * a.ystride), mask, _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q0), q1));
        }
        return;
    }
    for px in 0..n {
        let base = a.off + px * a.step;
        let mut acc0 = b0;
        let mut acc1 = b1;
        for p in 0..pairs {
            let xa = _mm512_loadu_si512((*a.taps.add(2 * p)).add(base) as *const _);
            let xb = if 2 * p + 1 < taps {
                _mm512_loadu_si512((*a.taps.add(2 * p + 1)).add(base) as *const _)
            } else {
                _mm512_setzero_si512()
            };
            acc0 = _mm512_dpwssd_epi32(acc0, _mm512_unpacklo_epi16(xa, xb), _mm512_loadu_si512(wq.add(2 * p) as *const _));
            acc1 = _mm512_dpwssd_epi32(acc1, _mm512_unpackhi_epi16(xa, xb), _mm512_loadu_si512(wq.add(2 * p + 1) as *const _));
        }
        let q0 = requant16(acc0, s0, lo, hi, zp);
        let q1 = requant16(acc1, s1, lo, hi, zp);
        _mm256_mask_storeu_epi8(a.y.add(px * a.ystride), mask, _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q0), q1));
    }
}

/// 16 accumulators → 16 int8 (as the GEMM: round half to even, then the zero point; the float
/// clamp keeps the result inside the int8 bounds, so truncating to bytes is exact).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn requant16(acc: __m512i, scale: __m512, lo: __m512, hi: __m512, zp: __m512i) -> __m128i {
    let f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    let f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zp))
}

#[cfg(test)]
mod tests {
    use super::permuted;

    #[test]
    fn unpack_of_the_permuted_order_gives_natural_channels() {
        // vpunpcklwd takes words 0–3 of each 128-bit lane (8 words), vpunpckhwd words 4–7.
        let mut lo = alloc::vec::Vec::new();
        let mut hi = alloc::vec::Vec::new();
        for lane in 0..4 {
            for w in 0..8 {
                let pos = lane * 8 + w;
                let ch = (0..32).find(|&j| permuted(j) == pos).unwrap();
                if w < 4 {
                    lo.push(ch);
                } else {
                    hi.push(ch);
                }
            }
        }
        assert_eq!(lo, (0..16).collect::<alloc::vec::Vec<_>>());
        assert_eq!(hi, (16..32).collect::<alloc::vec::Vec<_>>());
    }
}
