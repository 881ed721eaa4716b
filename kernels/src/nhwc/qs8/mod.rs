//! int8 NHWC kernels with XNNPACK's quantized arithmetic (qs8 activations with a per-tensor
//! scale/zero point, qc8 per-output-channel int8 weights with zero point 0, qc32 int32 biases),
//! so that ExecuTorch's XNNPACK-delegated int8 programs give XNNPACK's results bit for bit.
//!
//! # The arithmetic (XNNPACK as pinned by ExecuTorch 1.3/1.4, commit `1adaa7c7`, Mar 2026;
//! unchanged in `92a7ad50`, Jul 2026, pinned by ExecuTorch's main branch)
//!
//! **Conv / depthwise / fully connected (qs8-qc8w, "fp32" requantization).**
//! - Packing (`src/reference/packing.cc`: `xnn_pack_qs8_gemm_goi_w`, `xnn_pack_qs8_conv_goki_w`,
//!   `xnn_pack_qs8_dwconv_hwg_w`; `src/qs8-packw/gen/qs8-packw-x8c8-gemm-goi-avx2-madd.c`):
//!   packed bias `b[c] − izp·Σ_k w[c,k]` in wrapping 32-bit arithmetic; the kernels then add raw
//!   `Σ x·w`, so `acc = b + Σ (x − izp)·w (mod 2³²)`. Padding taps read a buffer filled with the
//!   input zero point (IGEMM / DWCONV indirection "zero" buffer), contributing exactly 0.
//! - Per-channel scale (`src/operators/convolution-nhwc.c` `init_requantization_scale_qx8_qc8w`,
//!   `src/operators/fully-connected-nc.c`): `scale[c] = input_scale * kernel_scale[c] /
//!   output_scale` evaluated left to right in f32; must be < 256. A per-tensor filter scale uses
//!   the same expression with one kernel scale.
//! - Requantization (`src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-3x8c8-minmax-fp32-avx2.c`,
//!   `src/qs8-qc8w-dwconv/gen/qs8-qc8w-dwconv-9p16c-minmax-fp32-avx2-mul32.c`; params from
//!   `xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params` in `src/microparams-init.c`):
//!   `f = (float)acc * scale[c]` (int→float rounds to nearest even), `f = min(f, out_max − zp)`,
//!   `cvtps2dq` (round half to even), saturate to i16, `+ zp` (saturating i16), saturate to i8,
//!   `max(·, out_min)`. The scalar/NEON variants (magic bias `12582912.0f`, `lrintf`,
//!   `vcvtnq_s32_f32`) give the same values. Equivalent form used here:
//!   `clamp(rne(clamp(f, out_min − zp, out_max − zp)) + zp, out_min, out_max)`.
//! - Output bounds (`src/subgraph/convolution-2d.c`, `depthwise-convolution-2d.c`,
//!   `fully-connected.c` → `xnn_qs8_quantize` in `src/xnnpack/requantization.h`):
//!   `lrintf(fminf(fmaxf(v / scale + (float)zp, −128), 127))` — see [`quantize_bound`]. A qs8
//!   Clamp node uses the same rule (`xnn_init_qs8_clamp_scalar_params`); `src/subgraph.c`
//!   `optimize_common_subgraphs_merge_clamps` folds a Clamp whose input has a single consumer into
//!   a producing Conv/DWConv/FC: `min' = min(max(min_p, min_c), max_c)`,
//!   `max' = min(max(max_p, min_c), max_c)` (floats, before quantizing; the producer then writes
//!   the clamp's output value).
//!
//! **Add** (`xnn_init_qs8_add_minmax_scalar_params`, `src/qs8-vadd/gen/qs8-vadd-minmax-avx2-mul32-ld64-u16.c`,
//! `src/qs8-vaddc/…`): `sa = a_scale / y_scale`, `sb = b_scale / y_scale` (f32);
//! `shift = 20 − (exponent of max(|sa|,|sb|))` (must be in [12, 30]); `mult = lrintf(s · 2^shift)`
//! (exponent-field add); `bias = 2^(shift−1) − ma·a_zp − mb·b_zp`;
//! `y = clamp(((bias + a·ma + b·mb) >>arith shift) + y_zp, min, max)` (32-bit wrapping; ties
//! therefore round toward +∞). The broadcast kernel folds `b·mb + bias` into one constant (same
//! value); a broadcast first operand swaps the operands and the params (symmetric).
//! `xnn_define_add2`/`xnn_define_multiply2` with finite bounds insert a separate qs8 Clamp node
//! (`src/subgraph/binary.c`, `xnn_insert_clamp_node`) with the output's quantization, which is the
//! same as clamping here with [`quantize_bound`] values.
//!
//! **Multiply** (`xnn_init_qs8_mul_minmax_scalar_params`,
//! `src/qs8-vmul/gen/qs8-vmul-minmax-fp32-avx-mul16-ld64-u16.c`, the x86 AVX/AVX2 choice in
//! `src/configs/binary-elementwise-config.c`): `scale = (a_scale · b_scale) / y_scale` (f32,
//! in [2⁻¹⁶, 2⁸)); `y = clamp(rne((float)((a − a_zp)·(b − b_zp)) · scale) + y_zp, min, max)`.
//! (XNNPACK on Arm64 uses the fixed-point "rndnu" variant instead, which can differ by 1 LSB;
//! this module follows x86 on every target.)
//!
//! **Global average pooling** (`xnn_define_global_average_pooling_2d` in
//! `src/subgraph/deprecated.c` = static mean over H, W; `src/operators/reduce-nd.c`,
//! `xnn_init_qs8_reduce_scalar_params` / `xnn_update_qs8_reduce_scalar_params`,
//! `src/qs8-rdsum/…`, int32→qs8 reference convert in `src/reference/unary-elementwise.cc` and
//! `src/xnnpack/reference-utils.h`): `sum = Σ_p x` (raw int8, int32);
//! `s = (in_scale / out_scale) * (1.0f / N)`; `zpf = (float)out_zp − ((float)N · (float)in_zp) · s`;
//! `y = clamp(nearbyint((float)sum · s + zpf), −128, 127)` (separate multiply and add, no FMA).
//! Finite output bounds become a separate Clamp node, applied after.
//!
//! **Convert** f32→qs8 (`xnn_init_f32_qs8_cvt_scalar_params`, `src/f32-qs8-vcvt/gen/f32-qs8-vcvt-avx2-u64.c`):
//! `inv = 1.0f / scale`; `f = min(x · inv, 32767)` (NaN → 32767 as `minps` does);
//! `y = clamp(rne(f) + zp, −128, 127)`. qs8→f32 (`xnn_init_qs8_f32_cvt_scalar_params`,
//! `src/qs8-f32-vcvt/gen/qs8-f32-vcvt-avx2-u16.c`): `y = (float)(q − zp) · scale`.
//!
//! # Layout and kernels
//! Weights are packed once in `new` (bias pre-adjusted by the input zero point). The GEMM
//! micro-kernels ([`gemm`]) take 4 rows × 16 columns, activations widened to i16 and pairs of
//! `k` multiplied with `_mm256_madd_epi16` (AVX2) or `vmlal_s16` (NEON); 1×1 stride-1
//! convolutions and fully-connected layers read rows in place, others gather an im2col tile
//! padded with the input zero point. Depthwise ([`dwconv`]) vectorizes 16 channels. Every fast
//! path has a plain-Rust twin ([`reference`]) and the tests compare them bit for bit.
//!
//! Also: convolutions whose weights have a zero point (XNNPACK's qu8 operators:
//! [`asymmetric`]), transposed convolution ([`deconv`], the same requantization), dynamically quantized
//! fully connected layers and convolutions ([`dynamic`], [`dynamic_conv`]: per-row / per-image
//! parameters computed at run time), max pooling ([`pooling`]), and the elementwise ops above
//! plus subtract (add with the second scale negated) and requantizing conversion
//! ([`elementwise`]); each with its own twin or formula test.

