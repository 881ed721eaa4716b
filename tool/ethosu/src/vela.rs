//! Vela (PyPI `ethos-u-vela`) as a toolchain tool: locate it, check its version, run it on a
//! network with an accelerator / system config / memory mode, and read its raw output and
//! performance summary.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::npz::{self, Npy};

/// How to install Vela, shown whenever it cannot be found or is too old.
pub const INSTALL_HINT: &str = "install it with `pip install ethos-u-vela` (into the project's venv: `.venv/bin/pip install ethos-u-vela`), or point RBUILD_VELA at the `vela` executable";

/// The oldest Vela whose `--output-format raw` output this crate reads.
pub const MIN_VERSION: (u32, u32, u32) = (4, 0, 0);

/// Accelerator configurations Vela accepts.
pub const ACCELERATORS: &[&str] = &[
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
];

#[derive(Debug)]
pub enum VelaError {
    NotFound {
        searched: Vec<PathBuf>,
    },
    BadVersion {
        path: PathBuf,
        found: String,
    },
    BadOption(String),
    Io {
        what: String,
        err: std::io::Error,
    },
    Failed {
        command: String,
        code: Option<i32>,
        output: String,
    },
    /// Vela stopped because operators cannot go on the NPU (its raw output needs the whole
    /// network there), listing them with its reasons.
    UnsupportedOperators {
        cpu_ops: Vec<CpuOp>,
        output: String,
    },
    Output(String),
}

impl fmt::Display for VelaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VelaError::NotFound { searched } => {
                write!(f, "Vela (the Ethos-U compiler) not found; looked in RBUILD_VELA, ")?;
                for p in searched {
                    write!(f, "{}, ", p.display())?;
                }
                write!(f, "and PATH. {INSTALL_HINT}")
            }
            VelaError::BadVersion { path, found } => write!(
                f,
                "{}: version `{found}`, rbuild needs Vela >= {}.{}.{}; {INSTALL_HINT}",
                path.display(),
                MIN_VERSION.0,
                MIN_VERSION.1,
                MIN_VERSION.2
            ),
            VelaError::BadOption(m) => write!(f, "Vela options: {m}"),
            VelaError::Io { what, err } => write!(f, "Vela: {what}: {err}"),
            VelaError::Failed { command, code, output } => {
                write!(f, "Vela failed (exit {}): {command}\n{output}", code.map_or("signal".to_string(), |c| c.to_string()))
            }
            VelaError::UnsupportedOperators { cpu_ops, output } => {
                write!(f, "Vela cannot place these operators on the NPU (raw output needs every operator there):")?;
                for c in cpu_ops {
                    write!(f, "\n  {} (output `{}`): {}", c.op, c.ofm, c.reasons.join(" "))?;
                }
                if cpu_ops.is_empty() {
                    write!(f, "\n{output}")?;
                }
                Ok(())
            }
            VelaError::Output(m) => write!(f, "Vela output: {m}"),
        }
    }
}
impl std::error::Error for VelaError {}

/// Runs `<vela> --version`: (exited successfully, stdout, stderr).
pub type VersionProbe<'a> = dyn Fn(&Path) -> std::io::Result<(bool, String, String)> + 'a;

