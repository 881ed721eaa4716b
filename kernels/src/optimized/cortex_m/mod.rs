//! Cortex-M int8 kernels: the fused `rbuild::q*` operators whose work is int8 dot products
//! (1×1 convolutions and linear layers, over 90 % of MobileNetV2's multiply-accumulates), on
//! the Armv7E-M / Armv8-M DSP extension: `SXTB16` widens two int8 lanes of a word to int16 and
//! `SMLAD` does two 16×16 multiply-accumulates in one instruction (CMSIS-NN's approach).
//!
//! Every kernel is bit-exact with its portable twin in [`crate::portable::qint8`]: the same
//! integer sums (the input zero point folded into the bias, `Σ(x − z)·w = Σx·w − z·Σw`, exact
//! in wrapping i32) and the same requantization. Shapes without a fast path go to the twin.
//!
//! The DSP instructions are inline assembly only on Arm builds with the `arm-dsp` feature (the
//! firmware template turns it on for cores that have the extension: Cortex-M4/M7/M33/M55/M85);
//! everywhere else [`dsp`] supplies plain-Rust twins of the same instructions, so host tests
//! check the algorithm and the firmware's bit-exact run against the host checks the assembly.
//! These kernels are not in the host [`crate::registry`]; [`crate::catalog_cortex_m`] puts them
//! in firmware builds.

pub mod dot;
pub mod dsp;

rbuild_runtime::kernel_table! {
    "rbuild::qconv2d.out" => dot::qconv2d_out,
    "rbuild::qlinear.out" => dot::qlinear_out,
}
