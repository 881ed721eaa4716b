//! Shared by the tests: a GGUF byte builder for hand-made files, and scratch folders.
#![allow(dead_code)] // each test crate uses part of it

use std::path::PathBuf;

/// GGUF value type ids.
pub mod vt {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// A GGUF string: u64 length, then the bytes.
pub fn string(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// An array value (without the leading ARRAY type id): element type, length, elements.
pub fn array(element_type: u32, len: u64, elements: &[u8]) -> Vec<u8> {
    let mut out = element_type.to_le_bytes().to_vec();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(elements);
    out
}

/// Builds a GGUF file field by field; tensors added with [`GgufBuilder::tensor`] get their
/// data appended at the next aligned offset.
#[derive(Clone)]
pub struct GgufBuilder {
    pub magic: [u8; 4],
    pub version: u32,
    /// Overrides the counts written in the header (the real counts otherwise).
    pub tensor_count: Option<u64>,
    pub metadata_count: Option<u64>,
    metadata: Vec<u8>,
    n_metadata: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
    alignment: usize,
}

impl Default for GgufBuilder {
    fn default() -> Self {
        GgufBuilder {
            magic: *b"GGUF",
            version: 3,
            tensor_count: None,
            metadata_count: None,
            metadata: Vec::new(),
            n_metadata: 0,
            infos: Vec::new(),
            n_tensors: 0,
            data: Vec::new(),
            alignment: 32,
        }
    }
}

impl GgufBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A metadata entry with the value's bytes as given.
    pub fn kv(mut self, key: &str, value_type: u32, value: &[u8]) -> Self {
        self.metadata.extend(string(key.as_bytes()));
        self.metadata.extend(value_type.to_le_bytes());
        self.metadata.extend_from_slice(value);
        self.n_metadata += 1;
        self
    }

    /// A metadata entry whose key is raw bytes (invalid UTF-8, empty).
    pub fn kv_raw_key(mut self, key: &[u8], value_type: u32, value: &[u8]) -> Self {
        self.metadata.extend(string(key));
        self.metadata.extend(value_type.to_le_bytes());
        self.metadata.extend_from_slice(value);
        self.n_metadata += 1;
        self
    }

    pub fn kv_u32(self, key: &str, v: u32) -> Self {
        self.kv(key, vt::U32, &v.to_le_bytes())
    }

    pub fn kv_str(self, key: &str, v: &str) -> Self {
        self.kv(key, vt::STRING, &string(v.as_bytes()))
    }

    /// Sets `general.alignment` and pads the data section to it.
    pub fn alignment(mut self, alignment: u32) -> Self {
        self.alignment = alignment as usize;
        self.kv_u32("general.alignment", alignment)
    }

    /// A tensor info with an explicit offset (no data added).
    pub fn tensor_at(mut self, name: &[u8], dims: &[u64], type_id: u32, offset: u64) -> Self {
        self.infos.extend(string(name));
        self.infos.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(type_id.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    /// A tensor whose `data` goes at the next aligned offset of the data section.
    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, data: &[u8]) -> Self {
        let offset = self.data.len().next_multiple_of(self.alignment.max(1));
        self.data.resize(offset, 0);
        self.data.extend_from_slice(data);
        self.tensor_at(name.as_bytes(), dims, type_id, offset as u64)
    }

    /// Bytes appended to the data section as they are.
    pub fn data(mut self, bytes: &[u8]) -> Self {
        self.data.extend_from_slice(bytes);
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = self.magic.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend(self.tensor_count.unwrap_or(self.n_tensors).to_le_bytes());
        out.extend(self.metadata_count.unwrap_or(self.n_metadata).to_le_bytes());
        out.extend_from_slice(&self.metadata);
        out.extend_from_slice(&self.infos);
        if self.n_tensors > 0 {
            out.resize(out.len().next_multiple_of(self.alignment.max(1)), 0);
            out.extend_from_slice(&self.data);
        }
        out
    }
}

/// A fresh scratch folder under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("rbuild-gguf-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}
