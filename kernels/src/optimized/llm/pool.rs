//! A persistent worker pool for splitting one kernel call over threads.
//!
//! Decode runs ~100 small kernels per token, so spawning threads per call (what
//! `gemm::par_units` does) costs more than the work. Workers here live for the process: after a
//! job they spin for a short while watching for the next one (kernels come back to back), then
//! park on a condition variable. The calling thread always takes part, so `threads = 2` means
//! the caller plus one worker.
//!
//! Tasks are infallible: kernels validate every argument before dispatching. Without `std` (or
//! with one thread, or when another thread is using the pool) everything runs on the caller.

/// Runs `f(i)` for every `i in 0..tasks`, on up to `threads` threads (the caller included).
pub fn run(threads: usize, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    if threads <= 1 || tasks <= 1 {
        (0..tasks).for_each(f);
        return;
    }
    imp::run(threads, tasks, f)
}

/// `out` viewed as an `rows × cols` row-major matrix, split into column blocks. Each block is
/// handed to exactly one task, so tasks write disjoint elements.
pub struct ColBlocks {
    ptr: *mut f32,
    rows: usize,
    cols: usize,
}

// SAFETY: ColBlocks only hands out row slices of disjoint column ranges (see `for_col_blocks`),
// and the borrow of `out` it was made from outlives every task.
unsafe impl Sync for ColBlocks {}

/// One task's columns `start..end` of every row.
pub struct ColBlock<'a> {
    blocks: &'a ColBlocks,
    pub start: usize,
    pub end: usize,
}

impl ColBlock<'_> {
    /// Row `r`'s elements in this block's columns.
    pub fn row(&mut self, r: usize) -> &mut [f32] {
        assert!(r < self.blocks.rows, "row {r} out of range");
        // SAFETY: `r < rows` and `start <= end <= cols`, so the range lies inside the `rows*cols`
        // buffer; no other task owns these columns (blocks are disjoint), and `&mut self`
        // prevents two live slices of this block.
        unsafe {
            core::slice::from_raw_parts_mut(self.blocks.ptr.add(r * self.blocks.cols + self.start), self.end - self.start)
        }
    }
}

