//! Reader errors: each names the archive and, where one is involved, the zip member.

use std::fmt;

/// What went wrong, for callers that branch on it (the message says the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file could not be read.
    Io,
    /// Not a readable zip: truncated, damaged central directory, a member past the end or
    /// failing its CRC.
    Zip,
    /// A zip, but not a `torch.export.save` archive of the supported layout (missing member,
    /// wrong `archive_format`, the pre-2.8 pickled layout).
    Layout,
    /// Valid input this reader does not handle: a schema major version other than 8,
    /// big-endian storages, pickled payloads, an unknown dtype.
    Unsupported,
    /// A JSON member that does not parse as its schema type.
    Json,
    /// A weight or constant whose view does not fit its storage or contradicts the graph.
    Tensor,
    /// A program whose signature or graph is inconsistent (unknown names, mismatched lists).
    Program,
}

/// An error reading a `.pt2` archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pt2Error {
    /// The archive's path, or the label given to an in-memory archive.
    pub archive: String,
    /// The zip member concerned (full name inside the zip), if any.
    pub member: Option<String>,
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for Pt2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.member {
            Some(member) => write!(f, "{}: {}: {}", self.archive, member, self.message),
            None => write!(f, "{}: {}", self.archive, self.message),
        }
    }
}

impl std::error::Error for Pt2Error {}

pub type Result<T, E = Pt2Error> = std::result::Result<T, E>;

/// Builds errors for one archive.
#[derive(Debug, Clone)]
pub(crate) struct ErrorContext {
    pub archive: String,
}

impl ErrorContext {
    pub fn error(&self, kind: ErrorKind, message: impl Into<String>) -> Pt2Error {
        Pt2Error { archive: self.archive.clone(), member: None, kind, message: message.into() }
    }

    pub fn member_error(&self, member: &str, kind: ErrorKind, message: impl Into<String>) -> Pt2Error {
        Pt2Error { archive: self.archive.clone(), member: Some(member.to_string()), kind, message: message.into() }
    }
}
