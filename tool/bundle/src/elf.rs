//! Just enough of ELF to bundle a binary: the loadable segments (what a flasher writes, at
//! their physical addresses) and the allocated sections (for the size report). Little-endian
//! ELF32 and ELF64; anything else is refused with a reason.

use std::fmt;

/// A `PT_LOAD` program header with its file bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Load (physical) address: where the bytes go in memory at flash time.
    pub paddr: u64,
    /// Run-time (virtual) address.
    pub vaddr: u64,
    /// The segment's file contents (`p_filesz` bytes; `p_memsz - p_filesz` more are zeroed at
    /// run time and need no flashing).
    pub data: Vec<u8>,
    pub memsz: u64,
    /// `PF_X | PF_W | PF_R` bits.
    pub flags: u32,
}

/// A section header with `SHF_ALLOC`: it occupies memory on the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub addr: u64,
    pub size: u64,
    /// `SHT_NOBITS` (`.bss`): occupies memory but no file bytes.
    pub nobits: bool,
    pub writable: bool,
    pub executable: bool,
}

impl Section {
    /// The usual size-report bucket: text, rodata, data or bss.
    pub fn kind(&self) -> &'static str {
        match (self.executable, self.writable, self.nobits) {
            (true, _, _) => "text",
            (false, true, true) => "bss",
            (false, true, false) => "data",
            (false, false, _) => "rodata",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Elf {
    pub class64: bool,
    /// `e_machine`: 40 Arm, 183 AArch64, 62 x86-64, …
    pub machine: u16,
    pub entry: u64,
    pub segments: Vec<Segment>,
    pub sections: Vec<Section>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfError(pub String);

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ElfError {}

const PT_LOAD: u32 = 1;
const SHT_NOBITS: u32 = 8;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;

/// Bounds-checked little-endian reads.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&self, at: u64, n: u64, what: &str) -> Result<&[u8], ElfError> {
        let end = at.checked_add(n).filter(|&e| e <= self.0.len() as u64);
        match end {
            Some(end) => Ok(&self.0[at as usize..end as usize]),
            None => Err(ElfError(format!("{what} at offset {at} ({n} bytes) lies past the end of the file ({} bytes): truncated ELF", self.0.len()))),
        }
    }
    fn u16(&self, at: u64) -> Result<u16, ElfError> {
        Ok(u16::from_le_bytes(self.bytes(at, 2, "header field")?.try_into().unwrap()))
    }
    fn u32(&self, at: u64) -> Result<u32, ElfError> {
        Ok(u32::from_le_bytes(self.bytes(at, 4, "header field")?.try_into().unwrap()))
    }
    fn u64(&self, at: u64) -> Result<u64, ElfError> {
        Ok(u64::from_le_bytes(self.bytes(at, 8, "header field")?.try_into().unwrap()))
    }
    /// A word: 4 bytes in ELF32, 8 in ELF64.
    fn word(&self, at: u64, class64: bool) -> Result<u64, ElfError> {
        if class64 {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
}

impl Elf {
    pub fn parse(bytes: &[u8]) -> Result<Elf, ElfError> {
        let r = Reader(bytes);
        let ident = r.bytes(0, 16, "ELF identification")?;
        if &ident[..4] != b"\x7fELF" {
            return Err(ElfError("not an ELF file (no \\x7fELF magic)".into()));
        }
        let class64 = match ident[4] {
            1 => false,
            2 => true,
            c => return Err(ElfError(format!("unknown ELF class {c}"))),
        };
        if ident[5] != 1 {
            return Err(ElfError("big-endian ELF is not supported".into()));
        }
        let machine = r.u16(18)?;
        let w = |off32: u64, off64: u64| if class64 { off64 } else { off32 };
        let entry = r.word(24, class64)?;
        let phoff = r.word(w(28, 32), class64)?;
        let shoff = r.word(w(32, 40), class64)?;
        let phentsize = u64::from(r.u16(w(42, 54))?);
        let phnum = u64::from(r.u16(w(44, 56))?);
        let shentsize = u64::from(r.u16(w(46, 58))?);
        let shnum = u64::from(r.u16(w(48, 60))?);
        let shstrndx = u64::from(r.u16(w(50, 62))?);

        let mut segments = Vec::new();
        for i in 0..phnum {
            let h = phoff + i * phentsize;
            let p_type = r.u32(h)?;
            if p_type != PT_LOAD {
                continue;
            }
            let (offset, vaddr, paddr, filesz, memsz, flags) = if class64 {
                (r.u64(h + 8)?, r.u64(h + 16)?, r.u64(h + 24)?, r.u64(h + 32)?, r.u64(h + 40)?, r.u32(h + 4)?)
            } else {
                (
                    u64::from(r.u32(h + 4)?),
                    u64::from(r.u32(h + 8)?),
                    u64::from(r.u32(h + 12)?),
                    u64::from(r.u32(h + 16)?),
                    u64::from(r.u32(h + 20)?),
                    r.u32(h + 24)?,
                )
            };
            let data = r.bytes(offset, filesz, &format!("LOAD segment {i}"))?.to_vec();
            segments.push(Segment { paddr, vaddr, data, memsz, flags });
        }

        let mut sections = Vec::new();
        if shoff != 0 && shnum != 0 {
            let header = |i: u64| shoff + i * shentsize;
            let strtab_off = r.word(header(shstrndx) + w(16, 24), class64)?;
            let strtab_size = r.word(header(shstrndx) + w(20, 32), class64)?;
            let strtab = r.bytes(strtab_off, strtab_size, "section name table")?;
            for i in 0..shnum {
                let h = header(i);
                let name_off = r.u32(h)? as usize;
                let sh_type = r.u32(h + 4)?;
                let flags = r.word(h + 8, class64)?;
                if flags & SHF_ALLOC == 0 {
                    continue;
                }
                let addr = r.word(h + w(12, 16), class64)?;
                let size = r.word(h + w(20, 32), class64)?;
                let name = strtab
                    .get(name_off..)
                    .and_then(|s| s.split(|&b| b == 0).next())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default();
                sections.push(Section {
                    name,
                    addr,
                    size,
                    nobits: sh_type == SHT_NOBITS,
                    writable: flags & SHF_WRITE != 0,
                    executable: flags & SHF_EXECINSTR != 0,
                });
            }
        }
        Ok(Elf { class64, machine, entry, segments, sections })
    }

    /// A short name of the architecture, for manifests.
    pub fn machine_name(&self) -> String {
        match self.machine {
            40 => "arm".into(),
            183 => "aarch64".into(),
            62 => "x86-64".into(),
            243 => "riscv".into(),
            m => format!("machine {m}"),
        }
    }
}

/// A contiguous flash image: what a `.bin` file holds and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub base: u64,
    pub bytes: Vec<u8>,
}

/// Gaps up to this size between LOAD segments are filled (with zeros, as `objcopy -O binary`
/// does); larger gaps (ITCM at 0x0 and QSPI at 0x28000000) split the firmware into one image
/// per region instead of a file hundreds of megabytes long.
pub const MAX_FILLED_GAP: u64 = 64 * 1024;

/// The segments' file bytes at their load addresses, merged into contiguous images.
pub fn images(segments: &[Segment]) -> Result<Vec<Image>, ElfError> {
    let mut loads: Vec<&Segment> = segments.iter().filter(|s| !s.data.is_empty()).collect();
    loads.sort_by_key(|s| s.paddr);
    let mut out: Vec<Image> = Vec::new();
    for s in loads {
        match out.last_mut() {
            Some(img) if s.paddr < img.base + img.bytes.len() as u64 => {
                return Err(ElfError(format!(
                    "LOAD segments overlap at load address {:#x}: cannot make a flat image",
                    s.paddr
                )));
            }
            Some(img) if s.paddr - (img.base + img.bytes.len() as u64) <= MAX_FILLED_GAP => {
                let gap = s.paddr - (img.base + img.bytes.len() as u64);
                img.bytes.resize(img.bytes.len() + gap as usize, 0);
                img.bytes.extend_from_slice(&s.data);
            }
            _ => out.push(Image { base: s.paddr, bytes: s.data.clone() }),
        }
    }
    Ok(out)
}
