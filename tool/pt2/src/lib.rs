//! Reader for `torch.export.save` archives (`.pt2`, torch ≥ 2.8, export schema 8.x), with no
//! Python and no unpickling.
//!
//! - [`Pt2Archive`] opens the zip (memory-mapped; stored members are viewed in place, deflated
//!   ones inflated), checks `archive_format`/`byteorder`, and hands out members.
//! - [`schema`] holds serde types for the serialized `ExportedProgram` (graph nodes and every
//!   `Argument` kind, tensor metadata, the graph signature, `range_constraints`) and the
//!   payload configs. Serde's dtype numbers are not ExecuTorch's: [`schema::SerdeDtype`] maps
//!   them to [`rbuild_runtime::ScalarType`].
//! - [`ExportedModel`] is one program resolved: each graph placeholder classified
//!   ([`GraphInput`]: user input, parameter, buffer, tensor constant, …) with parameters,
//!   buffers and constants as [`TensorView`]s into the archive; user inputs and outputs with
//!   their dtype and [`Dim`]s (static, or a symbol with its `range_constraints` bounds;
//!   `max: None` is unbounded and left to the caller); buffer mutations (output → buffer).
//! - [`TensorView`]: dtype, sizes, strides, storage offset and the storage bytes (shared by
//!   tied weights); [`TensorView::contiguous_bytes`] copies only strided views.
//!
//! Every error is a [`Pt2Error`] naming the archive and the member involved.
//!
//! ```no_run
//! use rbuild_pt2::{Dim, GraphInput, Pt2Archive};
//!
//! let archive = Pt2Archive::open("model.pt2")?;
//! let model = archive.default_model()?;
//! for input in &model.inputs {
//!     for dim in &input.dims {
//!         if let Dim::Dynamic { symbol, min, max, .. } = dim {
//!             println!("{}: {symbol} in {min}..={max:?}", input.name);
//!         }
//!     }
//! }
//! for (fqn, weight) in model.parameters() {
//!     let bytes = weight.contiguous_bytes(); // borrowed from the mapped file when contiguous
//!     println!("{fqn}: {} {:?}, {} bytes", weight.dtype.name(), weight.sizes, bytes.len());
//! }
//! for node in &model.graph().nodes {
//!     // `aten::conv2d.default`, with arguments by schema name (ATen defaults omitted).
//!     let _ = (node.op_name(), node.input("stride"));
//! }
//! if let Some(GraphInput::Buffer { fqn, persistent, .. }) = model.graph_input("b_running_mean") {
//!     println!("{fqn} persistent={persistent}");
//! }
//! # Ok::<(), rbuild_pt2::Pt2Error>(())
//! ```

pub mod archive;
pub mod error;
pub mod lower;
pub mod model;
pub mod schema;
pub mod tensor;

pub use archive::{PayloadKind, Pt2Archive, DEFAULT_MODEL};
pub use error::{ErrorKind, Pt2Error, Result};
pub use lower::{exceptions, is_mapped, lower, mapped_targets, unmapped_targets, ImportReport, LowerError, LowerOptions, LoweredProgram};
pub use model::{
    payload_view, BufferMutation, Dim, ExportedModel, GraphInput, InPlaceBufferWrite, UserInputMutation, UserTensor,
};
pub use tensor::TensorView;
