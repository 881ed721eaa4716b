//! Packed-weight f32 GEMM with fused bias and clamp (the XNNPACK approach).
//!
//! The weights `W` (`[n, k]`, output channel major) are packed once into column panels of
//! [`NR`] = 16 output channels: each panel is the 16 biases followed by `k` rows of 16 weights
//! (zero-padded past `n`), 64-byte aligned. The activations `A` are read in place, row `i` at
//! `a[i * a_stride]`, so an NHWC tensor's pixels are GEMM rows without any copying.
//!
//! A micro-kernel computes an `MR × 16` tile of `C` (`MR` ≤ [`MR`] = 6) over the whole `k`:
//! it starts its accumulators at the bias, broadcasts one `A` element per row and step and
//! multiplies it into the panel row, then clamps and stores. Implementations: AVX-512F (up to
//! 12 rows × two panels per tile) and AVX2+FMA on x86-64 (chosen at run time with `std`, at
//! compile time without), NEON on aarch64, and a plain-Rust fallback everywhere. Every
//! implementation sums each element in `k` order from the bias, so a result does not depend on
//! how rows or panels were tiled or split over threads (the one-row GEMV kernels, used only when
//! `m == 1`, split the sum).

use super::{Parallel, PostOp};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Output channels per packed panel (the micro-kernels' tile width).
pub const NR: usize = 16;
/// Most rows of `A` the AVX2 / NEON / scalar micro-kernels handle at once.
pub const MR: usize = 6;
/// Most rows of `A` any micro-kernel handles at once (the AVX-512 one: 12 zmm accumulators).
pub const MR_MAX: usize = 12;

/// Multiply-accumulates below which an operator stays on one thread (and the least work a task
/// gets when it is split).
pub(crate) const MIN_TASK_MACS: usize = 150_000;

/// One 64-byte-aligned row of a packed panel.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Lanes(pub(crate) [f32; NR]);

/// Weights (and bias) packed into 16-column panels for [`gemm_f32`].
#[derive(Clone)]
pub struct PackedWeightsF32 {
    n: usize,
    k: usize,
    /// Panel `p` is `data[p * (k + 1)..(p + 1) * (k + 1)]`: the bias row, then `k` weight rows.
    data: Vec<Lanes>,
}

impl PackedWeightsF32 {
    /// Packs `w` (`[n, k]` row-major: output channel major, like XNNPACK's fully-connected and
    /// 1×1-convolution filters) and `bias` (`[n]`, zeros when `None`).
    pub fn new(n: usize, k: usize, w: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        Self::new_strided(n, k, w, k, bias)
    }

    /// As [`new`](Self::new), with output channel `j`'s `k` weights at `w[j * w_stride..]`.
    pub(crate) fn new_strided(
        n: usize,
        k: usize,
        w: &[f32],
        w_stride: usize,
        bias: Option<&[f32]>,
    ) -> Result<Self, String> {
        if n == 0 || k == 0 {
            return Err(format!("packed weights: n ({n}) and k ({k}) must be nonzero"));
        }
        let need = (n - 1)
            .checked_mul(w_stride)
            .and_then(|v| v.checked_add(k))
            .ok_or("packed weights: size overflows")?;
        if w_stride < k || w.len() < need {
            return Err(format!(
                "packed weights: filter has {} elements, [{n}, {k}] needs {need}",
                w.len()
            ));
        }
        if let Some(b) = bias {
            if b.len() != n {
                return Err(format!("packed weights: bias has {} elements, expected {n}", b.len()));
            }
        }
        let panels = n.div_ceil(NR);
        let mut data = vec![Lanes([0.0; NR]); panels * (k + 1)];
        for p in 0..panels {
            let panel = &mut data[p * (k + 1)..(p + 1) * (k + 1)];
            for j in 0..NR.min(n - p * NR) {
                let col = p * NR + j;
                panel[0].0[j] = bias.map_or(0.0, |b| b[col]);
                let row = &w[col * w_stride..col * w_stride + k];
                for (kk, &v) in row.iter().enumerate() {
                    panel[kk + 1].0[j] = v;
                }
            }
        }
        Ok(PackedWeightsF32 { n, k, data })
    }

    /// Output channels (columns of `C`).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Reduction length (columns of `A`).
    pub fn k(&self) -> usize {
        self.k
    }
    pub(crate) fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }
    pub(crate) fn panel_ptr(&self, p: usize) -> *const f32 {
        self.data[p * (self.k + 1)..].as_ptr() as *const f32
    }
}

/// Whether the AVX2+FMA kernels may run (run-time detection with `std`, the compile-time
/// target features without).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "avx2", target_feature = "fma"))
    }
}

/// A CPU probe run once: `state` holds 0 (not probed yet), 1 (no) or 2 (yes).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) fn probe_once(state: &core::sync::atomic::AtomicU8, probe: impl FnOnce() -> bool) -> bool {
    use core::sync::atomic::Ordering;
    match state.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let yes = probe();
            state.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// Whether the AVX-512F kernels may run (run-time detection with `std`, unless the environment
/// variable `RBUILD_KERNELS_NO_AVX512` is set, for A/B timing; the compile-time target features
/// without `std`).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512() -> bool {
    #[cfg(feature = "std")]
    {
        static PROBED: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
        probe_once(&PROBED, || {
            has_avx2_fma() && std::is_x86_feature_detected!("avx512f") && std::env::var_os("RBUILD_KERNELS_NO_AVX512").is_none()
        })
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "avx512f", target_feature = "avx2", target_feature = "fma"))
    }
}

