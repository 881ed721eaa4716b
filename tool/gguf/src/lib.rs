//! Reader for GGUF, llama.cpp's model file format (versions 2 and 3, little-endian).
//!
//! A GGUF file is, in order (every integer little-endian):
//!
//! 1. the header: magic `"GGUF"`, u32 version, u64 tensor count, u64 metadata entry count;
//! 2. the metadata: that many entries of a string key (u64 length + UTF-8 bytes), a u32
//!    value type and the value ([`Value`]: integers, floats, bool, string, or an array —
//!    u32 element type, u64 length, the elements — which may itself hold arrays);
//! 3. the tensor infos: per tensor a string name, u32 n_dims, n_dims u64 dims (ggml `ne`
//!    order, fastest-varying first), a u32 [`GgmlType`] id and a u64 offset into the data
//!    section;
//! 4. padding to `general.alignment` (32 when absent), then the data section: each tensor's
//!    blocks of its type, at its offset (a multiple of the alignment).
//!
//! [`GgufFile::open`] maps the file and checks all of the above — counts and lengths against
//! the bytes that remain before anything is allocated for them, unique keys and names,
//! sizes with checked arithmetic, every tensor inside the file and none overlapping — so
//! that malformed input is a [`GgufError`] naming the file and the problem, never a panic.
//! Tensor data stays in the map: [`GgufFile::tensor_bytes`] borrows it,
//! [`GgufFile::dequantize`] decodes it to f32 ([`dequant`] holds one plain scalar decoder
//! per type, matching ggml's and gguf-py's arithmetic bit for bit), and [`blocks`] gives
//! typed views of Q4_0/Q4_1/Q8_0 blocks for importing them without dequantizing.
//!
//! ```no_run
//! use rbuild_gguf::GgufFile;
//!
//! let file = GgufFile::open("model.gguf".as_ref())?;
//! let arch = file.get_str("general.architecture")?.unwrap_or("?");
//! let layers = file.get_u64(&format!("{arch}.block_count"))?;
//! for t in file.tensors() {
//!     println!("{} {} {:?}", t.name, t.ggml_type, t.shape()); // shape: row-major, dims reversed
//! }
//! let embeddings = file.tensor("token_embd.weight").map(|t| file.dequantize(t)).transpose()?;
//! # let _ = (layers, embeddings);
//! # Ok::<(), rbuild_gguf::GgufError>(())
//! ```

// The workspace's rust-version is 1.85; `is_multiple_of` is 1.87+.
#![allow(clippy::manual_is_multiple_of)]

pub mod blocks;
pub mod dequant;
mod error;
mod file;
mod metadata;
mod reader;
mod tensor;
mod types;
mod value;

pub use error::GgufError;
pub use file::{GgufFile, ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
pub use tensor::{TensorInfo, MAX_DIMS};
pub use types::{GgmlType, QK_K};
pub use value::{Value, MAX_ARRAY_NESTING};
