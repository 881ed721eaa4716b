//! Real-to-complex and complex-to-real FFTs (`_fft_r2c`, `_fft_c2r`) over any set of dims.
//!
//! Complex tensors are read and written as interleaved `[re, im]` pairs (the runtime's
//! `Element` views of ComplexFloat/ComplexDouble). Every transform computes in f64 whatever the
//! dtype: an iterative radix-2 FFT for powers of two, a direct DFT for short other lengths, and
//! Bluestein's chirp-z transform (a convolution done with the radix-2 FFT) for long ones, so
//! every length costs O(n log n). Written here because the kernels must build without `std`.
//!
//! PyTorch's semantics: `normalization` is `fft_norm_mode` (0 none, 1 by 1/sqrt(n), 2 by 1/n,
//! n the product of the signal sizes); the last dim listed is the half-spectrum one.

use alloc::vec;
use alloc::vec::Vec;
use core::f64::consts::PI;
use core::ops::{Add, Mul, Sub};

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{normalize_dims, require_contiguous};

rbuild_runtime::kernel_table! {
    "aten::_fft_r2c.out" => fft_r2c_out,
    "aten::_fft_c2r.out" => fft_c2r_out,
}

/// A complex number in f64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Complex {
    re: f64,
    im: f64,
}

impl Complex {
    const ZERO: Complex = Complex { re: 0.0, im: 0.0 };

    fn new(re: f64, im: f64) -> Complex {
        Complex { re, im }
    }
    fn conj(self) -> Complex {
        Complex::new(self.re, -self.im)
    }
    fn scale(self, f: f64) -> Complex {
        Complex::new(self.re * f, self.im * f)
    }
    /// `exp(-i·π·num/den)`: the angle is reduced by the caller to keep it small and exact.
    fn turn(num: u64, den: u64) -> Complex {
        let angle = -PI * num as f64 / den as f64;
        Complex::new(libm::cos(angle), libm::sin(angle))
    }
}

impl Add for Complex {
    type Output = Complex;
    fn add(self, b: Complex) -> Complex {
        Complex::new(self.re + b.re, self.im + b.im)
    }
}

impl Sub for Complex {
    type Output = Complex;
    fn sub(self, b: Complex) -> Complex {
        Complex::new(self.re - b.re, self.im - b.im)
    }
}

impl Mul for Complex {
    type Output = Complex;
    fn mul(self, b: Complex) -> Complex {
        Complex::new(self.re * b.re - self.im * b.im, self.re * b.im + self.im * b.re)
    }
}

// ---------------------------------------------------------------------------------------------
// 1-D transforms
// ---------------------------------------------------------------------------------------------

/// Longest non-power-of-two length done by the direct O(n²) DFT.
const DIRECT_MAX: usize = 32;

/// How to transform one length.
enum Plan {
    /// `twiddles[j] = exp(-2πi·j/n)` for `j < n/2`.
    Radix2 { twiddles: Vec<Complex> },
    /// `twiddles[j] = exp(-2πi·j/n)` for `j < n`.
    Direct { twiddles: Vec<Complex> },
    /// `chirp[j] = exp(-πi·j²/n)`; `kernel` is the radix-2 FFT (length `m >= 2n - 1`) of the
    /// conjugate chirp laid out for a circular convolution.
    Bluestein { chirp: Vec<Complex>, kernel: Vec<Complex>, inner: Vec<Complex> },
}

/// Twiddles `exp(-2πi·j/n)` for `j < count`.
fn twiddles(n: usize, count: usize) -> Vec<Complex> {
    (0..count).map(|j| Complex::turn(2 * j as u64, n as u64)).collect()
}

