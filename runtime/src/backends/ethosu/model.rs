//! A register-level model of the Ethos-U programming interface, for tests without an NPU.
//!
//! It does not execute command streams. It records every register access and checks that the
//! driver follows the documented sequence (see [`super::driver`]): reset before the first run,
//! QBASE/QSIZE/BASEPn programmed for every run and never while running, aligned addresses,
//! the power Q-channel disabled during a run, CMD writes that preserve the Q-channel bits, the IRQ cleared
//! after each run. Breaches are collected in [`RegisterModel::violations`]. A run "executes" by
//! calling a hook with the programmed addresses, which may fill output memory and choose the
//! outcome (completion or fault bits), and completes after a set number of STATUS polls.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::regs::{cmd, reg, reset, status, NpuRegisters};

/// What the driver programmed for one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRecord {
    pub qbase: u64,
    pub qsize: u32,
    /// BASEP0..7 as 64-bit addresses (unprogrammed ones are 0).
    pub bases: [u64; 8],
    /// Which BASEPn (low word) were written for this run.
    pub bases_written: u8,
}

/// STATUS bits a run ends with (besides irq_raised): `CMD_END_REACHED` for success, or faults.
pub type RunHook = Box<dyn FnMut(&RunRecord) -> u32>;

pub struct RegisterModel {
    regs: [u32; 64],
    /// STATUS polls left before a pending reset completes / a run ends.
    reset_left: u32,
    run_left: u32,
    running: bool,
    reset_done: bool,
    written: u32,
    record: RunRecord,
    end_status: u32,
    hook: RunHook,
    /// STATUS polls a run takes.
    pub run_polls: u32,
    pub violations: Vec<String>,
    /// Every access: (is_write, offset, value).
    pub log: Vec<(bool, u32, u32)>,
    pub runs: Vec<RunRecord>,
}

const W_QBASE: u32 = 1;
const W_QBASE_HI: u32 = 2;
const W_QSIZE: u32 = 4;

impl RegisterModel {
    /// `id` / `config` are what ID and CONFIG read as; `hook` decides each run's outcome.
    pub fn new(id: u32, config: u32, hook: RunHook) -> Self {
        let mut regs = [0u32; 64];
        regs[(reg::ID / 4) as usize] = id;
        regs[(reg::CONFIG / 4) as usize] = config;
        RegisterModel {
            regs,
            reset_left: 0,
            run_left: 0,
            running: false,
            reset_done: false,
            written: 0,
            record: RunRecord::default(),
            end_status: 0,
            hook,
            run_polls: 3,
            violations: Vec::new(),
            log: Vec::new(),
            runs: Vec::new(),
        }
    }

    fn violate(&mut self, m: String) {
        self.violations.push(m);
    }

    fn status(&self) -> u32 {
        self.regs[(reg::STATUS / 4) as usize]
    }
    fn set_status(&mut self, v: u32) {
        self.regs[(reg::STATUS / 4) as usize] = v;
    }
}

impl NpuRegisters for RegisterModel {
    fn read(&mut self, offset: u32) -> u32 {
        if offset % 4 != 0 || offset >= 0x100 {
            self.violate(format!("read of unknown register 0x{offset:x}"));
            return 0;
        }
        if offset == reg::STATUS {
            if self.reset_left > 0 {
                self.reset_left -= 1;
                if self.reset_left == 0 {
                    let s = self.status() & !status::RESET_STATUS;
                    self.set_status(s);
                    self.reset_done = true;
                }
            } else if self.running {
                self.run_left = self.run_left.saturating_sub(1);
                if self.run_left == 0 {
                    self.running = false;
                    let end = self.end_status;
                    self.set_status(status::IRQ_RAISED | end);
                    let q = if end & status::CMD_END_REACHED != 0 { self.record.qsize } else { self.record.qsize / 2 };
                    self.regs[(reg::QREAD / 4) as usize] = q;
                }
            }
        }
        let v = self.regs[(offset / 4) as usize];
        self.log.push((false, offset, v));
        v
    }

