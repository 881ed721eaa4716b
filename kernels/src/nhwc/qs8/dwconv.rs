//! int8 depthwise convolution, 16 channels per step.
//!
//! Packed layout, one block per 16 output channels (`u32` words): 16 biases (i32,
//! `bias − izp·Σ_taps w`), then `taps` rows of 16 int8 weights, then 16 scales (f32). Padding
//! taps read a row filled with the input zero point (XNNPACK's DWCONV "zero" buffer), so they
//! add exactly `izp·w`, which the packed bias removes.
//!
//! AVX2, multiplier 1 (the fast path): a second packing holds, per block, the 16 biases, then
//! one 64-byte entry per *pair* of taps `(2p, 2p+1)` with the weights widened to i16 and
//! interleaved per channel (`[w₂ₚ[c], w₂ₚ₊₁[c]]`, channels 0–7 then 8–15; an odd last tap pairs
//! with weight 0), then the 16 scales. Per output row the tap pointers of every output pixel are
//! computed once (padding → the zero-point row); the kernel then walks 128-channel chunks and 4
//! output pixels at a time: for a tap pair it interleaves the two taps' 16 input bytes
//! (`punpck{l,h}bw`), sign-extends to i16 and `_mm256_madd_epi16` against the weight pair gives
//! both taps' products for 8 channels in one step (|x·w| ≤ 2¹⁴, exact; the i32 sums wrap like
//! the scalar path). Other multipliers and the scalar/NEON paths run one pixel at a time.

use super::conv::check_geom_pub as check_geom;
use super::{channel_scales, requantize, task_count, Isa, OutParams, QParams, SyncPtr};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

const CB: usize = 16;
/// Channels per chunk of a row in the AVX2 path (keeps the chunk's inputs and weights in L1).
#[cfg(target_arch = "x86_64")]
const CHUNK: usize = 128;

/// int8 depthwise 2-D convolution, NHWC: `filter` `[kh, kw, C·M]`, output channel `c·M + m`
/// reads input channel `c`; `g.groups` = C, `g.group_in` = 1, `g.group_out` = M.
#[derive(Clone, Debug)]
pub struct DepthwiseQs8 {
    geom: Conv2dGeom,
    taps: usize,
    data: Vec<u32>,
    out: OutParams,
    input_zp: i32,
    isa: Isa,
    /// The AVX2 pair-interleaved i16 packing (multiplier 1 only; empty otherwise; unread on
    /// targets without AVX2).
    #[cfg_attr(not(all(target_arch = "x86_64", feature = "std")), allow(dead_code))]
    pairs16: Vec<u32>,
    /// The AVX-512 VNNI packing ([`super::dwconv_vnni`]; multiplier 1 on CPUs that run it,
    /// empty otherwise).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    vnni: Vec<u32>,
}

fn block_words(taps: usize) -> usize {
    2 * CB + taps * 4
}

/// Words per block of the pair-interleaved packing.
fn pair_block_words(taps: usize) -> usize {
    2 * CB + taps.div_ceil(2) * CB
}

/// Builds the pair-interleaved i16 packing from the int8 one (see the module comment).
fn pack_pairs16(data: &[u32], taps: usize, blocks: usize) -> Vec<u32> {
    let (words, words16, pairs) = (block_words(taps), pair_block_words(taps), taps.div_ceil(2));
    let mut out = vec![0u32; blocks * words16];
    for blk in 0..blocks {
        let d = &data[blk * words..(blk + 1) * words];
        let wb: &[i8] = bytemuck::cast_slice(&d[CB..CB + taps * 4]);
        let o = &mut out[blk * words16..(blk + 1) * words16];
        o[..CB].copy_from_slice(&d[..CB]);
        for p in 0..pairs {
            for c in 0..CB {
                let w0 = wb[2 * p * CB + c] as i16;
                let w1 = if 2 * p + 1 < taps { wb[(2 * p + 1) * CB + c] as i16 } else { 0 };
                o[CB + p * CB + c] = (w0 as u16 as u32) | ((w1 as u16 as u32) << 16);
            }
        }
        o[CB + pairs * CB..].copy_from_slice(&d[CB + taps * 4..]);
    }
    out
}