fn run_version(path: &Path) -> std::io::Result<(bool, String, String)> {
    let out = Command::new(path).arg("--version").output()?;
    Ok((out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// A located, version-checked Vela.
#[derive(Clone, Debug)]
pub struct Vela {
    pub path: PathBuf,
    pub version: String,
}

/// `vela --version` prints just the version (`5.2.0`); anything else is not Vela.
fn parse_version(s: &str) -> Option<(u32, u32, u32)> {
    let v = s.lines().next()?.trim();
    if !v.chars().next().is_some_and(|c| c.is_ascii_digit()) || v.contains(char::is_whitespace) {
        return None;
    }
    let mut it = v.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next().flatten().unwrap_or(0), it.next().flatten().unwrap_or(0)))
}

impl Vela {
    /// Finds Vela: `$RBUILD_VELA` when set (only there), else `<root>/.venv/bin/vela` for each
    /// root, then `PATH`.
    pub fn locate(roots: &[&Path]) -> Result<Vela, VelaError> {
        Vela::locate_probed(roots, &run_version)
    }

    /// [`Vela::locate`] with `version` running `<vela> --version` (success, stdout, stderr):
    /// a caller may answer it from a cache of earlier runs of the same, unchanged program.
    pub fn locate_probed(roots: &[&Path], version: &VersionProbe<'_>) -> Result<Vela, VelaError> {
        let mut searched = Vec::new();
        let mut candidates = Vec::new();
        // An explicit RBUILD_VELA is used or reported, never silently passed over.
        if let Some(p) = std::env::var_os("RBUILD_VELA") {
            let p = PathBuf::from(p);
            return if p.is_file() { Vela::at_probed(&p, version) } else { Err(VelaError::NotFound { searched: vec![p] }) };
        }
        for r in roots {
            candidates.push(r.join(".venv/bin/vela"));
        }
        if let Some(path) = std::env::var_os("PATH") {
            for d in std::env::split_paths(&path) {
                candidates.push(d.join("vela"));
            }
        }
        for c in candidates {
            if c.is_file() {
                return Vela::at_probed(&c, version);
            }
            if !c.starts_with("/usr") && !c.starts_with("/bin") {
                searched.push(c);
            }
        }
        Err(VelaError::NotFound { searched })
    }

    /// Uses the Vela at `path`, checking `--version`.
    pub fn at(path: &Path) -> Result<Vela, VelaError> {
        Vela::at_probed(path, &run_version)
    }

    fn at_probed(path: &Path, version: &VersionProbe<'_>) -> Result<Vela, VelaError> {
        let (success, stdout, stderr) =
            version(path).map_err(|err| VelaError::Io { what: format!("running {} --version", path.display()), err })?;
        let text = stdout.trim().to_string();
        match parse_version(&text) {
            Some(v) if success && v >= MIN_VERSION => Ok(Vela { path: path.to_path_buf(), version: text }),
            _ => Err(VelaError::BadVersion { path: path.to_path_buf(), found: format!("{text}{}", stderr.trim()) }),
        }
    }

    /// Compiles a TFLite network. The work happens in a fresh temporary directory, removed after
    /// (kept, and its path printed, when `RBUILD_VELA_KEEP` is set).
    pub fn compile(&self, tflite: &[u8], opts: &VelaOptions) -> Result<VelaOutput, VelaError> {
        opts.check()?;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("rbuild-vela-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).map_err(|err| VelaError::Io { what: format!("creating {}", dir.display()), err })?;
        let r = self.compile_in(&dir, tflite, opts);
        if std::env::var_os("RBUILD_VELA_KEEP").is_some() {
            eprintln!("rbuild-ethosu: kept Vela's work directory {}", dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
        r
    }

    fn compile_in(&self, dir: &Path, tflite: &[u8], opts: &VelaOptions) -> Result<VelaOutput, VelaError> {
        let net = dir.join("network.tflite");
        std::fs::write(&net, tflite).map_err(|err| VelaError::Io { what: format!("writing {}", net.display()), err })?;
        let out_dir = dir.join("out");
        let mut cmd = Command::new(&self.path);
        let args = opts.args(&out_dir, &net);
        cmd.args(&args);
        let command = format!("{} {}", self.path.display(), args.join(" "));
        let out = cmd.output().map_err(|err| VelaError::Io { what: format!("running {command}"), err })?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            let all = format!("{stdout}{stderr}");
            let cpu_ops = parse_cpu_ops(&all);
            if !cpu_ops.is_empty() {
                return Err(VelaError::UnsupportedOperators { cpu_ops, output: all });
            }
            let tail: String = all.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            return Err(VelaError::Failed { command, code: out.status.code(), output: tail });
        }
        let mut npzs: Vec<PathBuf> = std::fs::read_dir(&out_dir)
            .map_err(|err| VelaError::Io { what: format!("listing {}", out_dir.display()), err })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "npz"))
            .collect();
        npzs.sort();
        let mut raws = Vec::new();
        for p in &npzs {
            let bytes = std::fs::read(p).map_err(|err| VelaError::Io { what: format!("reading {}", p.display()), err })?;
            let arrays = npz::parse(&bytes).map_err(|e| VelaError::Output(format!("{}: {e}", p.display())))?;
            raws.push(RawOutput::from_arrays(&arrays).map_err(|m| VelaError::Output(format!("{}: {m}", p.display())))?);
        }
        let csv = std::fs::read_dir(&out_dir)
            .ok()
            .and_then(|d| d.filter_map(|e| e.ok().map(|e| e.path())).find(|p| p.extension().is_some_and(|x| x == "csv")))
            .and_then(|p| std::fs::read_to_string(p).ok());
        let mut summary = Summary::parse(&stdout, csv.as_deref());
        summary.cpu_ops = parse_cpu_ops(&format!("{stdout}\n{stderr}"));
        Ok(VelaOutput { raws, summary, log: format!("{stdout}{stderr}") })
    }
}

/// Accelerator, system configuration, memory mode and config files for one Vela run.
#[derive(Clone, Debug, PartialEq)]
pub struct VelaOptions {
    pub accelerator: String,
    pub system_config: String,
    pub memory_mode: String,
    /// `--config` files: Vela's built-in names (`Arm/vela.ini`) or paths (`toolchains/vela.ini`).
    pub config_files: Vec<String>,
    pub extra_args: Vec<String>,
}

impl VelaOptions {
    /// ExecuTorch's defaults (facts §7): U55 → Ethos_U55_High_End_Embedded / Shared_Sram,
    /// U65 → Ethos_U65_High_End / Sram_Only, U85 → Ethos_U85_SYS_DRAM_Mid / Dedicated_Sram_384KB;
    /// configs from Vela's bundled `Arm/vela.ini`.
    pub fn for_accelerator(accelerator: &str) -> Result<VelaOptions, VelaError> {
        let (sys, mem) = if accelerator.starts_with("ethos-u55") {
            ("Ethos_U55_High_End_Embedded", "Shared_Sram")
        } else if accelerator.starts_with("ethos-u65") {
            ("Ethos_U65_High_End", "Sram_Only")
        } else if accelerator.starts_with("ethos-u85") {
            ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB")
        } else {
            return Err(VelaError::BadOption(format!("unknown accelerator `{accelerator}`; one of {}", ACCELERATORS.join(", "))));
        };
        let o = VelaOptions {
            accelerator: accelerator.into(),
            system_config: sys.into(),
            memory_mode: mem.into(),
            config_files: vec!["Arm/vela.ini".into()],
            extra_args: Vec::new(),
        };
        o.check()?;
        Ok(o)
    }

    fn check(&self) -> Result<(), VelaError> {
        if !ACCELERATORS.contains(&self.accelerator.as_str()) {
            return Err(VelaError::BadOption(format!("unknown accelerator `{}`; one of {}", self.accelerator, ACCELERATORS.join(", "))));
        }
        for (what, v) in [("system config", &self.system_config), ("memory mode", &self.memory_mode)] {
            if v.is_empty() || v.contains(char::is_whitespace) {
                return Err(VelaError::BadOption(format!("{what} `{v}` is not a config section name")));
            }
        }
        Ok(())
    }

    /// The command-line arguments (ExecuTorch's `arm_vela.py` passes the same set).
    pub fn args(&self, out_dir: &Path, network: &Path) -> Vec<String> {
        let mut a = vec![format!("--accelerator-config={}", self.accelerator)];
        for c in &self.config_files {
            a.push(format!("--config={c}"));
        }
        a.push(format!("--system-config={}", self.system_config));
        a.push(format!("--memory-mode={}", self.memory_mode));
        a.push("--output-format=raw".into());
        a.push(format!("--output-dir={}", out_dir.display()));
        a.extend(self.extra_args.iter().cloned());
        a.push(network.display().to_string());
        a
    }
}

/// What one Vela run produced.
#[derive(Clone, Debug)]
pub struct VelaOutput {
    /// One raw output per NPU subgraph (Vela splits the network where operators fall back to the CPU).
    pub raws: Vec<RawOutput>,
    pub summary: Summary,
    /// Vela's stdout and stderr.
    pub log: String,
}

/// An IO tensor of the compiled network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawIo {
    pub shape: Vec<i64>,
    pub elem_size: i64,
    pub offset: i64,
    pub region: i64,
}

