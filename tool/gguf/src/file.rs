//! [`GgufFile`]: opening (memory-mapped) or parsing (owned bytes) a whole file, and access to
//! its tensors' bytes and values.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::metadata::{read_metadata, Metadata};
use crate::reader::ByteCursor;
use crate::tensor::{check_layout, data_section_start, read_tensor_infos, TensorInfo};
use crate::value::Value;
use crate::{dequant, GgufError};

/// The data section's alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u32 = 32;

/// The metadata key that sets the data section's alignment (a u32 power of two).
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// A parsed GGUF file: header, metadata and tensor infos, with the bytes behind them.
pub struct GgufFile {
    path: String,
    storage: Storage,
    version: u32,
    alignment: usize,
    data_start: usize,
    pub(crate) metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Owned(bytes) => bytes,
        }
    }
}

/// What the header says, before it is joined to its bytes.
struct Header {
    version: u32,
    alignment: usize,
    data_start: usize,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Maps the file and parses its header. Tensor data is not read until asked for.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let name = path.display().to_string();
        let io_error = |e: std::io::Error| GgufError::new(&name, e.to_string());
        let file = File::open(path).map_err(io_error)?;
        let storage = if file.metadata().map_err(io_error)?.len() == 0 {
            // An empty file cannot be mapped everywhere; it fails parsing either way.
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and this crate never writes through it. Another
            // process truncating or rewriting the file while it is mapped would change (or
            // fault on) these bytes, as it would for every memory-mapped model loader; the
            // file is opened only for reading, and rbuild does not modify model files.
            Storage::Mapped(unsafe { Mmap::map(&file) }.map_err(io_error)?)
        };
        Self::from_storage(storage, name)
    }

    /// Parses a file held in memory (tests, fuzzing); `name` stands for the path in messages.
    pub fn parse(bytes: Vec<u8>, name: &str) -> Result<GgufFile, GgufError> {
        Self::from_storage(Storage::Owned(bytes), name.to_string())
    }

    fn from_storage(storage: Storage, path: String) -> Result<GgufFile, GgufError> {
        let header = match parse_header(storage.bytes()) {
            Ok(header) => header,
            Err(message) => return Err(GgufError::new(path, message)),
        };
        Ok(GgufFile {
            path,
            storage,
            version: header.version,
            alignment: header.alignment,
            data_start: header.data_start,
            metadata: header.metadata,
            tensors: header.tensors,
            tensor_index: header.tensor_index,
        })
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> GgufError {
        GgufError::new(&self.path, message)
    }

    /// The GGUF version (2 or 3; they differ only in v3 allowing big-endian files, which
    /// this reader refuses).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The path (or the name given to [`GgufFile::parse`]), for messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The data section's alignment (`general.alignment`, else 32).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The file offset of the data section, to which tensor offsets are relative.
    pub fn data_start(&self) -> usize {
        self.data_start
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor's raw bytes, exactly `t.n_bytes()` of them, borrowed from the file. `t`
    /// must be one of [`GgufFile::tensors`]; for an info whose range lies outside this file
    /// the slice is empty.
    pub fn tensor_bytes(&self, t: &TensorInfo) -> &[u8] {
        let start = self.data_start.saturating_add(usize::try_from(t.offset).unwrap_or(usize::MAX));
        self.storage.bytes().get(start..start.saturating_add(t.n_bytes())).unwrap_or(&[])
    }

    /// The tensor's values as f32, in memory order (row-major over [`TensorInfo::shape`]).
    /// Errs for types this crate does not decode, naming the tensor and the type.
    pub fn dequantize(&self, t: &TensorInfo) -> Result<Vec<f32>, GgufError> {
        if !t.ggml_type.can_dequantize() {
            return Err(self.error(format!("tensor '{}' has type {}, which rbuild cannot read", t.name, t.ggml_type)));
        }
        let bytes = self.tensor_bytes(t);
        if bytes.len() != t.n_bytes() {
            return Err(self.error(format!("tensor '{}' does not lie inside this file", t.name)));
        }
        let n = t.n_elements();
        let mut values = Vec::new();
        values.try_reserve_exact(n).map_err(|_| {
            self.error(format!("tensor '{}': cannot allocate {n} f32 values", t.name))
        })?;
        values.resize(n, 0.0);
        dequant::dequantize(t.ggml_type, bytes, &mut values).map_err(|e| self.error(format!("tensor '{}': {e}", t.name)))?;
        Ok(values)
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("metadata_entries", &self.metadata.entries.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// Magic, version, counts, metadata, tensor infos; then the data section's layout.
fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    let mut cursor = ByteCursor::new(bytes);
    let magic = cursor.take(4, "the magic").map_err(|_| format!("not a GGUF file: only {} bytes long", bytes.len()))?;
    if magic != b"GGUF" {
        return Err(format!("not a GGUF file: it starts with {:?}, not \"GGUF\"", String::from_utf8_lossy(magic)));
    }
    let version = cursor.u32("the version")?;
    check_version(version)?;
    let tensor_count = cursor.u64("the tensor count")?;
    let metadata_count = cursor.u64("the metadata entry count")?;
    let metadata = read_metadata(&mut cursor, metadata_count)?;
    let alignment = alignment(&metadata)?;
    let (tensors, tensor_index) = read_tensor_infos(&mut cursor, tensor_count)?;
    let data_start = data_section_start(cursor.position(), alignment)?;
    check_layout(&tensors, alignment, data_start, bytes.len())?;
    Ok(Header { version, alignment, data_start, metadata, tensors, tensor_index })
}

fn check_version(version: u32) -> Result<(), String> {
    match version {
        2 | 3 => Ok(()),
        // A big-endian writer's version 2 or 3 reads as 0x02000000 / 0x03000000 here.
        _ if matches!(version.swap_bytes(), 2 | 3) => Err(format!(
            "big-endian GGUF files are not supported (the version field reads 0x{version:08x}, version {} byte-swapped)",
            version.swap_bytes()
        )),
        _ => Err(format!("GGUF version {version} is not supported (only versions 2 and 3 are)")),
    }
}

/// `general.alignment`: a u32, non-zero power of two; 32 when absent.
fn alignment(metadata: &Metadata) -> Result<usize, String> {
    match metadata.get(ALIGNMENT_KEY) {
        None => Ok(DEFAULT_ALIGNMENT as usize),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(*a as usize),
        Some(Value::U32(a)) => Err(format!("{ALIGNMENT_KEY} is {a}, not a power of two")),
        Some(other) => Err(format!("{ALIGNMENT_KEY} has type {}, expected u32", other.describe_type())),
    }
}