/// Which micro-kernel implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ukernel {
    /// Plain Rust, any target (chosen at run time; a no_std build with AVX2 enabled at compile
    /// time, and aarch64 (always NEON), never pick it outside the tests).
    #[cfg_attr(any(not(feature = "std"), target_arch = "aarch64"), allow(dead_code))]
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    /// AVX-512F GEMM tiles (up to [`MR_MAX`] rows × 16); the other operators run their AVX2
    /// kernels under it (every AVX-512 CPU has AVX2 and FMA).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Ukernel {
    /// The fastest implementation this machine runs.
    pub(crate) fn best() -> Ukernel {
        #[cfg(target_arch = "x86_64")]
        if has_avx512() {
            return Ukernel::Avx512;
        }
        #[cfg(target_arch = "x86_64")]
        if has_avx2_fma() {
            return Ukernel::Avx2Fma;
        }
        #[cfg(target_arch = "aarch64")]
        {
            Ukernel::Neon
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            Ukernel::Scalar
        }
    }

    /// Whether this implementation runs on this CPU.
    pub(crate) fn supported(self) -> bool {
        match self {
            Ukernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Ukernel::Avx2Fma => has_avx2_fma(),
            #[cfg(target_arch = "x86_64")]
            Ukernel::Avx512 => has_avx512(),
            #[cfg(target_arch = "aarch64")]
            Ukernel::Neon => true,
        }
    }

    /// Every implementation this CPU runs (the tests check each against the reference).
    #[cfg(test)]
    pub(crate) fn all_supported() -> Vec<Ukernel> {
        let all = [
            Ukernel::Scalar,
            #[cfg(target_arch = "x86_64")]
            Ukernel::Avx2Fma,
            #[cfg(target_arch = "x86_64")]
            Ukernel::Avx512,
            #[cfg(target_arch = "aarch64")]
            Ukernel::Neon,
        ];
        all.into_iter().filter(|u| u.supported()).collect()
    }

    /// Most rows one tile of this implementation computes.
    #[inline]
    pub(crate) fn mr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Ukernel::Avx512 => MR_MAX,
            _ => MR,
        }
    }

    /// Computes one `mr × nr` tile of `C` (`mr <= self.mr()`).
    ///
    /// # Safety
    /// `1 <= mr <= self.mr()`, `1 <= nr <= NR`; `a + i * a_stride + kk` is readable for `i < mr`,
    /// `kk < k`; `w` is a packed panel of `k + 1` aligned [`Lanes`] rows; `c + i * c_stride + j`
    /// is writable for `i < mr`, `j < nr`, and none of it overlaps `a` or `w`. For
    /// [`Ukernel::Avx2Fma`] the CPU has AVX2 and FMA.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) unsafe fn tile(
        self,
        mr: usize,
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        match self {
            // SAFETY: forwarded from this function's contract.
            Ukernel::Scalar => unsafe { scalar::tile(mr, nr, k, a, a_stride, w, c, c_stride, min, max) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded; the caller guarantees AVX2+FMA for this variant.
            Ukernel::Avx2Fma => unsafe { avx2::tile(mr, nr, k, a, a_stride, w, c, c_stride, min, max) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded; the caller guarantees AVX-512F for this variant.
            Ukernel::Avx512 => unsafe { avx512::tile(mr, nr, k, a, a_stride, w, c, c_stride, min, max) },
            #[cfg(target_arch = "aarch64")]
            // SAFETY: forwarded; NEON is baseline on aarch64.
            Ukernel::Neon => unsafe { neon::tile(mr, nr, k, a, a_stride, w, c, c_stride, min, max) },
        }
    }

    /// One `1 × nr` tile of a GEMM with a single row (GEMV): as [`tile`](Self::tile) with
    /// `mr = 1`, but the SIMD kernels split the sum over several accumulators (faster, rounded
    /// differently), so only call it when `m == 1` for the whole GEMM.
    ///
    /// # Safety
    /// As [`tile`](Self::tile) with `mr = 1`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) unsafe fn gemv(self, nr: usize, k: usize, a: *const f32, w: *const f32, c: *mut f32, min: f32, max: f32) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded; the caller guarantees AVX2+FMA for this variant.
            Ukernel::Avx2Fma => unsafe { avx2::tile_1(nr, k, a, w, c, min, max) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded; the caller guarantees AVX-512F for this variant.
            Ukernel::Avx512 => unsafe { avx512::tile_1(nr, k, a, w, c, min, max) },
            // SAFETY: forwarded from this function's contract.
            _ => unsafe { self.tile(1, nr, k, a, 0, w, c, 0, min, max) },
        }
    }
}

/// Copies the first `nr` columns of an `mr × 16` tile into `C` (partial tiles).
///
/// # Safety
/// `c + i * c_stride + j` is writable for `i < mr`, `j < nr <= NR`.
#[inline(always)]
unsafe fn store_partial(tmp: &[[f32; NR]], nr: usize, c: *mut f32, c_stride: usize) {
    for (i, row) in tmp.iter().enumerate() {
        // SAFETY: row `i < mr` of C has `nr` writable elements (caller's contract).
        unsafe { core::ptr::copy_nonoverlapping(row.as_ptr(), c.add(i * c_stride), nr) };
    }
}

/// The plain-Rust micro-kernel (any target; also the tests' check on the SIMD ones).
pub(crate) mod scalar {
    use super::{store_partial, MR, NR};

    /// # Safety
    /// As [`super::Ukernel::tile`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn tile(
        mr: usize,
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        let mut acc = [[0.0f32; NR]; MR];
        // SAFETY: the panel has k + 1 rows of NR floats; A rows i < mr have k readable floats.
        unsafe {
            let bias = core::slice::from_raw_parts(w, NR);
            for row in acc.iter_mut().take(mr) {
                row.copy_from_slice(bias);
            }
            for kk in 0..k {
                let wrow = core::slice::from_raw_parts(w.add((kk + 1) * NR), NR);
                for (i, row) in acc.iter_mut().enumerate().take(mr) {
                    let av = *a.add(i * a_stride + kk);
                    for (o, &wv) in row.iter_mut().zip(wrow) {
                        *o += av * wv;
                    }
                }
            }
        }
        for row in acc.iter_mut().take(mr) {
            for v in row.iter_mut() {
                *v = v.max(min).min(max);
            }
        }
        // SAFETY: C's tile is writable (caller's contract).
        unsafe { store_partial(&acc[..mr], nr, c, c_stride) };
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{store_partial, NR};
    use core::arch::x86_64::*;

