//! The global allocator over the board's heap section (`__heap_start..__heap_end`, placed by the
//! generated linker script).
//!
//! A bump allocator that gives back the most recent block when it is freed and grows it in
//! place: loading a method allocates long-lived tables, and kernels allocate scratch that is
//! freed before the next call (last in, first out), so this reclaims what a run frees without
//! a free list. It records the peak, which the firmware reports.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;

extern "C" {
    static mut __heap_start: u8;
    static mut __heap_end: u8;
}

pub struct Heap {
    /// Next free address (0 before first use).
    next: Cell<usize>,
    /// Start of the most recent live block, if any.
    last: Cell<usize>,
    peak: Cell<usize>,
}

// SAFETY: the firmware is single-threaded and no interrupt handler allocates (SysTick only
// increments an atomic), so the cells are never accessed concurrently.
unsafe impl Sync for Heap {}

impl Heap {
    pub const fn new() -> Self {
        Heap { next: Cell::new(0), last: Cell::new(0), peak: Cell::new(0) }
    }

    fn bounds() -> (usize, usize) {
        // Only the symbols' addresses are taken (no access); the linker script defines both.
        (core::ptr::addr_of_mut!(__heap_start) as usize, core::ptr::addr_of_mut!(__heap_end) as usize)
    }

    /// Bytes in the heap section.
    pub fn capacity(&self) -> usize {
        let (start, end) = Self::bounds();
        end - start
    }

    /// Most bytes in use at once.
    pub fn peak(&self) -> usize {
        self.peak.get()
    }

    fn next(&self) -> usize {
        match self.next.get() {
            0 => Self::bounds().0,
            n => n,
        }
    }
}

unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (start, end) = Self::bounds();
        let Some(at) = self.next().checked_next_multiple_of(layout.align()) else { return core::ptr::null_mut() };
        let Some(new_next) = at.checked_add(layout.size()).filter(|&n| n <= end) else { return core::ptr::null_mut() };
        self.next.set(new_next);
        self.last.set(at);
        self.peak.set(self.peak.get().max(new_next - start));
        at as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // Only the newest block goes back; others are reclaimed when everything above them is.
        if ptr as usize == self.last.get() {
            self.next.set(ptr as usize);
            self.last.set(0);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (start, end) = Self::bounds();
        if ptr as usize == self.last.get() {
            if let Some(new_next) = (ptr as usize).checked_add(new_size).filter(|&n| n <= end) {
                self.next.set(new_next);
                self.peak.set(self.peak.get().max(new_next - start));
                return ptr;
            }
            return core::ptr::null_mut();
        }
        // SAFETY: the GlobalAlloc contract: `layout` describes `ptr`'s block; the new block
        // has the same alignment and at least `new_size` bytes.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
