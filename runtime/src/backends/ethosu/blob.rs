//! The `EthosUBackend` delegate blob: Vela's compiled network as a sequence of named blocks.
//!
//! Layout (ExecuTorch `backends/arm/arm_vela.py` writes it, `backends/arm/runtime/VelaBinStream.cpp`
//! reads it; summarized in the project's executorch-facts §7):
//!
//! ```text
//! block := name[16] (NUL-padded ASCII) | size: u32 LE (unpadded data length) | external: u8 |
//!          reserved[11] (zero) | data[size] | zero padding to a multiple of 16
//! blob  := vela_bin_stream (size 0) cmd_data weight_data scratch_size inputs outputs vela_end_stream
//! ```
//!
//! `scratch_size` holds one u32. `inputs` / `outputs` hold an i32 count, then per tensor 9 i32:
//! the shape as 6 dimensions (leading 1s), the element size in bytes, the byte offset of the
//! tensor inside its region, and the region (base-pointer index; 1 = scratch).
//! A block whose `external` flag is set holds, instead of its data, the key (Vela output's
//! sha256, as text) of a named-data entry of the program that does.
//!
//! [`parse`] is zero-copy and bounds-checked: every error names the block and byte offset.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Block names, in file order.
pub const BLOCK_ORDER: [&str; 7] = ["vela_bin_stream", "cmd_data", "weight_data", "scratch_size", "inputs", "outputs", "vela_end_stream"];
/// Bytes before a block's data.
pub const HEADER_LEN: usize = 32;
/// Dimensions stored per IO tensor.
pub const IO_DIMS: usize = 6;

/// The data of a block: inline bytes, or the named-data key of external bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockData<'a> {
    Inline(&'a [u8]),
    External(&'a str),
}

/// One tensor of the IO tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VelaIo {
    pub shape: [i32; IO_DIMS],
    pub elem_size: i32,
    /// Byte offset inside the region.
    pub offset: i32,
    /// Base-pointer index (region) the offset is relative to.
    pub region: i32,
}

impl VelaIo {
    /// Bytes the tensor occupies (product of the shape × element size), or None on a
    /// negative dimension or overflow.
    pub fn byte_len(&self) -> Option<usize> {
        let mut n = usize::try_from(self.elem_size).ok()?;
        for &d in &self.shape {
            n = n.checked_mul(usize::try_from(d).ok()?)?;
        }
        Some(n)
    }
}

/// A parsed blob, borrowing from the bytes it was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VelaBlob<'a> {
    pub cmd_data: BlockData<'a>,
    pub weight_data: BlockData<'a>,
    pub scratch_size: u32,
    pub inputs: Vec<VelaIo>,
    pub outputs: Vec<VelaIo>,
}

/// What a blob to write holds; `external` blocks carry their named-data key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VelaBlobBuf {
    pub cmd_data: Vec<u8>,
    /// Weights inline, or `None` when `weight_key` names them in the program's named data.
    pub weight_data: Vec<u8>,
    pub weight_key: Option<String>,
    pub scratch_size: u32,
    pub inputs: Vec<VelaIo>,
    pub outputs: Vec<VelaIo>,
}

/// Why a blob is malformed: the block (or the expected block), its byte offset, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobError {
    pub block: &'static str,
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for BlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EthosU delegate blob: block `{}` at byte {}: {}", self.block, self.offset, self.message)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BlobError {}

fn err(block: &'static str, offset: usize, message: impl Into<String>) -> BlobError {
    BlobError { block, offset, message: message.into() }
}

fn pad16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

