//! Random tensors (uniform, normal, permutations) and dropout.
//!
//! There is no entropy source in a `no_std` runtime, so draws come from a small seeded PRNG
//! (SplitMix64: a Weyl sequence through a strong 64-bit mix). Each kernel call takes a fresh
//! stream from a fixed seed and a process-wide call counter: runs are reproducible, and
//! successive calls (two dropout layers, say) draw differently.

use core::sync::atomic::{AtomicU32, Ordering};

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{to_sizes, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::rand.out" => rand_out,
    "aten::randn.out" => randn_out,
    "aten::randperm.out" => randperm_out,
    "aten::native_dropout.out" => native_dropout_out,
}

// ---------------------------------------------------------------------------------------------
// PRNG
// ---------------------------------------------------------------------------------------------

/// SplitMix64 (Steele, Lea & Flood, 2014): period 2^64, passes BigCrush.
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A stream for one kernel call: the fixed seed advanced by the call count.
    pub(crate) fn for_call() -> Rng {
        static CALLS: AtomicU32 = AtomicU32::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed) as u64;
        let mut seeder = Rng::new(0x5EED_0F4B_1D5E_ED00_u64 ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Rng::new(seeder.next_u64())
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) on a grid of 2^-bits (bits ≤ 53): with bits no more than a float
    /// type's significand, every value is exact in that type, so rounding never reaches 1.
    pub(crate) fn uniform_bits(&mut self, bits: u32) -> f64 {
        (self.next_u64() >> (64 - bits)) as f64 * libm::ldexp(1.0, -(bits as i32))
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub(crate) fn uniform(&mut self) -> f64 {
        self.uniform_bits(53)
    }

    /// Two independent standard normal draws (Box–Muller). u1 is in (0, 1], so the log is
    /// finite and so are both results.
    pub(crate) fn normal_pair(&mut self) -> (f64, f64) {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        let r = libm::sqrt(-2.0 * libm::log(u1));
        let theta = 2.0 * core::f64::consts::PI * u2;
        (r * libm::cos(theta), r * libm::sin(theta))
    }

    /// Uniform in [0, bound) without modulo bias (rejection of the short final block).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let threshold = bound.wrapping_neg() % bound; // 2^64 mod bound
        loop {
            let r = self.next_u64();
            if r >= threshold {
                return r % bound;
            }
        }
    }
}

/// Significand bits (with the implicit one) of a floating dtype, or None for the others.
fn significand_bits(dtype: ScalarType) -> Option<u32> {
    match dtype {
        ScalarType::Float => Some(24),
        ScalarType::Double => Some(53),
        ScalarType::Half => Some(11),
        ScalarType::BFloat16 => Some(8),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// rand / randn
// ---------------------------------------------------------------------------------------------

fn random_out<'a>(args: &KernelArgs<'a>, what: &str) -> KernelResult<TensorMut<'a>> {
    let sizes = to_sizes(&args.int_list(0)?).map_err(|e| kerr!("{what}: size: {}", e.message))?;
    let mut out = args.out(1)?;
    if !out.dtype.is_floating() {
        return Err(kerr!("{what}: output dtype must be floating, got {}", out.dtype));
    }
    out.resize(&sizes)?;
    Ok(out)
}

/// `rand.out(SymInt[] size, *, Tensor(a!) out)`: uniform in [0, 1) in the output's dtype.
pub fn rand_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let mut out = random_out(args, "rand")?;
    let bits = significand_bits(out.dtype).ok_or_else(|| kerr!("rand: unsupported output dtype {}", out.dtype))?;
    let mut rng = Rng::for_call();
    if out.dtype == ScalarType::Float {
        for v in out.data_mut::<f32>()? {
            *v = rng.uniform_bits(bits) as f32;
        }
        return Ok(());
    }
    let n = out.numel();
    let mut eo = ElemsMut::of(&mut out)?;
    for i in 0..n {
        eo.set_f64(i, rng.uniform_bits(bits));
    }
    Ok(())
}