impl Plan {
    fn new(n: usize) -> KernelResult<Plan> {
        if n.is_power_of_two() {
            return Ok(Plan::Radix2 { twiddles: twiddles(n, n / 2) });
        }
        if n <= DIRECT_MAX {
            return Ok(Plan::Direct { twiddles: twiddles(n, n) });
        }
        let m = n
            .checked_mul(2)
            .and_then(|v| (v - 1).checked_next_power_of_two())
            .ok_or_else(|| kerr!("FFT length {n} is too large"))?;
        let inner = twiddles(m, m / 2);
        // j² mod 2n keeps the chirp's angle in [0, 2π) (the chirp has period 2n in j²).
        let two_n = 2 * n as u64;
        let chirp: Vec<Complex> =
            (0..n as u64).map(|j| Complex::turn((j as u128 * j as u128 % two_n as u128) as u64, n as u64)).collect();
        let mut kernel = vec![Complex::ZERO; m];
        kernel[0] = chirp[0].conj();
        for j in 1..n {
            kernel[j] = chirp[j].conj();
            kernel[m - j] = chirp[j].conj();
        }
        radix2(&mut kernel, &inner);
        Ok(Plan::Bluestein { chirp, kernel, inner })
    }

    /// Unnormalized DFT of `data` in place: `X[k] = Σ x[j]·exp(∓2πi·jk/n)` (− forward).
    fn run(&self, data: &mut [Complex], inverse: bool, scratch: &mut Vec<Complex>) {
        if inverse {
            // The inverse DFT is the conjugate of the forward DFT of the conjugate.
            data.iter_mut().for_each(|c| *c = c.conj());
            self.forward(data, scratch);
            data.iter_mut().for_each(|c| *c = c.conj());
        } else {
            self.forward(data, scratch);
        }
    }

    fn forward(&self, data: &mut [Complex], scratch: &mut Vec<Complex>) {
        match self {
            Plan::Radix2 { twiddles } => radix2(data, twiddles),
            Plan::Direct { twiddles } => {
                let n = data.len();
                scratch.clear();
                scratch.extend_from_slice(data);
                for (k, out) in data.iter_mut().enumerate() {
                    let (mut sum, mut at) = (Complex::ZERO, 0usize);
                    for &x in scratch.iter() {
                        sum = sum + x * twiddles[at];
                        at = (at + k) % n;
                    }
                    *out = sum;
                }
            }
            Plan::Bluestein { chirp, kernel, inner } => {
                let m = kernel.len();
                scratch.clear();
                scratch.resize(m, Complex::ZERO);
                for ((s, &x), &c) in scratch.iter_mut().zip(data.iter()).zip(chirp) {
                    *s = x * c;
                }
                radix2(scratch, inner);
                for (s, &k) in scratch.iter_mut().zip(kernel) {
                    *s = (*s * k).conj();
                }
                radix2(scratch, inner); // conj(FFT(conj(.))) = m · inverse FFT
                let inv_m = 1.0 / m as f64;
                for ((out, &s), &c) in data.iter_mut().zip(scratch.iter()).zip(chirp) {
                    *out = s.conj().scale(inv_m) * c;
                }
            }
        }
    }
}

/// In-place iterative radix-2 FFT (forward) of a power-of-two length; `twiddles` has n/2 entries.
fn radix2(data: &mut [Complex], twiddles: &[Complex]) {
    let n = data.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            data.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let (half, step) = (len / 2, n / len);
        for block in data.chunks_exact_mut(len) {
            let (lo, hi) = block.split_at_mut(half);
            for (k, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let t = *b * twiddles[k * step];
                (*a, *b) = (*a + t, *a - t);
            }
        }
        len <<= 1;
    }
}

/// Sizes of a contiguous buffer split around `axis`: (outer count, length, inner stride).
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

/// Transforms every lane of a contiguous row-major buffer of `shape` along `axis`.
fn transform_axis(data: &mut [Complex], shape: &[usize], axis: usize, inverse: bool) -> KernelResult {
    let (outer, n, inner) = around(shape, axis);
    if n <= 1 || data.is_empty() {
        return Ok(()); // a length-1 DFT is the identity
    }
    let plan = Plan::new(n)?;
    let (mut lane, mut scratch) = (vec![Complex::ZERO; n], Vec::new());
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (t, v) in lane.iter_mut().enumerate() {
                *v = data[base + t * inner];
            }
            plan.run(&mut lane, inverse, &mut scratch);
            for (t, v) in lane.iter().enumerate() {
                data[base + t * inner] = *v;
            }
        }
    }
    Ok(())
}