/// Splits the columns of the row-major `rows × cols` matrix `out` into blocks of whole `align`
/// columns (about `4 × threads` of them, for balance when a core is busy) and calls `f` on
/// each, in parallel.
pub fn for_col_blocks(threads: usize, out: &mut [f32], rows: usize, cols: usize, align: usize, f: &(dyn Fn(ColBlock<'_>) + Sync)) {
    assert_eq!(out.len(), rows * cols, "for_col_blocks: output size");
    let align = align.max(1);
    let units = cols.div_ceil(align);
    if units == 0 || rows == 0 {
        return;
    }
    let tasks = if threads <= 1 { 1 } else { units.min(threads * 4) };
    let per = units.div_ceil(tasks) * align;
    let tasks = cols.div_ceil(per);
    let blocks = ColBlocks { ptr: out.as_mut_ptr(), rows, cols };
    run(threads, tasks, &|t| {
        let start = t * per;
        f(ColBlock { blocks: &blocks, start, end: (start + per).min(cols) })
    });
}

/// Cuts `out` into consecutive chunks of whole `unit`-element pieces and calls
/// `f(first_unit, chunk)` on each, in parallel.
pub fn for_chunks(threads: usize, out: &mut [f32], unit: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
    let unit = unit.max(1);
    let units = out.len() / unit;
    for_col_blocks(threads, &mut out[..units * unit], 1, units * unit, unit, &|mut b| f(b.start / unit, b.row(0)));
}

#[cfg(not(feature = "std"))]
mod imp {
    pub fn run(_threads: usize, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        (0..tasks).for_each(f);
    }
}

#[cfg(feature = "std")]
mod imp {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
    use std::time::{Duration, Instant};

    /// How long an idle worker spins before parking.
    const SPIN: Duration = Duration::from_micros(300);
    /// Most workers the pool will start.
    const MAX_WORKERS: usize = 63;

    /// One dispatched call. `f` borrows the caller's stack: it is only called for task indices
    /// below `tasks`, and the caller returns only after all of those have finished.
    struct Job {
        f: *const (dyn Fn(usize) + Sync + 'static),
        tasks: usize,
        /// Workers with an id below this take part.
        helpers: usize,
        next: AtomicUsize,
        done: AtomicUsize,
        panicked: AtomicBool,
    }

    // SAFETY: `f` points to a `Sync` closure; see `Job` for why it is never used after return.
    unsafe impl Send for Job {}
    unsafe impl Sync for Job {}

    impl Job {
        /// Takes and runs tasks until none are left.
        fn work(&self) {
            loop {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                if i >= self.tasks {
                    return;
                }
                // SAFETY: i < tasks, so the caller is still inside `run` waiting for this task
                // (done < tasks), and the closure `f` points to is alive.
                let f = unsafe { &*self.f };
                if catch_unwind(AssertUnwindSafe(|| f(i))).is_err() {
                    self.panicked.store(true, Ordering::Relaxed);
                }
                self.done.fetch_add(1, Ordering::Release);
            }
        }
    }

    struct Slot {
        job: Option<Arc<Job>>,
        sleepers: usize,
    }

    struct Pool {
        /// Bumped for every job; workers watch it while spinning.
        epoch: AtomicUsize,
        slot: Mutex<Slot>,
        wake: Condvar,
        /// Held by the one caller using the pool; others run serially.
        caller: Mutex<()>,
        workers: AtomicUsize,
    }

    fn pool() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool {
            epoch: AtomicUsize::new(0),
            slot: Mutex::new(Slot { job: None, sleepers: 0 }),
            wake: Condvar::new(),
            caller: Mutex::new(()),
            workers: AtomicUsize::new(0),
        })
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn worker(id: usize) {
        let p = pool();
        let mut seen = p.epoch.load(Ordering::Acquire);
        loop {
            // Spin for the next job, then park.
            let start = Instant::now();
            let mut spins = 0u32;
            while p.epoch.load(Ordering::Acquire) == seen {
                core::hint::spin_loop();
                spins += 1;
                if spins % 64 == 0 && start.elapsed() > SPIN {
                    break;
                }
            }
            let job = {
                let mut s = lock(&p.slot);
                while p.epoch.load(Ordering::Acquire) == seen {
                    s.sleepers += 1;
                    s = p.wake.wait(s).unwrap_or_else(|e| e.into_inner());
                    s.sleepers -= 1;
                }
                seen = p.epoch.load(Ordering::Acquire);
                s.job.clone()
            };
            if let Some(job) = job {
                if id < job.helpers {
                    job.work();
                }
            }
        }
    }

    fn ensure_workers(p: &'static Pool, want: usize) -> usize {
        let want = want.min(MAX_WORKERS);
        let mut have = p.workers.load(Ordering::Acquire);
        while have < want {
            if std::thread::Builder::new().name(format!("rbuild-kernel-{have}")).spawn(move || worker(have)).is_err() {
                break;
            }
            have += 1;
            p.workers.store(have, Ordering::Release);
        }
        have
    }

    pub fn run(threads: usize, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let p = pool();
        // One caller at a time (tests run kernels concurrently); the others run serially.
        let _guard = match p.caller.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return (0..tasks).for_each(f),
        };
        let helpers = ensure_workers(p, threads - 1).min(tasks - 1);
        if helpers == 0 {
            return (0..tasks).for_each(f);
        }
        // SAFETY: only the lifetime is erased; `run` does not return before every call of `f`
        // has finished (it waits for `done == tasks`), and `Job::work` never calls `f` for an
        // index at or past `tasks`.
        let f: *const (dyn Fn(usize) + Sync + 'static) = unsafe { core::mem::transmute(f as *const (dyn Fn(usize) + Sync)) };
        let job = Arc::new(Job {
            f,
            tasks,
            helpers,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        });
        {
            let mut s = lock(&p.slot);
            s.job = Some(job.clone());
            p.epoch.fetch_add(1, Ordering::AcqRel);
            if s.sleepers > 0 {
                p.wake.notify_all();
            }
        }
        job.work();
        let mut spins = 0u32;
        while job.done.load(Ordering::Acquire) < tasks {
            spins += 1;
            if spins < 1 << 16 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        lock(&p.slot).job = None;
        if job.panicked.load(Ordering::Relaxed) {
            resume_unwind(Box::new("a kernel task panicked on a pool worker"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_task_runs_once_for_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            for tasks in [0, 1, 2, 5, 64] {
                let hits: alloc::vec::Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                for _ in 0..20 {
                    run(threads, tasks, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 20), "threads {threads} tasks {tasks}");
            }
        }
    }

    #[test]
    fn col_blocks_cover_every_element_once() {
        for threads in [1, 2, 4] {
            for &(rows, cols, align) in &[(1, 1, 1), (1, 37, 8), (3, 100, 4), (2, 5, 8), (4, 0, 4)] {
                let mut out = alloc::vec![0.0f32; rows * cols];
                for_col_blocks(threads, &mut out, rows, cols, align, &|mut b| {
                    assert!(b.start % align == 0 && b.end <= cols);
                    for r in 0..rows {
                        let (s, row) = (b.start, b.row(r));
                        for (j, v) in row.iter_mut().enumerate() {
                            *v += (r * cols + s + j) as f32;
                        }
                    }
                });
                let want: alloc::vec::Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
                assert_eq!(out, want, "threads {threads} {rows}x{cols} align {align}");
            }
        }
    }

    #[test]
    fn chunks_are_whole_units() {
        let mut out = alloc::vec![0.0f32; 6 * 7];
        for_chunks(2, &mut out, 7, &|first, chunk| {
            assert_eq!(chunk.len() % 7, 0);
            for (i, v) in chunk.iter_mut().enumerate() {
                *v = (first * 7 + i) as f32;
            }
        });
        assert!(out.iter().enumerate().all(|(i, &v)| v == i as f32));
    }
}
