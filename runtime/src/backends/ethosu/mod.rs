//! Arm Ethos-U NPU delegate (`EthosUBackend`): the delegate blob, a register-level driver and
//! the [`crate::backend::Backend`] that runs Vela-compiled subgraphs.
//!
//! - [`blob`]: the ExecuTorch `EthosUBackend` blob layout (parse, no_std; write, for the tool).
//! - [`regs`]: register offsets/bits and the [`regs::NpuRegisters`] access trait; [`regs::Mmio`]
//!   for hardware.
//! - [`driver`]: reset / program / run / wait / fault reporting.
//! - [`model`]: a register-level model that checks the programming sequence. **No NPU simulator
//!   is available here: the driver is verified against this model, not against an NPU or FVP.**
//! - [`EthosUBackend`]: copies inputs into the scratch arena per the blob's IO table, runs the
//!   command stream with base pointers {weights, scratch, fast scratch}, copies outputs back.
//!
//! Firmware use: `EthosU::new(unsafe { Mmio::new(NPU_BASE) }, DriverConfig { .. })`, wrapped in
//! an `EthosUBackend` with `.with_idle(wfi)` and registered in the `BackendRegistry`. The driver
//! polls STATUS between idle calls; an enabled NPU interrupt whose handler only returns is enough
//! to wake `wfi` (STATUS.irq_raised stays set until the driver clears it through CMD). A handler
//! that owns the driver can call [`driver::EthosU::on_irq`] instead. The weights and command
//! stream are copied 16-aligned into RAM at init (the NPU reads them through BASEP0/QBASE); the
//! NPU must be able to reach that RAM (on Corstone-300: SRAM/DDR, not the TCMs).

// The workspace's rust-version is 1.85; `is_multiple_of` is 1.87+.
#![allow(clippy::manual_is_multiple_of)]

pub mod blob;
pub mod driver;
pub mod model;
pub mod payload;
pub mod regs;

use alloc::boxed::Box;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use crate::kernel::{KernelArgs, KernelContext, KernelResult};
use crate::kerr;

use blob::{BlockData, VelaIo};
use driver::{EthosU, BASE_FAST_SCRATCH, BASE_SCRATCH, BASE_WEIGHTS};
use regs::NpuRegisters;

/// The delegate id ExecuTorch's Arm backend uses.
pub const ETHOSU_BACKEND_ID: &str = "EthosUBackend";

/// A 16-byte-aligned byte buffer (the NPU requires 16-byte aligned base pointers; `Vec<u8>` and
/// 32-bit Arm `u128` only guarantee less).
struct Buf16 {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buf16 {
    fn zeroed(len: usize) -> Buf16 {
        let raw = vec![0u8; len + 16];
        let start = raw.as_ptr().align_offset(16);
        Buf16 { raw, start, len }
    }
    fn from_bytes(b: &[u8]) -> Buf16 {
        let mut x = Buf16::zeroed(b.len());
        x.as_mut().copy_from_slice(b);
        x
    }
    fn as_ref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// Platform settings for the backend.
#[derive(Clone, Copy, Debug)]
pub struct EthosUConfig {
    /// Size of the fast-scratch area (Vela's `--arena-cache-size` for Dedicated_Sram; 0 for
    /// Shared_Sram / Sram_Only, where BASEP2 is unused).
    pub fast_scratch_size: usize,
    /// CPU address → address the NPU sees (identity on Corstone-300 SRAM/DDR; TCMs are not
    /// visible to the NPU).
    pub npu_address: fn(usize) -> u64,
}

impl Default for EthosUConfig {
    fn default() -> Self {
        EthosUConfig { fast_scratch_size: 0, npu_address: |a| a as u64 }
    }
}

/// The NPU shared by every delegate of every loaded method.
pub type SharedNpu<R> = Rc<RefCell<EthosU<R>>>;

/// `EthosUBackend`: register it in the runtime's `BackendRegistry`.
pub struct EthosUBackend<R: NpuRegisters + 'static> {
    npu: SharedNpu<R>,
    cfg: EthosUConfig,
    /// Called between STATUS polls while the NPU runs (e.g. `wfi`).
    idle: fn(),
}

impl<R: NpuRegisters + 'static> EthosUBackend<R> {
    pub fn new(npu: EthosU<R>, cfg: EthosUConfig) -> Self {
        EthosUBackend { npu: Rc::new(RefCell::new(npu)), cfg, idle: || {} }
    }
    pub fn with_idle(mut self, idle: fn()) -> Self {
        self.idle = idle;
        self
    }
    /// The driver, e.g. for the NPU interrupt handler to call [`EthosU::on_irq`].
    pub fn npu(&self) -> SharedNpu<R> {
        self.npu.clone()
    }
}