fn rd_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses a blob; blocks must appear in [`BLOCK_ORDER`].
pub fn parse(blob: &[u8]) -> Result<VelaBlob<'_>, BlobError> {
    let mut pos = 0usize;
    let mut datas: [Option<BlockData<'_>>; 7] = [None; 7];
    for (k, &want) in BLOCK_ORDER.iter().enumerate() {
        if blob.len() < pos + HEADER_LEN {
            return Err(err(want, pos, alloc::format!("truncated header: {} bytes left, a header needs {HEADER_LEN}", blob.len() - pos)));
        }
        let name_bytes = &blob[pos..pos + 16];
        let end = name_bytes.iter().position(|&c| c == 0).unwrap_or(16);
        if name_bytes[end..].iter().any(|&c| c != 0) {
            return Err(err(want, pos, "block name is not NUL-padded"));
        }
        let name = core::str::from_utf8(&name_bytes[..end]).map_err(|_| err(want, pos, "block name is not UTF-8"))?;
        if name != want {
            return Err(err(want, pos, alloc::format!("found block `{name}` where `{want}` belongs")));
        }
        let size = u32::from_le_bytes([blob[pos + 16], blob[pos + 17], blob[pos + 18], blob[pos + 19]]) as usize;
        let external = match blob[pos + 20] {
            0 => false,
            1 => true,
            x => return Err(err(want, pos + 20, alloc::format!("external flag is {x}, not 0 or 1"))),
        };
        let data_at = pos + HEADER_LEN;
        let padded = pad16(size);
        if blob.len() < data_at || blob.len() - data_at < padded {
            return Err(err(
                want,
                data_at,
                alloc::format!(
                    "data of {size} bytes (padded {padded}) runs past the end ({} bytes left)",
                    blob.len().saturating_sub(data_at)
                ),
            ));
        }
        let data = &blob[data_at..data_at + size];
        datas[k] = Some(if external {
            if !matches!(want, "cmd_data" | "weight_data") {
                return Err(err(want, pos + 20, "only cmd_data and weight_data may be external"));
            }
            let key = core::str::from_utf8(data).map_err(|_| err(want, data_at, "external key is not UTF-8"))?;
            if key.is_empty() {
                return Err(err(want, data_at, "external block with an empty key"));
            }
            BlockData::External(key)
        } else {
            BlockData::Inline(data)
        });
        pos = data_at + padded;
    }
    if pos != blob.len() {
        return Err(err("vela_end_stream", pos, alloc::format!("{} trailing bytes after the end block", blob.len() - pos)));
    }
    let inline = |k: usize| match datas[k] {
        Some(BlockData::Inline(d)) => Ok(d),
        _ => Err(err(BLOCK_ORDER[k], 0, "must be inline")),
    };
    if !inline(0)?.is_empty() {
        return Err(err("vela_bin_stream", 0, "start block must be empty"));
    }
    let ss = inline(3)?;
    if ss.len() != 4 {
        return Err(err("scratch_size", 0, alloc::format!("holds {} bytes, expected a 4-byte u32", ss.len())));
    }
    let scratch_size = u32::from_le_bytes([ss[0], ss[1], ss[2], ss[3]]);
    let inputs = parse_ios("inputs", inline(4)?)?;
    let outputs = parse_ios("outputs", inline(5)?)?;
    for (block, ios) in [("inputs", &inputs), ("outputs", &outputs)] {
        for (i, io) in ios.iter().enumerate() {
            if io.byte_len().is_none() || io.offset < 0 || io.region < 0 || io.region > 7 {
                return Err(err(block, 0, alloc::format!("tensor {i}: invalid shape/elem_size/offset/region {io:?}")));
            }
        }
    }
    Ok(VelaBlob {
        cmd_data: datas[1].unwrap_or(BlockData::Inline(&[])),
        weight_data: datas[2].unwrap_or(BlockData::Inline(&[])),
        scratch_size,
        inputs,
        outputs,
    })
}

fn parse_ios(block: &'static str, d: &[u8]) -> Result<Vec<VelaIo>, BlobError> {
    if d.len() < 4 {
        return Err(err(block, 0, "missing the tensor count"));
    }
    let count = rd_i32(d, 0);
    let per = (IO_DIMS + 3) * 4;
    let count_u = usize::try_from(count).map_err(|_| err(block, 0, alloc::format!("negative tensor count {count}")))?;
    if count_u.checked_mul(per).and_then(|n| n.checked_add(4)) != Some(d.len()) {
        return Err(err(
            block,
            0,
            alloc::format!("count {count} needs {} bytes, block holds {}", 4 + count_u.saturating_mul(per), d.len()),
        ));
    }
    Ok((0..count_u)
        .map(|i| {
            let at = 4 + i * per;
            let mut shape = [0i32; IO_DIMS];
            for (j, s) in shape.iter_mut().enumerate() {
                *s = rd_i32(d, at + 4 * j);
            }
            VelaIo { shape, elem_size: rd_i32(d, at + 24), offset: rd_i32(d, at + 28), region: rd_i32(d, at + 32) }
        })
        .collect())
}

fn push_block(out: &mut Vec<u8>, name: &str, data: &[u8], external: bool) {
    let mut hdr = [0u8; HEADER_LEN];
    hdr[..name.len()].copy_from_slice(name.as_bytes());
    hdr[16..20].copy_from_slice(&(data.len() as u32).to_le_bytes());
    hdr[20] = external as u8;
    out.extend_from_slice(&hdr);
    out.extend_from_slice(data);
    out.resize(out.len() + pad16(data.len()) - data.len(), 0);
}

