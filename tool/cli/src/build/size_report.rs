//! `size-report.txt`: an ELF's allocated sections against the board's memory regions, parsed
//! straight from the section headers (ELF32 and ELF64, little-endian; ~60 lines beat a crate).
//!
//! API for the bundler: [`size_report`] (text) and [`elf_sections`] (the parsed table).

use std::fmt::Write as _;
use std::path::Path;

use rbuild_recipe::Region;

/// One allocated section of an ELF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    /// Run-time (virtual) address.
    pub address: u64,
    pub size: u64,
    /// Whether the file holds its bytes (false for .bss-like NOBITS sections).
    pub in_file: bool,
    pub writable: bool,
    pub executable: bool,
}

const SHT_NOBITS: u32 = 8;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;

fn read<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N], String> {
    bytes.get(at..at + N).and_then(|s| s.try_into().ok()).ok_or_else(|| format!("truncated ELF (reading {N} bytes at {at})"))
}

/// The allocated sections (those that occupy memory at run time), in header order.
pub fn elf_sections(elf: &[u8]) -> Result<Vec<Section>, String> {
    if elf.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    let is64 = match elf[4] {
        1 => false,
        2 => true,
        c => return Err(format!("unknown ELF class {c}")),
    };
    if elf.get(5) != Some(&1) {
        return Err("only little-endian ELF files are supported".into());
    }
    let u16_at = |at| read::<2>(elf, at).map(u16::from_le_bytes);
    let u32_at = |at| read::<4>(elf, at).map(u32::from_le_bytes);
    let u64_at = |at| read::<8>(elf, at).map(u64::from_le_bytes);
    let word = |at| if is64 { u64_at(at) } else { u32_at(at).map(u64::from) };
    let (shoff, shentsize, shnum, shstrndx) = if is64 {
        (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?)
    } else {
        (u64::from(u32_at(0x20)?), u16_at(0x2e)?, u16_at(0x30)?, u16_at(0x32)?)
    };
    let header = |i: u16| -> Result<usize, String> {
        usize::try_from(shoff + u64::from(i) * u64::from(shentsize)).map_err(|_| "section table offset out of range".to_string())
    };
    // Section header fields: name, type, flags, addr, offset, size (ELF32 / ELF64 offsets).
    let field = |h: usize, f32_off: usize, f64_off: usize| if is64 { word(h + f64_off) } else { word(h + f32_off) };
    if shoff + u64::from(shnum) * u64::from(shentsize) > elf.len() as u64 {
        return Err(format!("truncated ELF: the section table ends past the file's {} bytes", elf.len()));
    }
    let strtab = header(shstrndx)?;
    let (names_at, names_len) = (field(strtab, 0x10, 0x18)? as usize, field(strtab, 0x14, 0x20)? as usize);
    let names = elf.get(names_at..names_at + names_len).ok_or("section names out of range")?;
    let mut sections = Vec::new();
    for i in 0..shnum {
        let h = header(i)?;
        let flags = field(h, 0x08, 0x08)?;
        if flags & SHF_ALLOC == 0 {
            continue;
        }
        let name_at = u32_at(h)? as usize;
        let name = names.get(name_at..).and_then(|s| s.split(|&b| b == 0).next()).ok_or("section name out of range")?;
        sections.push(Section {
            name: String::from_utf8_lossy(name).into_owned(),
            address: field(h, 0x0c, 0x10)?,
            size: field(h, 0x14, 0x20)?,
            in_file: u32_at(h + 4)? != SHT_NOBITS,
            writable: flags & SHF_WRITE != 0,
            executable: flags & SHF_EXECINSTR != 0,
        });
    }
    Ok(sections)
}

/// The classic four numbers: code, read-only data, initialised data, zeroed/reserved memory.
fn class(s: &Section) -> &'static str {
    match (s.executable, s.writable, s.in_file) {
        (true, _, _) => "text",
        (false, false, true) => "rodata",
        (false, true, true) => "data",
        _ => "bss",
    }
}

