//! A persistent thread pool implementing [`Parallel`] (std only).
//!
//! `ThreadPool::new(t)` starts `t - 1` worker threads; the caller of `for_each` is the t-th.
//! A `for_each` publishes the job, and everyone (caller included) claims task indices from an
//! atomic counter until none are left; the caller then waits until every worker has let go of
//! the job before returning. One `for_each` runs at a time (concurrent callers queue on a
//! mutex). A panic in a task is caught, the job is finished, and the panic resumes on the
//! caller. Dropping the pool joins the workers.
//!
//! Waiting is spin-then-block: a network runs dozens of parallel steps a few tens of
//! microseconds apart, and waking a thread blocked on a futex takes about as long on a VM, so a
//! worker that finished a job watches for the next one for [`SPIN`] before it blocks on a
//! `Condvar`, and the caller watches for the workers' completion the same way. The spin is
//! bounded (and yields the core between checks when the threads outnumber the cores), so an
//! idle pool costs nothing and a busy neighbour on a shared 2-vCPU machine is not starved.

use super::Parallel;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a thread watches for work (or for the workers to finish) before blocking.
const SPIN: Duration = Duration::from_micros(200);

/// The job workers see: the task closure with its lifetime erased (see `for_each`'s SAFETY).
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize) + Sync + 'static),
    tasks: usize,
}
// SAFETY: `f` points to a `Sync` closure, so calling it from other threads is allowed; the
// pointer is only dereferenced while `for_each` keeps the closure alive (it waits for every
// worker to finish before returning).
unsafe impl Send for Job {}

struct State {
    job: Option<Job>,
    panic: Option<Box<dyn std::any::Any + Send>>,
    /// Workers blocked on `work`.
    sleepers: usize,
    /// The caller is blocked on `done`.
    caller_sleeping: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    next: AtomicUsize,
    /// Bumped (under the lock) for every job, so a worker runs each job at most once.
    generation: AtomicU64,
    /// Workers that have not yet finished the current job.
    busy: AtomicUsize,
    shutdown: AtomicBool,
    /// More threads than cores: yield the core while spinning.
    oversubscribed: bool,
}

/// Persistent worker threads; see the module docs.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes `for_each` calls from different threads.
    run: Mutex<()>,
}

impl ThreadPool {
    /// A pool using `threads` threads in all: `threads - 1` workers plus the caller (0 acts as 1).
    pub fn new(threads: usize) -> ThreadPool {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shared = Arc::new(Shared {
            state: Mutex::new(State { job: None, panic: None, sleepers: 0, caller_sleeping: false }),
            work: Condvar::new(),
            done: Condvar::new(),
            next: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            oversubscribed: threads > cores,
        });
        let workers = (1..threads.max(1))
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("rbuild-nhwc-{i}"))
                    .spawn(move || worker(&s))
                    .expect("spawning a thread-pool worker")
            })
            .collect();
        ThreadPool { shared, workers, run: Mutex::new(()) }
    }
}

/// Spins (bounded by [`SPIN`]) until `ready()`; returns whether it became ready.
fn spin_until(s: &Shared, ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut n = 0u32;
    loop {
        if ready() {
            return true;
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(64) {
            if start.elapsed() >= SPIN {
                return false;
            }
            if s.oversubscribed {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
}

/// Claims and runs tasks until none are left; returns a caught panic, if any.
fn drain(next: &AtomicUsize, job: Job) -> Option<Box<dyn std::any::Any + Send>> {
    // SAFETY: the closure outlives the job (the `for_each` that published it waits for all
    // workers before returning) and is `Sync`.
    let f = unsafe { &*job.f };
    catch_unwind(AssertUnwindSafe(|| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= job.tasks {
            break;
        }
        f(i);
    }))
    .err()
}

fn worker(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let fresh = |s: &Shared| s.generation.load(Ordering::Acquire) != seen || s.shutdown.load(Ordering::Acquire);
        spin_until(s, || fresh(s));
        let job = {
            let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if s.shutdown.load(Ordering::Acquire) {
                    return;
                }
                let g = s.generation.load(Ordering::Acquire);
                if g != seen {
                    seen = g;
                    if let Some(job) = st.job {
                        break job;
                    }
                }
                st.sleepers += 1;
                st = s.work.wait(st).unwrap_or_else(|e| e.into_inner());
                st.sleepers -= 1;
            }
        };
        let panic = drain(&s.next, job);
        if panic.is_some() {
            let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.panic.is_none() {
                st.panic = panic;
            }
        }
        if s.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one out: wake the caller if it stopped spinning. Taking the lock orders
            // this after the caller's check of `busy` (see `for_each`).
            let st = s.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.caller_sleeping {
                s.done.notify_one();
            }
        }
    }
}

