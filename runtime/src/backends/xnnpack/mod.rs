//! ExecuTorch's XNNPACK delegate payload (`XnnpackBackend`): the format, not the kernels.
//!
//! A payload is an optional `XH00` header ([`header`]) followed by the `XNNGraph` flatbuffer
//! (identifier `XN01`, or the older `XN00`) and a constant-data region. [`graph`] decodes the
//! flatbuffer into owned, validated [`graph::XnnGraph`] types: every value id a node names
//! exists, every constant index is in range, shapes fit in memory. The executor lives in
//! `rbuild-kernels` (`xnnpack` module), next to the NHWC kernels it runs on.

pub mod graph;
pub mod header;
pub mod writer;

pub use graph::{decode_graph, ConstantRef, NodeKind, NodeParams, Quant, Scales, XnnDatatype, XnnGraph, XnnNode, XnnValue};
pub use header::{split_payload, XnnHeader};
pub use writer::{encode_graph, write_payload};

/// The delegate id (`BackendDelegate.id`) ExecuTorch's `XnnpackPartitioner` emits.
pub const XNNPACK_BACKEND_ID: &str = "XnnpackBackend";

/// The value id XNNPACK uses for "none" (an absent bias).
pub const INVALID_VALUE_ID: u32 = u32::MAX;

/// A payload decoded into its graph plus the constant region the graph's offsets point into.
pub struct XnnPayload<'a> {
    pub graph: XnnGraph,
    pub constants: &'a [u8],
}

/// Header split plus graph decode: everything the executor needs from the blob.
pub fn parse_payload(blob: &[u8]) -> Result<XnnPayload<'_>, alloc::string::String> {
    let (fb, constants) = split_payload(blob)?;
    let graph = decode_graph(fb)?;
    Ok(XnnPayload { graph, constants })
}

