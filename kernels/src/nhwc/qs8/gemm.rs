//! Packed-weight int8 GEMM micro-kernels, two layouts ([`Layout`]):
//!
//! **Pairs** (AVX2, NEON, plain): `MR` = 4 rows × `NR` = 16 output channels. Packed block per
//! 16 output channels (`u32` words): 16 biases (i32, already `bias − izp·Σw`), then `kp/2`
//! k-pairs of 32 bytes (`[channel][2]` int8, zero past `n`/`k`), then 16 requantization scales
//! (f32). `kp` is `k` rounded up to even. Activations come as rows of `kp` i16 (the raw int8
//! values, widened), so a k-pair of a row is one 32-bit broadcast and `_mm256_madd_epi16`
//! against the 16 widened weights of 8 channels gives those channels' two products summed in one
//! step (AVX2), or `vmlal_s16` + a final pairwise add (NEON).
//!
//! **Quads** (AVX-512 VNNI): up to `MR_QUADS` = 8 rows × 16 channels. Same block shape with
//! `kp` = `k` rounded up to a multiple of 4 and `kp/4` k-quads of 64 bytes (`[channel][4]`);
//! activations are rows of `kp` u8 holding `x + 128` (`x ^ 0x80`), so `vpdpbusd` (u8 × s8, four
//! products summed into each i32 lane, no saturation) takes a broadcast quad of a row against
//! 16 channels' weights. The packed bias is `bias − (izp + 128)·Σw`, which cancels the offset:
//! `Σ (x + 128)·w − (izp + 128)·Σw = Σ (x − izp)·w`.
//!
//! All accumulation is wrapping int32, so every kernel gives exactly
//! `bias + Σ (x − izp)·w (mod 2³²)`; the requantization is [`super::requantize`] in every variant.

use super::{requantize, Isa, OutParams};
use alloc::vec;
use alloc::vec::Vec;

pub(crate) const MR: usize = 4;
pub(crate) const NR: usize = 16;
/// Rows per tile of the quad (VNNI) kernels.
pub(crate) const MR_QUADS: usize = 8;

/// How a [`PackedGemm`] lays out its weights (chosen by the micro-kernel family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// k in pairs, activations widened to i16.
    Pairs,
    /// k in quads, activations as `x ^ 0x80` bytes (packed for the VNNI kernels on x86-64; the
    /// plain twin runs it anywhere, in the tests).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Quads,
}

impl Layout {
    /// Reduction values per packed group.
    pub fn k_step(self) -> usize {
        match self {
            Layout::Pairs => 2,
            Layout::Quads => 4,
        }
    }

    /// Rows per tile.
    pub fn rows(self) -> usize {
        match self {
            Layout::Pairs => MR,
            Layout::Quads => MR_QUADS,
        }
    }
}

/// Packed weights of one GEMM (`n` output channels × `k` reduction).
#[derive(Clone, Debug)]
pub(crate) struct PackedGemm {
    pub n: usize,
    pub k: usize,
    pub kp: usize,
    pub layout: Layout,
    data: Vec<u32>,
}

impl PackedGemm {
    /// `w(j, kk)`: weight of output channel `j` at reduction index `kk`; `bias(j)`; `scales[j]`.
    pub fn pack(
        layout: Layout,
        n: usize,
        k: usize,
        w: impl Fn(usize, usize) -> i8,
        bias: impl Fn(usize) -> i32,
        scales: &[f32],
        input_zp: i32,
    ) -> Self {
        let step = layout.k_step();
        let kp = k.div_ceil(step) * step;
        // The activation offset the kernel sees: raw int8 (pairs) or x + 128 (quads).
        let zp = match layout {
            Layout::Pairs => input_zp,
            Layout::Quads => input_zp + 128,
        };
        let words = Self::block_words(kp);
        let blocks = n.div_ceil(NR);
        let mut data = vec![0u32; blocks * words];
        for blk in 0..blocks {
            let d = &mut data[blk * words..(blk + 1) * words];
            for c in 0..NR.min(n - blk * NR) {
                let j = blk * NR + c;
                let mut sum = 0i32;
                for kk in 0..k {
                    let v = w(j, kk);
                    sum = sum.wrapping_add(v as i32);
                    let byte = (kk / step) * (NR * step) + c * step + kk % step;
                    let word = &mut d[NR + byte / 4];
                    *word |= (v as u8 as u32) << (8 * (byte % 4));
                }
                d[c] = bias(j).wrapping_sub(sum.wrapping_mul(zp)) as u32;
                d[NR + kp * 4 + c] = scales[j].to_bits();
            }
        }
        PackedGemm { n, k, kp, layout, data }
    }

