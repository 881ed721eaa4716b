//! The export pipeline: a model described through [`builder::GraphBuilder`] becomes a graph of
//! Core ATen operators ([`graph`]), is optimized by [`passes`], memory-planned by [`plan`] and
//! written as an ExecuTorch `.pte` by [`emit`].
//!
//! ```text
//! models/ ──► builder (shape inference) ──► Graph ──► passes ──► plan ──► emit ──► .pte
//! ```

pub mod builder;
pub mod delegation;
pub mod emit;
pub mod error;
pub mod eval;
pub mod graph;
pub mod int8_quality;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod promote;
pub mod shape;
mod shape_create;
mod shape_dynamic;
mod shape_elementwise;
mod shape_index;
mod shape_layout;
mod shape_norm;
mod shape_pad;
mod shape_qint8;
mod shape_reduce;
mod shape_spatial;
mod shape_views;
pub mod weights;

pub use builder::GraphBuilder;
pub use error::ExportError;
pub use graph::{Arg, ConstData, Dim, Graph, Node, TensorMeta, ValueId};
