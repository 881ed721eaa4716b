//! Minimal FlatBuffers: a bounds-checked reader over `&[u8]` and a back-to-front builder.
//!
//! Only what `.pte` needs: tables, vectors of scalars/tables/strings, strings, unions (as a
//! type byte plus a table). Every read is checked; nothing here can panic on bad input.

use alloc::vec::Vec;
use core::cell::Cell;

use super::error::{FormatError, FormatErrorKind as K};

pub type Result<T> = core::result::Result<T, FormatError>;

/// A decoding step failed. The error itself waits in the reader's [`State`]: propagating a
/// unit through every field read is a branch, where a whole `FormatError` would be copied at
/// each level (code size on microcontrollers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failed;

pub type DecodeResult<T> = core::result::Result<T, Failed>;

/// What a decoding run shares: the work budget that stops shared-subtree blowups, and the
/// error that ended the run.
pub struct State {
    budget: Cell<usize>,
    error: Cell<Option<FormatError>>,
}

impl State {
    pub fn new(budget: usize) -> Self {
        State { budget: Cell::new(budget), error: Cell::new(None) }
    }

    /// The error recorded by the failed step.
    pub fn take_error(&self) -> FormatError {
        self.error.take().unwrap_or(FormatError::new(K::InvalidValue("decoding failed"), 0, "program"))
    }
}

/// The buffer being decoded plus the shared decoding [`State`].
#[derive(Clone, Copy)]
pub struct Reader<'a, 'c> {
    pub buf: &'a [u8],
    st: &'c State,
}

impl<'a, 'c> Reader<'a, 'c> {
    pub fn new(buf: &'a [u8], st: &'c State) -> Self {
        Reader { buf, st }
    }

    /// Records why decoding stops.
    #[cold]
    #[inline(never)]
    pub fn fail(&self, kind: K, at: usize, ctx: &'static str) -> Failed {
        self.st.error.set(Some(FormatError::new(kind, at, ctx)));
        Failed
    }

    /// Charges `n` units of decoding work.
    pub fn charge(&self, n: usize, at: usize, ctx: &'static str) -> DecodeResult<()> {
        let left = self.st.budget.get();
        if n > left {
            return Err(self.fail(K::TooComplex, at, ctx));
        }
        self.st.budget.set(left - n);
        Ok(())
    }

    #[inline(never)]
    pub fn bytes(&self, pos: usize, len: usize, ctx: &'static str) -> DecodeResult<&'a [u8]> {
        match pos.checked_add(len).and_then(|end| self.buf.get(pos..end)) {
            Some(b) => Ok(b),
            None => Err(self.fail(K::Truncated { needed: pos.saturating_add(len), available: self.buf.len() }, pos, ctx)),
        }
    }

    /// `len` (at most 8) little-endian bytes at `pos`, zero-extended.
    #[inline(never)]
    pub fn le(&self, pos: usize, len: usize, ctx: &'static str) -> DecodeResult<u64> {
        Ok(le_u64(self.bytes(pos, len, ctx)?))
    }

    pub fn u16(&self, pos: usize, ctx: &'static str) -> DecodeResult<usize> {
        Ok(self.le(pos, 2, ctx)? as usize)
    }

    pub fn u32(&self, pos: usize, ctx: &'static str) -> DecodeResult<u32> {
        Ok(self.le(pos, 4, ctx)? as u32)
    }

    /// Follows a uoffset stored at `pos`.
    #[inline(never)]
    pub fn follow(&self, pos: usize, ctx: &'static str) -> DecodeResult<usize> {
        let off = self.u32(pos, ctx)? as usize;
        match pos.checked_add(off).filter(|&t| t < self.buf.len()) {
            Some(t) => Ok(t),
            None => Err(self.fail(K::OffsetOutOfBounds { target: pos as u64 + off as u64 }, pos, ctx)),
        }
    }

    #[inline(never)]
    pub fn table(&self, pos: usize, ctx: &'static str) -> DecodeResult<Table<'a, 'c>> {
        self.charge(1, pos, ctx)?;
        let soff = self.u32(pos, ctx)? as i32 as i64;
        let vt = pos as i64 - soff;
        if vt < 0 || vt as usize >= self.buf.len() {
            return Err(self.fail(K::BadVTable, pos, ctx));
        }
        let vt = vt as usize;
        let vt_len = self.u16(vt, ctx)?;
        if vt_len < 4 || vt_len % 2 != 0 {
            return Err(self.fail(K::BadVTable, vt, ctx));
        }
        self.bytes(vt, vt_len, ctx)?;
        let obj_len = self.u16(vt + 2, ctx)?;
        self.bytes(pos, obj_len.max(4), ctx)?;
        Ok(Table { r: *self, pos, vt, vt_len, obj_len, ctx })
    }

    /// The table that the uoffset at `pos` points to.
    #[inline(never)]
    pub fn table_at(&self, pos: usize, ctx: &'static str) -> DecodeResult<Table<'a, 'c>> {
        self.table(self.follow(pos, ctx)?, ctx)
    }
}

/// Little-endian bytes (at most 8) as a zero-extended integer.
fn le_u64(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64)
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
    #[inline(never)]
    pub fn field(&self, slot: usize, size: usize) -> DecodeResult<Option<usize>> {
        let entry = 4 + 2 * slot;
        if entry + 2 > self.vt_len {
            return Ok(None);
        }
        let off = self.r.u16(self.vt + entry, self.ctx)?;
        if off == 0 {
            return Ok(None);
        }
        if off + size > self.obj_len {
            return Err(self.r.fail(K::BadVTable, self.vt, self.ctx));
        }
        Ok(Some(self.pos + off))
    }