impl Parallel for ThreadPool {
    fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if tasks == 0 {
            return;
        }
        if tasks == 1 || self.workers.is_empty() {
            for i in 0..tasks {
                f(i);
            }
            return;
        }
        let _serial = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: only the lifetime is erased. Workers dereference `f` between taking the job
        // and decrementing `busy`; this function does not return (nor unwind: the caller's own
        // tasks run under catch_unwind) before `busy` is back to 0 and the job is withdrawn, so
        // `f` outlives every use.
        let f_static: *const (dyn Fn(usize) + Sync + 'static) = unsafe {
            core::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync + 'static)>(
                f as *const _,
            )
        };
        let job = Job { f: f_static, tasks };
        let sleepers = {
            let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
            s.next.store(0, Ordering::Relaxed);
            st.job = Some(job);
            st.panic = None;
            s.busy.store(self.workers.len(), Ordering::Release);
            s.generation.fetch_add(1, Ordering::AcqRel);
            st.sleepers
        };
        if sleepers > 0 {
            s.work.notify_all();
        }
        let mine = drain(&s.next, job);
        let done = |s: &Shared| s.busy.load(Ordering::Acquire) == 0;
        let mut st = if spin_until(s, || done(s)) {
            s.state.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
            while !done(s) {
                st.caller_sleeping = true;
                st = s.done.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.caller_sleeping = false;
            st
        };
        st.job = None;
        let theirs = st.panic.take();
        drop(st);
        if let Some(p) = mine.or(theirs) {
            resume_unwind(p);
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let _st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Release);
        }
        self.shared.work.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::Serial;
    use std::sync::atomic::AtomicU64;

    fn run_sum(par: &dyn Parallel, tasks: usize) -> Vec<u64> {
        let out: Vec<AtomicU64> = (0..tasks).map(|_| AtomicU64::new(0)).collect();
        par.for_each(tasks, &|i| {
            // A little work per task, so several threads really interleave.
            let mut h = i as u64;
            for _ in 0..200 {
                h = h.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            out[i].fetch_add(h, Ordering::Relaxed);
        });
        out.into_iter().map(|a| a.into_inner()).collect()
    }

    #[test]
    fn pool_matches_serial() {
        for threads in [1, 3] {
            let pool = ThreadPool::new(threads);
            assert_eq!(pool.threads(), threads);
            for tasks in [0, 1, 2, 5, 1000, 10_000] {
                for _ in 0..3 {
                    assert_eq!(run_sum(&pool, tasks), run_sum(&Serial, tasks), "{threads} threads, {tasks} tasks");
                }
            }
        }
    }

    #[test]
    fn pool_runs_gemm_like_serial() {
        use crate::nhwc::gemm_f32::{gemm_f32, PackedWeightsF32};
        use crate::optimized::test_util::Lcg;
        let (m, n, k) = (300, 100, 200);
        let mut g = Lcg::new(9);
        let a = g.vec(m * k);
        let w = PackedWeightsF32::new(n, k, &g.vec(n * k), Some(&g.vec(n))).unwrap();
        let mut c1 = vec![0.0; m * n];
        let mut c3 = vec![0.0; m * n];
        gemm_f32(&Serial, m, &a, k, &w, &mut c1, n, -1.0, 1.0).unwrap();
        let pool = ThreadPool::new(3);
        gemm_f32(&pool, m, &a, k, &w, &mut c3, n, -1.0, 1.0).unwrap();
        assert_eq!(c1, c3);
    }

    #[test]
    fn pool_propagates_panics_and_stays_usable() {
        let pool = ThreadPool::new(3);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.for_each(100, &|i| {
                if i == 57 {
                    panic!("task 57");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(run_sum(&pool, 50), run_sum(&Serial, 50));
    }

    #[test]
    fn pool_shared_between_threads() {
        let pool = Arc::new(ThreadPool::new(2));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let p = pool.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        assert_eq!(run_sum(&*p, 100), run_sum(&Serial, 100));
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
}
