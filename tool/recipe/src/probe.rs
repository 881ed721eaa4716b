//! Checking that a platform's tools are present (`which` + a version probe) and installing the
//! missing ones from the steps its file declares.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use miette::Diagnostic;

use crate::toolchain::{InstallStep, Platform, Tool};

/// What [`Platform::check`] found for one tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolStatus {
    pub tool: String,
    /// Where it is and the first line its version probe printed, when it is installed.
    pub found: Option<(PathBuf, String)>,
    /// The exact command(s) that install it, one per line (or manual instructions).
    pub install_hint: String,
    /// The steps behind `install_hint`.
    pub steps: Vec<InstallStep>,
}

/// How long a version probe may take before it counts as broken (a tool waiting on a
/// terminal or a network must not hang `rbuild doctor`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl Platform {
    /// Probes every tool the platform needs, plus the Rust standard library for its target
    /// when it cross-compiles.
    pub fn check(&self) -> Vec<ToolStatus> {
        // The build machine's OS comes first: without it no tool matters.
        let mut statuses: Vec<ToolStatus> = self.host_os.iter().map(|os| check_host_os(os, &self.name)).collect();
        statuses.extend(self.tools.iter().map(|tool| check_tool(tool, self.source.name())));
        if let Some(target) = &self.rust_target {
            statuses.push(check_rust_target(target));
        }
        statuses
    }

    /// Installs the missing tools: the automatic steps of all of them grouped into one command
    /// per installer (`apt-get update` runs before `apt-get install`). Returns the commands it
    /// ran. Fails at the first command that fails, or at the end when some tools need manual
    /// steps.
    pub fn install(&self) -> Result<Vec<String>, InstallError> {
        let missing: Vec<ToolStatus> = self.check().into_iter().filter(|s| s.found.is_none()).collect();
        let mut grouped: Vec<InstallStep> = Vec::new();
        let mut manual = Vec::new();
        for status in &missing {
            if status.steps.iter().all(|s| matches!(s, InstallStep::Manual(_))) {
                manual.push((status.tool.clone(), status.install_hint.clone()));
            }
            for step in &status.steps {
                merge(&mut grouped, step);
            }
        }
        // apt may provide pip or cargo themselves, so it goes first; the grouping kept the
        // other installers in first-seen order.
        grouped.sort_by_key(|s| !matches!(s, InstallStep::Apt(_)));
        let mut ran = Vec::new();
        for step in &grouped {
            let Some((program, args)) = step.command() else { continue };
            if matches!(step, InstallStep::Apt(_)) {
                run(&mut ran, "apt-get", &["update".to_string()])?;
            }
            run(&mut ran, program, &args)?;
        }
        if manual.is_empty() {
            Ok(ran)
        } else {
            Err(InstallError::Manual { ran, steps: manual })
        }
    }
}

/// Adds `step` to `grouped`, joining it with an earlier step of the same installer.
fn merge(grouped: &mut Vec<InstallStep>, step: &InstallStep) {
    let items = |s: &InstallStep| match s {
        InstallStep::Apt(i) | InstallStep::Pip(i) | InstallStep::RustupTarget(i) | InstallStep::Cargo(i) => Some(i.clone()),
        InstallStep::Manual(_) => None,
    };
    let Some(new) = items(step) else { return };
    let same = grouped.iter_mut().find(|g| std::mem::discriminant(*g) == std::mem::discriminant(step));
    match same {
        Some(InstallStep::Apt(i) | InstallStep::Pip(i) | InstallStep::RustupTarget(i) | InstallStep::Cargo(i)) => {
            for item in new {
                if !i.contains(&item) {
                    i.push(item);
                }
            }
        }
        _ => grouped.push(step.clone()),
    }
}

fn run(ran: &mut Vec<String>, program: &str, args: &[String]) -> Result<(), InstallError> {
    let shown = format!("{program} {}", args.join(" "));
    let status = Command::new(program).args(args).stdin(Stdio::null()).status();
    match status {
        Ok(s) if s.success() => {
            ran.push(shown);
            Ok(())
        }
        Ok(s) => Err(InstallError::Failed { command: shown, detail: format!("it exited with {s}"), ran: ran.clone() }),
        Err(e) => Err(InstallError::Failed { command: shown, detail: format!("it could not start: {e}"), ran: ran.clone() }),
    }
}

