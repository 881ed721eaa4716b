//! rbuild's firmware runner for Cortex-M boards: runs the embedded program once on the embedded
//! test input and reports over semihosting, in the protocol `rbuild verify` reads:
//!
//! ```text
//! top-5: 1:283 (3.1416) 2:… …
//! RBUILD_OUTPUT index=0 dtype=float32 shape=1,1000 hex=…
//! RBUILD_STATS cycles=… cycles_source=… arena_bytes=… arena.sram=… heap_peak=…
//! ```
//!
//! then exits with status 0; any failure (program load, missing kernel, allocation, panic,
//! fault) prints `error: …` and exits non-zero. `src/board.rs` (the program, its input, the
//! planned arenas and their regions), `src/kernels.rs` and `link.x` are generated per build.
#![no_std]
#![no_main]

extern crate alloc;

mod board;
mod heap;
mod kernels;
mod report;
mod semihosting;
mod startup;

use alloc::vec::Vec;
use core::fmt::Write;

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::decimal::Dec;
use rbuild_runtime::{KernelContext, Program};

#[global_allocator]
static HEAP: heap::Heap = heap::Heap::new();

/// A planned-memory arena placed in a memory region by the generated linker script.
pub struct Arena {
    pub region: &'static str,
    pub bytes: &'static mut [u8],
}

/// One input tensor embedded at build time.
pub struct Input {
    pub dtype: rbuild_runtime::ScalarType,
    pub shape: &'static [usize],
    pub bytes: &'static [u8],
}

/// Bytes aligned for any element type: the runtime views constants and inputs in place.
#[repr(C, align(16))]
pub struct Aligned<T: ?Sized>(pub T);

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let mut out = semihosting::Console::new();
    let _ = writeln!(out, "error: panic: {info}");
    out.flush();
    semihosting::exit(2)
}

fn fail(what: core::fmt::Arguments) -> ! {
    let mut out = semihosting::Console::new();
    let _ = writeln!(out, "error: {what}");
    out.flush();
    semihosting::exit(1)
}

/// The delegates' backends: the Ethos-U NPU when the program has Ethos-U delegates.
#[cfg(not(feature = "ethos-u"))]
fn backends() -> BackendRegistry {
    BackendRegistry::new()
}

#[cfg(feature = "ethos-u")]
fn backends() -> BackendRegistry {
    use rbuild_runtime::backends::ethosu::driver::{DriverConfig, EthosU};
    use rbuild_runtime::backends::ethosu::regs::Mmio;
    use rbuild_runtime::backends::ethosu::{EthosUBackend, EthosUConfig};
    // SAFETY: NPU_BASE is the board file's Ethos-U register block; this firmware has no other
    // user of it, and the registry (and so the driver) lives for the whole run.
    let regs = unsafe { Mmio::new(board::NPU_BASE) };
    let npu = EthosU::new(regs, DriverConfig::default());
    let mut r = BackendRegistry::new();
    // The driver polls STATUS until the run ends (no NPU interrupt handler: nothing else runs).
    r.register(alloc::boxed::Box::new(EthosUBackend::new(npu, EthosUConfig::default())));
    r
}

#[no_mangle]
extern "C" fn firmware_main() -> ! {
    startup::start_counters();
    let program = Program::load(board::program()).unwrap_or_else(|e| fail(format_args!("cannot load the embedded program: {e}")));
    let registry = kernels::registry();
    // SAFETY: called once, before anything else uses the arena sections.
    let arenas = unsafe { board::arenas() };
    let placement: Vec<(&'static str, usize)> = arenas.iter().map(|a| (a.region, a.bytes.len())).collect();
    let mut method = program
        .load_method_in(board::METHOD, &registry, &backends(), arenas.into_iter().map(|a| a.bytes).collect())
        .unwrap_or_else(|e| fail(format_args!("cannot load method '{}': {e}", board::METHOD)));
    for (i, input) in board::INPUTS.iter().enumerate() {
        method
            .set_input_tensor(i, input.dtype, input.shape, core::hint::black_box(input.bytes))
            .unwrap_or_else(|e| fail(format_args!("input {i}: {e}")));
    }

    let (dwt0, tick0) = (startup::dwt_cycles(), startup::systick_ticks());
    method.execute(&mut KernelContext { threads: 1 }).unwrap_or_else(|e| fail(format_args!("execution failed: {e}")));
    let (dwt1, tick1) = (startup::dwt_cycles(), startup::systick_ticks());

    let mut out = semihosting::Console::new();
    report::top_k(&mut out, &method, board::TOP_K);
    report::outputs(&mut out, &method).unwrap_or_else(|e| fail(format_args!("{e}")));
    let dwt = dwt1.wrapping_sub(dwt0);
    let (cycles, source) = if dwt != 0 { (u64::from(dwt), "dwt") } else { (tick1 - tick0, "systick") };
    // 64-bit counts through Dec: `{}` of a u64 links the u64 division helpers.
    let _ = write!(
        out,
        "RBUILD_STATS cycles={} cycles_source={source} dwt_cycles={dwt} systick_ticks={} program_instructions={} kernels={} program_region={} program_bytes={}",
        Dec::unsigned(cycles),
        Dec::unsigned(tick1 - tick0),
        method.instruction_count(),
        kernels::OPS.len(),
        board::PROGRAM_REGION,
        board::program().len()
    );
    report::arenas(&mut out, &placement);
    let _ = writeln!(out, " heap_bytes={} heap_peak={}", HEAP.capacity(), HEAP.peak());
    out.flush();
    semihosting::exit(0)
}