/// Vela's `--output-format raw` npz: command stream, weights, scratch sizes and IO tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOutput {
    pub cmd_data: Vec<u8>,
    pub weight_data: Vec<u8>,
    pub weight_region: i64,
    pub scratch_size: u64,
    pub scratch_region: i64,
    pub scratch_fast_size: u64,
    pub scratch_fast_region: i64,
    pub inputs: Vec<RawIo>,
    pub outputs: Vec<RawIo>,
}

fn get<'a>(a: &'a BTreeMap<String, Npy>, k: &str) -> Result<&'a Npy, String> {
    a.get(k).ok_or_else(|| format!("missing array `{k}` (have {})", a.keys().cloned().collect::<Vec<_>>().join(", ")))
}

fn scalar(a: &BTreeMap<String, Npy>, k: &str) -> Result<i64, String> {
    let v = get(a, k)?.ints(k).map_err(|e| e.to_string())?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(format!("`{k}` holds {} values, expected one", v.len())),
    }
}

fn ios(a: &BTreeMap<String, Npy>, prefix: &str) -> Result<Vec<RawIo>, String> {
    let shape_k = format!("{prefix}_shape");
    let shapes = get(a, &shape_k)?;
    let vals = |k: &str| -> Result<Vec<i64>, String> { get(a, k)?.ints(k).map_err(|e| e.to_string()) };
    let elem = vals(&format!("{prefix}_elem_size"))?;
    let off = vals(&format!("{prefix}_offset"))?;
    let reg = vals(&format!("{prefix}_region"))?;
    let n = elem.len();
    if off.len() != n || reg.len() != n {
        return Err(format!("{prefix}: {n} elem sizes, {} offsets, {} regions", off.len(), reg.len()));
    }
    let flat = shapes.ints(&shape_k).map_err(|e| e.to_string())?;
    let rank = match (shapes.shape.as_slice(), n) {
        (_, 0) => 0,
        ([rows, rank], _) if *rows == n => *rank,
        (s, _) => return Err(format!("`{shape_k}` has array shape {s:?} for {n} tensors (tensors of different ranks?)")),
    };
    Ok((0..n)
        .map(|i| RawIo { shape: flat[i * rank..(i + 1) * rank].to_vec(), elem_size: elem[i], offset: off[i], region: reg[i] })
        .collect())
}

