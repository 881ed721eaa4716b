//! The two DSP-extension instructions the int8 kernels use, as inline assembly on Arm builds
//! with the `arm-dsp` feature and as plain-Rust twins elsewhere (the same results bit for bit,
//! so host tests exercise the kernels' lane bookkeeping).

/// `SXTB16 r, x`: bytes 0 and 2 of `x`, sign-extended to the two int16 halves.
#[inline(always)]
pub fn sxtb16(x: u32) -> u32 {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let r: u32;
        // SAFETY: SXTB16 reads one register and writes another; no memory, stack or flags.
        unsafe {
            core::arch::asm!("sxtb16 {r}, {x}", r = lateout(reg) r, x = in(reg) x, options(pure, nomem, nostack, preserves_flags));
        }
        r
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let lo = x as u8 as i8 as i16 as u16 as u32;
        let hi = (x >> 16) as u8 as i8 as i16 as u16 as u32;
        lo | (hi << 16)
    }
}

/// `SXTB16 r, x, ROR #8`: bytes 1 and 3 of `x`, sign-extended to the two int16 halves.
#[inline(always)]
pub fn sxtb16_ror8(x: u32) -> u32 {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let r: u32;
        // SAFETY: as `sxtb16`.
        unsafe {
            core::arch::asm!("sxtb16 {r}, {x}, ror #8", r = lateout(reg) r, x = in(reg) x, options(pure, nomem, nostack, preserves_flags));
        }
        r
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        sxtb16(x.rotate_right(8))
    }
}

/// `SMLAD r, a, b, acc`: `acc + a.lo·b.lo + a.hi·b.hi` over the signed int16 halves, wrapping
/// (the instruction sets the sticky Q flag on overflow and keeps the wrapped sum).
#[inline(always)]
pub fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let r: i32;
        // SAFETY: SMLAD reads three registers and writes one (and may set APSR.Q, which nothing
        // here reads); no memory or stack.
        unsafe {
            core::arch::asm!("smlad {r}, {a}, {b}, {acc}", r = lateout(reg) r, a = in(reg) a, b = in(reg) b, acc = in(reg) acc, options(pure, nomem, nostack));
        }
        r
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let (a0, a1) = (a as u16 as i16 as i32, (a >> 16) as u16 as i16 as i32);
        let (b0, b1) = (b as u16 as i16 as i32, (b >> 16) as u16 as i16 as i32);
        // Each product fits i32 and so does their sum (≤ 2^31 only for −32768² twice, which
        // int8 inputs never reach); the accumulation wraps like the instruction.
        acc.wrapping_add(a0 * b0 + a1 * b1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sxtb16_takes_bytes_0_and_2_sign_extended() {
        // bytes (little-endian): 0x80 (−128), 0x7F, 0xFF (−1), 0x01
        let x = u32::from_le_bytes([0x80, 0x7F, 0xFF, 0x01]);
        assert_eq!(sxtb16(x), 0xFFFF_FF80);
        assert_eq!(sxtb16_ror8(x), 0x0001_007F);
    }

    #[test]
    fn smlad_adds_both_half_products() {
        let a = (3i16 as u16 as u32) | ((-7i16 as u16 as u32) << 16);
        let b = (-128i16 as u16 as u32) | ((127i16 as u16 as u32) << 16);
        assert_eq!(smlad(a, b, 1000), 1000 - 384 - 889);
        assert_eq!(smlad(a, b, i32::MIN), i32::MIN.wrapping_add(-384 - 889));
    }
}
