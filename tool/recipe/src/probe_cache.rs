//! Tool probes (`rustc -vV`, `cc --version`, `rustc --print sysroot`, …) remembered on disk.
//!
//! Starting a compiler just to ask its version costs 10–40 ms each, and a no-op rebuild asks
//! several; so a probe's output is kept, keyed by the program as found on `PATH` and its
//! arguments, and reused while the program's *fingerprint* is unchanged: the resolved binary's
//! path, size and modification time. A rustup proxy (`~/.cargo/bin/rustc` is rustup itself)
//! does not change when the toolchain behind it does, so its fingerprint also holds what picks
//! and makes the active toolchain: `RUSTUP_TOOLCHAIN`, the folder (for directory overrides and
//! `rust-toolchain.toml` files), rustup's settings and every installed toolchain's binary of
//! that name.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, UNIX_EPOCH};

/// How long a probe may take before it counts as broken (a tool waiting on a terminal or a
/// network must not hang `rbuild doctor` or a build).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bumped when the file's layout or the fingerprint's recipe changes: older files are ignored.
const FORMAT: u64 = 1;

/// What a probe printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captured {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Captured {
    /// The first non-empty line of stdout, else of stderr (some tools print versions there).
    pub fn first_line(&self) -> Option<&str> {
        fn first(text: &str) -> Option<&str> {
            text.lines().map(str::trim).find(|l| !l.is_empty())
        }
        first(&self.stdout).or_else(|| first(&self.stderr))
    }
}

#[derive(Clone, Debug)]
struct Entry {
    fingerprint: String,
    captured: Captured,
}

/// Probe results, shared by the threads of one rbuild run and, when backed by a file, by
/// later runs.
pub struct Probes {
    file: Option<PathBuf>,
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl Probes {
    /// Remembers probes for this process only.
    pub fn in_memory() -> Probes {
        Probes { file: None, entries: Mutex::new(BTreeMap::new()) }
    }

    /// Remembers probes in `file` (JSON). A missing, unreadable or older-format file starts
    /// empty: it is a cache, and every entry is checked against its program before use.
    pub fn at(file: impl Into<PathBuf>) -> Probes {
        let file = file.into();
        let entries = std::fs::read(&file).ok().and_then(|bytes| parse(&bytes)).unwrap_or_default();
        Probes { file: Some(file), entries: Mutex::new(entries) }
    }

    /// The file behind this cache, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Runs `program args` (a name looked up on `PATH`, or a path), or returns what an earlier
    /// run of the same, unchanged program printed. Errors say why it could not be run.
    pub fn run(&self, program: &Path, args: &[String]) -> Result<Captured, String> {
        let resolved = which::which(program).map_err(|e| format!("`{}` not found: {e}", program.display()))?;
        let key = std::iter::once(resolved.display().to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join("\u{1f}");
        // A program that cannot be fingerprinted (unreadable metadata) is run every time.
        let fingerprint = fingerprint(&resolved);
        if let Some(fingerprint) = &fingerprint {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = entries.get(&key).filter(|e| &e.fingerprint == fingerprint) {
                return Ok(entry.captured.clone());
            }
        }
        // The lock is not held while the program runs: parallel builds probe in parallel.
        let captured = capture(&resolved, args)?;
        if let Some(fingerprint) = fingerprint {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.insert(key, Entry { fingerprint, captured: captured.clone() });
            // A cache that cannot be written only costs the next run its probes.
            let _ = self.save(&entries);
        }
        Ok(captured)
    }

    fn save(&self, entries: &BTreeMap<String, Entry>) -> std::io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        let probes: serde_json::Map<String, serde_json::Value> = entries
            .iter()
            .map(|(key, e)| {
                let value = serde_json::json!({
                    "fingerprint": e.fingerprint,
                    "success": e.captured.success,
                    "stdout": e.captured.stdout,
                    "stderr": e.captured.stderr,
                });
                (key.clone(), value)
            })
            .collect();
        let text = serde_json::to_vec_pretty(&serde_json::json!({ "format": FORMAT, "probes": probes }))?;
        write_atomic(file, &text)
    }
}

fn parse(bytes: &[u8]) -> Option<BTreeMap<String, Entry>> {
    let doc: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if doc["format"].as_u64() != Some(FORMAT) {
        return None;
    }
    let mut entries = BTreeMap::new();
    for (key, v) in doc["probes"].as_object()? {
        let text = |field: &str| v[field].as_str().map(str::to_string);
        let (Some(fingerprint), Some(success), Some(stdout), Some(stderr)) =
            (text("fingerprint"), v["success"].as_bool(), text("stdout"), text("stderr"))
        else {
            continue;
        };
        entries.insert(key.clone(), Entry { fingerprint, captured: Captured { success, stdout, stderr } });
    }
    Some(entries)
}

/// Writes through a temporary file in the same folder and a rename, so a concurrent reader
/// sees the old file or the new one, never half of one.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Size and modification time (ns) of `path`, following links; `-` when it does not exist.
fn stamp(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => {
            let mtime = m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            format!("{} {mtime}", m.len())
        }
        Err(_) => "-".to_string(),
    }
}