/// A text report of `elf`: every allocated section with its address, size, class and region,
/// then per region the bytes used (image bytes and reserved bytes) against its length.
pub fn size_report(elf: &Path, regions: &[Region]) -> Result<String, String> {
    let bytes = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let sections = elf_sections(&bytes).map_err(|e| format!("{}: {e}", elf.display()))?;
    let region_of = |s: &Section| regions.iter().find(|r| r.contains(s.address)).map_or("(none)", |r| r.name.as_str());
    let mut out = String::new();
    let file = elf.file_name().map_or_else(|| elf.display().to_string(), |n| n.to_string_lossy().into_owned());
    let _ = writeln!(out, "size report: {file} ({} bytes on disk)\n", bytes.len());
    let _ = writeln!(out, "{:<24} {:>10}  {:>12}  {:<7} {}", "section", "address", "bytes", "class", "region");
    let mut totals = [("text", 0u64), ("rodata", 0), ("data", 0), ("bss", 0)];
    for s in sections.iter().filter(|s| s.size > 0) {
        let _ = writeln!(out, "{:<24} {:#010x}  {:>12}  {:<7} {}", s.name, s.address, s.size, class(s), region_of(s));
        if let Some(t) = totals.iter_mut().find(|(c, _)| *c == class(s)) {
            t.1 += s.size;
        }
    }
    let _ = writeln!(out);
    for (c, n) in totals {
        let _ = writeln!(out, "{:<8} {:>12} bytes", format!(".{c}"), n);
    }
    let embedded: u64 = sections.iter().filter(|s| s.name == ".rbuild_program").map(|s| s.size).sum();
    if embedded > 0 {
        let _ = writeln!(out, "(.rodata includes .rbuild_program, the embedded program and input: {embedded} bytes)");
    }
    let _ = writeln!(out, "\n{:<10} {:>10}  {:>12}  {:>12}  {:>12}  {:>6}", "region", "origin", "length", "image", "reserved", "used");
    for r in regions {
        let inside: Vec<&Section> = sections.iter().filter(|s| r.contains(s.address)).collect();
        let image: u64 = inside.iter().filter(|s| s.in_file).map(|s| s.size).sum();
        let reserved: u64 = inside.iter().filter(|s| !s.in_file).map(|s| s.size).sum();
        let used = 100.0 * (image + reserved) as f64 / r.length as f64;
        let _ = writeln!(out, "{:<10} {:#010x}  {:>12}  {:>12}  {:>12}  {used:>5.1}%", r.name, r.origin, r.length, image, reserved);
    }
    let outside: Vec<&str> = sections.iter().filter(|s| s.size > 0 && !regions.iter().any(|r| r.contains(s.address))).map(|s| s.name.as_str()).collect();
    if !outside.is_empty() {
        let _ = writeln!(out, "\nsections outside every region: {}", outside.join(", "));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF32 with .text (alloc+exec), .bss (nobits) and the name table.
    fn tiny_elf() -> Vec<u8> {
        let names = b"\0.text\0.bss\0.shstrtab\0";
        let mut elf = vec![0u8; 52];
        elf[..6].copy_from_slice(b"\x7fELF\x01\x01");
        let names_at = elf.len();
        elf.extend_from_slice(names);
        while elf.len() % 4 != 0 {
            elf.push(0);
        }
        let shoff = elf.len() as u32;
        let sh = |name: u32, ty: u32, flags: u32, addr: u32, off: u32, size: u32| {
            let mut h = Vec::new();
            for v in [name, ty, flags, addr, off, size, 0, 0, 1, 0] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            h
        };
        elf.extend(sh(0, 0, 0, 0, 0, 0));
        elf.extend(sh(1, 1, 6, 0x100, 0, 0x40));
        elf.extend(sh(7, SHT_NOBITS, 3, 0x2000_0000, 0, 0x80));
        elf.extend(sh(12, 3, 0, 0, names_at as u32, names.len() as u32));
        elf[0x20..0x24].copy_from_slice(&shoff.to_le_bytes());
        elf[0x2e..0x30].copy_from_slice(&40u16.to_le_bytes());
        elf[0x30..0x32].copy_from_slice(&4u16.to_le_bytes());
        elf[0x32..0x34].copy_from_slice(&3u16.to_le_bytes());
        elf
    }

    #[test]
    fn parses_allocated_sections() {
        let s = elf_sections(&tiny_elf()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[0].address, s[0].size, class(&s[0])), (".text", 0x100, 0x40, "text"));
        assert_eq!((s[1].name.as_str(), s[1].address, s[1].size, class(&s[1])), (".bss", 0x2000_0000, 0x80, "bss"));
    }

    #[test]
    fn report_puts_sections_in_regions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fw.elf");
        std::fs::write(&path, tiny_elf()).unwrap();
        use rbuild_recipe::RegionKind::Ram;
        let regions = [
            Region { name: "itcm".into(), origin: 0, length: 0x1000, kind: Ram, loadable: true },
            Region { name: "dtcm".into(), origin: 0x2000_0000, length: 0x1000, kind: Ram, loadable: true },
        ];
        let text = size_report(&path, &regions).unwrap();
        assert!(text.contains(".text                    0x00000100            64  text    itcm"), "{text}");
        assert!(text.contains("dtcm       0x20000000          4096             0           128    3.1%"), "{text}");
        assert!(text.contains(".bss              128 bytes"), "{text}");
    }

    #[test]
    fn truncated_or_foreign_files_are_errors() {
        let elf = tiny_elf();
        for cut in [0, 3, 20, 60, elf.len() - 10] {
            assert!(elf_sections(&elf[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(elf_sections(b"MZ\0\0\0\0\0\0").unwrap_err(), "not an ELF file");
    }
}
