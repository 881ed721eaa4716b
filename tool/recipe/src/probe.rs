//! Checking that a platform's tools are present (`which`, the files each requires, and a
//! version probe) and installing the missing ones from the steps its file declares.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use miette::Diagnostic;

use crate::probe_cache::Probes;
use crate::toolchain::{InstallStep, Platform, Tool};

/// What [`Platform::check`] found for one tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolStatus {
    pub tool: String,
    /// Where it is and the first line its version probe printed, when it is installed and
    /// every file it requires exists.
    pub found: Option<(PathBuf, String)>,
    /// Files the tool requires (`requires` in the platform file) that do not exist: the tool
    /// counts as missing even when its executable is on PATH.
    pub missing_files: Vec<PathBuf>,
    /// The exact command(s) that install it, one per line (or manual instructions).
    pub install_hint: String,
    /// The steps behind `install_hint`.
    pub steps: Vec<InstallStep>,
}

impl ToolStatus {
    /// Why the tool counts as missing, in a few words (`None` when it is found).
    pub fn why_missing(&self) -> Option<String> {
        if self.found.is_some() {
            return None;
        }
        if self.missing_files.is_empty() {
            return Some("not found".to_string());
        }
        let files: Vec<String> = self.missing_files.iter().map(|f| f.display().to_string()).collect();
        Some(format!("incomplete: no {}", files.join(", ")))
    }

    /// Whether only a person can install it (every step is manual instructions).
    pub fn needs_a_person(&self) -> bool {
        self.steps.iter().all(|step| matches!(step, InstallStep::Manual(_)))
    }
}

impl Platform {
    /// Probes every tool the platform needs, plus the Rust standard library for its target
    /// when it cross-compiles. Every probe runs (see [`Platform::check_with`] to reuse them).
    pub fn check(&self) -> Vec<ToolStatus> {
        self.check_with(&Probes::in_memory())
    }

    /// [`Platform::check`] with version probes answered by `probes` where the program is
    /// unchanged since it last ran. Executables and required files are looked up every time.
    pub fn check_with(&self, probes: &Probes) -> Vec<ToolStatus> {
        // The build machine's OS comes first: without it no tool matters.
        let mut statuses: Vec<ToolStatus> = self.host_os.iter().map(|os| check_host_os(os, &self.name)).collect();
        statuses.extend(self.tools.iter().map(|tool| check_tool(tool, self.source.name(), probes)));
        if let Some(target) = &self.rust_target {
            statuses.push(check_rust_target(target, probes));
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
            if status.needs_a_person() {
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

fn check_tool(tool: &Tool, file: &str, probes: &Probes) -> ToolStatus {
    let install_hint = if tool.install.is_empty() {
        format!("no install steps are declared for `{}` in {file}", tool.name)
    } else {
        tool.install.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("\n")
    };
    let missing_files: Vec<PathBuf> = tool.requires.iter().filter(|f| !f.exists()).cloned().collect();
    let found = which::which(&tool.command).ok().filter(|_| missing_files.is_empty()).map(|path| {
        let version = version(probes, &path, &tool.version_args);
        (path, version)
    });
    ToolStatus { tool: tool.name.clone(), found, missing_files, install_hint, steps: tool.install.clone() }
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
    ToolStatus { tool: format!("{} build machine", pretty(os)), found, missing_files: Vec::new(), install_hint: step.to_string(), steps: vec![step] }
}

/// A cross target needs its standard library in rustc's sysroot (what `rustup target add`
/// puts there).
fn check_rust_target(target: &str, probes: &Probes) -> ToolStatus {
    let step = InstallStep::RustupTarget(vec![target.to_string()]);
    let found = sysroot(probes).and_then(|sysroot| {
        let dir = sysroot.join("lib").join("rustlib").join(target);
        dir.join("lib").is_dir().then(|| (dir, version(probes, Path::new("rustc"), &["--version".to_string()])))
    });
    ToolStatus { tool: format!("rust-std for {target}"), found, missing_files: Vec::new(), install_hint: step.to_string(), steps: vec![step] }
}

fn sysroot(probes: &Probes) -> Option<PathBuf> {
    let out = probes.run(Path::new("rustc"), &["--print".to_string(), "sysroot".to_string()]).ok()?;
    let text = out.stdout.trim();
    (out.success && !text.is_empty()).then(|| PathBuf::from(text))
}

/// The first line `program args` prints (stdout, else stderr), or why there is none.
fn version(probes: &Probes, program: &Path, args: &[String]) -> String {
    match probes.run(program, args) {
        Ok(out) => out.first_line().map_or_else(|| "unknown (no version output)".to_string(), str::to_string),
        Err(why) => format!("unknown (the version probe failed: {why})"),
    }
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
