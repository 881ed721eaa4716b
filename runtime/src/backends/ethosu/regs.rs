//! Ethos-U register interface: offsets, bits, and the access trait the driver programs through.
//!
//! Register offsets and bit positions are those of the Ethos-U55/U65 programmer's interface as
//! published in Arm's `ethos-u-core-driver` (`src/ethosu55_interface.h`, `src/ethosu_device_u55_u65.c`)
//! and in the Linux `accel/ethosu` driver header (`drivers/accel/ethosu/ethosu_device.h`:
//! `NPU_REG_*`, `STATUS_*`, `CMD_*`, `RESET_*`). Only the registers the inference sequence uses
//! are named here. U85 keeps ID/STATUS/CMD/RESET/QBASE/QSIZE/BASEP at the same offsets.

/// Register offsets (bytes from the NPU's APB base).
pub mod reg {
    pub const ID: u32 = 0x0000;
    pub const STATUS: u32 = 0x0004;
    pub const CMD: u32 = 0x0008;
    pub const RESET: u32 = 0x000C;
    /// Command-stream base address, low / high word.
    pub const QBASE: u32 = 0x0010;
    pub const QBASE_HI: u32 = 0x0014;
    /// Read offset of the command-stream parser (progress, for fault reports).
    pub const QREAD: u32 = 0x0018;
    pub const QCONFIG: u32 = 0x001C;
    /// Command-stream length in bytes.
    pub const QSIZE: u32 = 0x0020;
    pub const PROT: u32 = 0x0024;
    pub const CONFIG: u32 = 0x0028;
    pub const REGIONCFG: u32 = 0x003C;
    /// AXI_LIMIT0..3 at 0x40..0x4C (U55/U65; MEM_ATTR0..3 on U85).
    pub const AXI_LIMIT0: u32 = 0x0040;
    /// Base pointer `n` (0..8): low word at `0x80 + 8n`, high word at `0x84 + 8n`.
    pub const fn basep(n: u32) -> u32 {
        0x0080 + 8 * n
    }
    pub const fn basep_hi(n: u32) -> u32 {
        0x0084 + 8 * n
    }
    pub const BASEP_COUNT: u32 = 8;
}

/// STATUS bits.
pub mod status {
    /// 1 = running, 0 = stopped.
    pub const STATE_RUNNING: u32 = 1 << 0;
    pub const IRQ_RAISED: u32 = 1 << 1;
    /// An AXI bus error.
    pub const BUS_STATUS: u32 = 1 << 2;
    /// A soft reset is still in progress.
    pub const RESET_STATUS: u32 = 1 << 3;
    pub const CMD_PARSE_ERROR: u32 = 1 << 4;
    pub const CMD_END_REACHED: u32 = 1 << 5;
    pub const PMU_IRQ_RAISED: u32 = 1 << 6;
    pub const WD_FAULT: u32 = 1 << 7;
    pub const ECC_FAULT: u32 = 1 << 8;
    /// Any of these after a run means the NPU must be reset before the next one.
    pub const FAULTS: u32 = BUS_STATUS | CMD_PARSE_ERROR | WD_FAULT | ECC_FAULT;
}

/// CMD bits.
pub mod cmd {
    pub const TRANSITION_TO_RUNNING: u32 = 1 << 0;
    pub const CLEAR_IRQ: u32 = 1 << 1;
    /// Q-channel enables: when set the NPU may gate its clock / power down when idle.
    pub const CLOCK_Q_ENABLE: u32 = 1 << 2;
    pub const POWER_Q_ENABLE: u32 = 1 << 3;
    /// The bits a write to CMD must preserve (the core driver's `NPU_CMD_PWR_CLK_MASK`).
    pub const PWR_CLK_MASK: u32 = CLOCK_Q_ENABLE | POWER_Q_ENABLE;
}

/// RESET bits: the privilege / security level the NPU takes after the reset.
pub mod reset {
    pub const PENDING_CPL_PRIVILEGED: u32 = 1 << 0;
    pub const PENDING_CSL_SECURE: u32 = 1 << 1;
}

/// 32-bit register access. Implemented by [`Mmio`] on hardware and by test models.
pub trait NpuRegisters {
    fn read(&mut self, offset: u32) -> u32;
    fn write(&mut self, offset: u32, value: u32);
}

/// Memory-mapped registers at a fixed base address.
pub struct Mmio {
    base: *mut u32,
}

impl Mmio {
    /// # Safety
    /// `base` must be the address of an Ethos-U register block (at least 0x100 bytes of device
    /// memory mapped for volatile 32-bit access) that nothing else programs while this value lives.
    pub const unsafe fn new(base: usize) -> Mmio {
        Mmio { base: base as *mut u32 }
    }
}

impl NpuRegisters for Mmio {
    fn read(&mut self, offset: u32) -> u32 {
        debug_assert!(offset % 4 == 0 && offset < 0x1000);
        // SAFETY: `new`'s contract: base points at the NPU register block; offsets are the
        // word-aligned register offsets of [`reg`], all inside that block.
        unsafe { core::ptr::read_volatile(self.base.add((offset / 4) as usize)) }
    }
    fn write(&mut self, offset: u32, value: u32) {
        debug_assert!(offset % 4 == 0 && offset < 0x1000);
        // SAFETY: as in `read`.
        unsafe { core::ptr::write_volatile(self.base.add((offset / 4) as usize), value) }
    }
}
