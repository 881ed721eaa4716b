//! The `RbuildGpuBackend` delegate payload: types, reader, writer and graph validation.
//!
//! The byte layout, op table, dtype codes and versioning rules are in `../PAYLOAD.md`. In short:
//! a 16-byte header (`RGPU`, major, minor, total length, section count), a section table, then
//! the sections strings, symbols, values, io and ops, all little-endian. Weights are not in the
//! payload: constants and state initial values name keys of the program's `named_data`.
//!
//! [`Payload::from_bytes`] parses and validates; [`Payload::to_bytes`] validates and writes. A
//! payload the writer emits is always one the reader accepts.

mod call_shapes;
mod error;
mod op;
mod reader;
mod validate;
mod writer;

use alloc::string::String;
use alloc::vec::Vec;

pub use call_shapes::{checked_numel, describe};
pub use error::{ErrorKind, PayloadError};
pub use op::{Attr, AttrKind, BinaryOp, GeluApproximation, Op, UnaryOp};

/// First four bytes of every payload.
pub const MAGIC: [u8; 4] = *b"RGPU";
/// Readers reject any other major version.
pub const FORMAT_MAJOR: u16 = 1;
/// Minor versions only append sections (or add op / dtype codes a reader rejects by name).
pub const FORMAT_MINOR: u16 = 0;
/// Bytes before the section table.
pub const HEADER_LEN: usize = 16;
/// Sections a version-1 payload must hold, in section-table order.
pub const SECTION_NAMES: [&str; 5] = ["strings", "symbols", "values", "io", "ops"];
/// Largest tensor rank the format allows.
pub const MAX_RANK: usize = 8;

/// Index into [`Payload::values`].
pub type ValueId = u32;

/// Element types, with explicit codes (0 is never valid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    I32,
    I64,
    Bool,
    /// Signed int8 weight, one float scale per `group_size` elements of the last dim.
    QInt8Grouped,
    /// Signed int4 weight (two per byte, low nibble first), grouped scales like `QInt8Grouped`.
    QInt4Grouped,
}

impl DType {
    pub const ALL: [DType; 8] = [
        DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool,
        DType::QInt8Grouped, DType::QInt4Grouped,
    ];

    pub fn code(self) -> u8 {
        match self {
            DType::F32 => 1,
            DType::F16 => 2,
            DType::BF16 => 3,
            DType::I32 => 4,
            DType::I64 => 5,
            DType::Bool => 6,
            DType::QInt8Grouped => 16,
            DType::QInt4Grouped => 17,
        }
    }

    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::QInt8Grouped => "qint8_grouped",
            DType::QInt4Grouped => "qint4_grouped",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    pub fn is_index(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    pub fn is_quantized(self) -> bool {
        matches!(self, DType::QInt8Grouped | DType::QInt4Grouped)
    }
}

/// A dynamic dimension: its size is chosen per call, at most `max` (buffers are sized for `max`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub min: u64,
    pub max: u64,
}

/// One dimension of a tensor: a fixed size or an index into [`Payload::symbols`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    Fixed(u64),
    Symbol(u32),
}

/// Per-group scales of a weight-only quantized constant: `scales` is a float constant of shape
/// `[rows, ceil(cols / group_size)]` where the weight's logical shape is `[rows, cols]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupQuant {
    pub group_size: u32,
    pub scales: ValueId,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    pub dtype: DType,
    pub dims: Vec<Dim>,
    /// Present exactly when `dtype` is quantized.
    pub quant: Option<GroupQuant>,
}

/// How a state tensor is filled when the delegate is initialized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateInit {
    Zeros,
    /// Copied from this `named_data` key.
    Named(String),
}

/// Where a value's contents come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// Produced by exactly one op of the graph.
    Activation,
    /// A delegate input, listed once in [`Payload::inputs`].
    Input,
    /// Read-only weights stored in the program's `named_data` (or a `.ptd`) under `key`.
    Constant { key: String },
    /// Mutable, lives on the device between calls (KV caches); written only by `CacheUpdate`.
    State { init: StateInit },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueDef {
    /// For diagnostics; may be empty.
    pub name: String,
    pub meta: TensorMeta,
    pub kind: ValueKind,
}

/// One operator application; runs in list order.
#[derive(Clone, Debug, PartialEq)]
pub struct OpNode {
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

/// A whole delegate payload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Payload {
    pub symbols: Vec<Symbol>,
    pub values: Vec<ValueDef>,
    /// Delegate inputs, in the order of the DelegateCall's input arguments.
    pub inputs: Vec<ValueId>,
    /// Delegate outputs, in the order of the DelegateCall's output arguments.
    pub outputs: Vec<ValueId>,
    pub ops: Vec<OpNode>,
}

impl Payload {
    /// Parses and validates a payload. Never panics; errors name the offset and field.
    pub fn from_bytes(bytes: &[u8]) -> Result<Payload, PayloadError> {
        let payload = reader::read(bytes)?;
        payload.validate()?;
        Ok(payload)
    }

    /// Validates, then serializes the payload.
    pub fn to_bytes(&self) -> Result<alloc::vec::Vec<u8>, PayloadError> {
        self.validate()?;
        writer::write(self)
    }

    /// Checks graph well-formedness (see `PAYLOAD.md`, "What a runtime must validate").
    pub fn validate(&self) -> Result<(), PayloadError> {
        validate::validate(self)
    }
}

