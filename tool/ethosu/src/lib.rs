//! Arm Ethos-U lowering for rbuild.
//!
//! An int8 subgraph ([`graph::Int8Graph`]) → a TFLite flatbuffer ([`tflite`]) → Vela
//! ([`vela`], run as an external tool with accelerator/system config/memory mode) → Vela's raw
//! output ([`npz`]) → an `EthosUBackend` delegate blob ([`lower`], layout in
//! [`rbuild_runtime::backends::ethosu::blob`]) plus Vela's performance summary.
//!
//! [`reference`] evaluates a [`graph::Int8Graph`] with TFLite's int8 semantics and the CPU
//! kernels' requantization, to check a partition's translation against the CPU lowering.

pub mod graph;
pub mod lower;
pub mod npz;
pub mod partition;
pub mod reference;
pub mod testnet;
pub mod tflite;
pub mod vela;

pub use rbuild_runtime::backends::ethosu::blob;
