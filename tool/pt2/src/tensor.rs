//! Weight and constant views: a storage member's bytes seen through `as_strided(sizes,
//! strides, storage_offset)`, as `torch.export.save` writes them (one raw file per
//! deduplicated storage, so tied weights are two names on one storage).

use std::borrow::Cow;

use rbuild_runtime::ScalarType;

use crate::error::{ErrorContext, ErrorKind, Result};
use crate::schema::{Layout, SymInt, TensorMeta};

/// A tensor whose bytes live in the archive (in place for stored members).
#[derive(Debug, Clone)]
pub struct TensorView<'a> {
    /// The fully qualified name (`features.0.0.weight`).
    pub name: String,
    pub dtype: ScalarType,
    pub sizes: Vec<usize>,
    /// In elements, as PyTorch counts them.
    pub strides: Vec<usize>,
    /// In elements from the start of the storage.
    pub storage_offset: usize,
    /// The whole storage (possibly shared with other views, possibly empty).
    pub storage: &'a [u8],
    /// The zip member holding the storage (full name).
    pub storage_member: String,
}

impl<'a> TensorView<'a> {
    /// Checks `meta` against the storage: a known dtype, strided layout, static non-negative
    /// sizes/strides/offset, and every element inside the storage.
    pub(crate) fn new(
        ctx: &ErrorContext,
        name: &str,
        meta: &TensorMeta,
        storage: &'a [u8],
        storage_member: &str,
    ) -> Result<Self> {
        let fail =
            |kind, message: String| ctx.member_error(storage_member, kind, format!("tensor '{name}': {message}"));
        let dtype = meta.dtype.scalar_type().ok_or_else(|| {
            fail(ErrorKind::Unsupported, format!("dtype {} has no rbuild equivalent", meta.dtype.schema_name()))
        })?;
        if meta.layout != Layout::Strided {
            return Err(fail(ErrorKind::Unsupported, format!("layout {:?} is not strided", meta.layout)));
        }
        let static_value = |v: &SymInt, what: &str| match v {
            SymInt::Int(n) => {
                usize::try_from(*n).map_err(|_| fail(ErrorKind::Tensor, format!("{what} {n} is negative")))
            }
            SymInt::Expr(e) => Err(fail(ErrorKind::Tensor, format!("{what} is symbolic ({})", e.expr_str))),
        };
        let sizes = meta.sizes.iter().map(|s| static_value(s, "size")).collect::<Result<Vec<_>>>()?;
        let strides = meta.strides.iter().map(|s| static_value(s, "stride")).collect::<Result<Vec<_>>>()?;
        let storage_offset = static_value(&meta.storage_offset, "storage offset")?;
        if sizes.len() != strides.len() {
            return Err(fail(ErrorKind::Tensor, format!("{} sizes but {} strides", sizes.len(), strides.len())));
        }
        // Stride-0 (expanded) views may be far larger than their storage; their element
        // bytes must still be addressable, so that `nbytes` and `contiguous_bytes` cannot overflow.
        let addressable = sizes
            .iter()
            .try_fold(dtype.size(), |bytes, &size| bytes.checked_mul(size))
            .is_some_and(|bytes| bytes <= isize::MAX as usize);
        if !addressable {
            return Err(fail(ErrorKind::Tensor, format!("sizes {sizes:?} of {} exceed the address space", dtype.name())));
        }
        let view = TensorView {
            name: name.to_string(),
            dtype,
            sizes,
            strides,
            storage_offset,
            storage,
            storage_member: storage_member.to_string(),
        };
        match view.storage_bytes_needed() {
            Some(needed) if needed <= storage.len() as u128 => Ok(view),
            needed => Err(fail(
                ErrorKind::Tensor,
                format!(
                    "view (sizes {:?}, strides {:?}, offset {}, {}) needs {} bytes but the storage has {}",
                    view.sizes,
                    view.strides,
                    view.storage_offset,
                    dtype.name(),
                    needed.map_or("more than 2^128".to_string(), |n| n.to_string()),
                    storage.len()
                ),
            )),
        }
    }

    /// Bytes of storage the view reaches (0 for an empty tensor); `None` on overflow.
    fn storage_bytes_needed(&self) -> Option<u128> {
        if self.sizes.contains(&0) {
            return Some(0);
        }
        let mut last = self.storage_offset as u128;
        for (&size, &stride) in self.sizes.iter().zip(&self.strides) {
            last = last.checked_add((size as u128 - 1).checked_mul(stride as u128)?)?;
        }
        last.checked_add(1)?.checked_mul(self.dtype.size() as u128)
    }

    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }

    /// Bytes of the tensor's elements (not of its storage).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    /// Row-major with no gaps (dims of size 1 may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&size, &stride) in self.sizes.iter().zip(&self.strides).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected *= size;
        }
        true
    }

    /// The elements in row-major order: borrowed from the storage when contiguous, gathered
    /// into a new buffer otherwise (offset views are borrowed too).
    pub fn contiguous_bytes(&self) -> Cow<'a, [u8]> {
        let element = self.dtype.size();
        if self.numel() == 0 {
            return Cow::Borrowed(&[]);
        }
        let start = self.storage_offset * element;
        if self.is_contiguous() {
            return Cow::Borrowed(&self.storage[start..start + self.nbytes()]);
        }
        let mut out = Vec::with_capacity(self.nbytes());
        let rank = self.sizes.len();
        let mut index = vec![0usize; rank];
        // An odometer over the indices; `new` checked every reachable element is in bounds.
        loop {
            let offset: usize =
                self.storage_offset + index.iter().zip(&self.strides).map(|(i, s)| i * s).sum::<usize>();
            out.extend_from_slice(&self.storage[offset * element..(offset + 1) * element]);
            let mut dim = rank;
            loop {
                if dim == 0 {
                    return Cow::Owned(out);
                }
                dim -= 1;
                index[dim] += 1;
                if index[dim] < self.sizes[dim] {
                    break;
                }
                index[dim] = 0;
            }
        }
    }

    /// Whether both views read the same storage (tied weights).
    pub fn shares_storage_with(&self, other: &TensorView<'_>) -> bool {
        self.storage_member == other.storage_member
            && std::ptr::eq(self.storage.as_ptr(), other.storage.as_ptr())
            && self.storage.len() == other.storage.len()
    }
}
