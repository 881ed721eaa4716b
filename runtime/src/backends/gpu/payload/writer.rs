//! [`Payload`] -> bytes, the exact inverse of the reader (strings are interned on the way).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::error::{ErrorKind, PayloadError};
use super::op::Attr;
use super::*;

/// Collects strings in first-use order; each is stored once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        match self.table.iter().position(|t| t == s) {
            Some(i) => i as u32,
            None => {
                self.table.push(String::from(s));
                (self.table.len() - 1) as u32
            }
        }
    }
}

fn too_big(what: &str, n: usize) -> PayloadError {
    PayloadError::graph(ErrorKind::OutOfRange, format!("{what} = {n} does not fit the format"))
}

fn u32_of(what: &str, n: usize) -> Result<u32, PayloadError> {
    u32::try_from(n).map_err(|_| too_big(what, n))
}

fn u8_of(what: &str, n: usize) -> Result<u8, PayloadError> {
    u8::try_from(n).map_err(|_| too_big(what, n))
}

/// Serializes without validating (callers go through `Payload::to_bytes`).
pub(super) fn write(p: &Payload) -> Result<Vec<u8>, PayloadError> {
    let mut strings = Strings::default();

    let mut symbols = Vec::new();
    symbols.extend_from_slice(&u32_of("symbol count", p.symbols.len())?.to_le_bytes());
    for s in &p.symbols {
        symbols.extend_from_slice(&strings.id(&s.name).to_le_bytes());
        symbols.extend_from_slice(&s.min.to_le_bytes());
        symbols.extend_from_slice(&s.max.to_le_bytes());
    }

    let mut values = Vec::new();
    values.extend_from_slice(&u32_of("value count", p.values.len())?.to_le_bytes());
    for v in &p.values {
        values.extend_from_slice(&strings.id(&v.name).to_le_bytes());
        values.push(v.meta.dtype.code());
        values.push(u8_of("rank", v.meta.dims.len())?);
        for d in &v.meta.dims {
            let (tag, x) = match *d {
                Dim::Fixed(n) => (0u8, n),
                Dim::Symbol(s) => (1u8, s as u64),
            };
            values.push(tag);
            values.extend_from_slice(&x.to_le_bytes());
        }
        match v.meta.quant {
            None => values.push(0),
            Some(q) => {
                values.push(1);
                values.extend_from_slice(&q.group_size.to_le_bytes());
                values.extend_from_slice(&q.scales.to_le_bytes());
            }
        }
        match &v.kind {
            ValueKind::Activation => values.push(0),
            ValueKind::Input => values.push(1),
            ValueKind::Constant { key } => {
                values.push(2);
                values.extend_from_slice(&strings.id(key).to_le_bytes());
            }
            ValueKind::State { init } => {
                values.push(3);
                match init {
                    StateInit::Zeros => values.push(0),
                    StateInit::Named(key) => {
                        values.push(1);
                        values.extend_from_slice(&strings.id(key).to_le_bytes());
                    }
                }
            }
        }
    }

    let mut io = Vec::new();
    for (what, list) in [("input count", &p.inputs), ("output count", &p.outputs)] {
        io.extend_from_slice(&u32_of(what, list.len())?.to_le_bytes());
        for id in list {
            io.extend_from_slice(&id.to_le_bytes());
        }
    }

    let mut ops = Vec::new();
    ops.extend_from_slice(&u32_of("op count", p.ops.len())?.to_le_bytes());
    for node in &p.ops {
        ops.extend_from_slice(&node.op.code().to_le_bytes());
        for (what, list) in [("op input count", &node.inputs), ("op output count", &node.outputs)] {
            ops.push(u8_of(what, list.len())?);
            for id in list {
                ops.extend_from_slice(&id.to_le_bytes());
            }
        }
        let attrs = node.op.attrs();
        ops.push(u8_of("attribute count", attrs.len())?);
        for attr in &attrs {
            ops.push(attr.kind() as u8);
            match attr {
                Attr::Int(v) => ops.extend_from_slice(&v.to_le_bytes()),
                Attr::Float(v) => ops.extend_from_slice(&v.to_le_bytes()),
                Attr::Bool(v) => ops.push(*v as u8),
                Attr::Ints(v) => {
                    ops.push(u8_of("ints length", v.len())?);
                    for x in v {
                        ops.extend_from_slice(&x.to_le_bytes());
                    }
                }
            }
        }
    }

    let mut string_section = Vec::new();
    string_section.extend_from_slice(&u32_of("string count", strings.table.len())?.to_le_bytes());
    for s in &strings.table {
        string_section.extend_from_slice(&u32_of("string length", s.len())?.to_le_bytes());
        string_section.extend_from_slice(s.as_bytes());
    }

    let sections: [&[u8]; 5] = [&string_section, &symbols, &values, &io, &ops];
    let table_end = HEADER_LEN + sections.len() * 8;
    let total = table_end + sections.iter().map(|s| s.len()).sum::<usize>();
    let total32 = u32_of("payload length", total)?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    out.extend_from_slice(&total32.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    let mut offset = table_end;
    for s in &sections {
        out.extend_from_slice(&(offset as u32).to_le_bytes());
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        offset += s.len();
    }
    for s in &sections {
        out.extend_from_slice(s);
    }
    Ok(out)
}
