//! Tensor metadata as the executor keeps it: dtype, sizes, dim order and where the bytes live.

use crate::ScalarType;

/// ExecuTorch's kTensorDimensionLimit.
pub const MAX_RANK: usize = 16;

/// Sizes of a tensor, stored inline so that views can copy them freely.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: u8,
}

impl Shape {
    pub const SCALAR: Shape = Shape { dims: [0; MAX_RANK], rank: 0 };

    /// Fails (None) above MAX_RANK.
    pub fn new(dims: &[usize]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut s = Shape::SCALAR;
        s.dims[..dims.len()].copy_from_slice(dims);
        s.rank = dims.len() as u8;
        Some(s)
    }

    pub fn as_slice(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Element count; None on overflow.
    pub fn checked_numel(&self) -> Option<usize> {
        self.as_slice().iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }

    /// Contiguous (row-major) strides in elements.
    pub fn contiguous_strides(&self) -> [usize; MAX_RANK] {
        let mut st = [0usize; MAX_RANK];
        let mut acc = 1usize;
        for i in (0..self.rank()).rev() {
            st[i] = acc;
            acc = acc.saturating_mul(self.dims[i]);
        }
        st
    }
}

impl core::ops::Index<usize> for Shape {
    type Output = usize;
    fn index(&self, i: usize) -> &usize {
        &self.as_slice()[i]
    }
}

impl core::fmt::Debug for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.as_slice())
    }
}

/// Dimension order, outermost first; contiguous is 0..rank.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DimOrder {
    order: [u8; MAX_RANK],
    rank: u8,
}

impl DimOrder {
    pub fn contiguous(rank: usize) -> DimOrder {
        let mut order = [0u8; MAX_RANK];
        for (i, o) in order.iter_mut().enumerate().take(rank.min(MAX_RANK)) {
            *o = i as u8;
        }
        DimOrder { order, rank: rank.min(MAX_RANK) as u8 }
    }

    /// Validates that `order` is a permutation of 0..len.
    pub fn new(order: &[u8]) -> Option<DimOrder> {
        if order.len() > MAX_RANK {
            return None;
        }
        let mut seen = [false; MAX_RANK];
        for &o in order {
            let o = o as usize;
            if o >= order.len() || seen[o] {
                return None;
            }
            seen[o] = true;
        }
        let mut d = DimOrder::contiguous(0);
        d.order[..order.len()].copy_from_slice(order);
        d.rank = order.len() as u8;
        Some(d)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.order[..self.rank as usize]
    }

    pub fn is_contiguous(&self) -> bool {
        self.as_slice().iter().enumerate().all(|(i, &o)| i == o as usize)
    }
}

impl core::fmt::Debug for DimOrder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.as_slice())
    }
}

/// TensorShapeDynamism of the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dynamism {
    Static,
    /// `sizes` in the program is an upper bound; memory is planned at that bound.
    DynamicBound,
}

/// Where a tensor's bytes live: a buffer of the frame (constants, an arena, an owned block) at
/// an offset, or nowhere (an empty tensor, or an input not bound yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    None,
    Buffer { index: u32, offset: usize },
}

#[derive(Clone, Debug)]
pub struct TensorImpl {
    pub dtype: ScalarType,
    pub shape: Shape,
    pub dim_order: DimOrder,
    pub dynamism: Dynamism,
    /// Bytes available at `storage` (the planned upper bound).
    pub capacity: usize,
    pub storage: Storage,
}

impl TensorImpl {
    pub fn nbytes(&self) -> usize {
        self.shape.numel().saturating_mul(self.dtype.size())
    }
}