pub mod asymmetric;
pub mod conv;
pub mod deconv;
pub mod dwconv;
#[cfg(target_arch = "x86_64")]
mod dwconv_vnni;
pub mod dynamic;
pub mod dynamic_conv;
pub mod elementwise;
pub mod gemm;
pub mod pooling;
pub mod reference;

pub use asymmetric::ConvQu8;
pub use conv::{ConvQs8, FullyConnectedQs8};
pub use deconv::{DeconvQd8, DeconvQs8};
pub use dwconv::DepthwiseQs8;
pub use dynamic_conv::ConvQd8;
pub use elementwise::{dequantize_f32, global_avg_pool_qs8, lookup_table, quantize_f32, AddQs8, MulQs8, RequantizeQs8};
pub use pooling::max_pool_qs8;

use alloc::format;
use alloc::string::String;

/// Quantization of a qs8 tensor: `real = scale · (q − zero_point)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QParams {
    pub scale: f32,
    pub zero_point: i32,
}

impl QParams {
    pub(crate) fn check(&self, what: &str) -> Result<(), String> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(format!("{what} scale {} must be finite and > 0", self.scale));
        }
        if !(-128..=127).contains(&self.zero_point) {
            return Err(format!("{what} zero point {} outside [-128, 127]", self.zero_point));
        }
        Ok(())
    }
}

