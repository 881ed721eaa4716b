//! The `.pte` container: root offset, `ET12` identifier, optional `eh00` extended header,
//! the flatbuffer, then aligned data segments.

use alloc::vec::Vec;

use super::error::{FormatError, FormatErrorKind as K};
use super::flatbuf::{Builder, Reader, Result, State};
use super::schema::{BackendDelegate, DataSegment, FbTable, Program};

pub const IDENTIFIER: &[u8; 4] = b"ET12";
pub const HEADER_MAGIC: &[u8; 4] = b"eh00";
/// Length the writer puts in the extended header.
pub const HEADER_LEN: usize = 32;
/// ExecuTorch's default segment alignment.
pub const SEGMENT_ALIGNMENT: usize = 128;
/// ExecuTorch's constant tensor alignment inside the constant segment.
pub const CONSTANT_ALIGNMENT: usize = 16;

/// The `eh00` extended header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedHeader {
    pub length: u32,
    pub program_size: u64,
    pub segment_base_offset: u64,
    /// Present when the header length is ≥ 32 (ExecuTorch ≥ 1.0).
    pub segment_data_size: Option<u64>,
}

/// Parses the header at byte 8 if its magic is there. A header with another magic is treated
/// as absent (ExecuTorch does the same: the whole file is then the program).
pub fn parse_header(data: &[u8]) -> Result<Option<ExtendedHeader>> {
    if data.len() < 16 || &data[8..12] != HEADER_MAGIC {
        return Ok(None);
    }
    let u32_at = |p: usize| u32::from_le_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]);
    let u64_at = |p: usize| -> Result<u64> {
        let b = data.get(p..p + 8).ok_or(FormatError::new(
            K::Truncated { needed: p + 8, available: data.len() },
            p,
            "extended header",
        ))?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    let length = u32_at(12);
    if length < 24 {
        return Err(FormatError::new(K::BadHeader("length below 24"), 12, "extended header"));
    }
    let program_size = u64_at(16)?;
    let segment_base_offset = u64_at(24)?;
    let segment_data_size = if length >= 32 { Some(u64_at(32)?) } else { None };
    Ok(Some(ExtendedHeader { length, program_size, segment_base_offset, segment_data_size }))
}

/// A `.pte` file decoded over its bytes: the program tables plus access to segments.
#[derive(Clone, Debug)]
pub struct PteFile<'a> {
    pub data: &'a [u8],
    pub header: Option<ExtendedHeader>,
    pub program: Program<'a>,
}

