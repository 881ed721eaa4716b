//! Weights from safetensors files, memory-mapped: constants reference the file's bytes.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use rbuild_runtime::ScalarType;
use safetensors::SafeTensors;

use crate::error::{ExportError, Result};
use crate::graph::ConstData;
use crate::passes::prequantized::PreQuantized;

#[derive(Clone, Debug)]
struct Entry {
    dtype: ScalarType,
    shape: Vec<usize>,
    data: ConstData,
}

/// A state dict: tensor name → dtype, shape and bytes.
#[derive(Clone, Debug, Default)]
pub struct Weights {
    entries: HashMap<String, Entry>,
    /// Where the weights came from, for messages.
    pub source: String,
    /// Linear weights the file stores in a block format rbuild keeps as it is (a GGUF file's
    /// Q4_0, Q4_1, Q8_0), by name; the entries above hold their float32 values too.
    pub prequantized: Arc<HashMap<String, PreQuantized>>,
    /// Notes on how the file's tensors were read (e.g. block formats dequantized).
    pub import_notes: Vec<String>,
}

/// The runtime dtype of a safetensors dtype (None for those the runtime has no type for).
pub fn scalar_type(d: safetensors::Dtype) -> Option<ScalarType> {
    use safetensors::Dtype as D;
    Some(match d {
        D::BOOL => ScalarType::Bool,
        D::U8 => ScalarType::Byte,
        D::I8 => ScalarType::Char,
        D::I16 => ScalarType::Short,
        D::U16 => ScalarType::UInt16,
        D::I32 => ScalarType::Int,
        D::U32 => ScalarType::UInt32,
        D::I64 => ScalarType::Long,
        D::U64 => ScalarType::UInt64,
        D::F16 => ScalarType::Half,
        D::BF16 => ScalarType::BFloat16,
        D::F32 => ScalarType::Float,
        D::F64 => ScalarType::Double,
        _ => return None,
    })
}

/// The safetensors dtype that stores a runtime dtype (quantized types as their integers).
pub fn safetensors_dtype(s: ScalarType) -> Option<safetensors::Dtype> {
    use safetensors::Dtype as D;
    Some(match s {
        ScalarType::Bool => D::BOOL,
        ScalarType::Byte | ScalarType::QUInt8 => D::U8,
        ScalarType::Char | ScalarType::QInt8 => D::I8,
        ScalarType::Short => D::I16,
        ScalarType::UInt16 => D::U16,
        ScalarType::Int | ScalarType::QInt32 => D::I32,
        ScalarType::UInt32 => D::U32,
        ScalarType::Long => D::I64,
        ScalarType::UInt64 => D::U64,
        ScalarType::Half => D::F16,
        ScalarType::BFloat16 => D::BF16,
        ScalarType::Float => D::F32,
        ScalarType::Double => D::F64,
        _ => return None,
    })
}

