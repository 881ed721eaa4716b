//! rbuild's runtime: loads ExecuTorch `.pte` programs (identifier `ET12`) and executes them.
//!
//! `no_std` + `alloc`. The flow: [`format`] reads the file zero-copy into typed views
//! (and writes it back), [`executor`] turns a method into a [`frame::Frame`] of values and
//! planned memory and runs its instructions, calling kernels through the [`kernel`] signature and
//! delegates through [`backend`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod backend;
pub mod backends;
pub mod buffer;
pub mod decimal;
pub mod executor;
pub mod format;
pub mod frame;
#[cfg(feature = "harness")]
pub mod harness;
pub mod kernel;
pub mod scalar_type;
pub mod tensor;
pub mod value;

pub use executor::{LoadError, Method, MethodError, Program};
pub use kernel::{KernelArgs, KernelContext, KernelEntry, KernelError, KernelRegistry, KernelResult, TensorMut, TensorRef};
pub use scalar_type::ScalarType;
pub use value::{Scalar, Value};
