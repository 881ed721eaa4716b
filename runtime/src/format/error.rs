//! Typed errors for malformed programs: what is wrong and where.

use core::fmt::{self, Write};

use crate::decimal::Dec;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatErrorKind {
    /// The file is shorter than a structure it must contain.
    Truncated { needed: usize, available: usize },
    /// Bytes 4..8 are not an `ET??` identifier.
    BadIdentifier([u8; 4]),
    /// An `ET??` identifier other than the supported `ET12`.
    UnsupportedVersion([u8; 4]),
    /// A flatbuffer offset points outside the buffer or backwards.
    OffsetOutOfBounds { target: u64 },
    /// A vtable is malformed (size, alignment or position).
    BadVTable,
    /// A string is not UTF-8 or lacks room for its length.
    BadString,
    /// A vector would extend past the buffer.
    VectorOutOfBounds { len: u64 },
    /// An extended-header field is inconsistent.
    BadHeader(&'static str),
    /// A segment reference is out of range or extends past the file.
    BadSegment { index: u64 },
    /// Decoding would take more steps than the file size allows (shared-subtree blowup).
    TooComplex,
    /// A field has a value the format does not allow.
    InvalidValue(&'static str),
}

/// An error in a `.pte` file, with the byte offset and the table/field being read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    pub kind: FormatErrorKind,
    pub offset: usize,
    pub context: &'static str,
}

impl FormatError {
    pub fn new(kind: FormatErrorKind, offset: usize, context: &'static str) -> Self {
        FormatError { kind, offset, context }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FormatErrorKind::*;
        match &self.kind {
            Truncated { needed, available } => {
                write!(f, "file truncated: needs {needed} bytes, has {available}")?
            }
            BadIdentifier(id) => {
                f.write_str("not an ExecuTorch program: identifier ")?;
                quoted(f, id)?;
                f.write_str(" is not ET12")?
            }
            UnsupportedVersion(id) => {
                f.write_str("unsupported program version ")?;
                quoted(f, id)?;
                f.write_str(" (this runtime reads ET12)")?
            }
            OffsetOutOfBounds { target } => write!(f, "offset points outside the file (to {})", Dec::unsigned(*target))?,
            BadVTable => f.write_str("malformed flatbuffer vtable")?,
            BadString => f.write_str("malformed string")?,
            VectorOutOfBounds { len } => write!(f, "vector of {} elements extends past the end of the file", Dec::unsigned(*len))?,
            BadHeader(what) => write!(f, "bad extended header: {what}")?,
            BadSegment { index } => write!(f, "segment {} is missing or extends past the end of the file", Dec::unsigned(*index))?,
            TooComplex => f.write_str("program structure is too large for the file size (cyclic or shared subtrees)")?,
            InvalidValue(what) => write!(f, "invalid value: {what}")?,
        }
        write!(f, " at byte {} (reading {})", self.offset, self.context)
    }
}

/// `"ET99"`, bytes outside printable ASCII escaped (`"\x89PNG"`).
fn quoted(f: &mut fmt::Formatter<'_>, id: &[u8; 4]) -> fmt::Result {
    f.write_str("\"")?;
    for &b in id {
        for c in core::ascii::escape_default(b) {
            f.write_char(char::from(c))?;
        }
    }
    f.write_str("\"")
}

#[cfg(feature = "std")]
impl std::error::Error for FormatError {}