impl RawOutput {
    pub fn from_arrays(a: &BTreeMap<String, Npy>) -> Result<RawOutput, String> {
        let bytes = |k: &str| -> Result<Vec<u8>, String> { Ok(get(a, k)?.bytes(k).map_err(|e| e.to_string())?.to_vec()) };
        Ok(RawOutput {
            cmd_data: bytes("cmd_data")?,
            weight_data: bytes("weight_data")?,
            weight_region: scalar(a, "weight_region")?,
            scratch_size: scalar(a, "scratch_size")? as u64,
            scratch_region: scalar(a, "scratch_region")?,
            scratch_fast_size: scalar(a, "scratch_fast_size")? as u64,
            scratch_fast_region: scalar(a, "scratch_fast_region")?,
            inputs: ios(a, "input")?,
            outputs: ios(a, "output")?,
        })
    }
}

/// Vela's network summary: stdout's `key  value` lines and the `<network>_summary_<system>.csv`
/// it writes, as ordered (key, value) pairs, plus the figures rbuild records in the manifest.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// stdout lines (`CPU operators` → `0 (0.0%)`, `Total SRAM used` → `8.33 KiB`, …).
    pub fields: Vec<(String, String)>,
    /// The CSV columns (`cycles_npu`, `cycles_total`, `sram_memory_used`, …).
    pub csv: Vec<(String, String)>,
    pub cpu_operators: Option<u64>,
    pub npu_operators: Option<u64>,
    /// NPU compute cycles (CSV `cycles_npu`).
    pub npu_cycles: Option<u64>,
    /// Estimated total cycles including memory access (CSV `cycles_total`).
    pub total_cycles: Option<u64>,
    pub sram_used_kib: Option<f64>,
    /// Off-chip memory used (flash or DRAM, per the system config), KiB.
    pub offchip_used_kib: Option<f64>,
    pub inference_time_ms: Option<f64>,
    /// Operators Vela left on the CPU, with its reasons (`Warning (supported operators)` lines).
    pub cpu_ops: Vec<CpuOp>,
}

/// An operator Vela will not place on the NPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuOp {
    /// TFLite operator name (`MEAN`, `CONV_2D`, …).
    pub op: String,
    /// Its output tensor's name (our graph's tensor names pass through).
    pub ofm: String,
    pub reasons: Vec<String>,
}

