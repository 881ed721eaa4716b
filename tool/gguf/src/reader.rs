//! A little-endian byte cursor over the header: every read is bounds-checked, and lengths and
//! counts from the file are checked against the bytes that remain before anything is
//! allocated for them.

/// Reads the header's little-endian fields in order. Errors are plain messages naming what
/// was being read and where; the caller adds the file name.
pub(crate) struct ByteCursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> ByteCursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteCursor { bytes, position: 0 }
    }

    pub fn position(&self) -> usize {
        self.position
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// The next `len` bytes; `what` names the field for the error.
    pub fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], String> {
        if len > self.remaining() {
            return Err(format!(
                "file ends at byte {} while reading {what} at byte {} ({len} bytes needed, {} left)",
                self.bytes.len(),
                self.position,
                self.remaining()
            ));
        }
        let taken = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn i8(&mut self, what: &str) -> Result<i8, String> {
        Ok(i8::from_le_bytes(self.array(what)?))
    }
    pub fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub fn i16(&mut self, what: &str) -> Result<i16, String> {
        Ok(i16::from_le_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }
    pub fn f32(&mut self, what: &str) -> Result<f32, String> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 byte length, then that many bytes of UTF-8.
    pub fn string(&mut self, what: &str) -> Result<String, String> {
        let start = self.position;
        let len = self.u64(what)?;
        if len > self.remaining() as u64 {
            return Err(format!(
                "{what} at byte {start} claims {len} bytes, but only {} remain in the file",
                self.remaining()
            ));
        }
        let bytes = self.take(len as usize, what)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(e) => Err(format!("{what} at byte {start} is not valid UTF-8 ({e})")),
        }
    }

    /// Checks that `count` items of at least `min_item_bytes` each could fit in what remains,
    /// so a count from the file can size an allocation.
    pub fn check_count(&self, count: u64, min_item_bytes: usize, what: &str) -> Result<usize, String> {
        let fits = count.checked_mul(min_item_bytes as u64).is_some_and(|bytes| bytes <= self.remaining() as u64);
        if !fits {
            return Err(format!(
                "{what} is {count}, but {} bytes remain in the file (each needs at least {min_item_bytes})",
                self.remaining()
            ));
        }
        Ok(count as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let bytes = [1, 0, 0, 0, 0xff, 2];
        let mut cursor = ByteCursor::new(&bytes);
        assert_eq!(cursor.u32("a").unwrap(), 1);
        assert_eq!(cursor.i8("b").unwrap(), -1);
        let err = cursor.u16("c").unwrap_err();
        assert!(err.contains("reading c at byte 5"), "{err}");
        assert_eq!(cursor.u8("d").unwrap(), 2);
    }

    #[test]
    fn huge_string_lengths_and_counts_fail_before_allocating() {
        let mut bytes = (1u64 << 60).to_le_bytes().to_vec();
        bytes.extend_from_slice(b"abc");
        let err = ByteCursor::new(&bytes).string("key").unwrap_err();
        assert!(err.contains("claims 1152921504606846976 bytes"), "{err}");
        let cursor = ByteCursor::new(&bytes);
        assert!(cursor.check_count(u64::MAX, 2, "count").is_err());
        assert!(cursor.check_count(1 << 62, 4, "count").is_err());
        assert_eq!(cursor.check_count(11, 1, "count").unwrap(), 11);
    }
}
