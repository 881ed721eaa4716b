//! Dynamically quantized fully connected layers (XNNPACK's `qd8-f32-qc8w`, `qd8-f32-qc4w` and
//! `qd8-f32-qb4w` GEMMs): the f32 input is quantized to int8 at run time with one zero point and
//! scale per row ("per token"), multiplied with int8 or int4 weights, and the int32 sums are
//! scaled back to f32. This is how ExecuTorch's XNNPACK partitioner runs dynamically quantized
//! linear layers (`Convert` f32 → qdint8, then `FullyConnected` qdint8 × qc8w/qc4w/qb4w → f32).
//!
//! # The arithmetic (XNNPACK as pinned by ExecuTorch 1.3/1.4)
//! - Row parameters (`xnn_qd8_asymmetric_quantization_params`, `src/xnnpack/quantization.h`):
//!   `rmin = min(0, min x)`, `rmax = max(0, max x)`;
//!   `m = rmin == rmax ? 1 : 255 / (rmax − rmin)`; `zp = (−128 + rmin·m) + (127 + rmax·m) > 0 ?
//!   −128 − rmin·m : 127 − rmax·m`, clamped to [−128, 127] and rounded to nearest even;
//!   the dequantization scale is `1 / m`.
//! - Conversion (`xnn_compute_f32_qd8_convert` → f32-qs8-vcvt with scale `1 / (1 / m)`):
//!   `q = rne(clamp(x · s, −128 − zp, 127 − zp)) + zp`.
//! - GEMM: `acc = Σ_k (q_k − zp)·w_k` (int32, exact); per-channel weights give
//!   `y = (acc · (1/m)) · w_scale[n] + bias[n]`; blockwise (qb4w, bf16 block scales) gives
//!   `y = (1/m) · Σ_blocks w_scale[n, b] · acc_b + bias[n]`; then `output_min_max`.
//!   int4 weights are unsigned nibbles with the implicit zero point 8 (two per byte, even `k` in the
//!   low nibble, rows padded to an even length), i.e. values `nibble − 8` in [−8, 7].
//!
//! The f32 steps after the integer sum are done as above in plain f32 (XNNPACK's x86 kernels use
//! one FMA for the last multiply-add), so results agree with ExecuTorch's to float rounding
//! (a few ulps), not bit for bit; the integer part is exact.

use super::round_magic;
use crate::nhwc::Parallel;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// One row's dynamic quantization: `real = (q − zero_point) · scale`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Qd8Params {
    pub zero_point: i32,
    /// Dequantization scale (`1 / m` of the module docs).
    pub scale: f32,
    /// What the conversion multiplies by (`1 / scale`, as XNNPACK recomputes it).
    multiplier: f32,
}

/// XNNPACK's asymmetric int8 parameters for a row whose values lie in `[min, max]`.
pub fn qd8_params(min: f32, max: f32) -> Qd8Params {
    let (qmin, qmax) = (-128.0f32, 127.0f32);
    let rmin = if min < 0.0 { min } else { 0.0 };
    let rmax = if max > 0.0 { max } else { 0.0 };
    let m = if rmin == rmax { 1.0 } else { (qmax - qmin) / (rmax - rmin) };
    let (dmin, dmax) = (rmin * m, rmax * m);
    let zp = if (qmin + dmin) + (qmax + dmax) > 0.0 { qmin - dmin } else { qmax - dmax };
    // NaN/inf rows: XNNPACK gives garbage too; keep the zero point in range whatever happens.
    let zp = if zp.is_nan() { 0.0 } else { zp.clamp(qmin, qmax) };
    let scale = 1.0 / m;
    Qd8Params { zero_point: round_magic(zp), scale, multiplier: 1.0 / scale }
}

/// Quantizes one row: returns its parameters, writes `out[..x.len()]`.
pub fn quantize_row(x: &[f32], out: &mut [i8]) -> Qd8Params {
    let (mut lo, mut hi) = (0.0f32, 0.0f32);
    for &v in x {
        lo = if v < lo { v } else { lo };
        hi = if v > hi { v } else { hi };
    }
    let p = qd8_params(lo, hi);
    let (fmin, fmax) = ((-128 - p.zero_point) as f32, (127 - p.zero_point) as f32);
    for (o, &v) in out.iter_mut().zip(x) {
        let f = (v * p.multiplier).max(fmin).min(fmax);
        // `max`/`min` drop a NaN product for the bound; the sum stays in [−128, 127].
        *o = (round_magic(f) + p.zero_point) as i8;
    }
    p
}

