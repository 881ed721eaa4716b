//! Intel HEX writer: 16-byte data records, an extended linear address record (type 04)
//! whenever the upper 16 address bits change, the start linear address (type 05) and EOF.

use crate::elf::Image;

fn record(out: &mut String, kind: u8, address: u16, data: &[u8]) {
    let mut sum = data.len() as u8;
    sum = sum.wrapping_add((address >> 8) as u8).wrapping_add(address as u8).wrapping_add(kind);
    out.push_str(&format!(":{:02X}{address:04X}{kind:02X}", data.len()));
    for b in data {
        out.push_str(&format!("{b:02X}"));
        sum = sum.wrapping_add(*b);
    }
    out.push_str(&format!("{:02X}\n", sum.wrapping_neg()));
}

/// The images as Intel HEX; `entry` (the ELF entry point) becomes the start address record.
/// Fails for data above 4 GiB, which Intel HEX cannot address.
pub fn intel_hex(images: &[Image], entry: Option<u64>) -> Result<String, String> {
    let mut out = String::new();
    let mut upper: Option<u16> = None;
    for img in images {
        let end = img.base + img.bytes.len() as u64;
        if end > 1 << 32 {
            return Err(format!("data at {:#x}..{end:#x} lies above 4 GiB: Intel HEX addresses 32 bits", img.base));
        }
        let mut addr = img.base;
        let mut rest = img.bytes.as_slice();
        while !rest.is_empty() {
            let hi = (addr >> 16) as u16;
            if upper != Some(hi) {
                record(&mut out, 4, 0, &hi.to_be_bytes());
                upper = Some(hi);
            }
            // A record stays inside one 64 KiB page.
            let to_page_end = 0x1_0000 - (addr & 0xFFFF);
            let n = rest.len().min(16).min(to_page_end as usize);
            record(&mut out, 0, addr as u16, &rest[..n]);
            addr += n as u64;
            rest = &rest[n..];
        }
    }
    if let Some(e) = entry.filter(|&e| e <= u64::from(u32::MAX)) {
        record(&mut out, 5, 0, &(e as u32).to_be_bytes());
    }
    record(&mut out, 1, 0, &[]);
    Ok(out)
}

/// Parses Intel HEX back into (address, byte) runs; used by tests and `bundle --check`
/// style verification. Checks every record's checksum.
pub fn parse(text: &str) -> Result<Vec<Image>, String> {
    let mut images: Vec<Image> = Vec::new();
    let mut upper = 0u64;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let bad = |why: &str| format!("line {}: {why}", n + 1);
        let hex = line.strip_prefix(':').ok_or_else(|| bad("no ':' at the start"))?;
        if hex.len() % 2 != 0 || hex.len() < 10 {
            return Err(bad("odd or short record"));
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<_, _>>()
            .map_err(|_| bad("not hexadecimal"))?;
        if bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b)) != 0 {
            return Err(bad("checksum mismatch"));
        }
        let len = bytes[0] as usize;
        if bytes.len() != len + 5 {
            return Err(bad("length field disagrees with the record"));
        }
        let addr = u64::from(u16::from_be_bytes([bytes[1], bytes[2]]));
        let data = &bytes[4..4 + len];
        match bytes[3] {
            0 => {
                let at = upper + addr;
                match images.last_mut() {
                    Some(img) if img.base + img.bytes.len() as u64 == at => img.bytes.extend_from_slice(data),
                    _ => images.push(Image { base: at, bytes: data.to_vec() }),
                }
            }
            1 => return Ok(images),
            4 if len == 2 => upper = u64::from(u16::from_be_bytes([data[0], data[1]])) << 16,
            5 | 3 | 2 => {}
            t => return Err(bad(&format!("unexpected record type {t:02X}"))),
        }
    }
    Err("no end-of-file record".into())
}
