//! The one error type of the payload reader, writer and validator.

use alloc::string::String;
use core::fmt;

/// What class of problem a [`PayloadError`] reports (tests and callers can match on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The bytes end before a field, or a count promises more than the bytes hold.
    Truncated,
    /// The payload does not start with [`super::MAGIC`].
    BadMagic,
    /// A major format version this reader does not know.
    UnsupportedVersion,
    /// An index (string, symbol, value) or section offset outside its table or the payload.
    OutOfRange,
    /// An unknown op, dtype, attribute-kind or enum code.
    UnknownCode,
    /// An op's attributes do not match its schema (count, kind or value).
    BadAttribute,
    /// The graph is not well formed (see `Payload::validate`).
    Invalid,
}

/// A rejected payload: what went wrong, and where (byte offset into the payload when known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadError {
    pub kind: ErrorKind,
    pub offset: Option<usize>,
    pub message: String,
}

impl PayloadError {
    pub(crate) fn at(kind: ErrorKind, offset: usize, message: String) -> Self {
        PayloadError { kind, offset: Some(offset), message }
    }
    pub(crate) fn graph(kind: ErrorKind, message: String) -> Self {
        PayloadError { kind, offset: None, message }
    }
}

impl fmt::Display for PayloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(at) => write!(f, "gpu payload, byte {at}: {}", self.message),
            None => write!(f, "gpu payload: {}", self.message),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PayloadError {}
