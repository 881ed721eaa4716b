//! Non-negative integers of any size as decimal digits, with just the arithmetic Whisper's number
//! normalizer does on Python's unbounded ints (adding, the last digits, multiplying by powers of
//! ten): spoken numbers such as "nine hundred decillion" or a long run of digits must not wrap.

use std::fmt;

/// A non-negative integer: ASCII digits, no leading zeros ("0" for zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal(String);

impl Decimal {
    pub fn from_u64(v: u64) -> Decimal {
        Decimal(v.to_string())
    }

    /// `digits` (ASCII digits, maybe with leading zeros); None for anything else.
    pub fn parse(digits: &str) -> Option<Decimal> {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = digits.trim_start_matches('0');
        Some(Decimal(if trimmed.is_empty() { "0".into() } else { trimmed.into() }))
    }

    pub fn is_zero(&self) -> bool {
        self.0 == "0"
    }

    /// `self % 10^k` for k ≤ 18.
    pub fn rem_pow10(&self, k: usize) -> u64 {
        let tail = &self.0[self.0.len().saturating_sub(k)..];
        tail.parse().unwrap_or(0)
    }

    /// `self // 10^k * 10^k`: the last k digits zeroed.
    pub fn floor_pow10(&self, k: usize) -> Decimal {
        if self.0.len() <= k {
            return Decimal("0".into());
        }
        Decimal(format!("{}{}", &self.0[..self.0.len() - k], "0".repeat(k)))
    }

    /// `self * 10^k`.
    pub fn mul_pow10(&self, k: usize) -> Decimal {
        if self.is_zero() {
            return self.clone();
        }
        Decimal(format!("{}{}", self.0, "0".repeat(k)))
    }

    pub fn add(&self, other: &Decimal) -> Decimal {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
        let (mut i, mut j, mut carry) = (a.len(), b.len(), 0u8);
        while i > 0 || j > 0 || carry > 0 {
            let da = if i > 0 { i -= 1; a[i] - b'0' } else { 0 };
            let db = if j > 0 { j -= 1; b[j] - b'0' } else { 0 };
            let s = da + db + carry;
            out.push(b'0' + s % 10);
            carry = s / 10;
        }
        out.reverse();
        Decimal(String::from_utf8(out).unwrap_or_else(|_| "0".into()))
    }

    pub fn add_u64(&self, v: u64) -> Decimal {
        self.add(&Decimal::from_u64(v))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Python's `Fraction(text) * 10^k` when it is an integer: `text` is digits with at most one
/// `.` (as Fraction accepts: a digit first, or `.` then a digit); None when `text` is no such
/// number or the product keeps a fractional part.
pub fn scaled_integer(text: &str, k: usize) -> Option<Decimal> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > k {
        return None;
    }
    Decimal::parse(&format!("{}{frac}{}", if int.is_empty() { "0" } else { int }, "0".repeat(k - frac.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn arithmetic_beyond_u128() {
        let decillion = d("1").mul_pow10(33);
        let big = decillion.mul_pow10(33).add(&d("999"));
        assert_eq!(big.to_string(), format!("1{}999", "0".repeat(63)));
        assert_eq!(big.rem_pow10(3), 999);
        assert_eq!(big.floor_pow10(3).to_string(), format!("1{}", "0".repeat(66)));
        assert_eq!(d("99").add_u64(1).to_string(), "100");
        assert_eq!(d("007").to_string(), "7");
        assert_eq!(d("000").to_string(), "0");
        assert_eq!(d("12").floor_pow10(3).to_string(), "0");
        assert_eq!(d("0").mul_pow10(6).to_string(), "0");
        assert_eq!(Decimal::parse("1.5"), None);
    }

    #[test]
    fn scaled_like_python_fractions() {
        assert_eq!(scaled_integer("2.5", 6).unwrap().to_string(), "2500000");
        assert_eq!(scaled_integer("52.4", 6).unwrap().to_string(), "52400000");
        assert_eq!(scaled_integer("3.", 2).unwrap().to_string(), "300");
        assert_eq!(scaled_integer(".5", 1).unwrap().to_string(), "5");
        assert_eq!(scaled_integer("1.250", 2).unwrap().to_string(), "125");
        assert_eq!(scaled_integer("1.2345", 3), None);
        assert_eq!(scaled_integer("1.2.3", 6), None);
        assert_eq!(scaled_integer(".", 6), None);
        assert_eq!(scaled_integer("$5", 6), None);
    }
}
