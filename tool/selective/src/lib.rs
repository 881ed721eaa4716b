//! Selective build, in three steps:
//! 1. [`program_ops`]: the operators a `.pte` actually calls;
//! 2. [`select`]: the kernel for each (checked before anything compiles: a missing kernel
//!    fails the build with the full list, not a load error on the device);
//! 3. [`generate`]: a copy of a runner template whose `src/kernels.rs` registers exactly those
//!    kernels (by path, so the linker drops every other kernel), with a Cargo manifest
//!    rewritten by `toml_edit`; [`compile`] builds it with cargo and finds the binary through
//!    cargo's JSON messages (`cargo_metadata`).

mod compile;
mod generate;

use std::collections::BTreeSet;
use std::fmt;

pub use compile::{compile, lock_file, CompileOptions};
pub use generate::{bin_name, generate, kernels_rs, path_dependencies};

use rbuild_runtime::format::schema::InstructionArguments;
use rbuild_runtime::format::PteFile;

/// Ops the executor implements itself (no kernel to select).
const BUILTIN_OPS: &[&str] = &["executorch_prim::et_view.default"];

/// The pseudo-op [`program_ops`] lists for a program holding complex tensors: it selects the
/// kernels' `complex` feature (dtype-selective build; without it the arithmetic is left out).
pub const COMPLEX_DTYPES: &str = "dtype::complex";

/// ScalarType codes of ComplexHalf, ComplexFloat, ComplexDouble.
const COMPLEX_CODES: [i8; 3] = [8, 9, 10];

/// The operators called by any method of the program (`name.overload`), sorted, plus
/// `delegate::<id>` for each delegate the program holds whose CPU backend ships with the kernels
/// ([`rbuild_kernels::backend_catalog`], e.g. `delegate::XnnpackBackend`): selecting it links
/// that backend and nothing else does. Delegates a runner provides itself (GPU, NPU) are not
/// listed. [`COMPLEX_DTYPES`] when any tensor of the program is complex.
pub fn program_ops(pte: &[u8]) -> Result<BTreeSet<String>, String> {
    let file = PteFile::parse(pte).map_err(|e| e.to_string())?;
    let mut ops = BTreeSet::new();
    let backends = rbuild_kernels::backend_catalog();
    for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
        for d in plan.delegates.as_deref().unwrap_or(&[]) {
            let key = format!("{}{}", rbuild_kernels::DELEGATE_PREFIX, d.id.unwrap_or(""));
            if backends.iter().any(|(k, _)| *k == key) {
                ops.insert(key);
            }
        }
        let complex = plan.values.as_deref().unwrap_or(&[]).iter().any(|v| match &v.val {
            Some(rbuild_runtime::format::schema::KernelTypes::Tensor(t)) => COMPLEX_CODES.contains(&(t.scalar_type as i8)),
            _ => false,
        });
        if complex {
            ops.insert(COMPLEX_DTYPES.to_string());
        }
        let table = plan.operators.as_deref().unwrap_or(&[]);
        for chain in plan.chains.as_deref().unwrap_or(&[]) {
            for ins in chain.instructions.as_deref().unwrap_or(&[]) {
                if let Some(InstructionArguments::KernelCall(k)) = &ins.instr_args {
                    let op = usize::try_from(k.op_index).ok().and_then(|i| table.get(i));
                    let op = op.ok_or_else(|| format!("kernel call to operator {} out of range", k.op_index))?;
                    ops.insert(op.key());
                }
            }
        }
    }
    Ok(ops)
}

/// Operators no kernel implements.
#[derive(Clone, Debug, PartialEq)]
pub struct MissingKernels(pub Vec<String>);

impl fmt::Display for MissingKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no kernel for {} operator(s): {}", self.0.len(), self.0.join(", "))
    }
}

impl std::error::Error for MissingKernels {}

/// The kernel (op, Rust path) for each op, or every op without one.
pub fn select(ops: &BTreeSet<String>) -> Result<Vec<(String, String)>, MissingKernels> {
    let mut catalog = rbuild_kernels::catalog();
    catalog.extend(rbuild_kernels::backend_catalog());
    let mut selected = Vec::new();
    let mut missing = Vec::new();
    for op in ops {
        if BUILTIN_OPS.contains(&op.as_str()) {
            continue;
        }
        if op == COMPLEX_DTYPES {
            selected.push((op.clone(), "complex".to_string()));
            continue;
        }
        match catalog.iter().find(|(o, _)| o == op) {
            Some((o, p)) => selected.push((o.to_string(), p.to_string())),
            None => missing.push(op.clone()),
        }
    }
    if missing.is_empty() {
        Ok(selected)
    } else {
        Err(MissingKernels(missing))
    }
}

/// Every kernel and CPU delegate backend, with every dtype (for the all-kernels comparison
/// build).
pub fn all_kernels() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> =
        rbuild_kernels::catalog().into_iter().chain(rbuild_kernels::backend_catalog()).map(|(o, p)| (o.to_string(), p.to_string())).collect();
    all.push((COMPLEX_DTYPES.to_string(), "complex".to_string()));
    all
}