fn check_tool(tool: &Tool, file: &str) -> ToolStatus {
    let install_hint = if tool.install.is_empty() {
        format!("no install steps are declared for `{}` in {file}", tool.name)
    } else {
        tool.install.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("\n")
    };
    let found = which::which(&tool.command).ok().map(|path| {
        let version = probe(&path, &tool.version_args);
        (path, version)
    });
    ToolStatus { tool: tool.name.clone(), found, install_hint, steps: tool.install.clone() }
}

/// A platform whose SDK exists on one OS only (Apple's) builds there; this "tool" is found
/// exactly when rbuild runs on that OS.
fn check_host_os(os: &str, platform: &str) -> ToolStatus {
    let this = std::env::consts::OS;
    let pretty = |os: &str| match os {
        "macos" => "macOS".to_string(),
        "linux" => "Linux".to_string(),
        "windows" => "Windows".to_string(),
        other => other.to_string(),
    };
    let found = (this == os).then(|| (PathBuf::from("/"), format!("{} {}", pretty(this), std::env::consts::ARCH)));
    let step = InstallStep::Manual(format!(
        "{platform} builds only on {} (its SDK is not available for {}): run rbuild on a {} machine",
        pretty(os),
        pretty(this),
        pretty(os)
    ));
    ToolStatus { tool: format!("{} build machine", pretty(os)), found, install_hint: step.to_string(), steps: vec![step] }
}

/// A cross target needs its standard library in rustc's sysroot (what `rustup target add`
/// puts there).
fn check_rust_target(target: &str) -> ToolStatus {
    let step = InstallStep::RustupTarget(vec![target.to_string()]);
    let found = sysroot().and_then(|sysroot| {
        let dir = sysroot.join("lib").join("rustlib").join(target);
        dir.join("lib").is_dir().then(|| (dir, probe(Path::new("rustc"), &["--version".to_string()])))
    });
    ToolStatus { tool: format!("rust-std for {target}"), found, install_hint: step.to_string(), steps: vec![step] }
}

fn sysroot() -> Option<PathBuf> {
    let out = Command::new("rustc").args(["--print", "sysroot"]).stdin(Stdio::null()).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| PathBuf::from(text.trim()))
}

/// The first line `program args` prints (stdout, else stderr), or why there is none.
fn probe(program: &Path, args: &[String]) -> String {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return format!("unknown (could not run it: {e})"),
    };
    // Version output is far smaller than a pipe buffer, so reading after exit cannot block.
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < PROBE_TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return "unknown (the version probe did not finish)".to_string();
            }
        }
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let first_line = |text: &str| text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string);
    first_line(&out).or_else(|| first_line(&err)).unwrap_or_else(|| "unknown (no version output)".to_string())
}

/// Why [`Platform::install`] did not finish.
#[derive(Clone, Debug, PartialEq)]
pub enum InstallError {
    /// A command failed; `ran` are the commands that succeeded before it.
    Failed { command: String, detail: String, ran: Vec<String> },
    /// Every automatic step ran, but these tools need a person: (tool, instructions).
    Manual { ran: Vec<String>, steps: Vec<(String, String)> },
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::Failed { command, detail, .. } => write!(f, "`{command}` failed: {detail}"),
            InstallError::Manual { steps, .. } => {
                write!(f, "install these by hand:")?;
                for (tool, how) in steps {
                    write!(f, "\n  {tool}: {how}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for InstallError {}

impl Diagnostic for InstallError {
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self {
            InstallError::Failed { command, .. } if command.starts_with("apt-get") => {
                Some(Box::new("apt-get needs root: run it as root (or with sudo), then check again"))
            }
            InstallError::Failed { .. } => Some(Box::new("run the command yourself to see its full output")),
            InstallError::Manual { .. } => None,
        }
    }
}