    /// # Safety
    /// As [`super::Ukernel::tile`], and the CPU has AVX2 and FMA.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile(
        mr: usize,
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: forwarded from this function's contract (each arm matches `mr`).
        unsafe {
            match mr {
                6 => tile_m::<6>(nr, k, a, a_stride, w, c, c_stride, min, max),
                5 => tile_m::<5>(nr, k, a, a_stride, w, c, c_stride, min, max),
                4 => tile_m::<4>(nr, k, a, a_stride, w, c, c_stride, min, max),
                3 => tile_m::<3>(nr, k, a, a_stride, w, c, c_stride, min, max),
                2 => tile_m::<2>(nr, k, a, a_stride, w, c, c_stride, min, max),
                _ => tile_m::<1>(nr, k, a, 0, w, c, 0, min, max),
            }
        }
    }

    /// `M × 16` tile: 2·M ymm accumulators, two panel loads and M broadcasts per step.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile_m<const M: usize>(
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: every pointer stays inside the ranges the caller guarantees: panel rows
        // 0..=k (64-byte aligned, so aligned loads are fine), A rows i < M columns kk < k,
        // C rows i < M columns j < nr.
        unsafe {
            let b0 = _mm256_load_ps(w);
            let b1 = _mm256_load_ps(w.add(8));
            let mut acc0 = [b0; M];
            let mut acc1 = [b1; M];
            let mut ap = [a; M];
            for (i, p) in ap.iter_mut().enumerate() {
                *p = a.add(i * a_stride);
            }
            let mut wp = w.add(NR);
            let mut kk = 0;
            while kk + 2 <= k {
                let b0 = _mm256_load_ps(wp);
                let b1 = _mm256_load_ps(wp.add(8));
                for i in 0..M {
                    let av = _mm256_broadcast_ss(&*ap[i].add(kk));
                    acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
                    acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
                }
                let b0 = _mm256_load_ps(wp.add(NR));
                let b1 = _mm256_load_ps(wp.add(NR + 8));
                for i in 0..M {
                    let av = _mm256_broadcast_ss(&*ap[i].add(kk + 1));
                    acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
                    acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
                }
                wp = wp.add(2 * NR);
                kk += 2;
            }
            if kk < k {
                let b0 = _mm256_load_ps(wp);
                let b1 = _mm256_load_ps(wp.add(8));
                for i in 0..M {
                    let av = _mm256_broadcast_ss(&*ap[i].add(kk));
                    acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
                    acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
                }
            }
            let vmin = _mm256_set1_ps(min);
            let vmax = _mm256_set1_ps(max);
            for i in 0..M {
                acc0[i] = _mm256_min_ps(_mm256_max_ps(acc0[i], vmin), vmax);
                acc1[i] = _mm256_min_ps(_mm256_max_ps(acc1[i], vmin), vmax);
            }
            if nr == NR {
                for i in 0..M {
                    let cp = c.add(i * c_stride);
                    _mm256_storeu_ps(cp, acc0[i]);
                    _mm256_storeu_ps(cp.add(8), acc1[i]);
                }
            } else {
                let mut tmp = [[0.0f32; NR]; M];
                for i in 0..M {
                    _mm256_storeu_ps(tmp[i].as_mut_ptr(), acc0[i]);
                    _mm256_storeu_ps(tmp[i].as_mut_ptr().add(8), acc1[i]);
                }
                store_partial(&tmp, nr, c, c_stride);
            }
        }
    }

    /// One row (GEMV): four accumulators over even/odd `k` hide the FMA latency. The sums
    /// round differently from `tile_m`, so only GEMMs with one row in all use it (a row's
    /// result must not depend on how the rows were split over threads).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(super) unsafe fn tile_1(nr: usize, k: usize, a: *const f32, w: *const f32, c: *mut f32, min: f32, max: f32) {
        // SAFETY: as in `tile_m` with M = 1.
        unsafe {
            let mut s0 = _mm256_load_ps(w);
            let mut s1 = _mm256_load_ps(w.add(8));
            let mut t0 = _mm256_setzero_ps();
            let mut t1 = _mm256_setzero_ps();
            let mut wp = w.add(NR);
            let mut kk = 0;
            while kk + 2 <= k {
                let av = _mm256_broadcast_ss(&*a.add(kk));
                s0 = _mm256_fmadd_ps(av, _mm256_load_ps(wp), s0);
                s1 = _mm256_fmadd_ps(av, _mm256_load_ps(wp.add(8)), s1);
                let av = _mm256_broadcast_ss(&*a.add(kk + 1));
                t0 = _mm256_fmadd_ps(av, _mm256_load_ps(wp.add(NR)), t0);
                t1 = _mm256_fmadd_ps(av, _mm256_load_ps(wp.add(NR + 8)), t1);
                wp = wp.add(2 * NR);
                kk += 2;
            }
            if kk < k {
                let av = _mm256_broadcast_ss(&*a.add(kk));
                s0 = _mm256_fmadd_ps(av, _mm256_load_ps(wp), s0);
                s1 = _mm256_fmadd_ps(av, _mm256_load_ps(wp.add(8)), s1);
            }
            let vmin = _mm256_set1_ps(min);
            let vmax = _mm256_set1_ps(max);
            let r0 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(s0, t0), vmin), vmax);
            let r1 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(s1, t1), vmin), vmax);
            if nr == NR {
                _mm256_storeu_ps(c, r0);
                _mm256_storeu_ps(c.add(8), r1);
            } else {
                let mut tmp = [[0.0f32; NR]; 1];
                _mm256_storeu_ps(tmp[0].as_mut_ptr(), r0);
                _mm256_storeu_ps(tmp[0].as_mut_ptr().add(8), r1);
                store_partial(&tmp, nr, c, 0);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::NR;
    use core::arch::x86_64::*;

    /// How many panel rows (64 bytes each) ahead the GEMV prefetches.
    const PREFETCH: usize = 64;

    /// # Safety
    /// As [`super::Ukernel::tile`] (`mr <= MR_MAX`), and the CPU has AVX-512F.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn tile(
        mr: usize,
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: forwarded from this function's contract (each arm matches `mr`).
        unsafe {
            match mr {
                12 => tile_m::<12>(nr, k, a, a_stride, w, c, c_stride, min, max),
                11 => tile_m::<11>(nr, k, a, a_stride, w, c, c_stride, min, max),
                10 => tile_m::<10>(nr, k, a, a_stride, w, c, c_stride, min, max),
                9 => tile_m::<9>(nr, k, a, a_stride, w, c, c_stride, min, max),
                8 => tile_m::<8>(nr, k, a, a_stride, w, c, c_stride, min, max),
                7 => tile_m::<7>(nr, k, a, a_stride, w, c, c_stride, min, max),
                6 => tile_m::<6>(nr, k, a, a_stride, w, c, c_stride, min, max),
                5 => tile_m::<5>(nr, k, a, a_stride, w, c, c_stride, min, max),
                4 => tile_m::<4>(nr, k, a, a_stride, w, c, c_stride, min, max),
                3 => tile_m::<3>(nr, k, a, a_stride, w, c, c_stride, min, max),
                2 => tile_m::<2>(nr, k, a, a_stride, w, c, c_stride, min, max),
                _ => tile_m::<1>(nr, k, a, 0, w, c, 0, min, max),
            }
        }
    }

    /// Stores the first `nr` lanes of `v` at `c` (all 16 when `nr == NR`).
    ///
    /// # Safety
    /// `c .. c + nr` is writable; AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store(c: *mut f32, nr: usize, v: __m512) {
        // SAFETY: the masked store touches only lanes < nr (caller's contract).
        unsafe {
            if nr == NR {
                _mm512_storeu_ps(c, v);
            } else {
                _mm512_mask_storeu_ps(c, ((1u32 << nr) - 1) as __mmask16, v);
            }
        }
    }

    /// `M × 16` tile: M zmm accumulators, one aligned panel-row load and M broadcast operands
    /// per step.
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile_m<const M: usize>(
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: every pointer stays inside the ranges the caller guarantees: panel rows
        // 0..=k (64-byte aligned), A rows i < M columns kk < k, C rows i < M columns j < nr.
        unsafe {
            let mut acc = [_mm512_load_ps(w); M];
            let mut ap = [a; M];
            for (i, p) in ap.iter_mut().enumerate() {
                *p = a.add(i * a_stride);
            }
            let mut wp = w.add(NR);
            for kk in 0..k {
                let wv = _mm512_load_ps(wp);
                for i in 0..M {
                    acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(*ap[i].add(kk)), wv, acc[i]);
                }
                wp = wp.add(NR);
            }
            let vmin = _mm512_set1_ps(min);
            let vmax = _mm512_set1_ps(max);
            for i in 0..M {
                store(c.add(i * c_stride), nr, _mm512_min_ps(_mm512_max_ps(acc[i], vmin), vmax));
            }
        }
    }

    /// Two adjacent panels at once: an `mr × (16 + nr1)` tile of `C`, columns `0..16` from the
    /// full panel `w0`, `16..16 + nr1` from `w1`. 2·M accumulators; per step two panel-row
    /// loads and M broadcasts feed 2·M FMAs (the single-panel tile needs M + 1 loads for M
    /// FMAs: load-bound). Each element sums in the same order as [`tile`].
    ///
    /// # Safety
    /// As [`tile`] for both panels (`nr = 16` for `w0`, `nr1` for `w1`, C columns `0..16 + nr1`
    /// writable), `1 <= mr <= MR_MAX`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn tile2(
        mr: usize,
        nr1: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w0: *const f32,
        w1: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: forwarded from this function's contract (each arm matches `mr`).
        unsafe {
            match mr {
                12 => tile2_12(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                11 => tile2_m::<11>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                10 => tile2_m::<10>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                9 => tile2_m::<9>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                8 => tile2_m::<8>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                7 => tile2_m::<7>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                6 => tile2_m::<6>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                5 => tile2_m::<5>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                4 => tile2_m::<4>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                3 => tile2_m::<3>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                2 => tile2_m::<2>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
                _ => tile2_m::<1>(nr1, k, a, a_stride, w0, w1, c, c_stride, min, max),
            }
        }
    }

    /// [`tile2_m`] for 12 rows, written out: the four A base pointers (rows in threes,
    /// `[base + stride·{0,1,2}]`) and the two panel pointers are the only integers that move
    /// per step, so the loop is 2 panel-row loads, 12 broadcasts, 24 FMAs and 7 integer ops
    /// (the compiled `tile2_m::<12>` recomputes row addresses: an integer op per broadcast,
    /// competing with the FMAs for ports). Same FMAs in the same order: the same bits.
    ///
    /// # Safety
    /// As [`tile2`] with `mr == 12`; AVX-512F.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile2_12(
        nr1: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w0: *const f32,
        w1: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        let mask: u32 = if nr1 >= NR { 0xffff } else { (1u32 << nr1) - 1 };
        let vmin = _mm512_set1_ps(min);
        let vmax = _mm512_set1_ps(max);
        // SAFETY: the caller's contract: A rows 0..12 (base j = row 3j) have k readable floats
        // each, the panels w0 / w1 have k + 1 aligned 64-byte rows, C rows 0..12 have 16 + nr1
        // writable floats (the second half stored under mask k1 = the nr1 low lanes). The
        // block touches only the registers it names (zmm2..zmm29, k1, the operands) and no
        // stack.
        unsafe {
            core::arch::asm!(
                "kmovw k1, {mask:e}",
                "vmovaps zmm26, [{w0}]",
                "vmovaps zmm27, [{w1}]",
                "vmovaps zmm2, zmm26",
                "vmovaps zmm14, zmm27",
                "vmovaps zmm3, zmm26",
                "vmovaps zmm15, zmm27",
                "vmovaps zmm4, zmm26",
                "vmovaps zmm16, zmm27",
                "vmovaps zmm5, zmm26",
                "vmovaps zmm17, zmm27",
                "vmovaps zmm6, zmm26",
                "vmovaps zmm18, zmm27",
                "vmovaps zmm7, zmm26",
                "vmovaps zmm19, zmm27",
                "vmovaps zmm8, zmm26",
                "vmovaps zmm20, zmm27",
                "vmovaps zmm9, zmm26",
                "vmovaps zmm21, zmm27",
                "vmovaps zmm10, zmm26",
                "vmovaps zmm22, zmm27",
                "vmovaps zmm11, zmm26",
                "vmovaps zmm23, zmm27",
                "vmovaps zmm12, zmm26",
                "vmovaps zmm24, zmm27",
                "vmovaps zmm13, zmm26",
                "vmovaps zmm25, zmm27",
                "add {w0}, 64",
                "add {w1}, 64",
                "test {k}, {k}",
                "jz 3f",
                "2:",
                "vmovaps zmm26, [{w0}]",
                "vmovaps zmm27, [{w1}]",
                "vbroadcastss zmm28, dword ptr [{b0}]",
                "vfmadd231ps zmm2, zmm28, zmm26",
                "vfmadd231ps zmm14, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b0} + {s}]",
                "vfmadd231ps zmm3, zmm29, zmm26",
                "vfmadd231ps zmm15, zmm29, zmm27",
                "vbroadcastss zmm28, dword ptr [{b0} + {s}*2]",
                "vfmadd231ps zmm4, zmm28, zmm26",
                "vfmadd231ps zmm16, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b1}]",
                "vfmadd231ps zmm5, zmm29, zmm26",
                "vfmadd231ps zmm17, zmm29, zmm27",
                "vbroadcastss zmm28, dword ptr [{b1} + {s}]",
                "vfmadd231ps zmm6, zmm28, zmm26",
                "vfmadd231ps zmm18, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b1} + {s}*2]",
                "vfmadd231ps zmm7, zmm29, zmm26",
                "vfmadd231ps zmm19, zmm29, zmm27",
                "vbroadcastss zmm28, dword ptr [{b2}]",
                "vfmadd231ps zmm8, zmm28, zmm26",
                "vfmadd231ps zmm20, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b2} + {s}]",
                "vfmadd231ps zmm9, zmm29, zmm26",
                "vfmadd231ps zmm21, zmm29, zmm27",
                "vbroadcastss zmm28, dword ptr [{b2} + {s}*2]",
                "vfmadd231ps zmm10, zmm28, zmm26",
                "vfmadd231ps zmm22, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b3}]",
                "vfmadd231ps zmm11, zmm29, zmm26",
                "vfmadd231ps zmm23, zmm29, zmm27",
                "vbroadcastss zmm28, dword ptr [{b3} + {s}]",
                "vfmadd231ps zmm12, zmm28, zmm26",
                "vfmadd231ps zmm24, zmm28, zmm27",
                "vbroadcastss zmm29, dword ptr [{b3} + {s}*2]",
                "vfmadd231ps zmm13, zmm29, zmm26",
                "vfmadd231ps zmm25, zmm29, zmm27",
                "add {b0}, 4",
                "add {b1}, 4",
                "add {b2}, 4",
                "add {b3}, 4",
                "add {w0}, 64",
                "add {w1}, 64",
                "dec {k}",
                "jnz 2b",
                "3:",
                "vmaxps zmm2, zmm2, {vmin}",
                "vminps zmm2, zmm2, {vmax}",
                "vmovups [{c}], zmm2",
                "vmaxps zmm14, zmm14, {vmin}",
                "vminps zmm14, zmm14, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm14",
                "add {c}, {cs}",
                "vmaxps zmm3, zmm3, {vmin}",
                "vminps zmm3, zmm3, {vmax}",
                "vmovups [{c}], zmm3",
                "vmaxps zmm15, zmm15, {vmin}",
                "vminps zmm15, zmm15, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm15",
                "add {c}, {cs}",
                "vmaxps zmm4, zmm4, {vmin}",
                "vminps zmm4, zmm4, {vmax}",
                "vmovups [{c}], zmm4",
                "vmaxps zmm16, zmm16, {vmin}",
                "vminps zmm16, zmm16, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm16",
                "add {c}, {cs}",
                "vmaxps zmm5, zmm5, {vmin}",
                "vminps zmm5, zmm5, {vmax}",
                "vmovups [{c}], zmm5",
                "vmaxps zmm17, zmm17, {vmin}",
                "vminps zmm17, zmm17, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm17",
                "add {c}, {cs}",
                "vmaxps zmm6, zmm6, {vmin}",
                "vminps zmm6, zmm6, {vmax}",
                "vmovups [{c}], zmm6",
                "vmaxps zmm18, zmm18, {vmin}",
                "vminps zmm18, zmm18, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm18",
                "add {c}, {cs}",
                "vmaxps zmm7, zmm7, {vmin}",
                "vminps zmm7, zmm7, {vmax}",
                "vmovups [{c}], zmm7",
                "vmaxps zmm19, zmm19, {vmin}",
                "vminps zmm19, zmm19, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm19",
                "add {c}, {cs}",
                "vmaxps zmm8, zmm8, {vmin}",
                "vminps zmm8, zmm8, {vmax}",
                "vmovups [{c}], zmm8",
                "vmaxps zmm20, zmm20, {vmin}",
                "vminps zmm20, zmm20, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm20",
                "add {c}, {cs}",
                "vmaxps zmm9, zmm9, {vmin}",
                "vminps zmm9, zmm9, {vmax}",
                "vmovups [{c}], zmm9",
                "vmaxps zmm21, zmm21, {vmin}",
                "vminps zmm21, zmm21, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm21",
                "add {c}, {cs}",
                "vmaxps zmm10, zmm10, {vmin}",
                "vminps zmm10, zmm10, {vmax}",
                "vmovups [{c}], zmm10",
                "vmaxps zmm22, zmm22, {vmin}",
                "vminps zmm22, zmm22, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm22",
                "add {c}, {cs}",
                "vmaxps zmm11, zmm11, {vmin}",
                "vminps zmm11, zmm11, {vmax}",
                "vmovups [{c}], zmm11",
                "vmaxps zmm23, zmm23, {vmin}",
                "vminps zmm23, zmm23, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm23",
                "add {c}, {cs}",
                "vmaxps zmm12, zmm12, {vmin}",
                "vminps zmm12, zmm12, {vmax}",
                "vmovups [{c}], zmm12",
                "vmaxps zmm24, zmm24, {vmin}",
                "vminps zmm24, zmm24, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm24",
                "add {c}, {cs}",
                "vmaxps zmm13, zmm13, {vmin}",
                "vminps zmm13, zmm13, {vmax}",
                "vmovups [{c}], zmm13",
                "vmaxps zmm25, zmm25, {vmin}",
                "vminps zmm25, zmm25, {vmax}",
                "vmovups [{c} + 64] {{k1}}, zmm25",
                mask = in(reg) mask,
                w0 = inout(reg) w0 => _,
                w1 = inout(reg) w1 => _,
                k = inout(reg) k => _,
                b0 = inout(reg) a => _,
                b1 = inout(reg) a.wrapping_add(3 * a_stride) => _,
                b2 = inout(reg) a.wrapping_add(6 * a_stride) => _,
                b3 = inout(reg) a.wrapping_add(9 * a_stride) => _,
                s = in(reg) a_stride * 4,
                c = inout(reg) c => _,
                cs = in(reg) c_stride * 4,
                vmin = in(zmm_reg) vmin,
                vmax = in(zmm_reg) vmax,
                out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _, out("zmm20") _, out("zmm21") _, out("zmm22") _, out("zmm23") _, out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _, out("zmm28") _, out("zmm29") _,
                out("k1") _,
                options(nostack),
            );
        }
    }

    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile2_m<const M: usize>(
        nr1: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w0: *const f32,
        w1: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: as `tile_m`, for each of the two panels.
        unsafe {
            let mut acc0 = [_mm512_load_ps(w0); M];
            let mut acc1 = [_mm512_load_ps(w1); M];
            let mut ap = [a; M];
            for (i, p) in ap.iter_mut().enumerate() {
                *p = a.add(i * a_stride);
            }
            let (mut wp0, mut wp1) = (w0.add(NR), w1.add(NR));
            for kk in 0..k {
                let v0 = _mm512_load_ps(wp0);
                let v1 = _mm512_load_ps(wp1);
                for i in 0..M {
                    let av = _mm512_set1_ps(*ap[i].add(kk));
                    acc0[i] = _mm512_fmadd_ps(av, v0, acc0[i]);
                    acc1[i] = _mm512_fmadd_ps(av, v1, acc1[i]);
                }
                wp0 = wp0.add(NR);
                wp1 = wp1.add(NR);
            }
            let vmin = _mm512_set1_ps(min);
            let vmax = _mm512_set1_ps(max);
            for i in 0..M {
                let cp = c.add(i * c_stride);
                store(cp, NR, _mm512_min_ps(_mm512_max_ps(acc0[i], vmin), vmax));
                store(cp.add(NR), nr1, _mm512_min_ps(_mm512_max_ps(acc1[i], vmin), vmax));
            }
        }
    }

    /// [`tile_m`] (or [`tile2_m`] when `w1` is given: columns `16..16 + nr1` from panel `w1`,
    /// `w0` then full) whose A rows are `segs.len()` spans of `seg` floats (a convolution's
    /// kernel rows read in place): row `i`'s span `s` starts at `segs[s] + i * a_stride`. The
    /// panels' `k` is `segs.len() * seg`; the sums run in the same order as `tile_m` over the
    /// concatenated spans (bit-identical to it on an im2col copy).
    ///
    /// # Safety
    /// As [`tile`] (and [`tile2`] with `w1`) with A row `i`'s span `s` (`seg` floats at
    /// `segs[s] + i * a_stride`) readable for `i < mr`, and `mr <= MR_MAX`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn tile_seg(
        mr: usize,
        nr: usize,
        segs: &[*const f32],
        seg: usize,
        a_stride: usize,
        w0: *const f32,
        w1: Option<*const f32>,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        macro_rules! arms {
            ($two:literal) => {
                match mr {
                    12 => tile_seg_m::<12, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    11 => tile_seg_m::<11, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    10 => tile_seg_m::<10, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    9 => tile_seg_m::<9, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    8 => tile_seg_m::<8, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    7 => tile_seg_m::<7, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    6 => tile_seg_m::<6, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    5 => tile_seg_m::<5, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    4 => tile_seg_m::<4, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    3 => tile_seg_m::<3, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    2 => tile_seg_m::<2, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                    _ => tile_seg_m::<1, $two>(nr, segs, seg, a_stride, w0, w1.unwrap_or(w0), c, c_stride, min, max),
                }
            };
        }
        // SAFETY: forwarded from this function's contract (each arm matches `mr`; TWO only
        // with a second panel).
        unsafe {
            if w1.is_some() {
                arms!(true)
            } else {
                arms!(false)
            }
        }
    }

    /// `nr`: the columns of the last panel (`w1` when `TWO`, else `w0`).
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile_seg_m<const M: usize, const TWO: bool>(
        nr: usize,
        segs: &[*const f32],
        seg: usize,
        a_stride: usize,
        w0: *const f32,
        w1: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: as `tile_m` / `tile2_m`, with A's spans as `tile_seg`'s contract gives them.
        unsafe {
            let mut acc0 = [_mm512_load_ps(w0); M];
            let mut acc1 = [if TWO { _mm512_load_ps(w1) } else { _mm512_setzero_ps() }; M];
            let (mut wp0, mut wp1) = (w0.add(NR), w1.add(NR));
            for &sp in segs {
                let mut ap = [sp; M];
                for (i, p) in ap.iter_mut().enumerate() {
                    *p = sp.add(i * a_stride);
                }
                for kk in 0..seg {
                    let v0 = _mm512_load_ps(wp0);
                    let v1 = if TWO { _mm512_load_ps(wp1) } else { v0 };
                    for i in 0..M {
                        let av = _mm512_set1_ps(*ap[i].add(kk));
                        acc0[i] = _mm512_fmadd_ps(av, v0, acc0[i]);
                        if TWO {
                            acc1[i] = _mm512_fmadd_ps(av, v1, acc1[i]);
                        }
                    }
                    wp0 = wp0.add(NR);
                    if TWO {
                        wp1 = wp1.add(NR);
                    }
                }
            }
            let vmin = _mm512_set1_ps(min);
            let vmax = _mm512_set1_ps(max);
            for i in 0..M {
                let cp = c.add(i * c_stride);
                let r0 = _mm512_min_ps(_mm512_max_ps(acc0[i], vmin), vmax);
                if TWO {
                    store(cp, NR, r0);
                    store(cp.add(NR), nr, _mm512_min_ps(_mm512_max_ps(acc1[i], vmin), vmax));
                } else {
                    store(cp, nr, r0);
                }
            }
        }
    }

    /// One row (GEMV): four accumulators over `k` hide the FMA latency (only for GEMMs with
    /// one row in all, as the AVX2 twin).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn tile_1(nr: usize, k: usize, a: *const f32, w: *const f32, c: *mut f32, min: f32, max: f32) {
        // SAFETY: as in `tile_m` with M = 1.
        unsafe {
            let mut s = [_mm512_load_ps(w), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()];
            let mut wp = w.add(NR);
            let mut kk = 0;
            while kk + 4 <= k {
                // The weights stream from memory once (GEMV): ask for them well ahead (a
                // prefetch never faults, even past the panel's end).
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(PREFETCH * NR) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add((PREFETCH + 2) * NR) as *const i8);
                for (j, sj) in s.iter_mut().enumerate() {
                    *sj = _mm512_fmadd_ps(_mm512_set1_ps(*a.add(kk + j)), _mm512_load_ps(wp.add(j * NR)), *sj);
                }
                wp = wp.add(4 * NR);
                kk += 4;
            }
            while kk < k {
                s[0] = _mm512_fmadd_ps(_mm512_set1_ps(*a.add(kk)), _mm512_load_ps(wp), s[0]);
                wp = wp.add(NR);
                kk += 1;
            }
            let r = _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3]));
            let r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(min)), _mm512_set1_ps(max));
            store(c, nr, r);
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{store_partial, NR};
    use core::arch::aarch64::*;

    /// # Safety
    /// As [`super::Ukernel::tile`].
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile(
        mr: usize,
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: forwarded from this function's contract (each arm matches `mr`).
        unsafe {
            match mr {
                6 => tile_m::<6>(nr, k, a, a_stride, w, c, c_stride, min, max),
                5 => tile_m::<5>(nr, k, a, a_stride, w, c, c_stride, min, max),
                4 => tile_m::<4>(nr, k, a, a_stride, w, c, c_stride, min, max),
                3 => tile_m::<3>(nr, k, a, a_stride, w, c, c_stride, min, max),
                2 => tile_m::<2>(nr, k, a, a_stride, w, c, c_stride, min, max),
                _ => tile_m::<1>(nr, k, a, a_stride, w, c, c_stride, min, max),
            }
        }
    }

    /// `M × 16` tile: 4·M q-register accumulators (24 for M = 6), four panel loads per step.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn tile_m<const M: usize>(
        nr: usize,
        k: usize,
        a: *const f32,
        a_stride: usize,
        w: *const f32,
        c: *mut f32,
        c_stride: usize,
        min: f32,
        max: f32,
    ) {
        // SAFETY: every pointer stays inside the ranges the caller guarantees: panel rows
        // 0..=k, A rows i < M columns kk < k, C rows i < M columns j < nr.
        unsafe {
            let bias = [vld1q_f32(w), vld1q_f32(w.add(4)), vld1q_f32(w.add(8)), vld1q_f32(w.add(12))];
            let mut acc = [bias; M];
            let mut ap = [a; M];
            for (i, p) in ap.iter_mut().enumerate() {
                *p = a.add(i * a_stride);
            }
            let mut wp = w.add(NR);
            for kk in 0..k {
                let b = [vld1q_f32(wp), vld1q_f32(wp.add(4)), vld1q_f32(wp.add(8)), vld1q_f32(wp.add(12))];
                for i in 0..M {
                    let av = *ap[i].add(kk);
                    for (q, &bq) in acc[i].iter_mut().zip(&b) {
                        *q = vfmaq_n_f32(*q, bq, av);
                    }
                }
                wp = wp.add(NR);
            }
            let vmin = vdupq_n_f32(min);
            let vmax = vdupq_n_f32(max);
            let mut tmp = [[0.0f32; NR]; M];
            for i in 0..M {
                for (j, q) in acc[i].iter().enumerate() {
                    let r = vminq_f32(vmaxq_f32(*q, vmin), vmax);
                    if nr == NR {
                        vst1q_f32(c.add(i * c_stride + 4 * j), r);
                    } else {
                        vst1q_f32(tmp[i].as_mut_ptr().add(4 * j), r);
                    }
                }
            }
            if nr != NR {
                store_partial(&tmp, nr, c, c_stride);
            }
        }
    }
}

