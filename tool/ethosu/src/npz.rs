//! Reads NumPy `.npz` archives as `np.savez` writes them (an uncompressed ZIP, possibly with
//! ZIP64 extra fields, holding one `.npy` per array). Numeric and byte-string arrays only.
//!
//! Formats: PKWARE APPNOTE (end of central directory 0x06054b50, ZIP64 locator 0x07064b50 and
//! record 0x06064b50, central header 0x02014b50, local header 0x04034b50, ZIP64 extra id 1);
//! NumPy's `.npy` format (`\x93NUMPY`, version, header length, a Python-dict header with
//! `descr`, `fortran_order`, `shape`).

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct NpzError {
    /// The archive entry (array name) or "archive".
    pub entry: String,
    pub message: String,
}

impl fmt::Display for NpzError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "npz {}: {}", self.entry, self.message)
    }
}
impl std::error::Error for NpzError {}

fn e(entry: &str, m: impl Into<String>) -> NpzError {
    NpzError { entry: entry.into(), message: m.into() }
}

/// One array: its dtype descriptor (`<i4`, `|u1`, `|S12`, `|O`…), shape and raw bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Npy {
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl Npy {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Integer elements as i64 (any little-endian or single-byte integer / bool dtype).
    pub fn ints(&self, name: &str) -> Result<Vec<i64>, NpzError> {
        let d = self.descr.as_str();
        let (kind, size) = match d.as_bytes() {
            [b'<' | b'|' | b'=', k, rest @ ..] => (*k, std::str::from_utf8(rest).ok().and_then(|s| s.parse::<usize>().ok())),
            _ => return Err(e(name, format!("unsupported dtype `{d}`"))),
        };
        let size = size.ok_or_else(|| e(name, format!("unsupported dtype `{d}`")))?;
        if !matches!(kind, b'i' | b'u' | b'b') || !matches!(size, 1 | 2 | 4 | 8) {
            return Err(e(name, format!("expected an integer array, found dtype `{d}`")));
        }
        if self.data.len() != self.numel() * size {
            return Err(e(name, format!("{} data bytes for shape {:?} of `{d}`", self.data.len(), self.shape)));
        }
        Ok(self
            .data
            .chunks_exact(size)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(c);
                let u = u64::from_le_bytes(b);
                if kind == b'i' && size < 8 {
                    let sh = 64 - 8 * size as u32;
                    ((u << sh) as i64) >> sh
                } else {
                    u as i64
                }
            })
            .collect())
    }

    /// The array's bytes: an 8-bit integer array, or a byte string (`|S`) scalar.
    pub fn bytes(&self, name: &str) -> Result<&[u8], NpzError> {
        match self.descr.as_str() {
            "|u1" | "|i1" | "|b1" => Ok(&self.data),
            d if d.starts_with("|S") || d.starts_with("|V") => {
                // A 0-d bytes scalar; NumPy pads with NULs, but Vela's buffers are exact.
                Ok(&self.data)
            }
            d => Err(e(name, format!("expected bytes (uint8/int8/S), found dtype `{d}`"))),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the archive into arrays keyed by name (without the `.npy` suffix).
pub fn parse(zip: &[u8]) -> Result<BTreeMap<String, Npy>, NpzError> {
    let a = "archive";
    let trunc = || e(a, "truncated or not a ZIP archive");
    let lo = zip.len().saturating_sub(22 + 65_535);
    let eocd = (lo..=zip.len().saturating_sub(22))
        .rev()
        .find(|&i| u32_at(zip, i) == Some(0x0605_4b50))
        .ok_or_else(|| e(a, "no end-of-central-directory record (not a ZIP/npz file)"))?;
    let mut count = u16_at(zip, eocd + 10).ok_or_else(trunc)? as u64;
    let mut cd = u32_at(zip, eocd + 16).ok_or_else(trunc)? as u64;
    if (count == 0xFFFF || cd == 0xFFFF_FFFF) && eocd >= 20 && u32_at(zip, eocd - 20) == Some(0x0706_4b50) {
        let rec = u64_at(zip, eocd - 20 + 8).ok_or_else(trunc)? as usize;
        if u32_at(zip, rec) != Some(0x0606_4b50) {
            return Err(e(a, "bad ZIP64 end-of-central-directory record"));
        }
        count = u64_at(zip, rec + 32).ok_or_else(trunc)?;
        cd = u64_at(zip, rec + 48).ok_or_else(trunc)?;
    }
    let mut out = BTreeMap::new();
    let mut p = usize::try_from(cd).map_err(|_| trunc())?;
    for _ in 0..count {
        if u32_at(zip, p) != Some(0x0201_4b50) {
            return Err(e(a, format!("bad central directory header at byte {p}")));
        }
        let method = u16_at(zip, p + 10).ok_or_else(trunc)?;
        let mut csize = u32_at(zip, p + 20).ok_or_else(trunc)? as u64;
        let mut usize_ = u32_at(zip, p + 24).ok_or_else(trunc)? as u64;
        let nlen = u16_at(zip, p + 28).ok_or_else(trunc)? as usize;
        let xlen = u16_at(zip, p + 30).ok_or_else(trunc)? as usize;
        let clen = u16_at(zip, p + 32).ok_or_else(trunc)? as usize;
        let mut local = u32_at(zip, p + 42).ok_or_else(trunc)? as u64;
        let name = zip.get(p + 46..p + 46 + nlen).ok_or_else(trunc)?;
        let name = String::from_utf8_lossy(name).into_owned();
        // ZIP64 extra: the 0xFFFFFFFF fields, in order usize, csize, local offset.
        let extra = zip.get(p + 46 + nlen..p + 46 + nlen + xlen).ok_or_else(trunc)?;
        let mut x = 0;
        while x + 4 <= extra.len() {
            let id = u16_at(extra, x).unwrap_or(0);
            let len = u16_at(extra, x + 2).unwrap_or(0) as usize;
            if id == 1 {
                let mut q = x + 4;
                for field in [&mut usize_, &mut csize, &mut local] {
                    if *field == 0xFFFF_FFFF {
                        *field = u64_at(extra, q).ok_or_else(|| e(&name, "short ZIP64 extra field"))?;
                        q += 8;
                    }
                }
            }
            x += 4 + len;
        }
        if method != 0 {
            return Err(e(&name, format!("compressed with ZIP method {method}; only stored (np.savez) archives are read")));
        }
        if csize != usize_ {
            return Err(e(&name, "stored entry whose sizes differ"));
        }
        let l = local as usize;
        if u32_at(zip, l) != Some(0x0403_4b50) {
            return Err(e(&name, format!("bad local header at byte {l}")));
        }
        let ln = u16_at(zip, l + 26).ok_or_else(trunc)? as usize;
        let lx = u16_at(zip, l + 28).ok_or_else(trunc)? as usize;
        let start = l + 30 + ln + lx;
        let data = zip.get(start..start + csize as usize).ok_or_else(|| e(&name, "entry data runs past the end"))?;
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        out.insert(key.clone(), parse_npy(&key, data)?);
        p += 46 + nlen + xlen + clen;
    }
    Ok(out)
}

/// Parses one `.npy` file.
pub fn parse_npy(name: &str, b: &[u8]) -> Result<Npy, NpzError> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(e(name, "not a .npy array (bad magic)"));
    }
    let (hlen, hstart) = match b[6] {
        1 => (u16_at(b, 8).unwrap_or(0) as usize, 10),
        2 | 3 => (u32_at(b, 8).ok_or_else(|| e(name, "truncated header"))? as usize, 12),
        v => return Err(e(name, format!("unsupported .npy version {v}"))),
    };
    let header = b.get(hstart..hstart + hlen).ok_or_else(|| e(name, "truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| e(name, "header is not text"))?;
    let field = |key: &str| -> Result<&str, NpzError> {
        let k = format!("'{key}':");
        let at = header.find(&k).ok_or_else(|| e(name, format!("header lacks `{key}`: {header}")))?;
        Ok(header[at + k.len()..].trim_start())
    };
    let descr = field("descr")?;
    let descr =
        descr.strip_prefix('\'').and_then(|s| s.split('\'').next()).ok_or_else(|| e(name, format!("bad descr in {header}")))?.to_string();
    let fortran_order = field("fortran_order")?.starts_with("True");
    let shape_s = field("shape")?;
    let shape_s = shape_s.strip_prefix('(').and_then(|s| s.split(')').next()).ok_or_else(|| e(name, format!("bad shape in {header}")))?;
    let shape = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>().map_err(|_| e(name, format!("bad shape dimension `{s}`"))))
        .collect::<Result<Vec<_>, _>>()?;
    if descr == "|O" {
        return Ok(Npy { descr, fortran_order, shape, data: Vec::new() });
    }
    Ok(Npy { descr, fortran_order, shape, data: b[hstart + hlen..].to_vec() })
}
