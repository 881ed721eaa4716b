//! A register-level Ethos-U driver: soft reset, program a command stream and its base
//! pointers, start, wait (polling or after an interrupt), and report faults.
//!
//! The sequence follows Arm's `ethos-u-core-driver` (`ethosu_driver.c` / `ethosu_device_u55_u65.c`,
//! functions `ethosu_dev_soft_reset`, `ethosu_request_power`, `ethosu_dev_run_command_stream`,
//! `ethosu_dev_handle_interrupt`, `ethosu_release_power`), re-implemented from its documented
//! behaviour:
//!
//! 1. per payload (as `ethosu_invoke`): soft reset (write RESET with the pending
//!    privilege/security level, poll until `STATUS.reset_status` clears), read ID and CONFIG,
//!    write the platform's QCONFIG / REGIONCFG / AXI limits, check each OPTIMIZER_CONFIG of the
//!    payload against CONFIG/ID; then for each COMMAND_STREAM:
//! 2. disable the power Q-channel in CMD (clock Q-channel enabled) so the NPU stays powered;
//! 3. write QBASE (low, high), QSIZE, then BASEP0..n (low, high) — 0 = weights, 1 = scratch
//!    (arena), 2 = fast scratch;
//! 4. write CMD = (CMD & Q-channel bits) | transition_to_running_state;
//! 5. wait until STATUS shows `irq_raised` (or the NPU stopped), clear the IRQ via
//!    CMD.clear_irq, and check `bus_status`, `cmd_parse_error`, `wd_fault`, `ecc_fault` and
//!    `cmd_end_reached`, and that QREAD reached QSIZE; on a fault, soft reset again so the next
//!    inference starts clean;
//! 6. re-enable the power Q-channel.
//!
//! No Ethos-U simulator is available to this project, so this driver is tested against
//! [`super::model::RegisterModel`], which checks the sequence above, not against an NPU.

use core::fmt;

use alloc::string::String;

use super::payload::{self, Action};
use super::regs::{cmd, reg, reset, status, NpuRegisters};

/// Base-pointer indices the Vela command stream uses (ExecuTorch's EthosUBackend order).
pub const BASE_WEIGHTS: usize = 0;
pub const BASE_SCRATCH: usize = 1;
pub const BASE_FAST_SCRATCH: usize = 2;

/// Everything that can go wrong talking to the NPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NpuError {
    /// STATUS.reset_status did not clear within the poll budget.
    ResetTimeout { status: u32 },
    /// A run was requested while the NPU reports running.
    Busy { status: u32 },
    /// An address the NPU reads is not 16-byte aligned (what, address).
    Misaligned { what: &'static str, addr: u64 },
    /// The command stream is empty or not a whole number of 32-bit words.
    BadCommandStream { len: usize },
    /// More base pointers than the NPU has.
    TooManyBases { count: usize },
    /// The NPU did not finish within the poll budget; QREAD shows how far it got.
    Timeout { status: u32, qread: u32 },
    /// The run ended with fault bits set or without reaching the end of the command stream.
    Fault { status: u32, qread: u32 },
    /// The IRQ came but QREAD is not at the end of the stream.
    Incomplete { qread: u32, len: u32 },
    /// The command payload (`cmd_data`) is malformed.
    BadPayload(String),
    /// The payload was compiled for another NPU configuration (CONFIG / ID register values).
    ConfigMismatch { npu_config: u32, compiled_config: u32, npu_id: u32, compiled_id: u32 },
}

impl NpuError {
    fn describe_status(f: &mut fmt::Formatter<'_>, s: u32) -> fmt::Result {
        write!(f, "STATUS=0x{s:08x}")?;
        for (bit, name) in [
            (status::BUS_STATUS, "bus error"),
            (status::CMD_PARSE_ERROR, "command-stream parse error"),
            (status::WD_FAULT, "watchdog fault"),
            (status::ECC_FAULT, "ECC fault"),
        ] {
            if s & bit != 0 {
                write!(f, " [{name}]")?;
            }
        }
        if s & status::CMD_END_REACHED == 0 {
            write!(f, " [end of command stream not reached]")?;
        }
        Ok(())
    }
}