/// Reads Vela's `Warning (supported operators) operator: OP, ofm: 'name'` blocks and the
/// `Reason:` / constraint lines after each.
pub fn parse_cpu_ops(log: &str) -> Vec<CpuOp> {
    let mut out: Vec<CpuOp> = Vec::new();
    let mut open = false;
    for line in log.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Warning (supported operators) operator:") {
            let (op, ofm) = match rest.split_once(", ofm:") {
                Some((op, ofm)) => (op.trim(), ofm.trim().trim_matches('\'')),
                None => (rest.trim(), ""),
            };
            out.push(CpuOp { op: op.to_string(), ofm: ofm.to_string(), reasons: Vec::new() });
            open = true;
        } else if open && !l.is_empty() && !l.starts_with("Traceback") && !l.starts_with("Warning") && !l.starts_with("Network summary") {
            if let Some(c) = out.last_mut() {
                c.reasons.push(l.strip_prefix("Reason:").unwrap_or(l).trim().to_string());
            }
        } else {
            open = false;
        }
    }
    out
}

fn first_number(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == ',')).unwrap_or(t.len());
    t[..end].replace(',', "").parse().ok()
}

/// Splits `Total   SRAM used        8.33 KiB` at the gap before the value, collapsing the key's
/// inner spacing; or `key = value`.
fn split_line(l: &str) -> Option<(String, String)> {
    let l = l.trim();
    if let Some(i) = l.find(" = ") {
        return Some((l[..i].trim().to_string(), l[i + 3..].trim().to_string()));
    }
    let b = l.as_bytes();
    for i in 1..b.len().saturating_sub(1) {
        if b[i] == b' ' && b[i + 1] == b' ' && b[i - 1] != b' ' {
            let rest = l[i..].trim_start();
            if rest.starts_with(|c: char| c.is_ascii_digit()) || !rest.contains("  ") {
                let key = l[..i].split_whitespace().collect::<Vec<_>>().join(" ");
                return Some((key, rest.to_string()));
            }
        }
    }
    None
}

fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

impl Summary {
    /// Reads Vela's stdout summary and, when given, its summary CSV (header row, value row).
    pub fn parse(stdout: &str, csv: Option<&str>) -> Summary {
        let mut s = Summary::default();
        if let Some(csv) = csv {
            let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
            if let (Some(h), Some(v)) = (lines.next(), lines.next()) {
                s.csv = csv_fields(h).into_iter().zip(csv_fields(v)).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
            }
            let num = |k: &str| s.csv.iter().find(|(kk, _)| kk == k).and_then(|(_, v)| v.parse::<f64>().ok());
            s.npu_cycles = num("cycles_npu").map(|x| x as u64);
            s.total_cycles = num("cycles_total").map(|x| x as u64);
            s.sram_used_kib = num("sram_memory_used");
            let off = [num("off_chip_flash_memory_used"), num("dram_memory_used"), num("on_chip_flash_memory_used")];
            if off.iter().any(Option::is_some) {
                s.offchip_used_kib = Some(off.iter().flatten().sum());
            }
            s.inference_time_ms = num("inference_time").map(|t| t * 1000.0);
        }
        for line in stdout.lines() {
            let Some((k, v)) = split_line(line) else { continue };
            if k.is_empty() || v.is_empty() {
                continue;
            }
            s.fields.push((k.clone(), v.clone()));
            let v = v.as_str();
            let kl = k.to_ascii_lowercase();
            let num = first_number(v);
            match kl.as_str() {
                "cpu operators" => s.cpu_operators = num.map(|x| x as u64),
                "npu operators" => s.npu_operators = num.map(|x| x as u64),
                "npu cycles" if s.npu_cycles.is_none() => s.npu_cycles = num.map(|x| x as u64),
                "total sram used" if s.sram_used_kib.is_none() => s.sram_used_kib = num,
                "total off-chip flash used" | "total dram used" | "total off-chip dram used" if s.offchip_used_kib.is_none() => {
                    s.offchip_used_kib = num
                }
                "batch inference time" if s.inference_time_ms.is_none() => s.inference_time_ms = num,
                _ => {}
            }
        }
        s
    }
}
