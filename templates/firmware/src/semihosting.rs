//! Arm semihosting (`bkpt 0xAB`): console output and the exit status, which QEMU passes on as
//! its own (`-semihosting-config enable=on`). Hand-rolled: three calls do not justify a crate.

const SYS_OPEN: u32 = 0x01;
const SYS_WRITE: u32 = 0x05;
const SYS_WRITE0: u32 = 0x04;
const SYS_EXIT_EXTENDED: u32 = 0x20;
/// ADP_Stopped_ApplicationExit: "the application exited", with a status.
const ADP_STOPPED_APPLICATION_EXIT: u32 = 0x20026;

fn call(op: u32, arg: usize) -> isize {
    let result: isize;
    // SAFETY: the semihosting ABI: op in r0, a pointer to the argument block in r1, the result
    // in r0; the debugger/emulator reads only the block the pointer names, which the callers
    // keep alive across the call.
    unsafe {
        core::arch::asm!("bkpt #0xab", inout("r0") op as isize => result, in("r1") arg, options(nostack));
    }
    result
}

/// The host's stdout (`:tt` opened for writing), or -1.
fn open_stdout() -> isize {
    let name = b":tt\0";
    let block = [name.as_ptr() as usize, 4 /* "w" */, 3];
    call(SYS_OPEN, block.as_ptr() as usize)
}

fn write(handle: isize, bytes: &[u8]) {
    if handle < 0 {
        // No handle: SYS_WRITE0 of NUL-free chunks.
        let mut chunk = [0u8; 129];
        for part in bytes.chunks(128) {
            chunk[..part.len()].copy_from_slice(part);
            chunk[part.len()] = 0;
            call(SYS_WRITE0, chunk.as_ptr() as usize);
        }
        return;
    }
    let block = [handle as usize, bytes.as_ptr() as usize, bytes.len()];
    call(SYS_WRITE, block.as_ptr() as usize);
}

/// Ends the emulation with `code` as the exit status.
pub fn exit(code: u32) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT as usize, code as usize];
    call(SYS_EXIT_EXTENDED, block.as_ptr() as usize);
    // A debugger that ignores the call: stop here rather than run on.
    loop {
        // SAFETY: bkpt halts under a debugger; nothing else to do.
        unsafe { core::arch::asm!("bkpt #0") };
    }
}

/// Buffered console output: one semihosting call per 1 KiB, not per `write!` piece.
pub struct Console {
    handle: isize,
    buf: [u8; 1024],
    len: usize,
}

impl Console {
    pub fn new() -> Self {
        Console { handle: open_stdout(), buf: [0; 1024], len: 0 }
    }

    pub fn flush(&mut self) {
        if self.len > 0 {
            write(self.handle, &self.buf[..self.len]);
            self.len = 0;
        }
    }
}

impl core::fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush();
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.flush();
    }
}