    /// An inline scalar of `size` bytes (at most 8), zero-extended; 0 (the schema default)
    /// when absent.
    #[inline(never)]
    pub fn scalar(&self, slot: usize, size: usize) -> DecodeResult<u64> {
        match self.field(slot, size)? {
            Some(p) => self.r.le(p, size, self.ctx),
            None => Ok(0),
        }
    }

    /// Position of the object a uoffset field points to.
    #[inline(never)]
    pub fn offset(&self, slot: usize) -> DecodeResult<Option<usize>> {
        match self.field(slot, 4)? {
            Some(p) => Ok(Some(self.r.follow(p, self.ctx)?)),
            None => Ok(None),
        }
    }

    /// The elements of a vector of `elem`-byte scalars at field `slot`.
    #[inline(never)]
    pub fn scalar_vector(&self, slot: usize, elem: usize) -> DecodeResult<Option<&'a [u8]>> {
        match self.offset(slot)? {
            Some(p) => {
                let (start, len) = vector(&self.r, p, elem, self.ctx)?;
                Ok(Some(self.r.bytes(start, len * elem, self.ctx)?))
            }
            None => Ok(None),
        }
    }

    pub fn with_ctx(mut self, ctx: &'static str) -> Self {
        self.ctx = ctx;
        self
    }
}

/// Reads a vector header at `pos`: (element start, length), checking `len * elem` fits.
#[inline(never)]
pub fn vector(r: &Reader<'_, '_>, pos: usize, elem: usize, ctx: &'static str) -> DecodeResult<(usize, usize)> {
    let len = r.u32(pos, ctx)? as usize;
    let start = pos + 4;
    let end = len.checked_mul(elem).and_then(|bytes| start.checked_add(bytes));
    if end.is_none_or(|e| e > r.buf.len()) {
        return Err(r.fail(K::VectorOutOfBounds { len: len as u64 }, pos, ctx));
    }
    r.charge(len / 8 + 1, pos, ctx)?;
    Ok((start, len))
}

#[inline(never)]
pub fn string<'a>(r: &Reader<'a, '_>, pos: usize, ctx: &'static str) -> DecodeResult<&'a str> {
    let (start, len) = vector(r, pos, 1, ctx)?;
    let bytes = r.bytes(start, len, ctx)?;
    core::str::from_utf8(bytes).map_err(|_| r.fail(K::BadString, pos, ctx))
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