/// A block's bytes (inline, or looked up in the program's named data), copied 16-aligned.
fn block_bytes(ctx: &BackendInitContext<'_>, block: &str, d: BlockData<'_>) -> Result<Buf16, String> {
    match d {
        BlockData::Inline(b) => Ok(Buf16::from_bytes(b)),
        BlockData::External(key) => (ctx.named_data)(key)
            .map(Buf16::from_bytes)
            .ok_or_else(|| format!("EthosU delegate blob: block `{block}` names external data `{key}`, which the program lacks")),
    }
}

impl<R: NpuRegisters + 'static> Backend for EthosUBackend<R> {
    fn id(&self) -> &str {
        ETHOSU_BACKEND_ID
    }

    fn init(&self, ctx: &BackendInitContext<'_>, processed: &[u8], _specs: &[CompileSpec<'_>]) -> Result<Box<dyn DelegateHandle>, String> {
        let b = blob::parse(processed).map_err(|e| format!("{e}"))?;
        let cmd = block_bytes(ctx, "cmd_data", b.cmd_data)?;
        let weights = block_bytes(ctx, "weight_data", b.weight_data)?;
        payload::parse(cmd.as_ref()).map_err(|m| format!("EthosU delegate blob: block `cmd_data`: {m}"))?;
        let scratch_len = b.scratch_size as usize;
        for (block, ios) in [("inputs", &b.inputs), ("outputs", &b.outputs)] {
            for (i, io) in ios.iter().enumerate() {
                if io.region as usize != BASE_SCRATCH {
                    return Err(format!(
                        "EthosU delegate blob: block `{block}` tensor {i} lives in region {}, only the scratch region {BASE_SCRATCH} is supported",
                        io.region
                    ));
                }
                let end = io.byte_len().unwrap_or(usize::MAX).saturating_add(io.offset as usize);
                if end > scratch_len {
                    return Err(format!(
                        "EthosU delegate blob: block `{block}` tensor {i} ends at byte {end}, past the scratch size {scratch_len}"
                    ));
                }
            }
        }
        Ok(Box::new(EthosUHandle {
            npu: self.npu.clone(),
            cfg: self.cfg,
            idle: self.idle,
            cmd,
            weights,
            scratch: Buf16::zeroed(scratch_len),
            fast: Buf16::zeroed(self.cfg.fast_scratch_size),
            inputs: b.inputs,
            outputs: b.outputs,
        }))
    }
}

struct EthosUHandle<R: NpuRegisters + 'static> {
    npu: SharedNpu<R>,
    cfg: EthosUConfig,
    idle: fn(),
    cmd: Buf16,
    weights: Buf16,
    scratch: Buf16,
    fast: Buf16,
    inputs: Vec<VelaIo>,
    outputs: Vec<VelaIo>,
}

impl<R: NpuRegisters + 'static> DelegateHandle for EthosUHandle<R> {
    fn execute(&mut self, _ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let (ni, no) = (self.inputs.len(), self.outputs.len());
        if args.len() != ni + no {
            return Err(kerr!("EthosUBackend: delegate call has {} arguments, the blob's IO table {ni} inputs + {no} outputs", args.len()));
        }
        for (i, io) in self.inputs.iter().enumerate() {
            let t = args.tensor(i)?;
            let src = t.bytes();
            let n = io.byte_len().unwrap_or(0);
            if src.len() != n {
                return Err(kerr!(
                    "EthosUBackend: input {i} has {} bytes, the IO table expects {n} (shape {:?} × {})",
                    src.len(),
                    io.shape,
                    io.elem_size
                ));
            }
            let at = io.offset as usize;
            self.scratch.as_mut()[at..at + n].copy_from_slice(src);
        }
        let mut bases = [0u64; 3];
        let addr = self.cfg.npu_address;
        bases[BASE_WEIGHTS] = addr(self.weights.as_ref().as_ptr() as usize);
        bases[BASE_SCRATCH] = addr(self.scratch.as_mut().as_mut_ptr() as usize);
        bases[BASE_FAST_SCRATCH] = if self.fast.len == 0 { 0 } else { addr(self.fast.as_mut().as_mut_ptr() as usize) };
        let cmd_addr = addr(self.cmd.as_ref().as_ptr() as usize);
        {
            let mut npu = self.npu.try_borrow_mut().map_err(|_| kerr!("EthosUBackend: the NPU is already in use (re-entrant call)"))?;
            let idle = self.idle;
            npu.run_payload(self.cmd.as_ref(), cmd_addr, &bases, &mut || idle()).map_err(|e| kerr!("EthosUBackend: {e}"))?;
        }
        for (j, io) in self.outputs.iter().enumerate() {
            let mut t = args.out(ni + j)?;
            let dst = t.bytes_mut();
            let n = io.byte_len().unwrap_or(0);
            if dst.len() != n {
                return Err(kerr!(
                    "EthosUBackend: output {j} has {} bytes, the IO table gives {n} (shape {:?} × {})",
                    dst.len(),
                    io.shape,
                    io.elem_size
                ));
            }
            let at = io.offset as usize;
            dst.copy_from_slice(&self.scratch.as_ref()[at..at + n]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