    fn block_words(kp: usize) -> usize {
        2 * NR + kp * 4
    }

    pub fn blocks(&self) -> usize {
        self.n.div_ceil(NR)
    }

    pub fn block(&self, b: usize) -> &[u32] {
        let w = Self::block_words(self.kp);
        &self.data[b * w..(b + 1) * w]
    }
}

/// Computes one 4×16 pairs tile: `a` holds `MR` rows of `kp` i16, `block` one packed block.
/// Rows/channels past the valid ones are computed too (the caller ignores them).
pub(crate) fn run_tile(isa: Isa, a: &[i16], block: &[u32], kp: usize, o: &OutParams, out: &mut [[i8; NR]; MR]) {
    assert!(kp.is_multiple_of(2) && a.len() >= MR * kp && block.len() == 2 * NR + kp * 4);
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2`/`Avx512Vnni` are only chosen when the CPU has AVX2 (`Isa::best`,
        // or tests that check it); the sizes of `a` and `block` were asserted above.
        Isa::Avx2 | Isa::Avx512Vnni => unsafe { avx2::tile(a.as_ptr(), block.as_ptr(), kp, o, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is baseline on aarch64; sizes asserted above.
        Isa::Neon => unsafe { neon::tile(a.as_ptr(), block.as_ptr(), kp, o, out) },
        Isa::Scalar => tile_scalar(a, block, kp, o, out),
    }
}

/// Computes `m` (≤ `MR_QUADS`) rows × `nc` (≤ 16) channels of a quads tile into
/// `y[r·ldy + c]`: `a` holds `m` rows of `kp` bytes (`x ^ 0x80`), `block` one quads block.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_tile_quads(
    isa: Isa,
    a: &[u8],
    m: usize,
    block: &[u32],
    kp: usize,
    o: &OutParams,
    y: &mut [i8],
    ldy: usize,
    nc: usize,
) {
    assert!(kp.is_multiple_of(4) && (1..=MR_QUADS).contains(&m) && (1..=NR).contains(&nc));
    assert!(a.len() >= m * kp && block.len() == 2 * NR + kp * 4 && y.len() >= (m - 1) * ldy + nc);
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx512Vnni` is only chosen when the CPU has AVX-512 F/BW/VL and VNNI
        // (`Isa::best`, or tests that check it); the sizes were asserted above.
        Isa::Avx512Vnni => unsafe { vnni::tile(a.as_ptr(), m, block.as_ptr(), kp, o, y.as_mut_ptr(), ldy, nc) },
        _ => tile_quads_scalar(a, m, block, kp, o, y, ldy, nc),
    }
}

/// Plain-Rust pairs micro-kernel.
pub(crate) fn tile_scalar(a: &[i16], block: &[u32], kp: usize, o: &OutParams, out: &mut [[i8; NR]; MR]) {
    let bias = &block[..NR];
    let w: &[i8] = bytemuck::cast_slice(&block[NR..NR + kp * 4]);
    let scales = &block[NR + kp * 4..];
    for r in 0..MR {
        let row = &a[r * kp..(r + 1) * kp];
        let mut acc = [0i32; NR];
        for (c, v) in acc.iter_mut().enumerate() {
            *v = bias[c] as i32;
        }
        for (p, pair) in row.chunks_exact(2).enumerate() {
            let wp = &w[p * 32..p * 32 + 32];
            let (a0, a1) = (pair[0] as i32, pair[1] as i32);
            for (c, v) in acc.iter_mut().enumerate() {
                *v = v.wrapping_add(a0 * wp[2 * c] as i32 + a1 * wp[2 * c + 1] as i32);
            }
        }
        for c in 0..NR {
            out[r][c] = requantize(acc[c], f32::from_bits(scales[c]), o);
        }
    }
}

