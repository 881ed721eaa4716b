//! Minimal FlatBuffers: a bounds-checked reader over `&[u8]` and a back-to-front builder.
//!
//! Only what `.pte` needs: tables, vectors of scalars/tables/strings, strings, unions (as a
//! type byte plus a table). Every read is checked; nothing here can panic on bad input.

use alloc::vec::Vec;
use core::cell::Cell;

use super::error::{FormatError, FormatErrorKind as K};

pub type Result<T> = core::result::Result<T, FormatError>;

/// The buffer being decoded plus a work budget that stops shared-subtree blowups.
#[derive(Clone, Copy)]
pub struct Reader<'a, 'c> {
    pub buf: &'a [u8],
    budget: &'c Cell<usize>,
}

impl<'a, 'c> Reader<'a, 'c> {
    pub fn new(buf: &'a [u8], budget: &'c Cell<usize>) -> Self {
        Reader { buf, budget }
    }

    /// Charges `n` units of decoding work.
    pub fn charge(&self, n: usize, at: usize, ctx: &'static str) -> Result<()> {
        let left = self.budget.get();
        if n > left {
            return Err(FormatError::new(K::TooComplex, at, ctx));
        }
        self.budget.set(left - n);
        Ok(())
    }

    pub fn bytes(&self, pos: usize, len: usize, ctx: &'static str) -> Result<&'a [u8]> {
        pos.checked_add(len)
            .and_then(|end| self.buf.get(pos..end))
            .ok_or(FormatError::new(
                K::Truncated { needed: pos.saturating_add(len), available: self.buf.len() },
                pos,
                ctx,
            ))
    }

    pub fn array<const N: usize>(&self, pos: usize, ctx: &'static str) -> Result<[u8; N]> {
        let b = self.bytes(pos, N, ctx)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub fn u32(&self, pos: usize, ctx: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(pos, ctx)?))
    }

    /// Follows a uoffset stored at `pos`.
    pub fn follow(&self, pos: usize, ctx: &'static str) -> Result<usize> {
        let off = self.u32(pos, ctx)? as usize;
        let target = pos.checked_add(off).filter(|&t| t < self.buf.len());
        target.ok_or(FormatError::new(K::OffsetOutOfBounds { target: pos as u64 + off as u64 }, pos, ctx))
    }

    pub fn table(&self, pos: usize, ctx: &'static str) -> Result<Table<'a, 'c>> {
        self.charge(1, pos, ctx)?;
        let soff = i32::from_le_bytes(self.array(pos, ctx)?) as i64;
        let vt = pos as i64 - soff;
        if vt < 0 || vt as usize >= self.buf.len() {
            return Err(FormatError::new(K::BadVTable, pos, ctx));
        }
        let vt = vt as usize;
        let vt_len = u16::from_le_bytes(self.array(vt, ctx)?) as usize;
        if vt_len < 4 || vt_len % 2 != 0 {
            return Err(FormatError::new(K::BadVTable, vt, ctx));
        }
        self.bytes(vt, vt_len, ctx)?;
        let obj_len = u16::from_le_bytes(self.array(vt + 2, ctx)?) as usize;
        self.bytes(pos, obj_len.max(4), ctx)?;
        Ok(Table { r: *self, pos, vt, vt_len, obj_len, ctx })
    }
}

/// A decoded table position with its vtable.
#[derive(Clone, Copy)]
pub struct Table<'a, 'c> {
    pub r: Reader<'a, 'c>,
    pub pos: usize,
    vt: usize,
    vt_len: usize,
    obj_len: usize,
    pub ctx: &'static str,
}

impl<'a, 'c> Table<'a, 'c> {
    /// Absolute position of field `slot`, if present; the field must fit in the table.
    pub fn field(&self, slot: usize, size: usize) -> Result<Option<usize>> {
        let entry = 4 + 2 * slot;
        if entry + 2 > self.vt_len {
            return Ok(None);
        }
        let off = u16::from_le_bytes(self.r.array(self.vt + entry, self.ctx)?) as usize;
        if off == 0 {
            return Ok(None);
        }
        if off + size > self.obj_len {
            return Err(FormatError::new(K::BadVTable, self.vt, self.ctx));
        }
        Ok(Some(self.pos + off))
    }

    pub fn scalar<const N: usize>(&self, slot: usize) -> Result<Option<[u8; N]>> {
        match self.field(slot, N)? {
            Some(p) => Ok(Some(self.r.array::<N>(p, self.ctx)?)),
            None => Ok(None),
        }
    }

    /// Position of the object a uoffset field points to.
    pub fn offset(&self, slot: usize) -> Result<Option<usize>> {
        match self.field(slot, 4)? {
            Some(p) => Ok(Some(self.r.follow(p, self.ctx)?)),
            None => Ok(None),
        }
    }

    pub fn with_ctx(mut self, ctx: &'static str) -> Self {
        self.ctx = ctx;
        self
    }
}

/// Reads a vector header at `pos`: (element start, length), checking `len * elem` fits.
pub fn vector(r: &Reader<'_, '_>, pos: usize, elem: usize, ctx: &'static str) -> Result<(usize, usize)> {
    let len = r.u32(pos, ctx)? as usize;
    let start = pos + 4;
    let bytes = len.checked_mul(elem).ok_or(FormatError::new(K::VectorOutOfBounds { len: len as u64 }, pos, ctx))?;
    if start.checked_add(bytes).is_none_or(|e| e > r.buf.len()) {
        return Err(FormatError::new(K::VectorOutOfBounds { len: len as u64 }, pos, ctx));
    }
    r.charge(len / 8 + 1, pos, ctx)?;
    Ok((start, len))
}

