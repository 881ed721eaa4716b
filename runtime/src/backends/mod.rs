//! Delegate backends that ship with the runtime.
//!
//! Each backend implements [`crate::backend::Backend`] and is registered by the firmware or host
//! program that wants it; nothing here is registered automatically.

pub mod ethosu;
pub mod gpu;
pub mod xnnpack;