/// The first `keep` entries along `axis` of a contiguous buffer of `shape`.
fn crop_axis(data: &[Complex], shape: &[usize], axis: usize, keep: usize) -> Vec<Complex> {
    let (outer, n, inner) = around(shape, axis);
    let mut out = Vec::with_capacity(outer * keep * inner);
    for o in 0..outer {
        out.extend_from_slice(&data[o * n * inner..(o * n + keep) * inner]);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// `fft_norm_mode`: the factor applied to a transform over `n` points.
fn norm_scale(op: &str, mode: i64, n: f64) -> KernelResult<f64> {
    match mode {
        0 => Ok(1.0),
        1 => Ok(1.0 / libm::sqrt(n)),
        2 => Ok(1.0 / n),
        _ => Err(kerr!("{op}: normalization {mode} must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n)")),
    }
}

/// The transformed dims (normalized, distinct, at least one), each of a non-zero length in
/// `sizes` except the last (checked by the caller, whose rule differs).
fn fft_dims(op: &str, dims: &[i64], sizes: &[usize]) -> KernelResult<Vec<usize>> {
    if sizes.is_empty() {
        return Err(kerr!("{op}: input must have at least one dimension"));
    }
    if dims.is_empty() {
        return Err(kerr!("{op}: dim must name at least one dimension"));
    }
    let dims = normalize_dims(dims, sizes.len()).map_err(|e| kerr!("{op}: dim: {}", e.message))?;
    for &d in &dims[..dims.len() - 1] {
        if sizes[d] == 0 {
            return Err(kerr!("{op}: invalid number of data points (0) along dim {d} of input {sizes:?}"));
        }
    }
    Ok(dims)
}

fn load_real(t: &TensorRef<'_>) -> KernelResult<Vec<Complex>> {
    Ok(match t.dtype {
        ScalarType::Float => t.data::<f32>()?.iter().map(|&v| Complex::new(v as f64, 0.0)).collect(),
        _ => t.data::<f64>()?.iter().map(|&v| Complex::new(v, 0.0)).collect(),
    })
}

fn load_complex(t: &TensorRef<'_>) -> KernelResult<Vec<Complex>> {
    Ok(match t.dtype {
        ScalarType::ComplexFloat => {
            t.data::<[f32; 2]>()?.iter().map(|&[r, i]| Complex::new(r as f64, i as f64)).collect()
        }
        _ => t.data::<[f64; 2]>()?.iter().map(|&[r, i]| Complex::new(r, i)).collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

/// `_fft_r2c.out(self, int[] dim, int normalization, bool onesided, *, out)`: args = [self,
/// dim, normalization, onesided, out, out]. Float → ComplexFloat, Double → ComplexDouble. The
/// forward DFT over `dim`; `onesided` keeps `n/2 + 1` entries along the last dim listed.
pub fn fft_r2c_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "_fft_r2c";
    let input = args.tensor(0)?;
    require_contiguous(&input, OP)?;
    let in_sizes = input.sizes().to_vec();
    let dims = fft_dims(OP, &args.int_list(1)?, &in_sizes)?;
    let last = dims[dims.len() - 1];
    if in_sizes[last] == 0 {
        return Err(kerr!("{OP}: invalid number of data points (0) along dim {last} of input {in_sizes:?}"));
    }
    let signal: f64 = dims.iter().map(|&d| in_sizes[d] as f64).product();
    let scale = norm_scale(OP, args.int(2)?, signal)?;
    let onesided = args.bool(3)?;
    let mut out = args.out(4)?;
    if !matches!(
        (input.dtype, out.dtype),
        (ScalarType::Float, ScalarType::ComplexFloat) | (ScalarType::Double, ScalarType::ComplexDouble)
    ) {
        return Err(kerr!(
            "{OP}: needs a Float input with a ComplexFloat out or Double with ComplexDouble, got {} / {}",
            input.dtype,
            out.dtype
        ));
    }
    let mut out_sizes = in_sizes.clone();
    if onesided {
        out_sizes[last] = in_sizes[last] / 2 + 1;
    }
    out.resize(&out_sizes)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let mut buf = load_real(&input)?;
    // The last dim first, so that the one-sided crop spares the other dims' work.
    transform_axis(&mut buf, &in_sizes, last, false)?;
    if onesided {
        buf = crop_axis(&buf, &in_sizes, last, out_sizes[last]);
    }
    for &d in &dims[..dims.len() - 1] {
        transform_axis(&mut buf, &out_sizes, d, false)?;
    }
    store_complex(&mut out, &buf, scale)
}

/// `_fft_c2r.out(self, int[] dim, int normalization, SymInt last_dim_size, *, out)`: args =
/// [self, dim, normalization, last_dim_size, out, out]. ComplexFloat → Float, ComplexDouble →
/// Double. The inverse DFT over `dim` of a Hermitian signal whose last dim listed holds its
/// first `last_dim_size/2 + 1` entries (later ones are ignored, as are the imaginary parts of
/// the zero-frequency and, for an even length, the Nyquist entries), giving `last_dim_size`
/// real points there.
pub fn fft_c2r_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "_fft_c2r";
    let input = args.tensor(0)?;
    require_contiguous(&input, OP)?;
    let in_sizes = input.sizes().to_vec();
    let dims = fft_dims(OP, &args.int_list(1)?, &in_sizes)?;
    let last = dims[dims.len() - 1];
    let n_arg = args.int(3)?;
    let n = usize::try_from(n_arg)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| kerr!("{OP}: last_dim_size {n_arg} must be >= 1"))?;
    let half = n / 2 + 1;
    if in_sizes[last] < half {
        return Err(kerr!(
            "{OP}: input {in_sizes:?} has {} entries along dim {last}, last_dim_size {n} needs {half}",
            in_sizes[last]
        ));
    }
    let signal: f64 = dims[..dims.len() - 1].iter().map(|&d| in_sizes[d] as f64).product::<f64>() * n as f64;
    let scale = norm_scale(OP, args.int(2)?, signal)?;
    let mut out = args.out(4)?;
    if !matches!(
        (input.dtype, out.dtype),
        (ScalarType::ComplexFloat, ScalarType::Float) | (ScalarType::ComplexDouble, ScalarType::Double)
    ) {
        return Err(kerr!(
            "{OP}: needs a ComplexFloat input with a Float out or ComplexDouble with Double, got {} / {}",
            input.dtype,
            out.dtype
        ));
    }
    let mut out_sizes = in_sizes.clone();
    out_sizes[last] = n;
    out.resize(&out_sizes)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let mut half_sizes = in_sizes.clone();
    half_sizes[last] = half;
    let mut buf = crop_axis(&load_complex(&input)?, &in_sizes, last, half);
    for &d in &dims[..dims.len() - 1] {
        transform_axis(&mut buf, &half_sizes, d, true)?;
    }
    // The last dim: rebuild the full Hermitian spectrum of each lane, then invert it.
    let (outer, _, inner) = around(&half_sizes, last);
    let plan = Plan::new(n)?;
    let (mut lane, mut scratch) = (vec![Complex::ZERO; n], Vec::new());
    let mut real = vec![0.0f64; outer * n * inner];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| buf[(o * half + k) * inner + i];
            lane[0] = Complex::new(at(0).re, 0.0);
            for k in 1..half {
                if 2 * k == n {
                    lane[k] = Complex::new(at(k).re, 0.0);
                } else {
                    lane[k] = at(k);
                    lane[n - k] = at(k).conj();
                }
            }
            plan.run(&mut lane, true, &mut scratch);
            for (t, v) in lane.iter().enumerate() {
                real[(o * n + t) * inner + i] = v.re * scale;
            }
        }
    }
    match out.dtype {
        ScalarType::Float => out.data_mut::<f32>()?.iter_mut().zip(&real).for_each(|(d, &v)| *d = v as f32),
        _ => out.data_mut::<f64>()?.copy_from_slice(&real),
    }
    Ok(())
}