/// `randn.out(SymInt[] size, *, Tensor(a!) out)`: standard normal in the output's dtype.
pub fn randn_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let mut out = random_out(args, "randn")?;
    let mut rng = Rng::for_call();
    let n = out.numel();
    let mut eo = ElemsMut::of(&mut out)?;
    let mut i = 0;
    while i < n {
        let (z0, z1) = rng.normal_pair();
        eo.set_f64(i, z0);
        if i + 1 < n {
            eo.set_f64(i + 1, z1);
        }
        i += 2;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// randperm
// ---------------------------------------------------------------------------------------------

/// The largest count whose values 0..n are all exact in `dtype` (PyTorch's check for
/// randperm's result type), or None for bool and non-numeric types.
fn randperm_limit(dtype: ScalarType) -> Option<u64> {
    use ScalarType::*;
    Some(match dtype {
        Byte => u8::MAX as u64 + 1,
        Char => i8::MAX as u64 + 1,
        Short => i16::MAX as u64 + 1,
        Int => i32::MAX as u64 + 1,
        Long => i64::MAX as u64,
        UInt16 => u16::MAX as u64 + 1,
        UInt32 => u32::MAX as u64 + 1,
        UInt64 => u64::MAX,
        d => 1u64 << significand_bits(d)?,
    })
}

/// `randperm.out(SymInt n, *, Tensor(a!) out)`: a random permutation of 0..n (Fisher–Yates).
pub fn randperm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "randperm";
    let n = args.int(0)?;
    let mut out = args.out(1)?;
    let n = u64::try_from(n).map_err(|_| kerr!("{WHAT}: n must be non-negative, got {n}"))?;
    let limit = randperm_limit(out.dtype).ok_or_else(|| kerr!("{WHAT}: output dtype {} cannot hold a permutation", out.dtype))?;
    if n > limit {
        return Err(kerr!("{WHAT}: n = {n} is too large for the output dtype {}", out.dtype));
    }
    let len = usize::try_from(n).map_err(|_| kerr!("{WHAT}: n = {n} does not fit this machine"))?;
    // Resize first: it bounds n by the output's capacity before anything is allocated.
    out.resize(&[len])?;
    let mut rng = Rng::for_call();
    let mut perm: Vec<i64> = (0..len as i64).collect();
    for i in (1..len).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let mut eo = ElemsMut::of(&mut out)?;
    for (i, &v) in perm.iter().enumerate() {
        eo.set_i64(i, v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// dropout
// ---------------------------------------------------------------------------------------------

/// `native_dropout.out(Tensor input, float p, bool? train, *, Tensor(a!) out0, Tensor(b!)
/// out1)`: args = [input, p, train, out0, out1, (out0, out1)].
///
/// As PyTorch: in training (train None or true) each element is kept with probability 1 − p
/// (mask true) and scaled by 1/(1 − p), else it becomes x · 0 (0, or NaN for a non-finite x);
/// p = 1 drops everything. Out of training, or with p = 0, out = input and the mask is all true.
pub fn native_dropout_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "native_dropout";
    let inp = args.tensor(0)?;
    let p = args.double(1)?;
    let train = args.opt_bool(2)?.unwrap_or(true);
    let mut out = args.out(3)?;
    let mut mask = args.out(4)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(kerr!("{WHAT}: dropout probability has to be between 0 and 1, got {p}"));
    }
    if !inp.dtype.is_floating() {
        return Err(kerr!("{WHAT}: input must be a floating tensor, got {}", inp.dtype));
    }
    if out.dtype != inp.dtype {
        return Err(kerr!("{WHAT}: output dtype {} differs from the input dtype {}", out.dtype, inp.dtype));
    }
    if mask.dtype != ScalarType::Bool {
        return Err(kerr!("{WHAT}: mask dtype must be bool, got {}", mask.dtype));
    }
    // Elementwise: any layout works as long as all three share it.
    if out.dim_order != inp.dim_order || mask.dim_order != inp.dim_order {
        return Err(kerr!("{WHAT}: input, output and mask must share one dim order"));
    }
    out.resize(inp.sizes())?;
    mask.resize(inp.sizes())?;
    let keep: &mut [u8] = mask.data_mut()?;

    if !train || p == 0.0 {
        keep.fill(1);
        let dst = out.bytes_mut();
        let src = inp.bytes().get(..dst.len()).ok_or_else(|| kerr!("{WHAT}: input storage is smaller than its shape"))?;
        dst.copy_from_slice(src);
        return Ok(());
    }
    let keep_prob = 1.0 - p;
    let scale = if keep_prob == 0.0 { 0.0 } else { 1.0 / keep_prob };
    let mut rng = Rng::for_call();
    for k in keep.iter_mut() {
        *k = (rng.uniform() < keep_prob) as u8;
    }
    if inp.dtype == ScalarType::Float {
        // PyTorch's f32 arithmetic: (x · mask) · (float)scale.
        let x: &[f32] = inp.data()?;
        let scale = scale as f32;
        for ((y, &xv), &k) in out.data_mut::<f32>()?.iter_mut().zip(x).zip(keep.iter()) {
            *y = xv * k as f32 * scale;
        }
        return Ok(());
    }
    let x = Elems::of(&inp)?;
    let mut y = ElemsMut::of(&mut out)?;
    for (i, &k) in keep.iter().enumerate() {
        y.set_f64(i, x.f64(i) * k as f64 * scale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use half::{bf16, f16};
    use rbuild_runtime::harness::OpHarness;

    #[test]
    fn prng_uniform_range_and_spread() {
        let mut rng = Rng::new(7);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let u = rng.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02, "{sum}");
        // Coarse grids stay below 1 in their own dtype.
        for _ in 0..1000 {
            assert!(bf16::from_f64(rng.uniform_bits(8)).to_f32() < 1.0);
            assert!(f16::from_f64(rng.uniform_bits(11)).to_f32() < 1.0);
            assert!((rng.uniform_bits(24) as f32) < 1.0);
        }
        for _ in 0..1000 {
            assert!(rng.below(3) < 3);
        }
    }

    #[test]
    fn rand_in_unit_interval_for_each_dtype() {
        let mut h = OpHarness::new();
        let size = h.int_list(&[4, 50]);
        for dtype in [ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16] {
            let out = h.out(dtype, &[4, 50]);
            h.call(rand_out, &[size, out, out]).unwrap();
            let vals: Vec<f64> = match dtype {
                ScalarType::Float => h.read::<f32>(out).iter().map(|&v| v as f64).collect(),
                ScalarType::Double => h.read::<f64>(out),
                ScalarType::Half => h.read::<f16>(out).iter().map(|v| v.to_f64()).collect(),
                _ => h.read::<bf16>(out).iter().map(|v| v.to_f64()).collect(),
            };
            assert!(vals.iter().all(|v| (0.0..1.0).contains(v)), "{dtype}: {vals:?}");
            assert!(vals.iter().any(|&v| v != vals[0]), "{dtype}: constant draws");
        }
    }

    #[test]
    fn randn_is_finite_and_roughly_standard() {
        let mut h = OpHarness::new();
        let size = h.int_list(&[2001]);
        let out = h.out(ScalarType::Float, &[2001]);
        h.call(randn_out, &[size, out, out]).unwrap();
        let v = h.read::<f32>(out);
        assert!(v.iter().all(|x| x.is_finite()));
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / v.len() as f32;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.15, "{mean} {var}");
        let small = h.int_list(&[3]);
        let outh = h.out(ScalarType::Half, &[3]);
        h.call(randn_out, &[small, outh, outh]).unwrap();
        assert!(h.read::<f16>(outh).iter().all(|x| x.is_finite()));
    }

    #[test]
    fn rand_errors() {
        let mut h = OpHarness::new();
        let neg = h.int_list(&[2, -1]);
        let out = h.out(ScalarType::Float, &[2, 1]);
        assert!(h.call(rand_out, &[neg, out, out]).is_err());
        let size = h.int_list(&[3]);
        assert!(h.call(randn_out, &[size, out, out]).is_err()); // static shape mismatch
        let outl = h.out(ScalarType::Long, &[3]);
        assert!(h.call(rand_out, &[size, outl, outl]).is_err());
        assert!(h.call(randn_out, &[size, outl, outl]).is_err());
        // empty is fine
        let zero = h.int_list(&[0]);
        let out0 = h.out(ScalarType::Float, &[0]);
        h.call(rand_out, &[zero, out0, out0]).unwrap();
    }

    #[test]
    fn randperm_is_a_permutation() {
        let mut h = OpHarness::new();
        for (n, dtype) in [(0usize, ScalarType::Long), (1, ScalarType::Long), (100, ScalarType::Long), (50, ScalarType::Int), (20, ScalarType::Float)] {
            let nv = h.int(n as i64);
            let out = h.out(dtype, &[n]);
            h.call(randperm_out, &[nv, out, out]).unwrap();
            let mut got: Vec<i64> = match dtype {
                ScalarType::Long => h.read::<i64>(out),
                ScalarType::Int => h.read::<i32>(out).iter().map(|&v| v as i64).collect(),
                _ => h.read::<f32>(out).iter().map(|&v| v as i64).collect(),
            };
            let unsorted = got.clone();
            got.sort_unstable();
            assert_eq!(got, (0..n as i64).collect::<Vec<_>>());
            if n >= 50 {
                assert_ne!(unsorted, got, "not shuffled");
            }
        }
        // errors: negative n, n too large for the dtype, bool output, wrong capacity
        let neg = h.int(-1);
        let out = h.out(ScalarType::Long, &[0]);
        assert!(h.call(randperm_out, &[neg, out, out]).is_err());
        let big = h.int(300);
        let outb = h.out(ScalarType::Byte, &[300]);
        assert!(h.call(randperm_out, &[big, outb, outb]).is_err());
        let two = h.int(2);
        let outbool = h.out(ScalarType::Bool, &[2]);
        assert!(h.call(randperm_out, &[two, outbool, outbool]).is_err());
        let huge = h.int(i64::MAX);
        assert!(h.call(randperm_out, &[huge, out, out]).is_err());
    }

    fn dropout(h: &mut OpHarness, x: u32, p: f64, train: Option<bool>, sizes: &[usize]) -> Result<(u32, u32), rbuild_runtime::kernel::KernelError> {
        let pv = h.double(p);
        let t = match train {
            Some(b) => h.bool(b),
            None => h.none(),
        };
        let (o, m) = (h.out(ScalarType::Float, sizes), h.out(ScalarType::Bool, sizes));
        let list = h.tensor_list(&[o, m]);
        h.call(native_dropout_out, &[x, pv, t, o, m, list]).map(|_| (o, m))
    }

    #[test]
    fn dropout_identity_cases() {
        let mut h = OpHarness::new();
        let data = [1., -2., f32::NAN, 0.5];
        let x = h.f32(&[2, 2], &data);
        for (p, train) in [(0.5, Some(false)), (0.0, Some(true)), (0.0, None)] {
            let (o, m) = dropout(&mut h, x, p, train, &[2, 2]).unwrap();
            let got = h.read::<f32>(o);
            assert!(got.iter().zip(&data).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())));
            assert_eq!(h.read_bool(m), vec![true; 4]);
        }
    }

    #[test]
    fn dropout_training_scales_kept_and_zeroes_dropped() {
        let mut h = OpHarness::new();
        let n = 4000;
        let x = h.f32(&[n], &vec![2.0; n]);
        let (o, m) = dropout(&mut h, x, 0.25, None, &[n]).unwrap();
        let (out, mask) = (h.read::<f32>(o), h.read_bool(m));
        for (v, k) in out.iter().zip(&mask) {
            assert_eq!(*v, if *k { 2.0 / 0.75 } else { 0.0 });
        }
        let kept = mask.iter().filter(|&&k| k).count() as f64 / n as f64;
        assert!((kept - 0.75).abs() < 0.04, "{kept}");
        // p = 1: everything dropped
        let (o, m) = dropout(&mut h, x, 1.0, Some(true), &[n]).unwrap();
        assert!(h.read::<f32>(o).iter().all(|&v| v == 0.0));
        assert!(h.read_bool(m).iter().all(|&k| !k));
        // Double goes through the generic path.
        let xd = h.tensor::<f64>(ScalarType::Double, &[64], &[3.0; 64]);
        let (pv, t) = (h.double(0.5), h.bool(true));
        let (od, md) = (h.out(ScalarType::Double, &[64]), h.out(ScalarType::Bool, &[64]));
        let list = h.tensor_list(&[od, md]);
        h.call(native_dropout_out, &[xd, pv, t, od, md, list]).unwrap();
        for (v, k) in h.read::<f64>(od).iter().zip(h.read_bool(md)) {
            assert_eq!(*v, if k { 6.0 } else { 0.0 });
        }
    }

    #[test]
    fn dropout_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1., 2., 3.]);
        assert!(dropout(&mut h, x, 1.5, None, &[3]).is_err());
        assert!(dropout(&mut h, x, -0.1, None, &[3]).is_err());
        assert!(dropout(&mut h, x, f64::NAN, None, &[3]).is_err());
        assert!(dropout(&mut h, x, 0.5, None, &[4]).is_err());
        let i = h.i64(&[3], &[1, 2, 3]);
        let (pv, t) = (h.double(0.5), h.bool(true));
        let (o, m) = (h.out(ScalarType::Long, &[3]), h.out(ScalarType::Bool, &[3]));
        let list = h.tensor_list(&[o, m]);
        assert!(h.call(native_dropout_out, &[i, pv, t, o, m, list]).is_err());
        let (o2, m2) = (h.out(ScalarType::Float, &[3]), h.out(ScalarType::Float, &[3]));
        let list2 = h.tensor_list(&[o2, m2]);
        assert!(h.call(native_dropout_out, &[x, pv, t, o2, m2, list2]).is_err());
    }
}
