//! The `.pte` program format: the only code that knows the flatbuffer layout.
//!
//! [`PteFile::parse`] decodes a file zero-copy into [`schema`] types (payloads stay borrowed);
//! [`write_pte`] serializes them back.

pub mod error;
pub mod flatbuf;
pub mod pte;
pub mod schema;

pub use error::{FormatError, FormatErrorKind};
pub use pte::{parse_header, rewrite, write_pte, ExtendedHeader, PteFile};