/// XNNPACK's rule for turning a float output bound (clamp min/max, ±inf allowed) into an int8
/// bound (`xnn_qs8_quantize`): `lrintf(fminf(fmaxf(v / scale + (float)zp, -128), 127))`.
pub fn quantize_bound(v: f32, q: QParams) -> i8 {
    let t = v / q.scale + q.zero_point as f32;
    // fmaxf/fminf return the non-NaN operand, as Rust's max/min do.
    #[allow(clippy::manual_clamp)] // NaN must give −128 like fmaxf, not propagate
    let r = libm::rintf(t.max(-128.0).min(127.0));
    r as i8
}

/// Output side of the fp32 requantization: zero point and int8 bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct OutParams {
    pub zp: i32,
    pub min: i8,
    pub max: i8,
    /// `min − zp` and `max − zp` as floats (exact).
    pub fmin: f32,
    pub fmax: f32,
}

impl OutParams {
    pub fn new(q: QParams, min: i8, max: i8) -> Result<Self, String> {
        if min > max {
            return Err(format!("output bounds [{min}, {max}] are empty"));
        }
        let zp = q.zero_point;
        Ok(OutParams { zp, min, max, fmin: (min as i32 - zp) as f32, fmax: (max as i32 - zp) as f32 })
    }
}

/// Rounds `f` (|f| < 2²²) to the nearest integer, ties to even, with the magic-bias trick
/// (XNNPACK's scalar "fmagic" kernels); identical to `cvtps2dq` / `vcvtnq_s32_f32` there.
#[inline(always)]
pub(crate) fn round_magic(f: f32) -> i32 {
    ((f + 12582912.0f32).to_bits() as i32).wrapping_sub(0x4B40_0000)
}

/// XNNPACK's fp32 requantization of one accumulator (the kernels' scalar form).
#[inline(always)]
pub(crate) fn requantize(acc: i32, scale: f32, o: &OutParams) -> i8 {
    let f = (acc as f32 * scale).max(o.fmin).min(o.fmax);
    (round_magic(f) + o.zp) as i8
}

/// Per-output-channel requantization scales, `input_scale * kernel_scale[c] / output_scale` in
/// XNNPACK's order; `filter_scales` may hold one (per-tensor) or `n` values.
pub(crate) fn channel_scales(
    n: usize,
    input: QParams,
    filter_scales: &[f32],
    output: QParams,
) -> Result<alloc::vec::Vec<f32>, String> {
    input.check("input")?;
    output.check("output")?;
    if filter_scales.len() != n && filter_scales.len() != 1 {
        return Err(format!("{} filter scales for {n} output channels", filter_scales.len()));
    }
    (0..n)
        .map(|c| {
            let ks = filter_scales[if filter_scales.len() == 1 { 0 } else { c }];
            if !(ks.is_finite() && ks > 0.0) {
                return Err(format!("filter scale {ks} of channel {c} must be finite and > 0"));
            }
            let s = input.scale * ks / output.scale;
            if !(f32::MIN_POSITIVE..256.0).contains(&s) {
                return Err(format!("requantization scale {s} of channel {c} outside XNNPACK's range"));
            }
            Ok(s)
        })
        .collect()
}

