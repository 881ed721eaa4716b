//! Which SIMD instruction set the LLM kernels use, chosen once at run time.
//!
//! x86-64: AVX2 + FMA + F16C when the CPU has all three (`is_x86_feature_detected!` under
//! `std`; without `std`, only when the build enables them). aarch64: NEON (always present).
//! Everything else uses the scalar code, which is written to auto-vectorize.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    Neon,
}

/// The best instruction set this CPU supports.
pub fn isa() -> Isa {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        static CACHE: AtomicU8 = AtomicU8::new(0);
        match CACHE.load(Ordering::Relaxed) {
            1 => return Isa::Scalar,
            2 => return Isa::Avx2,
            _ => {}
        }
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("f16c");
        CACHE.store(if avx2 { 2 } else { 1 }, Ordering::Relaxed);
        if avx2 { Isa::Avx2 } else { Isa::Scalar }
    }
    #[cfg(all(target_arch = "x86_64", not(feature = "std")))]
    {
        if cfg!(all(target_feature = "avx2", target_feature = "fma", target_feature = "f16c")) { Isa::Avx2 } else { Isa::Scalar }
    }
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    {
        Isa::Neon
    }
    #[cfg(not(any(target_arch = "x86_64", all(target_arch = "aarch64", target_feature = "neon"))))]
    {
        Isa::Scalar
    }
}

/// Every instruction set usable here (scalar first), for tests that compare each path.
#[cfg(test)]
pub fn all() -> alloc::vec::Vec<Isa> {
    let mut v = alloc::vec![Isa::Scalar];
    if isa() != Isa::Scalar {
        v.push(isa());
    }
    v
}
