//! Delegates: backends that run a whole subgraph from an opaque blob (NPUs, GPUs).
//!
//! One trait, registered by delegate id string (`BackendDelegate.id`). CPU kernels are not a
//! delegate. A backend's `execute` sees the DelegateCall's values through the same
//! [`KernelArgs`] API kernels use: flattened inputs, then outputs.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use crate::kernel::{KernelArgs, KernelContext, KernelResult};

/// A compile spec handed to `init` (key, raw value bytes).
#[derive(Clone, Copy, Debug)]
pub struct CompileSpec<'a> {
    pub key: &'a str,
    pub value: &'a [u8],
}

/// What a backend sees at init time besides its blob.
pub struct BackendInitContext<'a> {
    /// Looks up a named-data blob of the program (e.g. packed weights).
    pub named_data: &'a dyn Fn(&str) -> Option<&'a [u8]>,
}

pub trait Backend {
    /// The delegate id this backend handles, e.g. `EthosUBackend`.
    fn id(&self) -> &str;
    fn is_available(&self) -> bool {
        true
    }
    /// Prepares a delegate from its processed blob.
    fn init(
        &self,
        ctx: &BackendInitContext<'_>,
        processed: &[u8],
        specs: &[CompileSpec<'_>],
    ) -> Result<Box<dyn DelegateHandle>, String>;
}

/// An initialized delegate; dropped (destroyed) with its method.
pub trait DelegateHandle {
    fn execute(&mut self, ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult;
}

#[derive(Default)]
pub struct BackendRegistry {
    backends: Vec<Box<dyn Backend>>,
}

impl BackendRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, b: Box<dyn Backend>) {
        self.backends.retain(|x| x.id() != b.id());
        self.backends.push(b);
    }

    pub fn get(&self, id: &str) -> Option<&dyn Backend> {
        self.backends.iter().find(|b| b.id() == id && b.is_available()).map(|b| b.as_ref())
    }
}
