//! rbuild's image-classifier runner: decode an image, preprocess it as torchvision's ImageNet
//! eval pipeline does, run an ExecuTorch-compatible program and rank the classes.
//!
//! The binary (`src/main.rs`) is the command line; this library holds the parts tests check.

pub mod classify;
pub mod decode;
pub mod kernels;
pub mod preprocess;
pub mod program;