/// What identifies the program `resolved` runs; `None` when its metadata cannot be read.
fn fingerprint(resolved: &Path) -> Option<String> {
    let real = resolved.canonicalize().ok()?;
    std::fs::metadata(&real).ok()?;
    let mut parts = vec![format!("{} {}", real.display(), stamp(&real))];
    if is_rustup_proxy(resolved, &real) {
        let tool = resolved.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        parts.push(rustup_state(&tool));
    }
    Some(parts.join("; "))
}

/// rustup installs its proxies as links to itself: symbolic (the resolved file is `rustup`)
/// or hard (the same file as the `rustup` beside it).
fn is_rustup_proxy(resolved: &Path, real: &Path) -> bool {
    let is_rustup = |p: &Path| p.file_stem().is_some_and(|s| s == "rustup");
    if is_rustup(real) {
        return !is_rustup(resolved);
    }
    let Some(sibling) = resolved.parent().map(|d| d.join(format!("rustup{}", std::env::consts::EXE_SUFFIX))) else {
        return false;
    };
    same_file(real, &sibling)
}

#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Everything that decides which toolchain a rustup proxy named `tool` runs, and that
/// toolchain's binary: cheap file stats, no process.
fn rustup_state(tool: &str) -> String {
    let home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")))
        .unwrap_or_default();
    let mut parts = vec![
        format!("RUSTUP_TOOLCHAIN={}", std::env::var("RUSTUP_TOOLCHAIN").unwrap_or_default()),
        format!("RUSTUP_HOME={}", home.display()),
        format!("settings {}", stamp(&home.join("settings.toml"))),
    ];
    // Directory overrides and toolchain files apply to the folder rustup runs in and those
    // above it.
    let cwd = std::env::current_dir().unwrap_or_default();
    parts.push(format!("cwd {}", cwd.display()));
    for dir in cwd.ancestors() {
        for name in ["rust-toolchain.toml", "rust-toolchain"] {
            let file = dir.join(name);
            if file.is_file() {
                parts.push(format!("{} {}", file.display(), stamp(&file)));
            }
        }
    }
    // `rustup update` replaces binaries inside a toolchain without touching the settings.
    let mut toolchains: Vec<PathBuf> =
        std::fs::read_dir(home.join("toolchains")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    toolchains.sort();
    for dir in toolchains {
        let binary = dir.join("bin").join(tool);
        parts.push(format!("{} {}", binary.display(), stamp(&binary)));
    }
    parts.join(", ")
}

/// Runs `program args` with no input, up to [`PROBE_TIMEOUT`].
fn capture(program: &Path, args: &[String]) -> Result<Captured, String> {
    let child = Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = child.map_err(|e| format!("could not run it: {e}"))?;
    // Probe output is far smaller than a pipe buffer, so reading after exit cannot block.
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < PROBE_TIMEOUT => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it did not finish within {} s", PROBE_TIMEOUT.as_secs()));
            }
        }
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut stdout);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut stderr);
    }
    Ok(Captured { success: status.success(), stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_prefers_stdout_then_stderr() {
        let c = |out: &str, err: &str| Captured { success: true, stdout: out.into(), stderr: err.into() };
        assert_eq!(c("\n  v1 \nx", "e").first_line(), Some("v1"));
        assert_eq!(c(" \n", "e2\n").first_line(), Some("e2"));
        assert_eq!(c("", "").first_line(), None);
    }

    #[test]
    fn a_file_of_another_format_is_ignored() {
        assert!(parse(br#"{"format": 0, "probes": {}}"#).is_none());
        assert!(parse(b"not json").is_none());
        let one = br#"{"format": 1, "probes": {"k": {"fingerprint": "f", "success": true, "stdout": "o", "stderr": ""}, "bad": {}}}"#;
        let entries = parse(one).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries["k"].captured.stdout, "o");
    }
}