/// A raw pointer that tasks may share: each task writes a disjoint part of what it points to.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
// SAFETY: only used to hand disjoint output regions to parallel tasks (see each use).
unsafe impl<T> Sync for SyncPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Send for SyncPtr<T> {}

/// Computes rows `rows` × panels `panels` of `C` with micro-kernel `uk`, blocked for the caches;
/// `gemv`: the whole GEMM is this one row (see [`Ukernel::gemv`]).
///
/// # Safety
/// `a`/`c` cover rows `rows` as [`gemm_f32`] checks (`a + i * a_stride .. + k` readable,
/// `c + i * c_stride .. + n` writable for every `i` in `rows`; `rows.len() == 1` if `gemv`),
/// `uk` runs on this CPU, and no other thread touches those rows × panels of `C` meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_block(
    uk: Ukernel,
    gemv: bool,
    rows: core::ops::Range<usize>,
    panels: core::ops::Range<usize>,
    a: *const f32,
    a_stride: usize,
    w: &PackedWeightsF32,
    c: *mut f32,
    c_stride: usize,
    min: f32,
    max: f32,
    post: PostOp,
) {
    let k = w.k;
    // Panels per block so that a block of weights stays in L2 (~192 KiB) while the row tiles
    // sweep it; each tile's A rows stay in L1 across the block.
    let panel_bytes = (k + 1) * NR * 4;
    let block = (192 * 1024 / panel_bytes).max(1);
    let mut p0 = panels.start;
    while p0 < panels.end {
        let p1 = (p0 + block).min(panels.end);
        let row_tiles = (rows.end - rows.start).div_ceil(uk.mr());
        let mut i = rows.start;
        // Equal-sized tiles (e.g. 49 rows: 10+10+10+10+9, not 12+12+12+12+1): a thin last tile
        // would run at the FMA latency instead of its throughput. Except on AVX-512, whose
        // written-out 12-row pair tile ([`avx512::tile2`]) beats the compiled 10- and 11-row
        // ones by more than a thin last tile costs (measured on MobileNet's 7×7 and 14×14
        // layers: equal or faster).
        let full_tiles = cfg!(target_arch = "x86_64") && uk.mr() == MR_MAX;
        let mut tiles_left = row_tiles;
        while i < rows.end {
            let mr = if full_tiles { (rows.end - i).min(MR_MAX) } else { (rows.end - i).div_ceil(tiles_left) };
            tiles_left -= 1;
            let mut p = p0;
            while p < p1 {
                let nr = NR.min(w.n - p * NR);
                #[cfg(target_arch = "x86_64")]
                if uk == Ukernel::Avx512 && !gemv && p + 1 < p1 {
                    // SAFETY: as below for panels p (full: not the last) and p + 1; the CPU
                    // has AVX-512F (the caller's `uk`).
                    unsafe {
                        avx512::tile2(
                            mr,
                            NR.min(w.n - (p + 1) * NR),
                            k,
                            a.add(i * a_stride),
                            a_stride,
                            w.panel_ptr(p),
                            w.panel_ptr(p + 1),
                            c.add(i * c_stride + p * NR),
                            c_stride,
                            min,
                            max,
                        )
                    };
                    p += 2;
                    continue;
                }
                // SAFETY: rows i..i+mr are inside `rows` and columns p*NR..p*NR+nr inside n, so
                // the tile's A/C accesses are covered by this function's contract.
                unsafe {
                    if gemv {
                        uk.gemv(nr, k, a.add(i * a_stride), w.panel_ptr(p), c.add(i * c_stride + p * NR), min, max);
                    } else {
                        uk.tile(mr, nr, k, a.add(i * a_stride), a_stride, w.panel_ptr(p), c.add(i * c_stride + p * NR), c_stride, min, max)
                    }
                };
                p += 1;
            }
            // SAFETY: this tile's rows i..i+mr and columns p0·NR..min(p1·NR, n) were just
            // written by this call (the caller's contract makes them ours).
            unsafe { post.apply(c.add(i * c_stride + p0 * NR), mr, (p1 * NR).min(w.n) - p0 * NR, c_stride) };
            i += mr;
        }
        p0 = p1;
    }
}