impl<'a> PteFile<'a> {
    /// Decodes and validates the container and every table. Never panics.
    pub fn parse(data: &'a [u8]) -> Result<PteFile<'a>> {
        if data.len() < 8 {
            return Err(FormatError::new(K::Truncated { needed: 8, available: data.len() }, 0, "file header"));
        }
        let ident = [data[4], data[5], data[6], data[7]];
        if &ident[..2] != b"ET" {
            return Err(FormatError::new(K::BadIdentifier(ident), 4, "file identifier"));
        }
        if &ident != IDENTIFIER {
            return Err(FormatError::new(K::UnsupportedVersion(ident), 4, "file identifier"));
        }
        let header = parse_header(data)?;
        let program_bytes = match header {
            Some(h) => {
                let size = usize::try_from(h.program_size).ok().filter(|&s| s <= data.len() && s >= 8).ok_or(
                    FormatError::new(K::BadHeader("program_size exceeds the file"), 16, "extended header"),
                )?;
                if h.segment_base_offset != 0 && h.segment_base_offset < h.program_size {
                    return Err(FormatError::new(
                        K::BadHeader("segment_base_offset lies inside the program"),
                        24,
                        "extended header",
                    ));
                }
                let end = h.segment_base_offset.checked_add(h.segment_data_size.unwrap_or(0));
                if end.is_none_or(|e| e > data.len() as u64) {
                    return Err(FormatError::new(
                        K::Truncated { needed: end.unwrap_or(u64::MAX) as usize, available: data.len() },
                        24,
                        "segment data (extended header)",
                    ));
                }
                &data[..size]
            }
            None => data,
        };
        // Decoding work is bounded by a multiple of the program size, so shared subtrees
        // cannot blow up time or memory.
        let st = State::new(program_bytes.len().saturating_mul(4) + 1024);
        let r = Reader::new(program_bytes, &st);
        let program = r
            .follow(0, "root offset")
            .and_then(|root| Program::decode(r.table(root, "Program")?))
            .map_err(|_| st.take_error())?;
        let file = PteFile { data, header, program };
        file.check_segments()?;
        Ok(file)
    }

    /// Start of segment data: from the header, or the end of the program without one.
    pub fn segment_base(&self) -> usize {
        self.header.map(|h| h.segment_base_offset as usize).unwrap_or(0)
    }

    fn check_segments(&self) -> Result<()> {
        let segs = self.program.segments.as_deref().unwrap_or(&[]);
        // ExecuTorch omits the header when all segments are empty.
        if self.header.is_none() && segs.iter().any(|s| s.size > 0) {
            return Err(FormatError::new(K::BadHeader("segment data listed but no extended header"), 8, "Program.segments"));
        }
        for i in 0..segs.len() {
            self.segment(i)?;
        }
        Ok(())
    }

    pub fn segments(&self) -> &[DataSegment] {
        self.program.segments.as_deref().unwrap_or(&[])
    }

    /// Bytes of segment `index`.
    pub fn segment(&self, index: usize) -> Result<&'a [u8]> {
        let seg = self
            .segments()
            .get(index)
            .ok_or(FormatError::new(K::BadSegment { index: index as u64 }, 0, "Program.segments"))?;
        let start = (self.segment_base() as u64).checked_add(seg.offset);
        let end = start.and_then(|s| s.checked_add(seg.size));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() as u64 => Ok(&self.data[s as usize..e as usize]),
            _ => Err(FormatError::new(
                K::BadSegment { index: index as u64 },
                self.segment_base(),
                "Program.segments",
            )),
        }
    }

    /// The constant segment's bytes and per-tensor offsets (index 0 is a placeholder), or the
    /// deprecated inline buffers. Returns (bytes, offsets); empty when there are no constants.
    pub fn constant_segment(&self) -> Result<Option<(&'a [u8], &[u64])>> {
        match &self.program.constant_segment {
            Some(cs) => {
                let offsets = cs.offsets.as_deref().unwrap_or(&[]);
                if offsets.len() <= 1 {
                    return Ok(None);
                }
                Ok(Some((self.segment(cs.segment_index as usize)?, offsets)))
            }
            None => Ok(None),
        }
    }

    /// The processed blob of a delegate (inline or in a segment).
    pub fn delegate_data(&self, d: &BackendDelegate<'a>) -> Result<&'a [u8]> {
        let r = d.processed.as_ref().ok_or(FormatError::new(
            K::InvalidValue("delegate without processed data"),
            0,
            "BackendDelegate.processed",
        ))?;
        match r.location {
            0 => self
                .program
                .backend_delegate_data
                .as_deref()
                .and_then(|v| v.get(r.index as usize))
                .and_then(|d| d.data)
                .ok_or(FormatError::new(K::InvalidValue("inline delegate index out of range"), 0, "BackendDelegateDataReference")),
            1 => self.segment(r.index as usize),
            _ => Err(FormatError::new(K::InvalidValue("unknown delegate data location"), 0, "BackendDelegateDataReference")),
        }
    }

    /// A named-data blob by key.
    pub fn named_data(&self, key: &str) -> Result<Option<&'a [u8]>> {
        for nd in self.program.named_data.as_deref().unwrap_or(&[]) {
            if nd.key == Some(key) {
                return self.segment(nd.segment_index as usize).map(Some);
            }
        }
        Ok(None)
    }
}

fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// Serializes `program` with `segments` as its data segments (in order). The program's
/// `segments` table is rewritten to match the new layout; the extended header is added only
/// when there is segment data (as ExecuTorch's writer does).
pub fn write_pte(program: &Program<'_>, segments: &[&[u8]]) -> Vec<u8> {
    let mut program = program.clone();
    // Lay segments out at SEGMENT_ALIGNMENT, relative to the segment base.
    let mut table = Vec::with_capacity(segments.len());
    let mut cursor = 0usize;
    for s in segments {
        cursor = align_up(cursor, SEGMENT_ALIGNMENT);
        table.push(DataSegment { offset: cursor as u64, size: s.len() as u64 });
        cursor += s.len();
    }
    if !segments.is_empty() || program.segments.is_some() {
        program.segments = Some(table.clone());
    }
    let mut b = Builder::new();
    let root = program.encode(&mut b);
    let fb = b.finish(root, IDENTIFIER);
    if cursor == 0 {
        return fb;
    }
    // Insert the header after the identifier; relative offsets are unaffected, the root
    // offset moves by the header length.
    let program_size = fb.len() + HEADER_LEN;
    let base = align_up(program_size, SEGMENT_ALIGNMENT);
    let mut out = Vec::with_capacity(base + cursor);
    let root_off = u32::from_le_bytes([fb[0], fb[1], fb[2], fb[3]]) + HEADER_LEN as u32;
    out.extend_from_slice(&root_off.to_le_bytes());
    out.extend_from_slice(&fb[4..8]);
    out.extend_from_slice(HEADER_MAGIC);
    out.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    out.extend_from_slice(&(program_size as u64).to_le_bytes());
    out.extend_from_slice(&(base as u64).to_le_bytes());
    out.extend_from_slice(&(cursor as u64).to_le_bytes());
    out.extend_from_slice(&fb[8..]);
    out.resize(base, 0);
    for (s, d) in segments.iter().zip(&table) {
        out.resize(base + d.offset as usize, 0);
        out.extend_from_slice(s);
    }
    out
}

/// Re-serializes a parsed file, carrying its segments over unchanged in content.
pub fn rewrite(file: &PteFile<'_>) -> Result<Vec<u8>> {
    let segs: Vec<&[u8]> = (0..file.segments().len()).map(|i| file.segment(i)).collect::<Result<_>>()?;
    Ok(write_pte(&file.program, &segs))
}