impl Weights {
    /// Maps a safetensors file; every tensor's header is validated, no data is copied.
    pub fn open(path: &Path) -> Result<Weights> {
        let io = |e: &dyn std::fmt::Display| ExportError::Io { path: path.display().to_string(), message: e.to_string() };
        let file = std::fs::File::open(path).map_err(|e| io(&e))?;
        // SAFETY: the map is read-only and the weights file is not expected to change while
        // exporting (the same assumption safetensors' own loaders make).
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io(&e))?);
        let (header_len, _) = SafeTensors::read_metadata(&map[..]).map_err(|e| io(&e))?;
        let st = SafeTensors::deserialize(&map[..]).map_err(|e| io(&e))?;
        let base = map.as_ptr() as usize;
        let mut entries = HashMap::new();
        for (name, view) in st.tensors() {
            let dt = scalar_type(view.dtype())
                .ok_or_else(|| io(&format!("tensor '{name}' has unsupported dtype {:?}", view.dtype())))?;
            let start = view.data().as_ptr() as usize - base;
            debug_assert!(start >= 8 + header_len);
            let data = ConstData::Mapped(map.clone(), start..start + view.data().len());
            entries.insert(name, Entry { dtype: dt, shape: view.shape().to_vec(), data });
        }
        Ok(Weights { entries, source: path.display().to_string(), ..Weights::default() })
    }

    /// Adds every tensor of `other` (another shard of the same checkpoint); a name present in
    /// both is an error.
    pub fn merge(&mut self, other: Weights) -> Result<()> {
        for (name, e) in other.entries {
            if self.entries.contains_key(&name) {
                return Err(ExportError::Weight { name, message: format!("appears in both {} and {}", self.source, other.source) });
            }
            self.entries.insert(name, e);
        }
        Ok(())
    }

    /// The dtype of tensor `name` in the file.
    pub fn dtype(&self, name: &str) -> Option<ScalarType> {
        self.entries.get(name).map(|e| e.dtype)
    }

    /// The tensor `name` as float32 constant data of exactly `shape`: float32 tensors are
    /// referenced in place, float16/bfloat16 ones (how most checkpoints ship) are widened.
    pub fn get_f32(&self, name: &str, shape: &[usize]) -> Result<ConstData> {
        match self.entries.get(name).map(|e| (e.dtype, &e.shape)) {
            Some((dt @ (ScalarType::Half | ScalarType::BFloat16), s)) if s == shape => match self.get(name, dt, shape)? {
                ConstData::Mapped(map, range) => Ok(ConstData::Widened { map, range, bf16: dt == ScalarType::BFloat16 }),
                raw => Ok(ConstData::owned(crate::graph::widen_halves(&raw.bytes(), dt == ScalarType::BFloat16))),
            },
            _ => self.get(name, ScalarType::Float, shape),
        }
    }

    /// Weights held in memory (generated or converted).
    pub fn insert(&mut self, name: &str, dtype: ScalarType, shape: &[usize], bytes: Vec<u8>) {
        self.entries.insert(name.into(), Entry { dtype, shape: shape.to_vec(), data: ConstData::owned(bytes) });
    }

    pub fn names(&self) -> BTreeSet<&str> {
        self.entries.keys().map(|s| s.as_str()).collect()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.entries.get(name).map(|e| e.shape.as_slice())
    }

    /// The tensor `name`, which must have exactly `dtype` and `shape`.
    pub fn get(&self, name: &str, dtype: ScalarType, shape: &[usize]) -> Result<ConstData> {
        let e = self.entries.get(name).ok_or_else(|| ExportError::Weight {
            name: name.into(),
            message: format!("missing from {}", self.source),
        })?;
        if e.dtype != dtype || e.shape != shape {
            return Err(ExportError::Weight {
                name: name.into(),
                message: format!("is {} {:?} in {}, the model needs {dtype} {shape:?}", e.dtype, e.shape, self.source),
            });
        }
        Ok(e.data.clone())
    }

    /// The tensor `name` as f32 values (for passes that rewrite weights).
    pub fn f32s(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let d = self.get(name, ScalarType::Float, shape)?;
        Ok(d.bytes().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// Writes the weights as a safetensors file (sorted by name, deterministic).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |e: &dyn std::fmt::Display| ExportError::Io { path: path.display().to_string(), message: e.to_string() };
        let mut names: Vec<&String> = self.entries.keys().collect();
        names.sort();
        let mut views = Vec::new();
        for n in names {
            let e = &self.entries[n];
            let dt = safetensors_dtype(e.dtype).ok_or_else(|| io(&format!("cannot save dtype {}", e.dtype)))?;
            views.push((n.clone(), e.shape.clone(), dt, e.data.bytes()));
        }
        let mut tensors = Vec::with_capacity(views.len());
        for (n, shape, dt, data) in &views {
            tensors.push((n.clone(), safetensors::tensor::TensorView::new(*dt, shape.clone(), data).map_err(|e| io(&e))?));
        }
        let bytes = safetensors::serialize(tensors, None).map_err(|e| io(&e))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes).map_err(|e| io(&e))?;
        std::fs::rename(&tmp, path).map_err(|e| io(&e))
    }
}