/// How [`gemm_f32`] splits `m × panels` into tasks: (rows per task, panels per task).
pub(crate) fn split(m: usize, panels: usize, k: usize, threads: usize) -> (usize, usize) {
    let macs = m * panels * NR * k;
    if threads <= 1 || macs < 2 * MIN_TASK_MACS {
        return (m.max(1), panels.max(1));
    }
    let want = (threads * 4).min(macs / MIN_TASK_MACS).max(2);
    let row_tiles = m.div_ceil(MR);
    let tiles_per_task = (row_tiles / want).max(1);
    let m_tasks = row_tiles.div_ceil(tiles_per_task);
    let p_tasks = if m_tasks >= want { 1 } else { want.div_ceil(m_tasks).min(panels) };
    (tiles_per_task * MR, panels.div_ceil(p_tasks))
}

/// Checks [`gemm_f32`]'s slice bounds.
pub(crate) fn check_gemm(
    m: usize,
    k: usize,
    n: usize,
    a_len: usize,
    a_stride: usize,
    c_len: usize,
    c_stride: usize,
) -> Result<(), String> {
    if m == 0 {
        return Ok(());
    }
    if m > 1 && (a_stride < k || c_stride < n) {
        return Err(format!("gemm: strides (a {a_stride}, c {c_stride}) below k {k} / n {n}"));
    }
    let a_need = (m - 1).checked_mul(a_stride).and_then(|v| v.checked_add(k));
    let c_need = (m - 1).checked_mul(c_stride).and_then(|v| v.checked_add(n));
    match (a_need, c_need) {
        (Some(an), Some(cn)) if an <= a_len && cn <= c_len => Ok(()),
        _ => Err(format!(
            "gemm: m={m} k={k} n={n} needs A ≥ (m-1)·{a_stride}+k and C ≥ (m-1)·{c_stride}+n \
             elements, got {a_len} and {c_len}"
        )),
    }
}

