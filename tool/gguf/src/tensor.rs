//! Tensor infos: name, dims, type and data offset, checked as llama.cpp's `gguf.cpp` checks
//! them, and the data section's layout (alignment, bounds, no overlaps).

use std::collections::HashMap;

use crate::reader::ByteCursor;
use crate::types::GgmlType;

/// ggml's GGML_MAX_DIMS: a tensor info holds at most this many dims.
pub const MAX_DIMS: usize = 4;

/// The fewest bytes a tensor info takes: name length, n_dims, type, offset.
const MIN_INFO_BYTES: usize = 8 + 4 + 4 + 8;

/// One tensor's description from the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF (ggml `ne`) order: `dims[0]` varies fastest, so a row-major `[rows, cols]`
    /// matrix is stored as `[cols, rows]`. Zero to four dims, each may be 0 (as in llama.cpp).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Byte offset of the tensor's data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// The shape in PyTorch's row-major order: `dims` reversed.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Elements in the tensor (1 for zero dims). Exact for every tensor of a parsed file,
    /// whose sizes were checked; saturates for hand-made infos that overflow.
    pub fn n_elements(&self) -> usize {
        self.dims.iter().fold(1usize, |n, &d| n.saturating_mul(usize::try_from(d).unwrap_or(usize::MAX)))
    }

    /// Bytes of data: whole blocks of the type.
    pub fn n_bytes(&self) -> usize {
        (self.n_elements() / self.ggml_type.block_size()).saturating_mul(self.ggml_type.type_size())
    }

    /// Elements per row (`dims[0]`; 1 for a zero-dim tensor).
    fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }
}

/// Reads `count` tensor infos, checking each one's dims, type and size, and that names are
/// unique. Returns them with an index by name.
pub(crate) fn read_tensor_infos(
    cursor: &mut ByteCursor<'_>,
    count: u64,
) -> Result<(Vec<TensorInfo>, HashMap<String, usize>), String> {
    let count = cursor.check_count(count, MIN_INFO_BYTES, "the tensor count")?;
    let mut tensors = Vec::with_capacity(count);
    let mut index = HashMap::with_capacity(count);
    for position in 0..count {
        let info = read_tensor_info(cursor, position)?;
        if let Some(first) = index.insert(info.name.clone(), position) {
            return Err(format!("tensor name '{}' appears twice (tensors {first} and {position})", info.name));
        }
        tensors.push(info);
    }
    Ok((tensors, index))
}

fn read_tensor_info(cursor: &mut ByteCursor<'_>, position: usize) -> Result<TensorInfo, String> {
    let name = cursor.string("a tensor name").map_err(|e| format!("tensor info {position}: {e}"))?;
    let in_tensor = |e: String| format!("tensor '{name}': {e}");
    let n_dims = cursor.u32("its dimension count").map_err(in_tensor)?;
    if n_dims as usize > MAX_DIMS {
        return Err(format!("tensor '{name}' has {n_dims} dims; GGUF allows at most {MAX_DIMS}"));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for axis in 0..n_dims {
        let dim = cursor.u64("a dim").map_err(in_tensor)?;
        // ggml stores dims as int64_t.
        if dim > i64::MAX as u64 {
            return Err(format!("tensor '{name}' dim {axis} is {dim}, more than the largest int64"));
        }
        dims.push(dim);
    }
    let type_id = cursor.u32("its type").map_err(in_tensor)?;
    let ggml_type = GgmlType::from_id(type_id)
        .ok_or_else(|| format!("tensor '{name}' has type id {type_id}, which is not a ggml type this reader knows"))?;
    let offset = cursor.u64("its data offset").map_err(in_tensor)?;
    let info = TensorInfo { name, dims, ggml_type, offset };
    check_size(&info)?;
    Ok(info)
}

/// The element count must fit an int64 and a usize, rows must be whole blocks, and the byte
/// size must fit a usize.
fn check_size(info: &TensorInfo) -> Result<(), String> {
    let name = &info.name;
    let elements = info
        .dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d).filter(|&n| n <= i64::MAX as u64))
        .filter(|&n| usize::try_from(n).is_ok())
        .ok_or_else(|| format!("tensor '{name}' with dims {:?} has more elements than this machine can address", info.dims))?;
    let ty = info.ggml_type;
    if info.row_len() % ty.block_size() as u64 != 0 {
        return Err(format!(
            "tensor '{name}' of type {ty} has rows of {} elements, not a multiple of the block size {}",
            info.row_len(),
            ty.block_size()
        ));
    }
    (elements / ty.block_size() as u64)
        .checked_mul(ty.type_size() as u64)
        .filter(|&bytes| usize::try_from(bytes).is_ok())
        .ok_or_else(|| format!("tensor '{name}' with dims {:?} is too large for this machine", info.dims))?;
    Ok(())
}

/// Where the data section starts: the end of the header rounded up to `alignment`.
pub(crate) fn data_section_start(header_end: usize, alignment: usize) -> Result<usize, String> {
    header_end
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| format!("the data section start overflows (header ends at byte {header_end})"))
}

/// Every tensor's offset is aligned, its bytes lie inside the file, and no two tensors share
/// bytes.
pub(crate) fn check_layout(tensors: &[TensorInfo], alignment: usize, data_start: usize, file_len: usize) -> Result<(), String> {
    if tensors.is_empty() {
        return Ok(());
    }
    if data_start > file_len {
        return Err(format!("the data section would start at byte {data_start}, past the end of the file ({file_len} bytes)"));
    }
    let data_len = (file_len - data_start) as u64;
    let mut ranges = Vec::with_capacity(tensors.len());
    for info in tensors {
        let name = &info.name;
        if info.offset % alignment as u64 != 0 {
            return Err(format!("tensor '{name}' has data offset {}, not a multiple of the alignment {alignment}", info.offset));
        }
        let n_bytes = info.n_bytes() as u64;
        let end = info.offset.checked_add(n_bytes).filter(|&end| end <= data_len).ok_or_else(|| {
            format!(
                "tensor '{name}' ({n_bytes} bytes at data offset {}) extends past the end of the file (the data section holds {data_len} bytes)",
                info.offset
            )
        })?;
        if n_bytes > 0 {
            ranges.push((info.offset, end, name));
        }
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((start_a, end_a, name_a), (start_b, end_b, name_b)) = (pair[0], pair[1]);
        if end_a > start_b {
            return Err(format!(
                "tensors '{name_a}' (data bytes {start_a}..{end_a}) and '{name_b}' (data bytes {start_b}..{end_b}) overlap"
            ));
        }
    }
    Ok(())
}
