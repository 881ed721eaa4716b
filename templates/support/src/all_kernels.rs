//! The kernel table of a runner built without selection: every kernel rbuild has.
//!
//! Each template's `src/kernels.rs` re-exports this; rbuild's selective build replaces that
//! file, in the runner crate it generates, with a table of just the program's operators. The
//! interface both keep: `registry()`, `backends()` (CPU delegate backends) and `OPS` (the op
//! names it registers).

use rbuild_kernels::{optimized, portable};
use rbuild_runtime::{KernelEntry, KernelRegistry};

/// Every kernel: portable ones, with optimized twins replacing them.
pub fn registry() -> KernelRegistry {
    rbuild_kernels::registry()
}

/// Every CPU delegate backend (`XnnpackBackend`).
pub fn backends() -> rbuild_runtime::backend::BackendRegistry {
    let mut b = rbuild_runtime::backend::BackendRegistry::new();
    b.register(Box::new(rbuild_kernels::xnnpack::XnnpackBackend));
    b
}

/// The op names [`registry`] registers, in its order (derived at compile time from the same
/// tables, so the two cannot drift).
pub const OPS: &[&str] = &ALL_OPS;
// `registry()` registers portable::KERNEL_SETS in order, then optimized::KERNELS; a repeated op
// replaces the earlier entry in place, so the name list is the tables' entries minus repeats.
const N_TABLES: usize = portable::KERNEL_SETS.len() + 1;
const ALL_OPS: [&str; count_unique()] = unique_ops();

const fn table(t: usize) -> &'static [KernelEntry] {
    if t < portable::KERNEL_SETS.len() {
        portable::KERNEL_SETS[t]
    } else {
        optimized::KERNELS
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether the op of entry `i` of table `t` already appeared in an earlier entry.
const fn seen_before(t: usize, i: usize) -> bool {
    let op = table(t)[i].op;
    let mut u = 0;
    while u <= t {
        let entries = table(u);
        let end = if u == t { i } else { entries.len() };
        let mut j = 0;
        while j < end {
            if str_eq(entries[j].op, op) {
                return true;
            }
            j += 1;
        }
        u += 1;
    }
    false
}

const fn count_unique() -> usize {
    let (mut n, mut t) = (0, 0);
    while t < N_TABLES {
        let mut i = 0;
        while i < table(t).len() {
            if !seen_before(t, i) {
                n += 1;
            }
            i += 1;
        }
        t += 1;
    }
    n
}

const fn unique_ops<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let (mut n, mut t) = (0, 0);
    while t < N_TABLES {
        let mut i = 0;
        while i < table(t).len() {
            if !seen_before(t, i) {
                out[n] = table(t)[i].op;
                n += 1;
            }
            i += 1;
        }
        t += 1;
    }
    out
}
