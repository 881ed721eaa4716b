//! Constant values of a payload: bytes found by named-data key, by offset into the payload's
//! constant region, or (old `XN00` payloads) inline; decoded into the element types the
//! kernels take, with every length and scale checked.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::{Quant, Scales, XnnDatatype, XnnGraph, XnnValue};

/// The program's named data, by key.
pub type NamedData<'a> = &'a dyn Fn(&str) -> Option<&'a [u8]>;

/// Constant bytes of the graph's values.
pub struct Constants<'a, 'f> {
    pub graph: &'a XnnGraph,
    pub region: &'a [u8],
    pub named: &'f dyn Fn(&str) -> Option<&'a [u8]>,
}

fn f32_at(c: &[u8]) -> f32 {
    f32::from_le_bytes([c[0], c[1], c[2], c[3]])
}

fn widen_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

impl<'a> Constants<'a, '_> {
    /// The first `want` bytes of constant entry `index`.
    pub fn entry(&self, index: u32, want: usize, what: &str) -> Result<&'a [u8], String> {
        let c = self.graph.constants.get(index as usize).ok_or_else(|| format!("{what}: constant entry {index} out of range"))?;
        let bytes: &'a [u8] = if let Some(inline) = &c.inline {
            inline.as_slice()
        } else if let Some(key) = &c.named_key {
            (self.named)(key).ok_or_else(|| format!("{what}: named data '{key}' is not in the program"))?
        } else {
            let start = usize::try_from(c.offset).ok();
            let end = start.and_then(|s| s.checked_add(usize::try_from(c.size).ok()?));
            match (start, end) {
                (Some(s), Some(e)) if e <= self.region.len() => &self.region[s..e],
                _ => return Err(format!("{what}: constant {index} (offset {}, size {}) lies outside the payload's {} bytes of constant data", c.offset, c.size, self.region.len())),
            }
        };
        if bytes.len() < want {
            return Err(format!("{what}: constant {index} holds {} bytes, {want} needed", bytes.len()));
        }
        Ok(&bytes[..want])
    }

    /// All the bytes value `id` needs (its element count at its datatype's width).
    fn value_bytes(&self, id: u32, v: &XnnValue) -> Result<&'a [u8], String> {
        let what = format!("value {id}");
        let c = v.constant.ok_or_else(|| format!("{what} must be a constant"))?;
        let bits = v.numel().checked_mul(v.datatype.bits()).ok_or_else(|| format!("{what}: dims {:?} are too large", v.dims))?;
        self.entry(c, bits.div_ceil(8), &what)
    }

    /// A float constant (fp32, fp16 or bf16) as f32 values (exact).
    pub fn floats(&self, id: u32, v: &XnnValue) -> Result<Vec<f32>, String> {
        let b = self.value_bytes(id, v)?;
        match v.datatype {
            XnnDatatype::Fp32 => Ok(b.chunks_exact(4).map(f32_at).collect()),
            XnnDatatype::Fp16 => Ok(b.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()),
            XnnDatatype::Bf16 => Ok(b.chunks_exact(2).map(|c| widen_bf16(u16::from_le_bytes([c[0], c[1]]))).collect()),
            d => Err(format!("value {id}: expected a float constant, got {}", d.name())),
        }
    }

    /// The first `len` bytes of a constant (packed int4 rows are padded to whole bytes).
    pub fn raw(&self, id: u32, v: &XnnValue, len: usize) -> Result<&'a [u8], String> {
        let what = format!("value {id}");
        let c = v.constant.ok_or_else(|| format!("{what} must be a constant"))?;
        self.entry(c, len, &what)
    }

    /// Block scales of a per-channel-group value, as the bf16 values ExecuTorch hands XNNPACK
    /// (f32 scales are rounded to bf16 as ExecuTorch's compiler does).
    pub fn group_scales(&self, id: u32, v: &XnnValue, want: usize) -> Result<Vec<f32>, String> {
        let Quant::PerChannelGroup { scales, .. } = &v.quant else {
            return Err(format!("value {id}: expected per-channel-group quantization"));
        };
        let out: Vec<f32> = match scales {
            Scales::InlineBf16(h) => h.iter().map(|&h| widen_bf16(h)).collect(),
            Scales::Buffer { index, count } => {
                let b = self.entry(*index, (*count as usize).saturating_mul(2), &format!("value {id} block scales"))?;
                b.chunks_exact(2).map(|c| widen_bf16(u16::from_le_bytes([c[0], c[1]]))).collect()
            }
            Scales::Inline(f) => f.iter().map(|&x| widen_bf16(((x * 1.003_891_05f32).to_bits() >> 16) as u16)).collect(),
        };
        if out.len() != want {
            return Err(format!("value {id}: {} block scales, {want} expected", out.len()));
        }
        if out.iter().any(|s| !s.is_finite()) {
            return Err(format!("value {id}: block scales must be finite"));
        }
        Ok(out)
    }

    /// An 8-bit quantized constant in the int8 representation (quint8 shifted by 128).
    pub fn i8s(&self, id: u32, v: &XnnValue) -> Result<Vec<i8>, String> {
        let flip = if v.datatype == XnnDatatype::QUInt8 { 0x80 } else { 0 };
        Ok(self.value_bytes(id, v)?.iter().map(|&b| (b ^ flip) as i8).collect())
    }

    pub fn i32s(&self, id: u32, v: &XnnValue) -> Result<Vec<i32>, String> {
        Ok(self.value_bytes(id, v)?.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// Per-channel scales (or the one per-tensor scale), finite and positive.
    pub fn scales(&self, id: u32, v: &XnnValue) -> Result<Vec<f32>, String> {
        let scales = match &v.quant {
            Quant::PerChannel { scales, .. } => scales,
            Quant::PerTensor { scale, .. } => return Ok(vec![*scale]),
            q => return Err(format!("value {id}: quantization {q:?} is not supported here")),
        };
        let out = match scales {
            Scales::Inline(s) => s.clone(),
            Scales::InlineBf16(h) => h.iter().map(|&h| widen_bf16(h)).collect(),
            Scales::Buffer { index, count } => {
                let b = self.entry(*index, (*count as usize).saturating_mul(4), &format!("value {id} scales"))?;
                b.chunks_exact(4).map(f32_at).collect()
            }
        };
        if out.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(format!("value {id}: scales must be finite and positive"));
        }
        Ok(out)
    }
}