/// A raw output pointer shared by tasks that write disjoint parts of one slice.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr(pub *mut i8);
// SAFETY: only used to hand disjoint sub-slices of one `&mut [i8]` to parallel tasks; each task
// rebuilds its own slice from a range no other task touches.
unsafe impl Sync for SyncPtr {}
// SAFETY: as above.
unsafe impl Send for SyncPtr {}

impl SyncPtr {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    #[inline]
    pub fn get(self) -> *mut i8 {
        self.0
    }
}

/// Which micro-kernel family runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 F/BW/VL with VNNI (`vpdpbusd`): the GEMM runs on u8×s8 quads; other kernels take
    /// their AVX2 paths.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Isa {
    /// The best one this CPU runs (`RBUILD_KERNELS_NO_AVX512` set: not the AVX-512 one).
    pub fn best() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx512_vnni() {
                return Isa::Avx512Vnni;
            }
            #[cfg(feature = "std")]
            let avx2 = std::is_x86_feature_detected!("avx2");
            #[cfg(not(feature = "std"))]
            let avx2 = cfg!(target_feature = "avx2");
            if avx2 {
                return Isa::Avx2;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            return Isa::Neon;
        }
        #[allow(unreachable_code)]
        Isa::Scalar
    }

    /// Whether AVX2 kernels may run under this choice.
    #[cfg(target_arch = "x86_64")]
    pub fn has_avx2(self) -> bool {
        matches!(self, Isa::Avx2 | Isa::Avx512Vnni)
    }

    /// How the GEMM's weights are packed for this family.
    pub fn gemm_layout(self) -> gemm::Layout {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => gemm::Layout::Quads,
            _ => gemm::Layout::Pairs,
        }
    }
}