fn store_complex(out: &mut TensorMut<'_>, buf: &[Complex], scale: f64) -> KernelResult {
    match out.dtype {
        ScalarType::ComplexFloat => {
            for (d, c) in out.data_mut::<[f32; 2]>()?.iter_mut().zip(buf) {
                *d = [(c.re * scale) as f32, (c.im * scale) as f32];
            }
        }
        _ => {
            for (d, c) in out.data_mut::<[f64; 2]>()?.iter_mut().zip(buf) {
                *d = [c.re * scale, c.im * scale];
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    use super::Complex;

    /// Deterministic values in [-2, 2).
    fn data(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_add(0x9e3779b97f4a7c15);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
            })
            .collect()
    }

    /// Independent multi-dim DFT by definition: `X[k] = Σ_j x[j] · exp(sign·2πi·Σ_d j_d k_d / n_d)`
    /// over the dims `dims` of a row-major `shape` (the other dims are batch).
    fn naive_dft(x: &[Complex], shape: &[usize], dims: &[usize], sign: f64) -> Vec<Complex> {
        let rank = shape.len();
        let strides: Vec<usize> = (0..rank).map(|d| shape[d + 1..].iter().product()).collect();
        let unravel = |mut i: usize| -> Vec<usize> {
            (0..rank)
                .map(|d| {
                    let v = i / strides[d];
                    i %= strides[d];
                    v
                })
                .collect()
        };
        let numel = x.len();
        let mut out = vec![Complex::ZERO; numel];
        for (k, o) in out.iter_mut().enumerate() {
            let kk = unravel(k);
            for (j, &xv) in x.iter().enumerate() {
                let jj = unravel(j);
                if (0..rank).any(|d| !dims.contains(&d) && jj[d] != kk[d]) {
                    continue;
                }
                let phase: f64 = dims.iter().map(|&d| (jj[d] * kk[d]) as f64 / shape[d] as f64).sum();
                let ang = sign * 2.0 * core::f64::consts::PI * phase;
                *o = *o + xv * Complex::new(ang.cos(), ang.sin());
            }
        }
        out
    }

    fn r2c(
        h: &mut OpHarness,
        x: u32,
        dims: &[i64],
        norm: i64,
        onesided: bool,
        dt: ScalarType,
        shape: &[usize],
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let (d, n, o) = (h.int_list(dims), h.int(norm), h.bool(onesided));
        let out = h.out(dt, shape);
        h.call(super::fft_r2c_out, &[x, d, n, o, out, out]).map(|_| out)
    }

    fn c2r(
        h: &mut OpHarness,
        x: u32,
        dims: &[i64],
        norm: i64,
        last: i64,
        dt: ScalarType,
        shape: &[usize],
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let (d, n, l) = (h.int_list(dims), h.int(norm), h.int(last));
        let out = h.out(dt, shape);
        h.call(super::fft_c2r_out, &[x, d, n, l, out, out]).map(|_| out)
    }

    fn read_c64(h: &OpHarness, id: u32) -> Vec<Complex> {
        h.read::<[f64; 2]>(id).iter().map(|&[r, i]| Complex::new(r, i)).collect()
    }

    fn read_c32(h: &OpHarness, id: u32) -> Vec<Complex> {
        h.read::<[f32; 2]>(id).iter().map(|&[r, i]| Complex::new(r as f64, i as f64)).collect()
    }

    /// Keeps the first `keep` entries along `axis` (the one-sided half).
    fn crop(x: &[Complex], shape: &[usize], axis: usize, keep: usize) -> Vec<Complex> {
        super::crop_axis(x, shape, axis, keep)
    }

    fn assert_close(got: &[Complex], want: &[Complex], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let err = (g.re - w.re).abs().max((g.im - w.im).abs());
            assert!(err <= tol, "element {i}: got {g:?}, want {w:?}");
        }
    }

    #[test]
    fn r2c_1d_every_algorithm_against_the_definition() {
        // Powers of two (radix-2), short others (direct), long others (Bluestein), and 1.
        for n in [1usize, 2, 3, 5, 8, 12, 17, 32, 33, 64, 100, 127] {
            let xs = data(2 * n, n as u64);
            let xc: Vec<Complex> = xs.iter().map(|&v| Complex::new(v, 0.0)).collect();
            let full = naive_dft(&xc, &[2, n], &[1], -1.0);
            for (norm, factor) in [(0, 1.0), (1, 1.0 / (n as f64).sqrt()), (2, 1.0 / n as f64)] {
                let want: Vec<Complex> = full.iter().map(|c| c.scale(factor)).collect();
                let mut h = OpHarness::new();
                let x = h.tensor::<f64>(ScalarType::Double, &[2, n], &xs);
                let o = r2c(&mut h, x, &[-1], norm, false, ScalarType::ComplexDouble, &[2, n]).unwrap();
                assert_close(&read_c64(&h, o), &want, 1e-10 * n as f64);
                let half = n / 2 + 1;
                let o = r2c(&mut h, x, &[1], norm, true, ScalarType::ComplexDouble, &[2, half]).unwrap();
                assert_close(&read_c64(&h, o), &crop(&want, &[2, n], 1, half), 1e-10 * n as f64);
                // Float in, ComplexFloat out.
                let xf: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
                let x = h.f32(&[2, n], &xf);
                let o = r2c(&mut h, x, &[1], norm, true, ScalarType::ComplexFloat, &[2, half]).unwrap();
                assert_close(&read_c32(&h, o), &crop(&want, &[2, n], 1, half), 1e-5 * n as f64);
            }
        }
    }

    #[test]
    fn r2c_multi_dim_and_dim_order() {
        let shape = [3usize, 4, 6];
        let xs = data(72, 9);
        let xc: Vec<Complex> = xs.iter().map(|&v| Complex::new(v, 0.0)).collect();
        let mut h = OpHarness::new();
        let x = h.tensor::<f64>(ScalarType::Double, &shape, &xs);
        // dims [0, 2]: dim 2 (last listed) is halved to 4; dim 1 is batch.
        let full = naive_dft(&xc, &shape, &[0, 2], -1.0);
        let o = r2c(&mut h, x, &[0, -1], 2, true, ScalarType::ComplexDouble, &[3, 4, 4]).unwrap();
        let want: Vec<Complex> = crop(&full, &shape, 2, 4).iter().map(|c| c.scale(1.0 / 18.0)).collect();
        assert_close(&read_c64(&h, o), &want, 1e-12);
        // dims [2, 0]: now dim 0 is the halved one (3 → 2).
        let o = r2c(&mut h, x, &[2, 0], 0, true, ScalarType::ComplexDouble, &[2, 4, 6]).unwrap();
        assert_close(&read_c64(&h, o), &crop(&full, &shape, 0, 2), 1e-12);
        // All three dims, two-sided, 1/sqrt(n).
        let full = naive_dft(&xc, &shape, &[0, 1, 2], -1.0);
        let o = r2c(&mut h, x, &[1, 2, 0], 1, false, ScalarType::ComplexDouble, &shape).unwrap();
        let want: Vec<Complex> = full.iter().map(|c| c.scale(1.0 / 72f64.sqrt())).collect();
        assert_close(&read_c64(&h, o), &want, 1e-12);
    }

    #[test]
    fn c2r_hand_computed_hermitian_rules() {
        let mut h = OpHarness::new();
        // n = 4 from [X0, X1, X2] = [1+5i, 2+i, 3+7i]: the imaginary parts of X0 and of the
        // Nyquist entry X2 are ignored: x[t] = 1 + 2·Re((2+i)·i^t) + 3·(-1)^t = [8, -4, 0, 0].
        let x = h.tensor::<[f32; 2]>(ScalarType::ComplexFloat, &[3], &[[1., 5.], [2., 1.], [3., 7.]]);
        let o = c2r(&mut h, x, &[0], 0, 4, ScalarType::Float, &[4]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![8., -4., 0., 0.]);
        // Entries past last_dim_size/2 + 1 are ignored; 1/n scales by 1/4.
        let x =
            h.tensor::<[f32; 2]>(ScalarType::ComplexFloat, &[5], &[[1., 5.], [2., 1.], [3., 7.], [9., 9.], [9., 9.]]);
        let o = c2r(&mut h, x, &[0], 2, 4, ScalarType::Float, &[4]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![2., -1., 0., 0.]);
        // n = 3 (odd, no Nyquist): x[t] = 1 + 2·Re((2+i)·exp(2πit/3)).
        let o = c2r(&mut h, x, &[-1], 0, 3, ScalarType::Float, &[3]).unwrap();
        let want: Vec<f64> = (0..3)
            .map(|t| {
                let a = 2.0 * core::f64::consts::PI * t as f64 / 3.0;
                1.0 + 2.0 * (2.0 * a.cos() - a.sin())
            })
            .collect();
        for (g, w) in h.read::<f32>(o).iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
        }
        // n = 1: just Re(X0).
        let o = c2r(&mut h, x, &[0], 1, 1, ScalarType::Float, &[1]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1.]);
    }

    #[test]
    fn c2r_matches_the_inverse_definition() {
        // A Hermitian spectrum from a real signal: c2r must give back `n · x` (norm none) —
        // and per the definition, c2c-inverse over the leading dims then Hermitian last dim.
        for (shape, dims, last) in [
            (vec![2usize, 5, 6], vec![1usize, 2], 2usize),
            (vec![4, 3, 7], vec![2, 0], 0),
            (vec![3, 40], vec![1], 1),
            (vec![6, 35], vec![0, 1], 1),
        ] {
            let numel: usize = shape.iter().product();
            let xs = data(numel, numel as u64);
            let xc: Vec<Complex> = xs.iter().map(|&v| Complex::new(v, 0.0)).collect();
            let full = naive_dft(&xc, &shape, &dims, -1.0);
            let n = shape[last];
            let half = n / 2 + 1;
            let mut half_shape = shape.clone();
            half_shape[last] = half;
            let spec = crop(&full, &shape, last, half);
            let pairs: Vec<[f64; 2]> = spec.iter().map(|c| [c.re, c.im]).collect();
            let signal: usize = dims.iter().map(|&d| shape[d]).product();
            let dims_i: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            let mut h = OpHarness::new();
            let x = h.tensor::<[f64; 2]>(ScalarType::ComplexDouble, &half_shape, &pairs);
            let o = c2r(&mut h, x, &dims_i, 2, n as i64, ScalarType::Double, &shape).unwrap();
            for (g, w) in h.read::<f64>(o).iter().zip(&xs) {
                assert!((g - w).abs() < 1e-10, "{shape:?}: {g} vs {w}");
            }
            let o = c2r(&mut h, x, &dims_i, 0, n as i64, ScalarType::Double, &shape).unwrap();
            for (g, w) in h.read::<f64>(o).iter().zip(&xs) {
                assert!((g - w * signal as f64).abs() < 1e-8, "{shape:?}: {g} vs {}", w * signal as f64);
            }
        }
    }

    #[test]
    fn round_trip_c2r_of_r2c_is_identity() {
        for (shape, dims) in
            [(vec![3usize, 8], vec![-1i64]), (vec![2, 7, 9], vec![0, 2]), (vec![5, 6, 50], vec![1, 2, 0])]
        {
            let numel: usize = shape.iter().product();
            let xs: Vec<f32> = data(numel, 3).iter().map(|&v| v as f32).collect();
            let last = (dims[dims.len() - 1].rem_euclid(shape.len() as i64)) as usize;
            let mut half_shape = shape.clone();
            half_shape[last] = shape[last] / 2 + 1;
            for (fwd, inv) in [(0, 2), (1, 1), (2, 0)] {
                let mut h = OpHarness::new();
                let x = h.f32(&shape, &xs);
                let spec = r2c(&mut h, x, &dims, fwd, true, ScalarType::ComplexFloat, &half_shape).unwrap();
                let back = c2r(&mut h, spec, &dims, inv, shape[last] as i64, ScalarType::Float, &shape).unwrap();
                for (g, w) in h.read::<f32>(back).iter().zip(&xs) {
                    assert!((g - w).abs() < 1e-5, "{shape:?} norms {fwd}/{inv}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn empty_batch_gives_empty_outputs() {
        let mut h = OpHarness::new();
        let x = h.f32(&[0, 8], &[]);
        let o = r2c(&mut h, x, &[1], 0, true, ScalarType::ComplexFloat, &[0, 5]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 5]);
        let x = h.tensor::<[f32; 2]>(ScalarType::ComplexFloat, &[0, 5], &[]);
        let o = c2r(&mut h, x, &[1], 0, 8, ScalarType::Float, &[0, 8]).unwrap();
        assert_eq!(h.sizes(o), vec![0, 8]);
    }

    #[test]
    fn fft_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4], &[0.; 8]);
        let cf = ScalarType::ComplexFloat;
        let e = |r: Result<u32, rbuild_runtime::KernelError>| r.unwrap_err().message;
        assert!(e(r2c(&mut h, x, &[], 0, true, cf, &[2, 3])).contains("at least one"));
        assert!(e(r2c(&mut h, x, &[2], 0, true, cf, &[2, 3])).contains("out of range"));
        assert!(e(r2c(&mut h, x, &[1, -1], 0, true, cf, &[2, 3])).contains("repeated"));
        assert!(e(r2c(&mut h, x, &[1], 3, true, cf, &[2, 3])).contains("normalization"));
        assert!(e(r2c(&mut h, x, &[1], -1, true, cf, &[2, 3])).contains("normalization"));
        assert!(e(r2c(&mut h, x, &[1], 0, true, ScalarType::ComplexDouble, &[2, 3])).contains("ComplexFloat"));
        assert!(e(r2c(&mut h, x, &[1], 0, true, ScalarType::Float, &[2, 3])).contains("ComplexFloat"));
        assert!(e(r2c(&mut h, x, &[1], 0, true, cf, &[2, 4])).contains("shape"));
        let xi = h.i64(&[4], &[1; 4]);
        assert!(e(r2c(&mut h, xi, &[0], 0, true, cf, &[3])).contains("Float input"));
        let empty = h.f32(&[2, 0], &[]);
        assert!(e(r2c(&mut h, empty, &[1], 0, true, cf, &[2, 1])).contains("data points"));
        assert!(e(r2c(&mut h, empty, &[1, 0], 0, true, cf, &[1, 0])).contains("data points"));
        let scalar = h.f32(&[], &[1.]);
        assert!(e(r2c(&mut h, scalar, &[0], 0, true, cf, &[])).contains("at least one dimension"));

        let z = h.tensor::<[f32; 2]>(cf, &[2, 3], &[[0., 0.]; 6]);
        let f = ScalarType::Float;
        assert!(e(c2r(&mut h, z, &[1], 0, 0, f, &[2, 0])).contains("last_dim_size"));
        assert!(e(c2r(&mut h, z, &[1], 0, -4, f, &[2, 4])).contains("last_dim_size"));
        assert!(e(c2r(&mut h, z, &[1], 0, 6, f, &[2, 6])).contains("needs 4"));
        assert!(e(c2r(&mut h, z, &[1], 0, i64::MAX, f, &[2, 4])).contains("needs"));
        assert!(e(c2r(&mut h, z, &[1], 5, 4, f, &[2, 4])).contains("normalization"));
        assert!(e(c2r(&mut h, z, &[1], 0, 4, ScalarType::Double, &[2, 4])).contains("ComplexFloat input"));
        assert!(e(c2r(&mut h, x, &[1], 0, 4, f, &[2, 4])).contains("ComplexFloat input"));
        assert!(e(c2r(&mut h, z, &[3], 0, 4, f, &[2, 4])).contains("out of range"));
        assert!(e(c2r(&mut h, z, &[1], 0, 5, f, &[2, 4])).contains("shape"));
        let ze = h.tensor::<[f32; 2]>(cf, &[0, 3], &[]);
        assert!(e(c2r(&mut h, ze, &[0, 1], 0, 4, f, &[0, 4])).contains("data points"));
    }
}