/// How the weights are scaled back to real values.
#[derive(Clone, Debug, PartialEq)]
pub enum WeightScales {
    /// One scale per output channel (qc8w, qc4w).
    PerChannel(Vec<f32>),
    /// `[n, k / block]` scales (qb4w; bf16 in the payload, exact in f32).
    Blockwise { block: usize, scales: Vec<f32> },
}

/// A fully connected layer `y[m, n] = x[m, :] · W[n, :]ᵀ + bias[n]` with int8-valued weights
/// (int8 or int4 in the payload) and dynamically quantized f32 input rows.
#[derive(Clone, Debug)]
pub struct FullyConnectedQd8 {
    n: usize,
    k: usize,
    /// `[n, k]` weight values.
    w: Vec<i8>,
    /// Per channel: `[n]` sums of each row; blockwise: `[n, blocks]` sums of each block.
    sums: Vec<i32>,
    scales: WeightScales,
    bias: Vec<f32>,
}

/// Output channels per parallel task.
const N_TASK: usize = 64;

impl FullyConnectedQd8 {
    /// `w` gives the value of weight `(output channel, input channel)`.
    pub fn new(n: usize, k: usize, w: impl Fn(usize, usize) -> i8, scales: WeightScales, bias: Option<&[f32]>) -> Result<Self, String> {
        if n == 0 || k == 0 {
            return Err(format!("dynamically quantized fully connected: {n} outputs × {k} inputs"));
        }
        let blocks = match &scales {
            WeightScales::PerChannel(s) => {
                if s.len() != n {
                    return Err(format!("dynamically quantized fully connected: {} weight scales for {n} output channels", s.len()));
                }
                1
            }
            WeightScales::Blockwise { block, scales: s } => {
                if *block == 0 || k % block != 0 {
                    return Err(format!("dynamically quantized fully connected: block size {block} does not divide {k} input channels"));
                }
                if s.len() != n * (k / block) {
                    return Err(format!("dynamically quantized fully connected: {} block scales, {n} × {} expected", s.len(), k / block));
                }
                k / block
            }
        };
        if let Some(b) = bias {
            if b.len() != n {
                return Err(format!("dynamically quantized fully connected: bias has {} values for {n} outputs", b.len()));
            }
        }
        let mut wv = vec![0i8; n * k];
        for (r, row) in wv.chunks_exact_mut(k).enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                *v = w(r, c);
            }
        }
        let bl = k / blocks;
        let sums = wv.chunks_exact(bl).map(|b| b.iter().map(|&v| v as i32).sum()).collect();
        Ok(FullyConnectedQd8 { n, k, w: wv, sums, scales, bias: bias.map_or_else(|| vec![0.0; n], <[f32]>::to_vec) })
    }

    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }

    /// `x`: `m` rows of `k`; `y`: `m` rows of `n`.
    pub fn run(&self, par: &dyn Parallel, x: &[f32], m: usize, y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let (n, k) = (self.n, self.k);
        if x.len() < m * k || y.len() < m * n {
            return Err(format!("dynamically quantized fully connected: {m} rows need {} inputs / {} outputs, got {} / {}", m * k, m * n, x.len(), y.len()));
        }
        let mut q = vec![0i8; m * k];
        let params: Vec<Qd8Params> = q.chunks_exact_mut(k).zip(x.chunks_exact(k)).map(|(qr, xr)| quantize_row(xr, qr)).collect();
        let tasks = n.div_ceil(N_TASK);
        let yp = crate::nhwc::gemm_f32::SyncPtr(y.as_mut_ptr());
        let task = |t: usize| {
            let cols = t * N_TASK..((t + 1) * N_TASK).min(n);
            let yp = &yp;
            for (i, p) in params.iter().enumerate() {
                let a = &q[i * k..(i + 1) * k];
                for c in cols.clone() {
                    let v = self.column(a, p, c).max(min).min(max);
                    // SAFETY: `i < m`, `c < n` and `y` holds `m·n` values (checked above); tasks
                    // own disjoint column ranges, so no two tasks write the same element.
                    unsafe { *yp.0.add(i * n + c) = v };
                }
            }
        };
        par.for_each(tasks, &task);
        Ok(())
    }

    /// Output `c` of one quantized row.
    #[inline]
    fn column(&self, a: &[i8], p: &Qd8Params, c: usize) -> f32 {
        let k = self.k;
        let w = &self.w[c * k..(c + 1) * k];
        match &self.scales {
            WeightScales::PerChannel(s) => {
                let acc = dot(a, w).wrapping_sub(p.zero_point.wrapping_mul(self.sums[c]));
                (acc as f32 * p.scale) * s[c] + self.bias[c]
            }
            WeightScales::Blockwise { block, scales } => {
                let blocks = k / block;
                let mut f = 0.0f32;
                for b in 0..blocks {
                    let r = b * block..(b + 1) * block;
                    let acc = dot(&a[r.clone()], &w[r]).wrapping_sub(p.zero_point.wrapping_mul(self.sums[c * blocks + b]));
                    f += acc as f32 * scales[c * blocks + b];
                }
                f * p.scale + self.bias[c]
            }
        }
    }
}

