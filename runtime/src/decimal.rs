//! 64-bit integers in decimal with 32-bit arithmetic only.
//!
//! On 32-bit Arm, `{}` of a `u64`/`i64` divides by powers of ten through the u64 division
//! helpers of compiler-builtins (about 1.5 KB with their formatting code); the runtime's errors
//! and the firmware's statistics print 64-bit values through [`Dec`] instead.

use core::fmt;

/// A 64-bit integer that displays in decimal (no width or sign flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dec {
    negative: bool,
    magnitude: u64,
}

impl Dec {
    pub fn unsigned(v: u64) -> Dec {
        Dec { negative: false, magnitude: v }
    }

    pub fn signed(v: i64) -> Dec {
        Dec { negative: v < 0, magnitude: v.unsigned_abs() }
    }
}

/// `(v / d, v % d)` for a divisor below 2^16, by long division over 16-bit limbs.
pub fn div_rem_small(v: u64, d: u16) -> (u64, u32) {
    let d = u32::from(d.max(1));
    let (mut q, mut r) = (0u64, 0u32);
    for shift in [48, 32, 16, 0] {
        // r < d < 2^16, so the partial dividend fits in 32 bits.
        let cur = (r << 16) | ((v >> shift) as u32 & 0xffff);
        q |= u64::from(cur / d) << shift;
        r = cur % d;
    }
    (q, r)
}

impl fmt::Display for Dec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 21];
        let mut i = buf.len();
        let mut v = self.magnitude;
        loop {
            let (q, r) = div_rem_small(v, 10);
            i -= 1;
            buf[i] = b'0' + r as u8;
            v = q;
            if v == 0 {
                break;
            }
        }
        if self.negative {
            i -= 1;
            buf[i] = b'-';
        }
        f.write_str(core::str::from_utf8(&buf[i..]).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn matches_core_formatting() {
        for v in [0u64, 1, 9, 10, 99, 65535, 65536, 4294967295, 4294967296, 1 << 48, u64::MAX, 12345678901234567890] {
            assert_eq!(Dec::unsigned(v).to_string(), v.to_string());
            assert_eq!(div_rem_small(v, 10_000), (v / 10_000, (v % 10_000) as u32));
        }
        for v in [0i64, -1, 7, -10, i64::MIN, i64::MAX] {
            assert_eq!(Dec::signed(v).to_string(), v.to_string());
        }
    }
}
