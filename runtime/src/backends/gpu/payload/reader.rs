//! Bytes -> [`Payload`]. Every read is bounds-checked; every count is checked against the bytes
//! left before anything is allocated for it.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::{ErrorKind, PayloadError};
use super::op::{self, Attr, AttrKind, Op};
use super::*;

/// Smallest encodings, used to cap hostile counts (see `PAYLOAD.md`).
const MIN_STRING_BYTES: usize = 4;
const MIN_SYMBOL_BYTES: usize = 20;
const MIN_VALUE_BYTES: usize = 8;
const MIN_DIM_BYTES: usize = 9;
const MIN_OP_BYTES: usize = 5;
const MIN_ATTR_BYTES: usize = 2;

/// A read position inside one section; offsets in errors are absolute payload offsets.
struct Cursor<'a> {
    section: &'static str,
    bytes: &'a [u8],
    base: usize,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> usize {
        self.base + self.pos
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn error(&self, kind: ErrorKind, message: String) -> PayloadError {
        PayloadError::at(kind, self.offset(), format!("section `{}`: {message}", self.section))
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], PayloadError> {
        if self.remaining() < n {
            return Err(self.error(ErrorKind::Truncated, format!("{field} needs {n} byte(s), {} left", self.remaining())));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], PayloadError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn u8(&mut self, field: &str) -> Result<u8, PayloadError> {
        Ok(self.array::<1>(field)?[0])
    }
    fn u16(&mut self, field: &str) -> Result<u16, PayloadError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }
    fn u32(&mut self, field: &str) -> Result<u32, PayloadError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    fn u64(&mut self, field: &str) -> Result<u64, PayloadError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }
    fn i64(&mut self, field: &str) -> Result<i64, PayloadError> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }
    fn f32(&mut self, field: &str) -> Result<f32, PayloadError> {
        Ok(f32::from_le_bytes(self.array(field)?))
    }

    /// A count of items each at least `min_item_bytes` long; rejected if the rest cannot hold them.
    fn count(&mut self, width: usize, field: &str, min_item_bytes: usize) -> Result<usize, PayloadError> {
        let at = self.offset();
        let n = match width {
            1 => self.u8(field)? as usize,
            _ => self.u32(field)? as usize,
        };
        if n.saturating_mul(min_item_bytes) > self.remaining() {
            return Err(PayloadError::at(
                ErrorKind::Truncated,
                at,
                format!("section `{}`: {field} = {n} needs at least {} byte(s), {} left", self.section, n.saturating_mul(min_item_bytes), self.remaining()),
            ));
        }
        Ok(n)
    }

    fn finish(&self) -> Result<(), PayloadError> {
        if self.remaining() != 0 {
            return Err(self.error(ErrorKind::Invalid, format!("{} unread byte(s) at the end of the section", self.remaining())));
        }
        Ok(())
    }
}

/// Parses the bytes into a [`Payload`] (without graph validation).
pub(super) fn read(bytes: &[u8]) -> Result<Payload, PayloadError> {
    let mut header = Cursor { section: "header", bytes, base: 0, pos: 0 };
    let magic: [u8; 4] = header.array("magic")?;
    if magic != MAGIC {
        return Err(PayloadError::at(ErrorKind::BadMagic, 0, format!("magic is {magic:02x?}, expected `RGPU` (not an RbuildGpuBackend payload)")));
    }
    let major = header.u16("major version")?;
    let minor = header.u16("minor version")?;
    if major != FORMAT_MAJOR {
        return Err(PayloadError::at(
            ErrorKind::UnsupportedVersion,
            4,
            format!("format version {major}.{minor} is not supported (this reader handles {FORMAT_MAJOR}.x)"),
        ));
    }
    let total_len = header.u32("total length")? as usize;
    if total_len < HEADER_LEN {
        return Err(PayloadError::at(ErrorKind::Truncated, 8, format!("payload declares {total_len} bytes, less than the {HEADER_LEN}-byte header")));
    }
    if total_len > bytes.len() {
        return Err(PayloadError::at(ErrorKind::Truncated, 8, format!("payload declares {total_len} bytes, only {} present", bytes.len())));
    }
    // Bytes after `total_len` are padding from the container and are ignored.
    let bytes = &bytes[..total_len];
    let mut header = Cursor { section: "header", bytes, base: 0, pos: 12 };
    let section_count = header.count(4, "section count", 8)?;
    if section_count < SECTION_NAMES.len() {
        return Err(PayloadError::at(ErrorKind::Invalid, 12, format!("{section_count} section(s), version 1 needs {}", SECTION_NAMES.len())));
    }
    let table_end = HEADER_LEN + section_count * 8;
    let mut sections: Vec<Cursor<'_>> = Vec::with_capacity(SECTION_NAMES.len());
    // Sections past the known ones come from a newer minor version: bounds-checked, then skipped.
    for index in 0..section_count {
        let entry_at = header.offset();
        let offset = header.u32("section offset")? as usize;
        let len = header.u32("section length")? as usize;
        let name = SECTION_NAMES.get(index).copied().unwrap_or("unknown");
        let end = offset.checked_add(len).filter(|&end| offset >= table_end && end <= total_len);
        let Some(end) = end else {
            return Err(PayloadError::at(
                ErrorKind::OutOfRange,
                entry_at,
                format!("section {index} (`{name}`) at offset {offset}, length {len} lies outside bytes {table_end}..{total_len}"),
            ));
        };
        if index < SECTION_NAMES.len() {
            sections.push(Cursor { section: name, bytes: &bytes[offset..end], base: offset, pos: 0 });
        }
    }
    let mut sections = sections.into_iter();
    let mut next = || sections.next().ok_or_else(|| PayloadError::at(ErrorKind::Invalid, 12, "missing section".to_string()));
    let strings = read_strings(&mut next()?)?;
    let symbols = read_symbols(&mut next()?, &strings)?;
    let values = read_values(&mut next()?, &strings, symbols.len())?;
    let (inputs, outputs) = read_io(&mut next()?, values.len())?;
    let ops = read_ops(&mut next()?, values.len())?;
    Ok(Payload { symbols, values, inputs, outputs, ops })
}