/// Plain-Rust quads micro-kernel (the VNNI kernel's twin).
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_quads_scalar(
    a: &[u8],
    m: usize,
    block: &[u32],
    kp: usize,
    o: &OutParams,
    y: &mut [i8],
    ldy: usize,
    nc: usize,
) {
    let w: &[i8] = bytemuck::cast_slice(&block[NR..NR + kp * 4]);
    let scales = &block[NR + kp * 4..];
    for r in 0..m {
        let row = &a[r * kp..(r + 1) * kp];
        for c in 0..nc {
            let mut acc = block[c] as i32;
            for (q, quad) in row.chunks_exact(4).enumerate() {
                for (i, &x) in quad.iter().enumerate() {
                    acc = acc.wrapping_add(x as i32 * w[q * 64 + c * 4 + i] as i32);
                }
            }
            y[r * ldy + c] = requantize(acc, f32::from_bits(scales[c]), o);
        }
    }
}

/// An activation element as a micro-kernel family reads it: the raw int8 value widened to i16
/// (pairs), or offset to u8 as `x + 128` = `x ^ 0x80` (quads).
pub(crate) trait Act: Copy + Default + Send + Sync + 'static {
    fn from_i8(v: i8) -> Self;

    /// `dst[i] = from_i8(src[i])` (`dst.len() == src.len()`).
    #[inline(always)]
    fn convert(dst: &mut [Self], src: &[i8]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = Self::from_i8(*s);
        }
    }
}

impl Act for i16 {
    #[inline(always)]
    fn from_i8(v: i8) -> i16 {
        v as i16
    }
}

impl Act for u8 {
    #[inline(always)]
    fn from_i8(v: i8) -> u8 {
        v as u8 ^ 0x80
    }