fn io_bytes(ios: &[VelaIo]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + ios.len() * 36);
    v.extend_from_slice(&(ios.len() as i32).to_le_bytes());
    for io in ios {
        for d in io.shape.iter().chain([io.elem_size, io.offset, io.region].iter()) {
            v.extend_from_slice(&d.to_le_bytes());
        }
    }
    v
}

/// Serializes a blob in [`BLOCK_ORDER`].
pub fn write(b: &VelaBlobBuf) -> Vec<u8> {
    let mut out = Vec::new();
    push_block(&mut out, "vela_bin_stream", &[], false);
    push_block(&mut out, "cmd_data", &b.cmd_data, false);
    match &b.weight_key {
        Some(k) => push_block(&mut out, "weight_data", k.as_bytes(), true),
        None => push_block(&mut out, "weight_data", &b.weight_data, false),
    }
    push_block(&mut out, "scratch_size", &b.scratch_size.to_le_bytes(), false);
    push_block(&mut out, "inputs", &io_bytes(&b.inputs), false);
    push_block(&mut out, "outputs", &io_bytes(&b.outputs), false);
    push_block(&mut out, "vela_end_stream", &[], false);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn sample() -> VelaBlobBuf {
        VelaBlobBuf {
            cmd_data: (0..40u8).collect(),
            weight_data: vec![7; 33],
            weight_key: None,
            scratch_size: 4096,
            inputs: vec![VelaIo { shape: [1, 1, 8, 8, 3, 1], elem_size: 1, offset: 0, region: 1 }],
            outputs: vec![VelaIo { shape: [1, 1, 1, 1, 1, 10], elem_size: 1, offset: 256, region: 1 }],
        }
    }

    #[test]
    fn round_trip_and_layout() {
        let b = sample();
        let bytes = write(&b);
        assert_eq!(bytes.len() % 16, 0);
        // first block: name, size 0, no data
        assert_eq!(&bytes[..15], b"vela_bin_stream");
        assert_eq!(&bytes[16..32], &[0u8; 16]);
        // cmd_data header at 32, data 40 bytes padded to 48
        assert_eq!(&bytes[32..40], b"cmd_data");
        assert_eq!(u32::from_le_bytes(bytes[48..52].try_into().unwrap()), 40);
        assert_eq!(&bytes[64..104], &b.cmd_data[..]);
        assert_eq!(&bytes[104..112], &[0u8; 8]);
        assert_eq!(&bytes[112..123], b"weight_data");
        let p = parse(&bytes).unwrap();
        assert_eq!(p.cmd_data, BlockData::Inline(&b.cmd_data));
        assert_eq!(p.weight_data, BlockData::Inline(&b.weight_data));
        assert_eq!(p.scratch_size, 4096);
        assert_eq!(p.inputs, b.inputs);
        assert_eq!(p.outputs, b.outputs);
        assert_eq!(p.outputs[0].byte_len(), Some(10));
        assert_eq!(bytes[bytes.len() - 32..bytes.len() - 17], *b"vela_end_stream");
    }

    #[test]
    fn external_weights() {
        let mut b = sample();
        b.weight_key = Some("ab".repeat(32));
        let bytes = write(&b);
        let p = parse(&bytes).unwrap();
        assert_eq!(p.weight_data, BlockData::External(&b.weight_key.as_ref().unwrap()[..]));
        let at = 112 + 20;
        assert_eq!(bytes[at], 1);
    }

    #[test]
    fn malformed_blocks_are_named() {
        let bytes = write(&sample());
        // truncated in the middle of cmd_data
        let e = parse(&bytes[..70]).unwrap_err();
        assert_eq!(e.block, "cmd_data");
        // wrong block name where weight_data belongs
        let mut bad = bytes.clone();
        bad[112..123].copy_from_slice(b"weight_dato");
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.block, "weight_data");
        assert!(e.to_string().contains("weight_dato"), "{e}");
        // IO count not matching the block size
        let mut bad = bytes.clone();
        let inputs_at = bad.windows(6).position(|w| w == b"inputs").unwrap();
        bad[inputs_at + 32] = 2;
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.block, "inputs");
        // bad external flag
        let mut bad = bytes.clone();
        bad[32 + 20] = 9;
        assert_eq!(parse(&bad).unwrap_err().block, "cmd_data");
        // trailing garbage
        let mut bad = bytes.clone();
        bad.extend_from_slice(&[0; 16]);
        assert_eq!(parse(&bad).unwrap_err().block, "vela_end_stream");
        // every truncation errors, none panics
        for n in 0..bytes.len() {
            assert!(parse(&bytes[..n]).is_err());
        }
    }
}
