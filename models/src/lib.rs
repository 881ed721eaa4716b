//! Model definitions: Rust functions that describe a model on a [`GraphBuilder`] from a
//! state dict ([`Weights`]).

pub use rbuild_export::weights::Weights;
pub use rbuild_export::GraphBuilder;