fn read_strings(c: &mut Cursor<'_>) -> Result<Vec<String>, PayloadError> {
    let n = c.count(4, "string count", MIN_STRING_BYTES)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let len = c.u32("string length")? as usize;
        let at = c.offset();
        let raw = c.take(len, "string bytes")?;
        let s = core::str::from_utf8(raw).map_err(|_| PayloadError::at(ErrorKind::Invalid, at, format!("section `strings`: string {i} is not UTF-8")))?;
        out.push(String::from(s));
    }
    c.finish()?;
    Ok(out)
}

fn string(c: &mut Cursor<'_>, strings: &[String], field: &str) -> Result<String, PayloadError> {
    let at = c.offset();
    let index = c.u32(field)? as usize;
    strings.get(index).cloned().ok_or_else(|| {
        PayloadError::at(ErrorKind::OutOfRange, at, format!("section `{}`: {field} is string {index}, the table has {}", c.section, strings.len()))
    })
}

fn read_symbols(c: &mut Cursor<'_>, strings: &[String]) -> Result<Vec<Symbol>, PayloadError> {
    let n = c.count(4, "symbol count", MIN_SYMBOL_BYTES)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = string(c, strings, "symbol name")?;
        let min = c.u64("symbol min")?;
        let max = c.u64("symbol max")?;
        out.push(Symbol { name, min, max });
    }
    c.finish()?;
    Ok(out)
}

fn value_id(c: &mut Cursor<'_>, value_count: usize, field: &str) -> Result<ValueId, PayloadError> {
    let at = c.offset();
    let id = c.u32(field)?;
    if id as usize >= value_count {
        return Err(PayloadError::at(ErrorKind::OutOfRange, at, format!("section `{}`: {field} is value {id}, there are {value_count}", c.section)));
    }
    Ok(id)
}

fn read_values(c: &mut Cursor<'_>, strings: &[String], symbol_count: usize) -> Result<Vec<ValueDef>, PayloadError> {
    let n = c.count(4, "value count", MIN_VALUE_BYTES)?;
    let mut out = Vec::with_capacity(n);
    for index in 0..n {
        let name = string(c, strings, "value name")?;
        let at = c.offset();
        let code = c.u8("dtype")?;
        let dtype = DType::from_code(code)
            .ok_or_else(|| PayloadError::at(ErrorKind::UnknownCode, at, format!("section `values`: value {index} `{name}` has unknown dtype code {code}")))?;
        let at = c.offset();
        let rank = c.count(1, "rank", MIN_DIM_BYTES)?;
        if rank > MAX_RANK {
            return Err(PayloadError::at(ErrorKind::Invalid, at, format!("section `values`: value {index} `{name}` has rank {rank}, at most {MAX_RANK}")));
        }
        let mut dims = Vec::with_capacity(rank);
        for _ in 0..rank {
            let at = c.offset();
            let tag = c.u8("dim tag")?;
            let v = c.u64("dim value")?;
            dims.push(match tag {
                0 => Dim::Fixed(v),
                1 => match u32::try_from(v) {
                    Ok(s) if (s as usize) < symbol_count => Dim::Symbol(s),
                    _ => {
                        return Err(PayloadError::at(
                            ErrorKind::OutOfRange,
                            at,
                            format!("section `values`: value {index} `{name}` has a dynamic dim on symbol {v}, which is not defined ({symbol_count} symbol(s))"),
                        ))
                    }
                },
                t => return Err(PayloadError::at(ErrorKind::UnknownCode, at, format!("section `values`: value {index} `{name}` has unknown dim tag {t}"))),
            });
        }
        let at = c.offset();
        let quant = match c.u8("quant tag")? {
            0 => None,
            1 => {
                let group_size = c.u32("group size")?;
                // The scales id is range-checked once all values are read.
                let scales = c.u32("scales value")?;
                Some(GroupQuant { group_size, scales })
            }
            t => return Err(PayloadError::at(ErrorKind::UnknownCode, at, format!("section `values`: value {index} `{name}` has unknown quant tag {t}"))),
        };
        let at = c.offset();
        let kind = match c.u8("value kind")? {
            0 => ValueKind::Activation,
            1 => ValueKind::Input,
            2 => ValueKind::Constant { key: string(c, strings, "constant key")? },
            3 => {
                let at = c.offset();
                let init = match c.u8("state init")? {
                    0 => StateInit::Zeros,
                    1 => StateInit::Named(string(c, strings, "state init key")?),
                    t => return Err(PayloadError::at(ErrorKind::UnknownCode, at, format!("section `values`: state `{name}` has unknown init tag {t}"))),
                };
                ValueKind::State { init }
            }
            t => return Err(PayloadError::at(ErrorKind::UnknownCode, at, format!("section `values`: value {index} `{name}` has unknown kind {t}"))),
        };
        out.push(ValueDef { name, meta: TensorMeta { dtype, dims, quant }, kind });
    }
    c.finish()?;
    Ok(out)
}