impl fmt::Display for NpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpuError::ResetTimeout { status } => write!(f, "Ethos-U soft reset timed out (STATUS=0x{status:08x})"),
            NpuError::Busy { status } => write!(f, "Ethos-U is already running (STATUS=0x{status:08x})"),
            NpuError::Misaligned { what, addr } => write!(f, "Ethos-U {what} at 0x{addr:x} is not 16-byte aligned"),
            NpuError::BadCommandStream { len } => write!(f, "Ethos-U command stream of {len} bytes (must be a non-empty multiple of 4)"),
            NpuError::TooManyBases { count } => write!(f, "{count} base pointers; the Ethos-U has {}", reg::BASEP_COUNT),
            NpuError::Timeout { status, qread } => write!(f, "Ethos-U inference timed out at command-stream byte {qread} (STATUS=0x{status:08x})"),
            NpuError::Incomplete { qread, len } => write!(f, "Ethos-U stopped at command-stream byte {qread} of {len}"),
            NpuError::BadPayload(m) => write!(f, "Ethos-U command payload: {m}"),
            NpuError::ConfigMismatch { npu_config, compiled_config, npu_id, compiled_id } => write!(
                f,
                "the command stream was compiled for another Ethos-U: MACs/cycle {} vs this NPU's {}, SHRAM {} vs {} KiB, command-stream version {} vs {}, architecture {}.{} vs {}.{} (CONFIG 0x{compiled_config:08x} vs 0x{npu_config:08x}); recompile with the matching --accelerator-config",
                1u32 << (compiled_config & 0xF),
                1u32 << (npu_config & 0xF),
                (compiled_config >> 8) & 0xFF,
                (npu_config >> 8) & 0xFF,
                (compiled_config >> 4) & 0xF,
                (npu_config >> 4) & 0xF,
                compiled_id >> 28,
                (compiled_id >> 20) & 0xFF,
                npu_id >> 28,
                (npu_id >> 20) & 0xFF,
            ),
            NpuError::Fault { status, qread } => {
                write!(f, "Ethos-U fault at command-stream byte {qread}: ")?;
                NpuError::describe_status(f, *status)
            }
        }
    }
}

/// Hardware identity read at reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NpuInfo {
    pub id: u32,
    pub config: u32,
}

impl NpuInfo {
    /// log2 of MACs per cycle (CONFIG bits 3:0): 5 = 32 … 8 = 256 on U55/U65.
    pub fn macs_per_cc_log2(&self) -> u32 {
        self.config & 0xF
    }
    pub fn cmd_stream_version(&self) -> u32 {
        (self.config >> 4) & 0xF
    }
    pub fn arch(&self) -> (u32, u32, u32) {
        (self.id >> 28, (self.id >> 20) & 0xFF, (self.id >> 16) & 0xF)
    }
}

/// Driver settings.
#[derive(Clone, Copy, Debug)]
pub struct DriverConfig {
    /// Privilege / security level the NPU takes at reset (must match how the firmware accesses it).
    pub privileged: bool,
    pub secure: bool,
    /// STATUS reads before a reset is declared stuck.
    pub reset_polls: u32,
    /// STATUS reads (or idle-hook calls) before an inference is declared timed out.
    pub run_polls: u32,
    /// Platform AXI settings written after each reset, as the core driver's `npu_axi_init`
    /// does from its build configuration: QCONFIG (command-stream memory type), REGIONCFG
    /// (memory type per base-pointer region) and AXI_LIMIT0..3 (burst/outstanding limits,
    /// U55/U65). `None` leaves the reset values.
    pub qconfig: Option<u32>,
    pub regioncfg: Option<u32>,
    pub axi_limits: Option<[u32; 4]>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            privileged: true,
            secure: true,
            reset_polls: 100_000,
            run_polls: u32::MAX,
            qconfig: None,
            regioncfg: None,
            axi_limits: None,
        }
    }
}