impl DepthwiseQs8 {
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
        check_geom(g)?;
        if g.group_in != 1 {
            return Err(format!("depthwise: group_in must be 1, got {}", g.group_in));
        }
        let cm = g.out_channels();
        let taps = g.kernel_h * g.kernel_w;
        if filter.len() != taps * cm {
            return Err(format!("filter has {} values, expected {}", filter.len(), taps * cm));
        }
        if let Some(b) = bias {
            if b.len() != cm {
                return Err(format!("bias has {} values for {cm} output channels", b.len()));
            }
        }
        let scales = channel_scales(cm, input, filter_scales, output)?;
        let out = OutParams::new(output, out_min, out_max)?;
        // Packed biases: `bias − izp·Σ_taps w` (the padding taps read the zero point).
        let packed_bias: Vec<i32> = (0..cm)
            .map(|oc| {
                let sum: i32 = (0..taps).map(|t| filter[t * cm + oc] as i32).sum();
                bias.map_or(0, |b| b[oc]).wrapping_sub(sum.wrapping_mul(input.zero_point))
            })
            .collect();
        let words = block_words(taps);
        let blocks = cm.div_ceil(CB);
        let mut data = vec![0u32; blocks * words];
        for blk in 0..blocks {
            let d = &mut data[blk * words..(blk + 1) * words];
            for c in 0..CB.min(cm - blk * CB) {
                let oc = blk * CB + c;
                for t in 0..taps {
                    let v = filter[t * cm + oc];
                    let byte = t * CB + c;
                    d[CB + byte / 4] |= (v as u8 as u32) << (8 * (byte % 4));
                }
                d[c] = packed_bias[oc] as u32;
                d[CB + taps * 4 + c] = scales[oc].to_bits();
            }
        }
        let pairs16 = if g.group_out == 1 && cfg!(target_arch = "x86_64") { pack_pairs16(&data, taps, blocks) } else { Vec::new() };
        let isa = Isa::best();
        #[cfg(target_arch = "x86_64")]
        let vnni = if g.group_out == 1 && isa == Isa::Avx512Vnni {
            super::dwconv_vnni::pack(cm, taps, |t, ch| filter[t * cm + ch], &packed_bias, &scales)
        } else {
            Vec::new()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let vnni = Vec::new();
        Ok(DepthwiseQs8 { geom: *g, taps, data, out, input_zp: input.zero_point, isa, pairs16, vnni })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    pub fn run(&self, par: &dyn Parallel, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        self.run_with(par, self.isa, x, y)
    }

    pub(crate) fn run_with(&self, par: &dyn Parallel, isa: Isa, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        let g = &self.geom;
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!(
                "depthwise: input {} / output {} values, expected {} / {}",
                x.len(),
                y.len(),
                g.in_len(),
                g.out_len()
            ));
        }
        let (c, m) = (g.groups, g.group_out);
        let cm = c * m;
        let rows = g.batch * g.out_h;
        if rows == 0 {
            return Ok(());
        }
        let ldy = g.out_w * cm;
        let tasks = task_count(par, g.out_len() * self.taps, rows);
        let per = rows.div_ceil(tasks);
        let zp_row = vec![self.input_zp as i8; cm];
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512Vnni && m == 1 && !self.vnni.is_empty() {
            super::dwconv_vnni::run(g, &self.vnni, &self.out, self.input_zp, par, tasks, x, y);
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if isa.has_avx2() && m == 1 {
            self.run_avx2_m1(par, tasks, per, &zp_row, x, y);
            return Ok(());
        }
        let words = block_words(self.taps);
        let yp = SyncPtr(y.as_mut_ptr());
        let run = |t: usize| {
            let (r0, r1) = (t * per, ((t + 1) * per).min(rows));
            if r0 >= r1 {
                return;
            }
            // SAFETY: tasks own disjoint output-row ranges [r0, r1) of `y`, whose length
            // (batch·out_h·ldy) was checked above.
            let yt = unsafe { core::slice::from_raw_parts_mut(yp.get().add(r0 * ldy), (r1 - r0) * ldy) };
            let mut expanded = if m > 1 { vec![0i8; self.taps * cm] } else { Vec::new() };
            let mut offs: Vec<Option<usize>> = Vec::with_capacity(self.taps);
            let mut tap_rows: Vec<&[i8]> = Vec::with_capacity(self.taps);
            let mut out = [0i8; CB];
            let full = cm / CB;
            for row in r0..r1 {
                let (b, oy) = (row / g.out_h, row % g.out_h);
                for ox in 0..g.out_w {
                    // Input offset of each tap's pixel, or None in the padding.
                    offs.clear();
                    for ky in 0..g.kernel_h {
                        let iy = (oy * g.stride_h + ky * g.dilation_h).checked_sub(g.pad_top).filter(|&v| v < g.in_h);
                        for kx in 0..g.kernel_w {
                            let ix = (ox * g.stride_w + kx * g.dilation_w)
                                .checked_sub(g.pad_left)
                                .filter(|&v| v < g.in_w);
                            offs.push(iy.zip(ix).map(|(iy, ix)| ((b * g.in_h + iy) * g.in_w + ix) * c));
                        }
                    }
                    let yo = &mut yt[(row - r0) * ldy + ox * cm..(row - r0) * ldy + (ox + 1) * cm];
                    if m > 1 {
                        for (t, off) in offs.iter().enumerate() {
                            let src = off.map_or(&zp_row[..c], |at| &x[at..at + c]);
                            for (oc, e) in expanded[t * cm..(t + 1) * cm].iter_mut().enumerate() {
                                *e = src[oc / m];
                            }
                        }
                        let rows_m: Vec<&[i8]> = expanded.chunks_exact(cm).collect();
                        self.pixel(isa, &rows_m, words, full, &mut out, yo);
                    } else {
                        tap_rows.clear();
                        tap_rows.extend(offs.iter().map(|off| off.map_or(&zp_row[..c], |at| &x[at..at + c])));
                        self.pixel(isa, &tap_rows, words, full, &mut out, yo);
                    }
                }
            }
        };
        if tasks == 1 {
            run(0);
        } else {
            par.for_each(tasks, &run);
        }
        Ok(())
    }
}