/// `Σ a·b` over int8 (exact in i32 for any `k` below 2¹⁷).
#[inline]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn dot_avx2(a: &[i8], b: &[i8]) -> i32 {
            dot_plain(a, b)
        }
        if super::Isa::best().has_avx2() {
            // SAFETY: AVX2 is present (checked at run time); the body is safe code.
            return unsafe { dot_avx2(a, b) };
        }
    }
    dot_plain(a, b)
}

/// Written so the vectorizer turns it into widening multiply-adds.
#[inline(always)]
fn dot_plain(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for j in 0..16 {
            acc[j] += x[j] as i16 as i32 * y[j] as i16 as i32;
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ar.iter().zip(br) {
        s += *x as i32 * *y as i32;
    }
    s
}

/// Unpacks int4 weights: `[rows, cols]` nibbles, rows padded to whole bytes, even columns in the
/// low nibble, value `nibble − 8`.
pub fn unpack_int4(bytes: &[u8], rows: usize, cols: usize) -> Result<Vec<i8>, String> {
    let stride = cols.div_ceil(2);
    let need = rows.checked_mul(stride).ok_or_else(|| format!("int4 weights: {rows} × {cols} overflows"))?;
    if bytes.len() < need {
        return Err(format!("int4 weights: {} bytes, [{rows}, {cols}] needs {need}", bytes.len()));
    }
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &bytes[r * stride..(r + 1) * stride];
        for c in 0..cols {
            let b = row[c / 2];
            let nib = if c % 2 == 0 { b & 15 } else { b >> 4 };
            out.push(nib as i8 - 8);
        }
    }
    Ok(out)
}

/// The plain twin: dequantize the row and the weights as XNNPACK's reference does and sum.
pub mod reference {
    use super::{qd8_params, WeightScales};
    use alloc::vec::Vec;

    /// `y[m, n]` for `x` `[m, k]`, weights `w` `[n, k]` (values), scales, bias.
    #[allow(clippy::too_many_arguments)]
    pub fn fully_connected(x: &[f32], m: usize, k: usize, w: &[i8], n: usize, scales: &WeightScales, bias: Option<&[f32]>, min: f32, max: f32) -> Vec<f32> {
        let mut y = Vec::with_capacity(m * n);
        for i in 0..m {
            let row = &x[i * k..(i + 1) * k];
            let lo = row.iter().fold(0.0f32, |a, &v| if v < a { v } else { a });
            let hi = row.iter().fold(0.0f32, |a, &v| if v > a { v } else { a });
            let p = qd8_params(lo, hi);
            let q: Vec<i32> = row
                .iter()
                .map(|&v| {
                    let f = (v * p.multiplier).max((-128 - p.zero_point) as f32).min((127 - p.zero_point) as f32);
                    rne(f) + p.zero_point
                })
                .collect();
            let q: Vec<i32> = q.iter().map(|&v| v - p.zero_point).collect();
            for c in 0..n {
                let wr = &w[c * k..(c + 1) * k];
                let v = match scales {
                    WeightScales::PerChannel(s) => {
                        let acc: i32 = q.iter().zip(wr).map(|(&a, &b)| a * b as i32).sum();
                        (acc as f32 * p.scale) * s[c] + bias.map_or(0.0, |b| b[c])
                    }
                    WeightScales::Blockwise { block, scales: s } => {
                        let blocks = k / block;
                        let mut f = 0.0f32;
                        for b in 0..blocks {
                            let acc: i32 = q[b * block..(b + 1) * block].iter().zip(&wr[b * block..(b + 1) * block]).map(|(&a, &w)| a * w as i32).sum();
                            f += acc as f32 * s[c * blocks + b];
                        }
                        f * p.scale + bias.map_or(0.0, |b| b[c])
                    }
                };
                y.push(v.max(min).min(max));
            }
        }
        y
    }

