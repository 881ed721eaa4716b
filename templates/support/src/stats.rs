//! Figures every runner reports: peak memory and run-time medians.

use std::time::Duration;

/// The process's peak resident set size so far (Linux and macOS; None elsewhere).
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "ios"))]
    {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a whole rusage into the pointer we own; it is read only on
        // success.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: zeroed, then written by the successful call above.
        let max = unsafe { ru.assume_init() }.ru_maxrss.max(0) as u64;
        // Linux reports KiB, Apple's systems bytes.
        Some(if cfg!(target_os = "linux") { max * 1024 } else { max })
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "ios")))]
    {
        None
    }
}

/// `12.3 MiB`, or `n/a` when unknown.
pub fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("n/a".to_string(), |b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64))
}

/// Wall times of repeated runs, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunTimes {
    ms: Vec<f64>,
}

impl RunTimes {
    pub fn push(&mut self, d: Duration) {
        self.ms.push(d.as_secs_f64() * 1e3);
    }

    pub fn runs(&self) -> usize {
        self.ms.len()
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.ms.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The middle run (the upper one of an even count); None before any run.
    pub fn median_ms(&self) -> Option<f64> {
        let v = self.sorted();
        v.get(v.len() / 2).copied()
    }

    pub fn min_ms(&self) -> Option<f64> {
        self.sorted().first().copied()
    }
}