#[cfg(target_arch = "x86_64")]
impl DepthwiseQs8 {
    /// The AVX2 multiplier-1 path (sizes of `x`/`y` already checked; `isa` is AVX2).
    fn run_avx2_m1(&self, par: &dyn Parallel, tasks: usize, per: usize, zp_row: &[i8], x: &[i8], y: &mut [i8]) {
        let g = &self.geom;
        let c = g.groups;
        let (taps, kw) = (self.taps, g.kernel_w);
        let rows = g.batch * g.out_h;
        let ldy = g.out_w * c;
        let words16 = pair_block_words(taps);
        let full = c / CB;
        let rem = c % CB;
        assert!(self.pairs16.len() == c.div_ceil(CB) * words16 && zp_row.len() == c);
        let yp = SyncPtr(y.as_mut_ptr());
        let run = |t: usize| {
            let (r0, r1) = (t * per, ((t + 1) * per).min(rows));
            if r0 >= r1 {
                return;
            }
            // Tap pointers of every pixel of the current output row, pixel-major.
            let mut ptrs: Vec<*const i8> = vec![core::ptr::null(); g.out_w * taps];
            let mut tail_in = vec![0i8; taps * CB];
            let mut tail_ptrs: Vec<*const i8> = vec![core::ptr::null(); taps];
            let mut tail_out = [0i8; CB];
            for row in r0..r1 {
                let (b, oy) = (row / g.out_h, row % g.out_h);
                for ky in 0..g.kernel_h {
                    let iy = (oy * g.stride_h + ky * g.dilation_h).wrapping_sub(g.pad_top);
                    // `wrapping_add` only forms addresses; they are dereferenced (by the
                    // kernel) only for in-bounds pixels.
                    let base = x.as_ptr().wrapping_add((b * g.in_h + iy.min(g.in_h)) * g.in_w * c);
                    for (ox, px) in ptrs.chunks_exact_mut(taps).enumerate() {
                        for kx in 0..kw {
                            let ix = (ox * g.stride_w + kx * g.dilation_w).wrapping_sub(g.pad_left);
                            px[ky * kw + kx] = if iy < g.in_h && ix < g.in_w {
                                base.wrapping_add(ix * c)
                            } else {
                                zp_row.as_ptr()
                            };
                        }
                    }
                }
                // SAFETY: tasks own disjoint output rows; row < batch·out_h, so this row's
                // `ldy` bytes lie inside `y` (length checked by `run_with`).
                let yrow = unsafe { yp.get().add(row * ldy) };
                let mut cs = 0;
                while cs < full * CB {
                    let ce = (cs + CHUNK).min(full * CB);
                    let mut ox = 0;
                    while ox < g.out_w {
                        let step = if ox + 4 <= g.out_w { 4 } else { 1 };
                        let mut cb = cs;
                        while cb < ce {
                            // SAFETY: AVX2 was checked when `Isa::Avx2` was chosen. Every tap
                            // pointer addresses a whole input pixel (or the zero row) of `c`
                            // bytes and cb + 16 <= full·16 <= c; the block `cb/16` lies inside
                            // `pairs16` (asserted); the `step` output pixels at `ox` hold `c`
                            // bytes each inside this task's row.
                            unsafe {
                                let w = self.pairs16.as_ptr().add(cb / CB * words16);
                                let p = ptrs.as_ptr().add(ox * taps);
                                let o = yrow.add(ox * c + cb);
                                match (step, taps) {
                                    (4, 9) => avx2::pixels::<4, 9>(p, taps, cb, w, &self.out, o, c),
                                    (4, 25) => avx2::pixels::<4, 25>(p, taps, cb, w, &self.out, o, c),
                                    (4, _) => avx2::pixels::<4, 0>(p, taps, cb, w, &self.out, o, c),
                                    (_, 9) => avx2::pixels::<1, 9>(p, taps, cb, w, &self.out, o, c),
                                    _ => avx2::pixels::<1, 0>(p, taps, cb, w, &self.out, o, c),
                                }
                            }
                            cb += CB;
                        }
                        ox += step;
                    }
                    cs = ce;
                }
                if rem > 0 {
                    for ox in 0..g.out_w {
                        for t in 0..taps {
                            // SAFETY: the tap pointer addresses `c` readable bytes; we read the
                            // last `rem` of them.
                            let src = unsafe { core::slice::from_raw_parts(ptrs[ox * taps + t].add(full * CB), rem) };
                            tail_in[t * CB..t * CB + rem].copy_from_slice(src);
                            tail_ptrs[t] = tail_in[t * CB..].as_ptr();
                        }
                        // SAFETY: AVX2 checked; the tail pointers address 16 bytes each; block
                        // `full` exists (rem > 0); `tail_out` holds 16 bytes.
                        unsafe {
                            let w = self.pairs16.as_ptr().add(full * words16);
                            avx2::pixels::<1, 0>(tail_ptrs.as_ptr(), taps, 0, w, &self.out, tail_out.as_mut_ptr(), CB);
                            core::ptr::copy_nonoverlapping(tail_out.as_ptr(), yrow.add(ox * c + full * CB), rem);
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
}

impl DepthwiseQs8 {
    /// All channels of one output pixel: full 16-channel blocks, then a scalar tail.
    fn pixel(&self, isa: Isa, rows: &[&[i8]], words: usize, full: usize, out: &mut [i8; CB], yo: &mut [i8]) {
        for blk in 0..full {
            let w = &self.data[blk * words..(blk + 1) * words];
            block(isa, rows, blk * CB, w, &self.out, out);
            yo[blk * CB..(blk + 1) * CB].copy_from_slice(out);
        }
        let rem = yo.len() - full * CB;
        if rem > 0 {
            let w = &self.data[full * words..(full + 1) * words];
            tail_scalar(rows, full * CB, rem, w, &self.out, &mut yo[full * CB..]);
        }
    }
}

/// The last `rem` (< 16) channels, plain Rust (same arithmetic as the blocks).
fn tail_scalar(rows: &[&[i8]], off: usize, rem: usize, w: &[u32], o: &OutParams, out: &mut [i8]) {
    let taps = rows.len();
    let wb: &[i8] = bytemuck::cast_slice(&w[CB..CB + taps * 4]);
    for (c, yv) in out.iter_mut().enumerate().take(rem) {
        let mut acc = w[c] as i32;
        for (t, r) in rows.iter().enumerate() {
            acc = acc.wrapping_add(r[off + c] as i32 * wb[t * CB + c] as i32);
        }
        *yv = requantize(acc, f32::from_bits(w[CB + taps * 4 + c]), o);
    }
}

/// 16 channels of one output pixel: `rows[t][off..off + 16]` are tap `t`'s inputs.
fn block(isa: Isa, rows: &[&[i8]], off: usize, w: &[u32], o: &OutParams, out: &mut [i8; CB]) {
    let taps = rows.len();
    assert!(w.len() == block_words(taps) && rows.iter().all(|r| r.len() >= off + CB));
    match isa {
        Isa::Scalar => block_scalar(rows, off, w, o, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 checked when `Isa::Avx2` was chosen; all tap rows hold 16 bytes at `off`
        // and `w` is one whole block (asserted above).
        Isa::Avx2 | Isa::Avx512Vnni => unsafe { avx2::block(rows, off, w.as_ptr(), o, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is baseline on aarch64; bounds asserted above.
        Isa::Neon => unsafe { neon::block(rows, off, w.as_ptr(), o, out) },
    }
}

fn block_scalar(rows: &[&[i8]], off: usize, w: &[u32], o: &OutParams, out: &mut [i8; CB]) {
    let taps = rows.len();
    let wb: &[i8] = bytemuck::cast_slice(&w[CB..CB + taps * 4]);
    let mut acc = [0i32; CB];
    for (c, a) in acc.iter_mut().enumerate() {
        *a = w[c] as i32;
    }
    for (t, r) in rows.iter().enumerate() {
        for c in 0..CB {
            acc[c] = acc[c].wrapping_add(r[off + c] as i32 * wb[t * CB + c] as i32);
        }
    }
    for c in 0..CB {
        out[c] = requantize(acc[c], f32::from_bits(w[CB + taps * 4 + c]), o);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::gemm::avx2::requant16;
    use super::{OutParams, CB};
    use core::arch::x86_64::*;

    /// # Safety
    /// AVX2 must be available; each `rows[t]` must hold 16 bytes at `off`; `w` must point to one
    /// packed block for `rows.len()` taps.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block(rows: &[&[i8]], off: usize, w: *const u32, o: &OutParams, out: &mut [i8; CB]) {
        let taps = rows.len();
        let mut acc0 = _mm256_loadu_si256(w as *const __m256i);
        let mut acc1 = _mm256_loadu_si256(w.add(8) as *const __m256i);
        let wp = w.add(CB) as *const i8;
        for (t, r) in rows.iter().enumerate() {
            let xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(r.as_ptr().add(off) as *const __m128i));
            let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(t * CB) as *const __m128i));
            // |x·w| ≤ 2¹⁴: exact in i16.
            let p = _mm256_mullo_epi16(xv, wv);
            acc0 = _mm256_add_epi32(acc0, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(p)));
            acc1 = _mm256_add_epi32(acc1, _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(p)));
        }
        let v = requant16(acc0, acc1, w.add(CB + taps * 4) as *const f32, o);
        _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, v);
    }

    /// `P` output pixels × 16 channels from the pair-interleaved packing (`T`: the tap count when
    /// fixed at compile time, which must then equal `taps`, or 0): `ptrs` holds `P·taps`
    /// tap pointers (pixel-major), each read at `off..off + 16`; `w` points to one block
    /// (`super::pair_block_words(taps)` words); pixel `i`'s 16 outputs go to `out + i·ostride`.
    ///
    /// # Safety
    /// AVX2 must be available; every pointer must be valid as described.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pixels<const P: usize, const T: usize>(
        ptrs: *const *const i8,
        taps: usize,
        off: usize,
        w: *const u32,
        o: &OutParams,
        out: *mut i8,
        ostride: usize,
    ) {
        // A tap count fixed at compile time (`T` > 0) unrolls the tap loop.
        let taps = if T > 0 { T } else { taps };
        let b0 = _mm256_loadu_si256(w as *const __m256i);
        let b1 = _mm256_loadu_si256(w.add(8) as *const __m256i);
        let mut a0 = [b0; P];
        let mut a1 = [b1; P];
        let pairs = taps.div_ceil(2);
        let mut wp = w.add(CB) as *const __m256i;
        for p in 0..pairs {
            let t0 = 2 * p;
            // An odd last tap pairs with itself; its second weight is 0.
            let t1 = if t0 + 1 < taps { t0 + 1 } else { t0 };
            let wlo = _mm256_loadu_si256(wp);
            let whi = _mm256_loadu_si256(wp.add(1));
            for i in 0..P {
                let x0 = _mm_loadu_si128((*ptrs.add(i * taps + t0)).add(off) as *const __m128i);
                let x1 = _mm_loadu_si128((*ptrs.add(i * taps + t1)).add(off) as *const __m128i);
                let lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1));
                let hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1));
                a0[i] = _mm256_add_epi32(a0[i], _mm256_madd_epi16(lo, wlo));
                a1[i] = _mm256_add_epi32(a1[i], _mm256_madd_epi16(hi, whi));
            }
            wp = wp.add(2);
        }
        let scales = w.add(CB + pairs * CB) as *const f32;
        for i in 0..P {
            let v = requant16(a0[i], a1[i], scales, o);
            _mm_storeu_si128(out.add(i * ostride) as *mut __m128i, v);
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::super::gemm::neon::requant4;
    use super::{OutParams, CB};
    use core::arch::aarch64::*;

    /// # Safety
    /// Each `rows[t]` must hold 16 bytes at `off`; `w` must point to one packed block.
    pub(super) unsafe fn block(rows: &[&[i8]], off: usize, w: *const u32, o: &OutParams, out: &mut [i8; CB]) {
        let taps = rows.len();
        let b = w as *const i32;
        let mut acc = [vld1q_s32(b), vld1q_s32(b.add(4)), vld1q_s32(b.add(8)), vld1q_s32(b.add(12))];
        let wp = w.add(CB) as *const i8;
        for (t, r) in rows.iter().enumerate() {
            let xv = vld1q_s8(r.as_ptr().add(off));
            let wv = vld1q_s8(wp.add(t * CB));
            let lo = vmull_s8(vget_low_s8(xv), vget_low_s8(wv));
            let hi = vmull_high_s8(xv, wv);
            acc[0] = vaddw_s16(acc[0], vget_low_s16(lo));
            acc[1] = vaddw_high_s16(acc[1], lo);
            acc[2] = vaddw_s16(acc[2], vget_low_s16(hi));
            acc[3] = vaddw_high_s16(acc[3], hi);
        }
        let s = w.add(CB + taps * 4) as *const f32;
        let q0 = vcombine_s16(requant4(acc[0], s, o), requant4(acc[1], s.add(4), o));
        let q1 = vcombine_s16(requant4(acc[2], s.add(8), o), requant4(acc[3], s.add(12), o));
        vst1q_s8(out.as_mut_ptr(), vcombine_s8(vqmovn_s16(q0), vqmovn_s16(q1)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::super::test_util::{isas, FakePar, Lcg};
    use super::*;
    use crate::nhwc::Serial;

    #[test]
    fn depthwise_matches_reference() {
        let mut r = Lcg(21);
        // (batch, h, w, c, m, k, stride, dilation, pad)
        let cases = [
            (1, 8, 8, 32, 1, 3, 1, 1, 1),
            (1, 9, 7, 24, 1, 3, 2, 1, 1),
            (2, 6, 5, 19, 1, 3, 1, 1, 1),
            (1, 7, 7, 40, 1, 5, 2, 1, 2),
            (1, 6, 6, 5, 2, 3, 1, 2, 2),
            (1, 4, 5, 9, 3, 3, 1, 1, 0),
            (1, 3, 3, 17, 1, 1, 1, 1, 0),
            (1, 11, 13, 144, 1, 3, 1, 1, 1), // 128-channel chunks + a 16-block chunk
            (2, 10, 9, 88, 1, 3, 2, 1, 1),   // tail of 8, batch 2
            (1, 9, 10, 48, 1, 5, 1, 1, 2),   // 25 taps (odd pair)
            (1, 5, 6, 20, 1, 3, 1, 1, 1),    // tail of 4, widths not a multiple of 4
            (1, 9, 9, 72, 1, 3, 1, 3, 3),    // dilation 3 (ring of 7 rows), tail of 8 in the 32-group
            (3, 8, 7, 33, 1, 3, 2, 1, 0),    // no padding, stride 2, one channel past a group
            (1, 6, 6, 16, 1, 7, 1, 1, 3),    // 49 taps (generic tap count)
            (1, 12, 12, 96, 1, 3, 2, 1, 1),  // MobileNetV2's stride-2 shape, smaller
            (2, 40, 40, 64, 1, 3, 1, 1, 1),  // big enough to split into tasks
        ];
        for (i, &(bt, h, w, c, m, k, s, d, p)) in cases.iter().enumerate() {
            let oh = (h + 2 * p - (k - 1) * d - 1) / s + 1;
            let ow = (w + 2 * p - (k - 1) * d - 1) / s + 1;
            let g = Conv2dGeom {
                batch: bt,
                in_h: h,
                in_w: w,
                out_h: oh,
                out_w: ow,
                kernel_h: k,
                kernel_w: k,
                stride_h: s,
                stride_w: s,
                dilation_h: d,
                dilation_w: d,
                pad_top: p,
                pad_left: p,
                groups: c,
                group_in: 1,
                group_out: m,
            };
            let cm = c * m;
            let x = r.i8s(g.in_len());
            let wt = r.i8s(k * k * cm);
            let scales: Vec<f32> = (0..cm).map(|_| r.f32(0.002, 0.05)).collect();
            let bias: Vec<i32> = (0..cm).map(|_| (r.next() as i32) >> 18).collect();
            let input = QParams { scale: r.f32(0.01, 0.1), zero_point: r.i8() as i32 };
            let output = QParams { scale: r.f32(0.02, 0.2), zero_point: r.i8() as i32 };
            for (lo, hi) in [(-128i8, 127i8), (-50, 60)] {
                let op = DepthwiseQs8::new(&g, input, &wt, &scales, Some(&bias), output, lo, hi).unwrap();
                let want = reference::depthwise_qs8(&g, input, &x, &wt, &scales, Some(&bias), output, lo, hi);
                for isa in isas() {
                    for par in [&Serial as &dyn Parallel, &FakePar] {
                        let mut y = vec![0i8; g.out_len()];
                        op.run_with(par, isa, &x, &mut y).unwrap();
                        assert_eq!(y, want, "case {i} {isa:?} ({lo},{hi})");
                    }
                }
            }
        }
    }

    #[test]
    fn depthwise_bad_sizes() {
        let q = QParams { scale: 0.1, zero_point: 0 };
        let g = Conv2dGeom {
            batch: 1,
            in_h: 4,
            in_w: 4,
            out_h: 4,
            out_w: 4,
            kernel_h: 3,
            kernel_w: 3,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_top: 1,
            pad_left: 1,
            groups: 8,
            group_in: 1,
            group_out: 1,
        };
        assert!(DepthwiseQs8::new(&g, q, &[0; 71], &[0.1], None, q, -128, 127).is_err());
        assert!(DepthwiseQs8::new(&g, q, &[0; 72], &[0.1; 3], None, q, -128, 127).is_err());
        let mut bad = g;
        bad.group_in = 2;
        assert!(DepthwiseQs8::new(&bad, q, &[0; 72], &[0.1], None, q, -128, 127).is_err());
        let op = DepthwiseQs8::new(&g, q, &[0; 72], &[0.1], None, q, -128, 127).unwrap();
        assert!(op.run(&Serial, &[0; 127], &mut [0; 128]).is_err());
    }
}