/// One Ethos-U, programmed through `R`.
pub struct EthosU<R: NpuRegisters> {
    regs: R,
    cfg: DriverConfig,
    info: Option<NpuInfo>,
    /// STATUS captured by [`EthosU::on_irq`], consumed by `wait`.
    irq_status: Option<u32>,
    /// QSIZE of the run in flight (QREAD must reach it).
    qsize: u32,
}

impl<R: NpuRegisters> EthosU<R> {
    pub fn new(regs: R, cfg: DriverConfig) -> Self {
        EthosU { regs, cfg, info: None, irq_status: None, qsize: 0 }
    }

    pub fn regs(&mut self) -> &mut R {
        &mut self.regs
    }

    pub fn info(&self) -> Option<NpuInfo> {
        self.info
    }

    /// Soft reset, read ID/CONFIG, apply the platform AXI settings. [`EthosU::run_payload`] does
    /// this first; [`EthosU::start`] does it once if nothing has yet.
    pub fn reset(&mut self) -> Result<NpuInfo, NpuError> {
        let mut r = 0;
        if self.cfg.privileged {
            r |= reset::PENDING_CPL_PRIVILEGED;
        }
        if self.cfg.secure {
            r |= reset::PENDING_CSL_SECURE;
        }
        self.regs.write(reg::RESET, r);
        let mut s = self.regs.read(reg::STATUS);
        let mut n = 0;
        while s & status::RESET_STATUS != 0 {
            n += 1;
            if n >= self.cfg.reset_polls {
                return Err(NpuError::ResetTimeout { status: s });
            }
            s = self.regs.read(reg::STATUS);
        }
        let info = NpuInfo { id: self.regs.read(reg::ID), config: self.regs.read(reg::CONFIG) };
        if let Some(q) = self.cfg.qconfig {
            self.regs.write(reg::QCONFIG, q);
        }
        if let Some(r) = self.cfg.regioncfg {
            self.regs.write(reg::REGIONCFG, r);
        }
        if let Some(l) = self.cfg.axi_limits {
            for (i, v) in l.iter().enumerate() {
                self.regs.write(reg::AXI_LIMIT0 + 4 * i as u32, *v);
            }
        }
        // Let the NPU gate its clock and power while idle.
        self.regs.write(reg::CMD, cmd::PWR_CLK_MASK);
        self.irq_status = None;
        self.info = Some(info);
        Ok(info)
    }

    /// Programs the command stream and base pointers and starts the NPU (steps 2–4).
    /// Addresses are as the NPU sees them.
    pub fn start(&mut self, cmd_addr: u64, cmd_len: usize, bases: &[u64]) -> Result<(), NpuError> {
        if self.info.is_none() {
            self.reset()?;
        }
        if cmd_len == 0 || cmd_len % 4 != 0 || u32::try_from(cmd_len).is_err() {
            return Err(NpuError::BadCommandStream { len: cmd_len });
        }
        if cmd_addr % 16 != 0 {
            return Err(NpuError::Misaligned { what: "command stream", addr: cmd_addr });
        }
        if bases.len() > reg::BASEP_COUNT as usize {
            return Err(NpuError::TooManyBases { count: bases.len() });
        }
        for &b in bases {
            if b % 16 != 0 {
                return Err(NpuError::Misaligned { what: "base pointer", addr: b });
            }
        }
        let s = self.regs.read(reg::STATUS);
        if s & status::STATE_RUNNING != 0 {
            return Err(NpuError::Busy { status: s });
        }
        self.irq_status = None;
        // Keep the NPU powered for the inference: power Q-channel off, clock Q-channel on
        // (ethosu_invoke's set_clock_and_power(CLOCK_Q_ENABLE, POWER_Q_DISABLE)).
        let powered = cmd::CLOCK_Q_ENABLE;
        self.regs.write(reg::CMD, powered);
        self.regs.write(reg::QBASE, cmd_addr as u32);
        self.regs.write(reg::QBASE_HI, (cmd_addr >> 32) as u32);
        self.regs.write(reg::QSIZE, cmd_len as u32);
        self.qsize = cmd_len as u32;
        for (i, &b) in bases.iter().enumerate() {
            self.regs.write(reg::basep(i as u32), b as u32);
            self.regs.write(reg::basep_hi(i as u32), (b >> 32) as u32);
        }
        self.regs.write(reg::CMD, powered | cmd::TRANSITION_TO_RUNNING);
        Ok(())
    }