    fn write(&mut self, offset: u32, value: u32) {
        self.log.push((true, offset, value));
        if offset % 4 != 0 || offset >= 0x100 {
            self.violate(format!("write of unknown register 0x{offset:x}"));
            return;
        }
        match offset {
            reg::ID | reg::STATUS | reg::QREAD | reg::CONFIG => {
                self.violate(format!("write to read-only register 0x{offset:x}"));
            }
            reg::RESET => {
                if self.running {
                    self.violate("RESET written while running".into());
                    self.running = false;
                }
                let mut prot = 0;
                if value & reset::PENDING_CPL_PRIVILEGED != 0 {
                    prot |= 1;
                }
                if value & reset::PENDING_CSL_SECURE != 0 {
                    prot |= 2;
                }
                self.regs[(reg::PROT / 4) as usize] = prot;
                self.regs[(reg::CMD / 4) as usize] = 0;
                self.set_status(status::RESET_STATUS);
                self.reset_left = 2;
                self.written = 0;
            }
            reg::CMD => {
                let old = self.regs[(reg::CMD / 4) as usize];
                if value & cmd::CLEAR_IRQ != 0 {
                    let s = self.status() & !status::IRQ_RAISED;
                    self.set_status(s);
                    if value & cmd::PWR_CLK_MASK != old & cmd::PWR_CLK_MASK {
                        self.violate(format!("CMD clear_irq write 0x{value:x} changed the Q-channel bits (were 0x{old:x})"));
                    }
                }
                if value & cmd::TRANSITION_TO_RUNNING != 0 {
                    let mut why = Vec::new();
                    if !self.reset_done {
                        why.push("NPU not reset since power-on".into());
                    }
                    if self.running || self.reset_left > 0 {
                        why.push("NPU busy".into());
                    }
                    if self.status() & status::IRQ_RAISED != 0 {
                        why.push("IRQ of the previous run not cleared".into());
                    }
                    for (bit, name) in [(W_QBASE, "QBASE"), (W_QBASE_HI, "QBASE_HI"), (W_QSIZE, "QSIZE")] {
                        if self.written & bit == 0 {
                            why.push(format!("{name} not programmed for this run"));
                        }
                    }
                    if value & cmd::POWER_Q_ENABLE != 0 {
                        why.push(format!("the power Q-channel enabled during the run (CMD=0x{value:x})"));
                    }
                    let qsize = self.regs[(reg::QSIZE / 4) as usize];
                    let qbase = (self.regs[(reg::QBASE_HI / 4) as usize] as u64) << 32 | self.regs[(reg::QBASE / 4) as usize] as u64;
                    if qsize == 0 {
                        why.push("QSIZE is 0".into());
                    }
                    if qbase % 16 != 0 {
                        why.push(format!("QBASE 0x{qbase:x} not 16-byte aligned"));
                    }
                    let mut rec = RunRecord { qbase, qsize, bases: [0; 8], bases_written: (self.written >> 8) as u8 };
                    for n in 0..8u32 {
                        let lo = self.regs[(reg::basep(n) / 4) as usize] as u64;
                        let hi = self.regs[(reg::basep_hi(n) / 4) as usize] as u64;
                        rec.bases[n as usize] = hi << 32 | lo;
                        if rec.bases_written & (1 << n) != 0 && rec.bases[n as usize] % 16 != 0 {
                            why.push(format!("BASEP{n} 0x{:x} not 16-byte aligned", rec.bases[n as usize]));
                        }
                    }
                    if why.is_empty() {
                        self.end_status = (self.hook)(&rec);
                        self.record = rec.clone();
                        self.runs.push(rec);
                        self.running = true;
                        self.run_left = self.run_polls.max(1);
                        self.set_status(status::STATE_RUNNING);
                    } else {
                        for w in why {
                            self.violate(format!("run started with {w}"));
                        }
                    }
                    self.written = 0;
                }
                self.regs[(reg::CMD / 4) as usize] = value & cmd::PWR_CLK_MASK;
            }
            _ => {
                let is_queue = matches!(offset, reg::QBASE | reg::QBASE_HI | reg::QSIZE);
                let is_base = (reg::basep(0)..reg::basep(8)).contains(&offset);
                if (is_queue || is_base) && self.running {
                    self.violate(format!("register 0x{offset:x} written while the NPU runs"));
                }
                match offset {
                    reg::QBASE => self.written |= W_QBASE,
                    reg::QBASE_HI => self.written |= W_QBASE_HI,
                    reg::QSIZE => self.written |= W_QSIZE,
                    o if is_base && (o - reg::basep(0)) % 8 == 0 => self.written |= 1 << (8 + (o - reg::basep(0)) / 8),
                    _ => {}
                }
                self.regs[(offset / 4) as usize] = value;
            }
        }
    }
}