    /// Eight bytes per step: the short runs of an im2col gather (e.g. 9 bytes for a 3×3
    /// kernel over 3 channels) would otherwise go byte by byte.
    #[inline(always)]
    fn convert(dst: &mut [u8], src: &[i8]) {
        let n = dst.len().min(src.len());
        let (dst, src) = (&mut dst[..n], &src[..n]);
        let mut d8 = dst.chunks_exact_mut(8);
        let mut s8 = src.chunks_exact(8);
        for (d, s) in (&mut d8).zip(&mut s8) {
            let v = u64::from_ne_bytes(bytemuck::cast_slice::<i8, u8>(s).try_into().unwrap_or([0; 8]));
            d.copy_from_slice(&(v ^ 0x8080_8080_8080_8080).to_ne_bytes());
        }
        for (d, s) in d8.into_remainder().iter_mut().zip(s8.remainder()) {
            *d = *s as u8 ^ 0x80;
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod vnni {
    use super::{OutParams, MR_QUADS, NR};
    use core::arch::x86_64::*;

    /// # Safety
    /// AVX-512 F/BW/VL and VNNI must be available; `a` must point to `m·kp` bytes, `w` to one
    /// packed quads block (`2·NR + 4·kp` words), `y` to `(m−1)·ldy + nc` writable bytes;
    /// `1 ≤ m ≤ MR_QUADS`, `1 ≤ nc ≤ 16`, `kp` a multiple of 4.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) unsafe fn tile(a: *const u8, m: usize, w: *const u32, kp: usize, o: &OutParams, y: *mut i8, ldy: usize, nc: usize) {
        match m {
            8 => rows::<8>(a, w, kp, o, y, ldy, nc),
            7 => rows::<7>(a, w, kp, o, y, ldy, nc),
            6 => rows::<6>(a, w, kp, o, y, ldy, nc),
            5 => rows::<5>(a, w, kp, o, y, ldy, nc),
            4 => rows::<4>(a, w, kp, o, y, ldy, nc),
            3 => rows::<3>(a, w, kp, o, y, ldy, nc),
            2 => rows::<2>(a, w, kp, o, y, ldy, nc),
            _ => rows::<1>(a, w, kp, o, y, ldy, nc),
        }
    }

    /// `M` rows; with fewer than 4 rows the quads alternate between two accumulator sets so the
    /// `vpdpbusd` dependency chains overlap (the sets are summed at the end; wrapping adds, so
    /// the result is the same).
    #[inline]
    #[allow(clippy::needless_range_loop)] // rows index several arrays in step
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn rows<const M: usize>(a: *const u8, w: *const u32, kp: usize, o: &OutParams, y: *mut i8, ldy: usize, nc: usize) {
        const { assert!(M >= 1 && M <= MR_QUADS) };
        let bias = _mm512_loadu_si512(w as *const _);
        let mut acc = [bias; M];
        let mut wp = w.add(NR) as *const u8;
        let quads = kp / 4;
        let mut q = 0;
        if M < 4 {
            let mut acc2 = [_mm512_setzero_si512(); M];
            while q + 2 <= quads {
                let w0 = _mm512_loadu_si512(wp as *const _);
                let w1 = _mm512_loadu_si512(wp.add(64) as *const _);
                for r in 0..M {
                    let ar = a.add(r * kp + 4 * q);
                    let x0 = _mm512_set1_epi32((ar as *const i32).read_unaligned());
                    let x1 = _mm512_set1_epi32((ar.add(4) as *const i32).read_unaligned());
                    acc[r] = _mm512_dpbusd_epi32(acc[r], x0, w0);
                    acc2[r] = _mm512_dpbusd_epi32(acc2[r], x1, w1);
                }
                wp = wp.add(128);
                q += 2;
            }
            for r in 0..M {
                acc[r] = _mm512_add_epi32(acc[r], acc2[r]);
            }
        }
        while q < quads {
            let wv = _mm512_loadu_si512(wp as *const _);
            for r in 0..M {
                let x = _mm512_set1_epi32((a.add(r * kp + 4 * q) as *const i32).read_unaligned());
                acc[r] = _mm512_dpbusd_epi32(acc[r], x, wv);
            }
            wp = wp.add(64);
            q += 1;
        }
        let scale = _mm512_loadu_ps(w.add(NR + kp * 4) as *const f32);
        let lo = _mm512_set1_ps(o.fmin);
        let hi = _mm512_set1_ps(o.fmax);
        let zp = _mm512_set1_epi32(o.zp);
        let mask: __mmask16 = ((1u32 << nc) - 1) as u16;
        for (r, &v) in acc.iter().enumerate() {
            let f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
            let f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            // cvtps2dq rounds half to even under the default MXCSR; after the float clamp
            // `rne(f) + zp` lies inside the int8 bounds, so truncating to bytes is exact.
            let i = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
            _mm_mask_storeu_epi8(y.add(r * ldy), mask, _mm512_cvtepi32_epi8(i));
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::{OutParams, MR, NR};
    use core::arch::x86_64::*;

    /// Requantizes 16 int32 accumulators (two vectors) to 16 int8 values.
    ///
    /// # Safety
    /// AVX2 must be available; `scales` must point to 16 readable f32.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn requant16(acc0: __m256i, acc1: __m256i, scales: *const f32, o: &OutParams) -> __m128i {
        let lo = _mm256_set1_ps(o.fmin);
        let hi = _mm256_set1_ps(o.fmax);
        let zp = _mm256_set1_epi32(o.zp);
        let f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(acc0), _mm256_loadu_ps(scales));
        let f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(acc1), _mm256_loadu_ps(scales.add(8)));
        let f0 = _mm256_min_ps(_mm256_max_ps(f0, lo), hi);
        let f1 = _mm256_min_ps(_mm256_max_ps(f1, lo), hi);
        // cvtps2dq rounds half to even under the default MXCSR (Rust never changes it).
        let i0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), zp);
        let i1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), zp);
        let p16 = _mm256_permute4x64_epi64::<0xD8>(_mm256_packs_epi32(i0, i1));
        _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256::<1>(p16))
    }

    /// # Safety
    /// AVX2 must be available; `a` must point to `MR·kp` i16 and `w` to one packed block
    /// (`2·NR + 4·kp` words), `kp` even.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn tile(a: *const i16, w: *const u32, kp: usize, o: &OutParams, out: &mut [[i8; NR]; MR]) {
        let b0 = _mm256_loadu_si256(w as *const __m256i);
        let b1 = _mm256_loadu_si256(w.add(8) as *const __m256i);
        let (mut c00, mut c01, mut c10, mut c11) = (b0, b1, b0, b1);
        let (mut c20, mut c21, mut c30, mut c31) = (b0, b1, b0, b1);
        let mut wp = w.add(NR) as *const u8;
        let (a0, a1, a2, a3) = (a, a.add(kp), a.add(2 * kp), a.add(3 * kp));
        let mut k = 0;
        while k < kp {
            let w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp as *const __m128i));
            let w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(16) as *const __m128i));
            let x0 = _mm256_set1_epi32((a0.add(k) as *const i32).read_unaligned());
            c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(x0, w0));
            c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(x0, w1));
            let x1 = _mm256_set1_epi32((a1.add(k) as *const i32).read_unaligned());
            c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(x1, w0));
            c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(x1, w1));
            let x2 = _mm256_set1_epi32((a2.add(k) as *const i32).read_unaligned());
            c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(x2, w0));
            c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(x2, w1));
            let x3 = _mm256_set1_epi32((a3.add(k) as *const i32).read_unaligned());
            c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(x3, w0));
            c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(x3, w1));
            wp = wp.add(32);
            k += 2;
        }
        let scales = w.add(NR + kp * 4) as *const f32;
        let rows = [(c00, c01), (c10, c11), (c20, c21), (c30, c31)];
        for (r, (x, y)) in rows.into_iter().enumerate() {
            let v = requant16(x, y, scales, o);
            _mm_storeu_si128(out[r].as_mut_ptr() as *mut __m128i, v);
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub(crate) mod neon {
    use super::{OutParams, MR, NR};
    use core::arch::aarch64::*;

    /// Requantizes 4 int32 accumulators to 4 int16 (already clamped to the int8 bounds).
    ///
    /// # Safety
    /// `scales` must point to 4 readable f32.
    #[inline(always)]
    pub(crate) unsafe fn requant4(acc: int32x4_t, scales: *const f32, o: &OutParams) -> int16x4_t {
        let f = vmulq_f32(vcvtq_f32_s32(acc), vld1q_f32(scales));
        let f = vminq_f32(vmaxq_f32(f, vdupq_n_f32(o.fmin)), vdupq_n_f32(o.fmax));
        vqmovn_s32(vaddq_s32(vcvtnq_s32_f32(f), vdupq_n_s32(o.zp)))
    }

    /// # Safety
    /// `a` must point to `MR·kp` i16 and `w` to one packed block (`2·NR + 4·kp` words).
    pub(crate) unsafe fn tile(a: *const i16, w: *const u32, kp: usize, o: &OutParams, out: &mut [[i8; NR]; MR]) {
        let scales = w.add(NR + kp * 4) as *const f32;
        for half in 0..2 {
            // acc[r][q]: lanes (channel even-k, channel odd-k) for 2 channels.
            let z = vdupq_n_s32(0);
            let mut acc = [[z; 4]; MR];
            let mut wp = (w.add(NR) as *const i8).add(half * 16);
            let mut k = 0;
            while k < kp {
                let wb = vld1q_s8(wp);
                let w0 = vmovl_s8(vget_low_s8(wb));
                let w1 = vmovl_high_s8(wb);
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let pair = (a.add(r * kp + k) as *const i32).read_unaligned();
                    let x = vreinterpretq_s16_s32(vdupq_n_s32(pair));
                    acc_r[0] = vmlal_s16(acc_r[0], vget_low_s16(w0), vget_low_s16(x));
                    acc_r[1] = vmlal_high_s16(acc_r[1], w0, x);
                    acc_r[2] = vmlal_s16(acc_r[2], vget_low_s16(w1), vget_low_s16(x));
                    acc_r[3] = vmlal_high_s16(acc_r[3], w1, x);
                }
                wp = wp.add(32);
                k += 2;
            }
            let bias = w.add(half * 8) as *const i32;
            let b0 = vld1q_s32(bias);
            let b1 = vld1q_s32(bias.add(4));
            for (r, acc_r) in acc.iter().enumerate() {
                let s0 = vaddq_s32(vpaddq_s32(acc_r[0], acc_r[1]), b0);
                let s1 = vaddq_s32(vpaddq_s32(acc_r[2], acc_r[3]), b1);
                let q0 = requant4(s0, scales.add(half * 8), o);
                let q1 = requant4(s1, scales.add(half * 8 + 4), o);
                let v = vqmovn_s16(vcombine_s16(q0, q1));
                vst1_s8(out[r].as_mut_ptr().add(half * 8), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{isas, Lcg};
    use super::super::QParams;
    use super::*;


    #[test]
    fn quad_tiles_match_plain_sums() {
        let mut r = Lcg(9);
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut isas = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        if Isa::best() == Isa::Avx512Vnni {
            isas.push(Isa::Avx512Vnni);
        } else {
            std::println!("quad_tiles_match_plain_sums: no AVX-512 VNNI here, plain twin only");
        }
        for &(n, k) in &[(16, 4), (5, 1), (16, 9), (33, 64), (3, 200), (17, 7), (40, 1280), (16, 27)] {
            let w = r.i8s(n * k);
            let bias: Vec<i32> = (0..n).map(|_| (r.next() as i32) >> 12).collect();
            let scales: Vec<f32> = (0..n).map(|_| r.f32(1e-4, 0.05)).collect();
            let izp = r.i8() as i32;
            let p = PackedGemm::pack(Layout::Quads, n, k, |j, kk| w[j * k + kk], |j| bias[j], &scales, izp);
            let o = OutParams::new(QParams { scale: 1.0, zero_point: r.i8() as i32 }, -100, 120).unwrap();
            for m in 1..=MR_QUADS {
                let x = r.i8s(m * k);
                // Bytes past k hold junk: their weights are zero.
                let mut a: Vec<u8> = (0..m * p.kp).map(|_| r.next() as u8).collect();
                for row in 0..m {
                    u8::convert(&mut a[row * p.kp..row * p.kp + k], &x[row * k..(row + 1) * k]);
                }
                let ldy = n + 3;
                for &isa in &isas {
                    let mut y = vec![77i8; m * ldy];
                    for b in 0..p.blocks() {
                        let nc = NR.min(n - b * NR);
                        run_tile_quads(isa, &a, m, p.block(b), p.kp, &o, &mut y[b * NR..], ldy, nc);
                    }
                    for row in 0..m {
                        for j in 0..n {
                            let mut acc = bias[j];
                            for kk in 0..k {
                                acc += (x[row * k + kk] as i32 - izp) * w[j * k + kk] as i32;
                            }
                            let want = super::super::reference::requantize_ref(acc, scales[j], &o);
                            assert_eq!(y[row * ldy + j], want, "{isa:?} n={n} k={k} m={m} row={row} j={j}");
                        }
                        assert!(y[row * ldy + n..(row + 1) * ldy].iter().all(|&v| v == 77), "wrote past n");
                    }
                }
            }
        }
    }

    #[test]
    fn tiles_match_plain_sums() {
        let mut r = Lcg(7);
        for &(n, k) in &[(16, 2), (5, 1), (16, 9), (33, 64), (3, 200), (17, 7)] {
            let w = r.i8s(n * k);
            let bias: Vec<i32> = (0..n).map(|_| (r.next() as i32) >> 12).collect();
            let scales: Vec<f32> = (0..n).map(|_| r.f32(1e-4, 0.05)).collect();
            let izp = r.i8() as i32;
            let p = PackedGemm::pack(Layout::Pairs, n, k, |j, kk| w[j * k + kk], |j| bias[j], &scales, izp);
            let o = OutParams::new(QParams { scale: 1.0, zero_point: r.i8() as i32 }, -100, 120).unwrap();
            let x = r.i8s(MR * k);
            let mut a = vec![0i16; MR * p.kp];
            for row in 0..MR {
                i16::convert(&mut a[row * p.kp..row * p.kp + k], &x[row * k..(row + 1) * k]);
            }
            for isa in isas() {
                for b in 0..p.blocks() {
                    let mut out = [[0i8; NR]; MR];
                    run_tile(isa, &a, p.block(b), p.kp, &o, &mut out);
                    for (row, out_row) in out.iter().enumerate() {
                        for (c, &got) in out_row.iter().enumerate().take(NR.min(n - b * NR)) {
                            let j = b * NR + c;
                            let mut acc = bias[j];
                            for kk in 0..k {
                                acc += (x[row * k + kk] as i32 - izp) * w[j * k + kk] as i32;
                            }
                            let want = super::super::reference::requantize_ref(acc, scales[j], &o);
                            assert_eq!(got, want, "{isa:?} n={n} k={k} row={row} j={j}");
                        }
                    }
                }
            }
        }
    }
}