/// `C[m, n] = clamp(A[m, k] · Wᵀ + bias, min, max)`.
///
/// Row `i` of `A` starts at `a[i * a_stride]` (`a_stride >= k`), row `i` of `C` at
/// `c[i * c_stride]` (`c_stride >= n`); elements between rows are neither read nor written.
/// Short slices are an `Err`, never a panic.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f32(
    par: &dyn Parallel,
    m: usize,
    a: &[f32],
    a_stride: usize,
    w: &PackedWeightsF32,
    c: &mut [f32],
    c_stride: usize,
    min: f32,
    max: f32,
) -> Result<(), String> {
    gemm_f32_with(Ukernel::best(), par, m, a, a_stride, w, c, c_stride, min, max, PostOp::None)
}

/// [`gemm_f32`] with a chosen micro-kernel (tests run the scalar one through this).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_f32_with(
    uk: Ukernel,
    par: &dyn Parallel,
    m: usize,
    a: &[f32],
    a_stride: usize,
    w: &PackedWeightsF32,
    c: &mut [f32],
    c_stride: usize,
    min: f32,
    max: f32,
    post: PostOp,
) -> Result<(), String> {
    check_gemm(m, w.k, w.n, a.len(), a_stride, c.len(), c_stride)?;
    if !uk.supported() {
        return Err(format!("gemm: this CPU cannot run {uk:?}"));
    }
    if m == 0 {
        return Ok(());
    }
    let panels = w.panels();
    let (rb, pb) = split(m, panels, w.k, par.threads());
    let m_tasks = m.div_ceil(rb);
    let p_tasks = panels.div_ceil(pb);
    let ap = SyncPtr(a.as_ptr() as *mut f32);
    let cp = SyncPtr(c.as_mut_ptr());
    let task = |t: usize| {
        let (ti, tp) = (t / p_tasks, t % p_tasks);
        let rows = ti * rb..((ti + 1) * rb).min(m);
        let pans = tp * pb..((tp + 1) * pb).min(panels);
        let (ap, cp) = (ap, cp);
        // SAFETY: bounds were checked by `check_gemm` for all m rows; `uk` was checked to run on
        // this CPU; tasks cover disjoint (rows × panels) blocks of C, so no two write the same
        // element, and `c` is exclusively borrowed for the call.
        unsafe { gemm_block(uk, m == 1, rows, pans, ap.0, a_stride, w, cp.0, c_stride, min, max, post) };
    };
    if m_tasks * p_tasks == 1 {
        task(0);
    } else {
        par.for_each(m_tasks * p_tasks, &task);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::reference::fully_connected_f32;
    use crate::nhwc::Serial;
    use crate::optimized::test_util::{assert_close, Lcg};

    fn check_case(uk: Ukernel, m: usize, n: usize, k: usize, pad_a: usize, pad_c: usize, seed: u64) {
        let mut g = Lcg::new(seed);
        let (a_stride, c_stride) = (k + pad_a, n + pad_c);
        let a = g.vec(m.saturating_sub(1) * a_stride + k);
        let w = g.vec(n * k);
        let b = g.vec(n);
        let (min, max) = if seed.is_multiple_of(3) { (-0.25, 0.5) } else { (f32::NEG_INFINITY, f32::INFINITY) };
        let pw = PackedWeightsF32::new(n, k, &w, Some(&b)).unwrap();
        let sentinel = 1234.5;
        let mut c = vec![sentinel; m.saturating_sub(1) * c_stride + n];
        gemm_f32_with(uk, &Serial, m, &a, a_stride, &pw, &mut c, c_stride, min, max, PostOp::None).unwrap();
        let dense: Vec<f32> = (0..m).flat_map(|i| a[i * a_stride..i * a_stride + k].to_vec()).collect();
        let want = fully_connected_f32(m, n, k, &dense, &w, Some(&b), min, max);
        let got: Vec<f32> = (0..m).flat_map(|i| c[i * c_stride..i * c_stride + n].to_vec()).collect();
        let tol = 1e-5 * (k as f32).sqrt();
        assert_close(&got, &want, tol, &format!("{uk:?} gemm m={m} n={n} k={k}"));
        for i in 0..m.saturating_sub(1) {
            for j in n..c_stride {
                assert_eq!(c[i * c_stride + j], sentinel, "gap between C rows written");
            }
        }
    }

    fn kernels() -> Vec<Ukernel> {
        Ukernel::all_supported()
    }

    #[test]
    fn gemm_matches_reference_on_partial_tiles() {
        let mut seed = 1;
        for uk in kernels() {
            for &m in &[1, 2, 3, 5, 6, 7, 11, 12, 13, 25, 31] {
                for &n in &[1, 7, 15, 16, 17, 33, 40] {
                    for &k in &[1, 2, 3, 8, 17, 64] {
                        check_case(uk, m, n, k, (seed % 3) as usize, (seed & 1) as usize * 5, seed);
                        seed += 1;
                    }
                }
            }
        }
    }

    #[test]
    fn scalar_micro_kernel_direct() {
        // One 3 × 5 tile straight through the scalar micro-kernel.
        let (k, mr, nr) = (7, 3, 5);
        let mut g = Lcg::new(77);
        let a = g.vec(mr * 9);
        let w = g.vec(nr * k);
        let b = g.vec(nr);
        let pw = PackedWeightsF32::new(nr, k, &w, Some(&b)).unwrap();
        let mut c = vec![0.0; mr * 6];
        // SAFETY: a has 3 rows of stride 9 ≥ k, c has 3 rows of stride 6 ≥ nr, panel 0 exists.
        unsafe {
            scalar::tile(mr, nr, k, a.as_ptr(), 9, pw.panel_ptr(0), c.as_mut_ptr(), 6, -0.5, 0.5)
        };
        for i in 0..mr {
            for j in 0..nr {
                let mut s = b[j];
                for kk in 0..k {
                    s += a[i * 9 + kk] * w[j * k + kk];
                }
                let want = s.clamp(-0.5, 0.5);
                assert!((c[i * 6 + j] - want).abs() < 1e-5, "({i},{j}) {} vs {want}", c[i * 6 + j]);
            }
        }
    }

    #[test]
    fn gemm_big_split_over_tasks() {
        // Large enough that `split` makes several tasks; a fake 3-thread Parallel runs them.
        struct Three;
        impl Parallel for Three {
            fn threads(&self) -> usize {
                3
            }
            fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
                for i in (0..tasks).rev() {
                    f(i);
                }
            }
        }
        for &(m, n, k) in &[(200, 70, 300), (1, 1000, 1280), (49, 320, 960)] {
            let mut g = Lcg::new((m * n) as u64);
            let a = g.vec(m * k);
            let w = g.vec(n * k);
            let pw = PackedWeightsF32::new(n, k, &w, None).unwrap();
            let mut c = vec![0.0; m * n];
            gemm_f32(&Three, m, &a, k, &pw, &mut c, n, f32::NEG_INFINITY, f32::INFINITY).unwrap();
            let want = fully_connected_f32(m, n, k, &a, &w, None, f32::NEG_INFINITY, f32::INFINITY);
            assert_close(&c, &want, 1e-5 * (k as f32).sqrt(), "split gemm");
        }
    }

    #[test]
    fn gemm_bad_sizes_are_errors() {
        assert!(PackedWeightsF32::new(4, 3, &[0.0; 11], None).is_err());
        assert!(PackedWeightsF32::new(4, 3, &[0.0; 12], Some(&[0.0; 3])).is_err());
        assert!(PackedWeightsF32::new(0, 3, &[], None).is_err());
        let pw = PackedWeightsF32::new(4, 3, &[0.0; 12], None).unwrap();
        let mut c = vec![0.0; 8];
        assert!(gemm_f32(&Serial, 2, &[0.0; 5], 3, &pw, &mut c, 4, 0.0, 1.0).is_err());
        assert!(gemm_f32(&Serial, 2, &[0.0; 6], 3, &pw, &mut c[..7], 4, 0.0, 1.0).is_err());
        assert!(gemm_f32(&Serial, 2, &[0.0; 6], 2, &pw, &mut c, 4, 0.0, 1.0).is_err());
        assert!(gemm_f32(&Serial, 2, &[0.0; 6], 3, &pw, &mut c, 4, 0.0, 1.0).is_ok());
        assert!(gemm_f32(&Serial, 0, &[], 3, &pw, &mut [], 4, 0.0, 1.0).is_ok());
    }
}