    /// For the firmware's NPU interrupt handler: captures STATUS and clears the IRQ.
    pub fn on_irq(&mut self) {
        let s = self.regs.read(reg::STATUS);
        let keep = self.regs.read(reg::CMD) & cmd::PWR_CLK_MASK;
        self.regs.write(reg::CMD, keep | cmd::CLEAR_IRQ);
        self.irq_status = Some(s);
    }

    /// Waits for the run started by [`EthosU::start`] to end (step 5–6). `idle` is called between
    /// polls (a `wfi` on hardware, where [`EthosU::on_irq`] runs from the interrupt).
    pub fn wait(&mut self, idle: &mut dyn FnMut()) -> Result<(), NpuError> {
        let mut n = 0u32;
        let s = loop {
            if let Some(s) = self.irq_status.take() {
                break s;
            }
            let s = self.regs.read(reg::STATUS);
            if s & status::IRQ_RAISED != 0 || s & status::STATE_RUNNING == 0 {
                let keep = self.regs.read(reg::CMD) & cmd::PWR_CLK_MASK;
                self.regs.write(reg::CMD, keep | cmd::CLEAR_IRQ);
                break s;
            }
            n += 1;
            if n >= self.cfg.run_polls {
                let qread = self.regs.read(reg::QREAD);
                // Leave the NPU in a known state for the next inference.
                let _ = self.reset();
                return Err(NpuError::Timeout { status: s, qread });
            }
            idle();
        };
        if s & status::FAULTS != 0 || s & status::CMD_END_REACHED == 0 {
            let qread = self.regs.read(reg::QREAD);
            let _ = self.reset();
            return Err(NpuError::Fault { status: s, qread });
        }
        let qread = self.regs.read(reg::QREAD);
        if qread != self.qsize {
            let _ = self.reset();
            return Err(NpuError::Incomplete { qread, len: self.qsize });
        }
        self.regs.write(reg::CMD, cmd::PWR_CLK_MASK);
        Ok(())
    }

    /// Runs a Vela command payload (`cmd_data`, see [`payload`]) located at NPU address
    /// `payload_addr`, as `ethosu_invoke` does: soft reset, check each OPTIMIZER_CONFIG against
    /// the NPU's CONFIG/ID registers, run each COMMAND_STREAM to completion.
    pub fn run_payload(&mut self, payload: &[u8], payload_addr: u64, bases: &[u64], idle: &mut dyn FnMut()) -> Result<(), NpuError> {
        let actions = payload::parse(payload).map_err(NpuError::BadPayload)?;
        let info = self.reset()?;
        for a in actions {
            match a {
                Action::OptimizerConfig { config, id } => {
                    // macs_per_cc, cmd_stream_version, shram_size must be equal; the
                    // architecture major revision equal and the minor not older.
                    let same_cfg = (config ^ info.config) & 0xFFFF == 0;
                    let (cmaj, cmin) = (id >> 28, (id >> 20) & 0xFF);
                    let (nmaj, nmin, _) = info.arch();
                    if !same_cfg || cmaj != nmaj || nmin < cmin {
                        return Err(NpuError::ConfigMismatch {
                            npu_config: info.config,
                            compiled_config: config,
                            npu_id: info.id,
                            compiled_id: id,
                        });
                    }
                }
                Action::CommandStream { offset, len } => {
                    self.start(payload_addr + offset as u64, len, bases)?;
                    self.wait(idle)?;
                }
                Action::Debug(_) => {}
            }
        }
        Ok(())
    }

    /// `start` then `wait`: one bare register command stream.
    pub fn invoke(&mut self, cmd_addr: u64, cmd_len: usize, bases: &[u64], idle: &mut dyn FnMut()) -> Result<(), NpuError> {
        self.start(cmd_addr, cmd_len, bases)?;
        self.wait(idle)
    }
}
