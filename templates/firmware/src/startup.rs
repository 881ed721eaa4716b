//! Reset and fault handling, written by hand rather than with `cortex-m-rt`: rbuild generates
//! the whole linker script from the board file (regions, arenas, program, heap, stack), and
//! cortex-m-rt ships its own `link.x` that expects a `memory.x` with fixed FLASH/RAM names. What
//! it would give us is ~40 lines: a vector table, .data copy, .bss zeroing and FPU enable.
//!
//! The reset handler is assembly so nothing touches the FPU or the stack limit before they are
//! set up, whatever the compiler generates for Rust code.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::semihosting;

core::arch::global_asm!(
    // Exceptions 0-15 of Armv8-M Mainline; the firmware enables no external interrupts.
    ".section .vector_table, \"a\", %progbits",
    ".global __vector_table",
    ".p2align 7",
    "__vector_table:",
    ".word __stack_top",
    ".word reset_handler",
    ".word fault_trampoline", // NMI
    ".word fault_trampoline", // HardFault
    ".word fault_trampoline", // MemManage
    ".word fault_trampoline", // BusFault
    ".word fault_trampoline", // UsageFault
    ".word fault_trampoline", // SecureFault
    ".word 0",
    ".word 0",
    ".word 0",
    ".word fault_trampoline", // SVCall
    ".word fault_trampoline", // DebugMonitor
    ".word 0",
    ".word fault_trampoline", // PendSV
    ".word systick_handler",
    "",
    ".section .text.reset_handler, \"ax\", %progbits",
    ".global reset_handler",
    ".type reset_handler, %function",
    ".thumb_func",
    "reset_handler:",
    // Stack overflow faults instead of corrupting .bss (Armv8-M stack limit).
    "    ldr r0, =__stack_bottom",
    "    msr msplim, r0",
    // FPU and MVE: CPACR.CP10/CP11 = full access.
    "    ldr r0, =0xE000ED88",
    "    ldr r1, [r0]",
    "    orr r1, r1, #(0xF << 20)",
    "    str r1, [r0]",
    "    dsb",
    "    isb",
    // .data from its load address.
    "    ldr r0, =__data_start",
    "    ldr r1, =__data_end",
    "    ldr r2, =__data_load",
    "1:  cmp r0, r1",
    "    bhs 2f",
    "    ldr r3, [r2], #4",
    "    str r3, [r0], #4",
    "    b 1b",
    // .bss to zero.
    "2:  ldr r0, =__bss_start",
    "    ldr r1, =__bss_end",
    "    movs r2, #0",
    "3:  cmp r0, r1",
    "    bhs 4f",
    "    str r2, [r0], #4",
    "    b 3b",
    "4:  bl firmware_main",
    "    b .",
    ".size reset_handler, . - reset_handler",
    "",
    // Reads the stacked pc and lr (MSP or PSP frame), then reports on a fresh stack: after a
    // stack overflow (STKOF) the old one is at its limit and the report would fault again.
    // The firmware never returns from a fault, so starting over at the top loses nothing.
    ".section .text.fault_trampoline, \"ax\", %progbits",
    ".global fault_trampoline",
    ".type fault_trampoline, %function",
    ".thumb_func",
    "fault_trampoline:",
    "    tst lr, #4",
    "    ite eq",
    "    mrseq r3, msp",
    "    mrsne r3, psp",
    "    ldr r0, [r3, #24]",
    "    ldr r1, [r3, #20]",
    "    mrs r2, ipsr",
    "    movs r3, #0",
    "    msr msplim, r3",
    "    ldr r3, =__stack_top",
    "    mov sp, r3",
    "    b fault_handler",
    ".size fault_trampoline, . - fault_trampoline",
);

const SCB_CFSR: *const u32 = 0xE000_ED28 as *const u32;
const SCB_HFSR: *const u32 = 0xE000_ED2C as *const u32;
const SCB_MMFAR: *const u32 = 0xE000_ED34 as *const u32;
const SCB_BFAR: *const u32 = 0xE000_ED38 as *const u32;

/// Any fault: say what and where, then exit non-zero (never hang the emulator).
///
/// `pc` and `lr` come from the stacked exception frame (meaningless when the frame could not be
/// stacked: a stack overflow on exception entry).
#[no_mangle]
extern "C" fn fault_handler(pc: u32, lr: u32, ipsr: u32) -> ! {
    let names = ["thread", "reset", "NMI", "HardFault", "MemManage", "BusFault", "UsageFault", "SecureFault"];
    let name = names.get(ipsr as usize & 0x1ff).copied().unwrap_or("exception");
    // SAFETY: the System Control Block's fault registers are always readable.
    let (cfsr, hfsr, mmfar, bfar) =
        unsafe { (SCB_CFSR.read_volatile(), SCB_HFSR.read_volatile(), SCB_MMFAR.read_volatile(), SCB_BFAR.read_volatile()) };
    let mut out = semihosting::Console::new();
    let _ = core::fmt::write(
        &mut out,
        format_args!(
            "error: {name} (exception {}) at pc={pc:#010x} lr={lr:#010x} CFSR={cfsr:#010x} HFSR={hfsr:#010x} MMFAR={mmfar:#010x} BFAR={bfar:#010x}{}\n",
            ipsr & 0x1ff,
            if cfsr & (1 << 20) != 0 { " (stack overflow: UsageFault STKOF)" } else { "" }
        ),
    );
    out.flush();
    semihosting::exit(3)
}

/// SysTick wraps (every 2^24 processor clocks), for a 64-bit tick count.
static SYSTICK_WRAPS: AtomicU32 = AtomicU32::new(0);

#[no_mangle]
extern "C" fn systick_handler() {
    SYSTICK_WRAPS.fetch_add(1, Ordering::Relaxed);
}

const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
const DEMCR: *mut u32 = 0xE000_EDFC as *mut u32;
const DWT_CTRL: *mut u32 = 0xE000_1000 as *mut u32;
const DWT_CYCCNT: *mut u32 = 0xE000_1004 as *mut u32;

/// Starts SysTick on the processor clock (interrupt on wrap) and the DWT cycle counter.
pub fn start_counters() {
    // SAFETY: architecturally defined system registers of every Armv8-M Mainline core.
    unsafe {
        SYST_RVR.write_volatile(0x00FF_FFFF);
        SYST_CVR.write_volatile(0);
        SYST_CSR.write_volatile(0b111); // enable, interrupt on wrap, processor clock
        DEMCR.write_volatile(DEMCR.read_volatile() | (1 << 24)); // TRCENA
        DWT_CYCCNT.write_volatile(0);
        DWT_CTRL.write_volatile(DWT_CTRL.read_volatile() | 1); // CYCCNTENA
    }
}

/// The DWT cycle counter (0 where it is not implemented: QEMU reads it as zero).
pub fn dwt_cycles() -> u32 {
    // SAFETY: see start_counters.
    unsafe { DWT_CYCCNT.read_volatile() }
}

/// Processor-clock ticks counted by SysTick since `start_counters`.
pub fn systick_ticks() -> u64 {
    loop {
        let wraps = SYSTICK_WRAPS.load(Ordering::Relaxed);
        // SAFETY: see start_counters.
        let current = unsafe { SYST_CVR.read_volatile() } & 0x00FF_FFFF;
        if SYSTICK_WRAPS.load(Ordering::Relaxed) == wraps {
            return (u64::from(wraps) << 24) + u64::from(0x00FF_FFFF - current);
        }
    }
}