pub fn string<'a>(r: &Reader<'a, '_>, pos: usize, ctx: &'static str) -> Result<&'a str> {
    let (start, len) = vector(r, pos, 1, ctx)?;
    let bytes = r.bytes(start, len, ctx)?;
    core::str::from_utf8(bytes).map_err(|_| FormatError::new(K::BadString, pos, ctx))
}

/// Back-to-front builder. Bytes are kept reversed (`rev[0]` is the final buffer's last byte),
/// so an object's position is its distance from the end, which stays fixed as the buffer grows.
#[derive(Default)]
pub struct Builder {
    rev: Vec<u8>,
    max_align: usize,
    fields: Vec<(usize, usize)>,
    table_end: usize,
}

impl Builder {
    pub fn new() -> Self {
        Builder { rev: Vec::new(), max_align: 8, fields: Vec::new(), table_end: 0 }
    }

    pub fn pos(&self) -> usize {
        self.rev.len()
    }

    /// Pads so that after `additional` more bytes the position is a multiple of `align`.
    pub fn prep(&mut self, align: usize, additional: usize) {
        self.max_align = self.max_align.max(align);
        while (self.rev.len() + additional) % align != 0 {
            self.rev.push(0);
        }
    }

    /// Prepends raw little-endian bytes.
    pub fn push(&mut self, le: &[u8]) {
        self.rev.extend(le.iter().rev());
    }

    pub fn push_u32(&mut self, v: u32) {
        self.prep(4, 4);
        self.push(&v.to_le_bytes());
    }

    /// Prepends a uoffset to the object at `target`; returns the field position.
    pub fn push_offset(&mut self, target: usize) -> usize {
        self.prep(4, 4);
        let at = self.pos() + 4;
        self.push(&((at - target) as u32).to_le_bytes());
        at
    }

    pub fn create_string(&mut self, s: &str) -> usize {
        self.prep(4, s.len() + 1);
        self.rev.push(0);
        self.push(s.as_bytes());
        self.push_u32(s.len() as u32);
        self.pos()
    }

    /// A byte vector whose data starts 16-aligned (ExecuTorch's `force_align: 16` blobs).
    pub fn create_bytes(&mut self, b: &[u8]) -> usize {
        self.prep(16, b.len());
        self.push(b);
        self.push_u32(b.len() as u32);
        self.pos()
    }

    /// A vector of fixed-size little-endian scalars, each given as `size` bytes.
    pub fn create_scalars(&mut self, items: &[&[u8]], size: usize) -> usize {
        self.prep(size.max(4), items.len() * size);
        for it in items.iter().rev() {
            self.push(it);
        }
        self.push_u32(items.len() as u32);
        self.pos()
    }

    /// A vector of offsets to already-built objects.
    pub fn create_offsets(&mut self, targets: &[usize]) -> usize {
        self.prep(4, targets.len() * 4);
        for &t in targets.iter().rev() {
            self.push_offset(t);
        }
        self.push_u32(targets.len() as u32);
        self.pos()
    }

    pub fn start_table(&mut self) {
        self.fields.clear();
        self.table_end = self.pos();
    }

    /// Adds an inline scalar field (little-endian bytes, aligned to its size).
    pub fn add_scalar(&mut self, slot: usize, le: &[u8]) {
        self.prep(le.len(), le.len());
        self.push(le);
        self.fields.push((slot, self.pos()));
    }

    pub fn add_offset(&mut self, slot: usize, target: usize) {
        let at = self.push_offset(target);
        self.fields.push((slot, at));
    }

    /// Writes the soffset and a fresh vtable; returns the table's position.
    pub fn end_table(&mut self) -> usize {
        self.prep(4, 4);
        self.push(&0i32.to_le_bytes());
        let table = self.pos();
        let slots = self.fields.iter().map(|&(s, _)| s + 1).max().unwrap_or(0);
        let mut vt = alloc::vec![0u16; 2 + slots];
        vt[0] = (4 + 2 * slots) as u16;
        vt[1] = (table - self.table_end) as u16;
        for &(slot, at) in &self.fields {
            vt[2 + slot] = (table - at) as u16;
        }
        for v in vt.iter().rev() {
            self.push(&v.to_le_bytes());
        }
        let vtable = self.pos();
        // soffset = table address - vtable address = vtable pos - table pos (vtable precedes).
        let soff = (vtable - table) as i32;
        self.patch(table, &soff.to_le_bytes());
        table
    }

    /// Overwrites bytes of an object already written at position `pos`.
    fn patch(&mut self, pos: usize, le: &[u8]) {
        for (k, b) in le.iter().enumerate() {
            self.rev[pos - 1 - k] = *b;
        }
    }

    /// Finishes with the root offset and a 4-byte file identifier; returns the buffer.
    pub fn finish(mut self, root: usize, ident: &[u8; 4]) -> Vec<u8> {
        let align = self.max_align;
        self.prep(align, 8);
        self.push(ident);
        self.push_offset(root);
        self.rev.reverse();
        self.rev
    }
}