/// AVX-512 F/BW/VL + VNNI present and not switched off (probed once with `std`; the
/// compile-time target features without it).
#[cfg(target_arch = "x86_64")]
fn has_avx512_vnni() -> bool {
    #[cfg(feature = "std")]
    {
        static PROBED: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
        crate::nhwc::gemm_f32::probe_once(&PROBED, || {
            crate::nhwc::gemm_f32::has_avx512()
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(
            target_feature = "avx512f",
            target_feature = "avx512bw",
            target_feature = "avx512vl",
            target_feature = "avx512vnni",
            target_feature = "avx2"
        ))
    }
}

/// Number of tasks for an operator of `macs` multiply-adds over `units` splittable units.
pub(crate) fn task_count(par: &dyn super::Parallel, macs: usize, units: usize) -> usize {
    let threads = par.threads().max(1);
    if threads == 1 || macs < 200_000 {
        return 1;
    }
    let by_work = (macs / 100_000).max(1);
    by_work.min(threads * 4).min(units).max(1)
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::Isa;
    use crate::nhwc::Parallel;

    /// Every kernel family this CPU runs (the tests run each against the plain twin).
    pub fn isas() -> alloc::vec::Vec<Isa> {
        let mut v = alloc::vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if Isa::best().has_avx2() {
                v.push(Isa::Avx2);
            }
            if Isa::best() == Isa::Avx512Vnni {
                v.push(Isa::Avx512Vnni);
            } else {
                std::println!("no AVX-512 VNNI here: its kernels are not exercised");
            }
        }
        #[cfg(target_arch = "aarch64")]
        v.push(Isa::Neon);
        v
    }

    /// Runs tasks in reverse order, several "threads" (exercises the task split).
    pub struct FakePar;
    impl Parallel for FakePar {
        fn threads(&self) -> usize {
            3
        }
        fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
            for i in (0..tasks).rev() {
                f(i);
            }
        }
    }

    /// Deterministic pseudo-random numbers (64-bit LCG).
    pub struct Lcg(pub u64);
    impl Lcg {
        pub fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
        pub fn below(&mut self, n: usize) -> usize {
            self.next() as usize % n
        }
        pub fn i8(&mut self) -> i8 {
            self.next() as i8
        }
        pub fn i8s(&mut self, n: usize) -> alloc::vec::Vec<i8> {
            (0..n).map(|_| self.i8()).collect()
        }
        /// Uniform in [lo, hi).
        pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
            lo + (hi - lo) * (self.next() as f32 / 4294967296.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_bound_matches_xnn_qs8_quantize() {
        let q = QParams { scale: 0.5, zero_point: -10 };
        assert_eq!(quantize_bound(0.0, q), -10);
        assert_eq!(quantize_bound(6.0, q), 2); // 12 − 10
        assert_eq!(quantize_bound(f32::INFINITY, q), 127);
        assert_eq!(quantize_bound(f32::NEG_INFINITY, q), -128);
        assert_eq!(quantize_bound(1000.0, q), 127);
        // Ties round to even: 0.25/0.5 = 0.5 → 0.5 − 10 = −9.5 → −10.
        assert_eq!(quantize_bound(0.25, q), -10);
        assert_eq!(quantize_bound(0.75, q), -8); // 1.5 − 10 = −8.5 → −8
        let q = QParams { scale: 0.023529412, zero_point: -128 };
        assert_eq!(quantize_bound(6.0, q), 127); // 255 − 128
    }

    #[test]
    fn requantize_rounds_half_to_even_and_clamps() {
        let o = OutParams::new(QParams { scale: 1.0, zero_point: 3 }, -128, 127).unwrap();
        // acc·scale = 2.5 → 2 (+3 = 5); 3.5 → 4 (+3 = 7); −2.5 → −2 (+3 = 1).
        assert_eq!(requantize(5, 0.5, &o), 5);
        assert_eq!(requantize(7, 0.5, &o), 7);
        assert_eq!(requantize(-5, 0.5, &o), 1);
        assert_eq!(requantize(1_000_000, 0.5, &o), 127);
        assert_eq!(requantize(i32::MIN, 0.5, &o), -128);
        let o = OutParams::new(QParams { scale: 1.0, zero_point: -128 }, -128, -28).unwrap();
        assert_eq!(requantize(250, 0.5, &o), -28); // clamp at the fused max
        assert_eq!(requantize(-7, 0.5, &o), -128);
        // Same as the rintf formulation for many values.
        let mut r = test_util::Lcg(1);
        for _ in 0..20000 {
            let acc = (r.next() as i32) >> r.below(31);
            let s = r.f32(1e-6, 2.0);
            let o = OutParams::new(QParams { scale: 1.0, zero_point: r.i8() as i32 }, r.i8().min(0), r.i8().max(0))
                .unwrap();
            assert_eq!(requantize(acc, s, &o), reference::requantize_ref(acc, s, &o));
        }
    }

    #[test]
    fn channel_scale_order_and_errors() {
        let i = QParams { scale: 0.1, zero_point: 0 };
        let o = QParams { scale: 0.3, zero_point: 0 };
        let s = channel_scales(2, i, &[0.7, 0.01], o).unwrap();
        assert_eq!(s[0], 0.1f32 * 0.7f32 / 0.3f32);
        assert_eq!(s[1], 0.1f32 * 0.01f32 / 0.3f32);
        assert!(channel_scales(3, i, &[0.7, 0.01], o).is_err());
        assert!(channel_scales(1, i, &[0.0], o).is_err());
        assert!(channel_scales(1, i, &[f32::NAN], o).is_err());
        assert!(channel_scales(1, QParams { scale: -1.0, zero_point: 0 }, &[1.0], o).is_err());
        assert!(channel_scales(1, i, &[1e5], o).is_err()); // ≥ 256
    }
}
