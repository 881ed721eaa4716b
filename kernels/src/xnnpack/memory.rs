//! Activation memory: buffers assigned by liveness (a value's buffer goes back to the free
//! list after its last reader), within a byte limit.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::plan::{Buf, Elem};

/// Activation memory a delegate may allocate unless told otherwise (4 GiB; all of the address
/// space on 32-bit targets, where `4 << 30` would wrap to 0).
pub const DEFAULT_ACTIVATION_LIMIT: usize = if (usize::MAX as u64) < (4u64 << 30) { usize::MAX } else { (4u64 << 30) as usize };

pub struct Alloc {
    pub bufs: Vec<Buf>,
    free: Vec<usize>,
    /// The buffer holding each value, once written.
    pub slot: Vec<Option<usize>>,
    /// Activation bytes allocated so far, and the most allowed.
    bytes: usize,
    limit: usize,
}

impl Alloc {
    pub fn new(values: usize, limit: usize) -> Alloc {
        Alloc { bufs: Vec::new(), free: Vec::new(), slot: vec![None; values], bytes: 0, limit }
    }

    /// Checks that growing the activations by `more` bytes stays within the limit.
    pub fn charge(&mut self, more: usize) -> Result<(), String> {
        match self.bytes.checked_add(more) {
            Some(total) if total <= self.limit => {
                self.bytes = total;
                Ok(())
            }
            _ => Err(format!("activations need more than the {} MiB this delegate may allocate", self.limit >> 20)),
        }
    }

    /// A buffer for `len` elements of `elem`.
    pub fn take(&mut self, elem: Elem, len: usize) -> Result<usize, String> {
        // Best fit among free buffers of the same type, else the largest one grown, else new.
        let mut best: Option<(usize, usize)> = None;
        for (k, &b) in self.free.iter().enumerate() {
            if self.bufs[b].elem() != elem {
                continue;
            }
            let cap = self.bufs[b].len();
            let better = match best {
                None => true,
                Some((_, bc)) => {
                    let (fits, best_fits) = (cap >= len, bc >= len);
                    (fits && (!best_fits || cap < bc)) || (!fits && !best_fits && cap > bc)
                }
            };
            if better {
                best = Some((k, cap));
            }
        }
        let size = match elem {
            Elem::I8 => len,
            _ => len.saturating_mul(4),
        };
        match best {
            Some((k, _)) => {
                let b = self.free.swap_remove(k);
                self.charge(size.saturating_sub(self.bufs[b].bytes()))?;
                self.bufs[b].grow(len)?;
                Ok(b)
            }
            None => {
                self.charge(size)?;
                self.bufs.push(Buf::new(elem, len)?);
                Ok(self.bufs.len() - 1)
            }
        }
    }

    /// Buffer `b` is free for later values.
    pub fn release(&mut self, b: usize) {
        if !self.free.contains(&b) {
            self.free.push(b);
        }
    }

    /// A buffer that value `slot` keeps for good (a constant read as an activation).
    pub fn push_pinned(&mut self, slot: usize, buf: Buf) -> usize {
        self.bufs.push(buf);
        let b = self.bufs.len() - 1;
        self.slot[slot] = Some(b);
        b
    }
}