fn read_io(c: &mut Cursor<'_>, value_count: usize) -> Result<(Vec<ValueId>, Vec<ValueId>), PayloadError> {
    let list = |c: &mut Cursor<'_>, what: &str| -> Result<Vec<ValueId>, PayloadError> {
        let n = c.count(4, &format!("{what} count"), 4)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(value_id(c, value_count, what)?);
        }
        Ok(out)
    };
    let inputs = list(c, "input")?;
    let outputs = list(c, "output")?;
    c.finish()?;
    Ok((inputs, outputs))
}

fn read_ops(c: &mut Cursor<'_>, value_count: usize) -> Result<Vec<OpNode>, PayloadError> {
    let n = c.count(4, "op count", MIN_OP_BYTES)?;
    let mut out = Vec::with_capacity(n);
    for index in 0..n {
        let op_at = c.offset();
        let code = c.u16("op code")?;
        let schema = op::schema(code)
            .ok_or_else(|| PayloadError::at(ErrorKind::UnknownCode, op_at, format!("section `ops`: op {index} has unknown op code {code}")))?;
        let field = |what: &str| format!("op {index} (`{}`) {what}", schema.name);
        let n_in = c.count(1, &field("input count"), 4)?;
        let mut inputs = Vec::with_capacity(n_in);
        for _ in 0..n_in {
            inputs.push(value_id(c, value_count, &field("input"))?);
        }
        let n_out = c.count(1, &field("output count"), 4)?;
        let mut outputs = Vec::with_capacity(n_out);
        for _ in 0..n_out {
            outputs.push(value_id(c, value_count, &field("output"))?);
        }
        let n_attrs = c.count(1, &field("attribute count"), MIN_ATTR_BYTES)?;
        let mut attrs = Vec::with_capacity(n_attrs);
        for _ in 0..n_attrs {
            let at = c.offset();
            let kind_code = c.u8(&field("attribute kind"))?;
            let kind = AttrKind::from_code(kind_code).ok_or_else(|| {
                PayloadError::at(ErrorKind::UnknownCode, at, format!("section `ops`: {} {kind_code}", field("has unknown attribute kind")))
            })?;
            attrs.push(match kind {
                AttrKind::Int => Attr::Int(c.i64(&field("int attribute"))?),
                AttrKind::Float => Attr::Float(c.f32(&field("float attribute"))?),
                AttrKind::Bool => match c.u8(&field("bool attribute"))? {
                    0 => Attr::Bool(false),
                    1 => Attr::Bool(true),
                    b => return Err(PayloadError::at(ErrorKind::BadAttribute, at, format!("section `ops`: {} is {b}, not 0 or 1", field("bool attribute")))),
                },
                AttrKind::Ints => {
                    let len = c.count(1, &field("ints length"), 8)?;
                    let mut v = Vec::with_capacity(len);
                    for _ in 0..len {
                        v.push(c.i64(&field("ints element"))?);
                    }
                    Attr::Ints(v)
                }
            });
        }
        let op = Op::decode(code, &attrs).map_err(|m| PayloadError::at(ErrorKind::BadAttribute, op_at, format!("section `ops`: op {index}: {m}")))?;
        out.push(OpNode { op, inputs, outputs });
    }
    c.finish()?;
    Ok(out)
}