    /// Round half to even, by integer steps (independent of the kernels' magic-number trick).
    fn rne(f: f32) -> i32 {
        let t = f as i32;
        let floor = if (t as f32) > f { t - 1 } else { t };
        let d = f - floor as f32;
        if d > 0.5 || (d == 0.5 && floor % 2 != 0) {
            floor + 1
        } else {
            floor
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::Serial;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    #[test]
    fn params_follow_xnnpack() {
        // All-zero row: scale 1; the error rule picks the max side, zero point 127.
        assert_eq!(qd8_params(0.0, 0.0), Qd8Params { zero_point: 127, scale: 1.0, multiplier: 1.0 });
        // Symmetric range: the zero point from the min side is 0.5 → rounds to even 0.
        let p = qd8_params(-1.0, 1.0);
        assert_eq!(p.zero_point, 0);
        // Positive row: rmin = 0, so the zero point is −128 (min error side).
        let p = qd8_params(0.5, 2.0);
        assert_eq!(p.zero_point, -128);
        assert!((p.scale - 2.0 / 255.0).abs() < 1e-9);
        // Negative row: zero point 127.
        assert_eq!(qd8_params(-3.0, -1.0).zero_point, 127);
        let mut q = [0i8; 3];
        let p = quantize_row(&[0.0, 2.0, 1.0], &mut q);
        // 1.0 · (1 / (1 / 127.5)) is just below 127.5 in f32, so it rounds down: XNNPACK's
        // recomputed multiplier, not 127.5 itself.
        assert!(p.multiplier < 127.5);
        assert_eq!(q, [-128, 127, -1]);
        assert_eq!(p.zero_point, -128);
    }

    #[test]
    fn int4_unpacking_puts_even_columns_low() {
        // Row of 3: bytes [hi=c1, lo=c0], [lo=c2]; second row likewise.
        let w = unpack_int4(&[0x9F, 0x00, 0x18, 0x07], 2, 3).unwrap();
        assert_eq!(w, [7, 1, -8, 0, -7, -1]);
        assert!(unpack_int4(&[0; 3], 2, 3).unwrap_err().contains("needs 4"));
    }

    #[test]
    fn fast_path_matches_reference() {
        let mut seed = 7;
        for &(m, n, k, block) in &[(1, 5, 7, 0), (3, 70, 64, 32), (4, 129, 96, 0), (2, 17, 256, 64), (5, 3, 1, 0)] {
            let x: Vec<f32> = (0..m * k).map(|i| lcg(&mut seed) * if i % 5 == 0 { 3.0 } else { 1.0 } + 0.2).collect();
            let w: Vec<i8> = (0..n * k).map(|_| (lcg(&mut seed) * 127.0) as i8).collect();
            let bias: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let scales = if block == 0 {
                WeightScales::PerChannel((0..n).map(|_| lcg(&mut seed).abs() * 0.01 + 1e-3).collect())
            } else {
                WeightScales::Blockwise { block, scales: (0..n * k / block).map(|_| lcg(&mut seed).abs() * 0.01 + 1e-3).collect() }
            };
            let op = FullyConnectedQd8::new(n, k, |r, c| w[r * k + c], scales.clone(), Some(&bias)).unwrap();
            let mut y = vec![0.0; m * n];
            op.run(&Serial, &x, m, &mut y, -0.5, f32::INFINITY).unwrap();
            let want = reference::fully_connected(&x, m, k, &w, n, &scales, Some(&bias), -0.5, f32::INFINITY);
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "m{m} n{n} k{k}: y[{i}] = {a}, reference {b}");
            }
            // Against plain f32 math: within the quantization error of the row.
            let x0: Vec<f32> = x[..k].to_vec();
            let amax = x0.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            if let WeightScales::PerChannel(s) = &scales {
                let exact: f32 = (0..k).map(|j| x0[j] * w[j] as f32 * s[0]).sum::<f32>() + bias[0];
                let wsum: f32 = (0..k).map(|j| (w[j] as f32 * s[0]).abs()).sum();
                assert!((y[0].max(-0.5) - exact.max(-0.5)).abs() <= wsum * amax * 2.0 / 255.0 + 1e-5);
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(FullyConnectedQd8::new(2, 6, |_, _| 0, WeightScales::Blockwise { block: 4, scales: vec![1.0; 2] }, None).unwrap_err().contains("block size 4"));
        assert!(FullyConnectedQd8::new(2, 4, |_, _| 0, WeightScales::PerChannel(vec![1.0]), None).unwrap_err().contains("1 weight scales"));
        let op = FullyConnectedQd8::new(2, 4, |_, _| 1, WeightScales::PerChannel(vec![1.0; 2]), None).unwrap();
        assert!(op.run(&Serial, &[0.0; 7], 2, &mut [0.0; 4], f32::NEG_INFINITY, f32::INFINITY).is_err());
    }
}
