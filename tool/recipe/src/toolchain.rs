//! Platform files (`toolchains/<platform>.kdl`): the Rust target, linker, the tools a build for
//! the platform needs (how to find them, how to install them) and how to run a binary there.
//! Adding a platform is adding a file, not code.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kdl::{KdlDocument, KdlNode};
use miette::Report;

use crate::board::{decode_board, Board, BOARD_NODES};
use crate::decode::{Decoder, Parent, Spanned};
use crate::diag::{syntax_problems, LoadError, Problem, Source};

/// A loaded platform file.
#[derive(Clone, Debug)]
pub struct Platform {
    /// The file stem: `toolchains/linux-arm64.kdl` is `linux-arm64`.
    pub name: String,
    pub description: String,
    /// The Rust target triple; `None` builds for the machine rbuild runs on.
    pub rust_target: Option<String>,
    /// The linker cargo should use for `rust_target` (one of `tools`).
    pub linker: Option<String>,
    pub tools: Vec<Tool>,
    pub run: RunSpec,
    /// The operating system a build for this platform must run on (`macos`: Apple's SDKs
    /// exist only there), as `std::env::consts::OS` names it; `None`: any.
    pub host_os: Option<String>,
    /// CPU, memory map, firmware layout and NPU of a bare-metal board (`crate::board`).
    pub board: Option<Board>,
    /// A GPU runtime the platform's runs need (`gpu "cuda"`): builds do not need it, so they
    /// proceed without one; `rbuild doctor` checks it and verification is skipped, saying why,
    /// where it is missing.
    pub gpu: Option<PlatformGpu>,
    /// The file's text, for diagnostics raised later about this platform.
    pub source: Source,
}

/// The GPU runtime a platform's runs need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformGpu {
    /// An NVIDIA GPU with its driver (libcuda) and NVRTC.
    Cuda,
}

impl PlatformGpu {
    pub fn as_str(self) -> &'static str {
        match self {
            PlatformGpu::Cuda => "cuda",
        }
    }
}

/// A program a build for the platform needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    /// The executable looked up on PATH (defaults to the tool's name).
    pub command: String,
    /// Arguments that make it print its version; the first line of output is kept.
    pub version_args: Vec<String>,
    /// Absolute paths of files the tool is useless without (a cross compiler's C library:
    /// `crti.o`), which its executable alone does not prove present.
    pub requires: Vec<PathBuf>,
    /// How to install it when missing, in order.
    pub install: Vec<InstallStep>,
}

/// One way of installing a missing tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallStep {
    /// Debian/Ubuntu packages: `apt-get install -y …`.
    Apt(Vec<String>),
    /// Python packages: `pip install …`.
    Pip(Vec<String>),
    /// Rust standard libraries for targets: `rustup target add …`.
    RustupTarget(Vec<String>),
    /// Rust programs: `cargo install …`.
    Cargo(Vec<String>),
    /// Instructions for a person; [`Platform::install`] cannot run these.
    Manual(String),
}

impl InstallStep {
    /// The program and arguments that perform this step, or `None` for manual steps.
    pub fn command(&self) -> Option<(&'static str, Vec<String>)> {
        let with = |prefix: &[&str], items: &[String]| {
            prefix.iter().map(|s| s.to_string()).chain(items.iter().cloned()).collect::<Vec<_>>()
        };
        match self {
            InstallStep::Apt(p) => Some(("apt-get", with(&["install", "-y"], p))),
            InstallStep::Pip(p) => Some(("pip", with(&["install"], p))),
            InstallStep::RustupTarget(t) => Some(("rustup", with(&["target", "add"], t))),
            InstallStep::Cargo(c) => Some(("cargo", with(&["install"], c))),
            InstallStep::Manual(_) => None,
        }
    }
}

impl fmt::Display for InstallStep {
    /// The exact command a person would type (or the manual instructions).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.command()) {
            (InstallStep::Manual(text), _) => f.write_str(text),
            (_, Some((program, args))) => write!(f, "{program} {}", args.join(" ")),
            (_, None) => Ok(()),
        }
    }
}

/// How a binary built for the platform is run on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunSpec {
    /// Directly.
    Native,
    /// Through an emulator: `program args… <binary> <binary's args…>`.
    Emulator { program: String, args: Vec<String> },
    /// Not on this kind of machine (a phone, a simulator rbuild does not drive yet); the
    /// text says where it does run.
    Elsewhere(String),
}

impl RunSpec {
    /// A command that runs `binary` (add the binary's own arguments to it), or `None` when
    /// binaries of this platform do not run here.
    pub fn command(&self, binary: &Path) -> Option<Command> {
        match self {
            RunSpec::Native => Some(Command::new(binary)),
            RunSpec::Emulator { program, args } => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(binary);
                Some(cmd)
            }
            RunSpec::Elsewhere(_) => None,
        }
    }

    /// The words before the binary: empty when native, the emulator and its arguments
    /// otherwise (for scripts and manifests).
    pub fn prefix(&self) -> Vec<String> {
        match self {
            RunSpec::Emulator { program, args } => std::iter::once(program.clone()).chain(args.iter().cloned()).collect(),
            RunSpec::Native | RunSpec::Elsewhere(_) => Vec::new(),
        }
    }

    /// How a binary runs, in a few words: `native`, `qemu-aarch64`, or why it cannot here.
    pub fn describe(&self) -> String {
        match self {
            RunSpec::Native => "native".into(),
            RunSpec::Emulator { program, .. } => program.clone(),
            RunSpec::Elsewhere(why) => format!("not here: {why}"),
        }
    }
}

const TOP: &[&str] = &["description", "host-os", "target", "linker", "run", "tool", "gpu", "cpu", "memory", "firmware", "npu"];
/// Operating systems `host-os` may name (`std::env::consts::OS` spellings).
const HOST_OSES: &[&str] = &["linux", "macos", "windows"];
const TOOL: &[&str] = &["command", "version", "requires", "install"];
const INSTALL: &[&str] = &["apt", "pip", "rustup-target", "cargo", "manual"];

/// Loads every `*.kdl` file in `dir` (sorted by name). Problems in all files come back in
/// one report.
pub fn load_platforms(dir: impl AsRef<Path>) -> Result<Vec<Platform>, Report> {
    let dir = dir.as_ref();
    let what = format!("cannot load platforms from `{}`", dir.display());
    let files = kdl_files(dir).map_err(|e| {
        LoadError::report(
            &what,
            vec![Problem::plain(format!("cannot read folder `{}`: {e}", dir.display()))
                .help("platform files live in `toolchains/<platform>.kdl` at the repository root")],
        )
    })?;
    let mut platforms = Vec::new();
    let mut problems = Vec::new();
    for path in files {
        match read_platform(&path) {
            Ok(platform) => platforms.push(platform),
            Err(mut found) => problems.append(&mut found),
        }
    }
    LoadError::check(&what, problems)?;
    Ok(platforms)
}

/// Loads one platform file.
pub fn load_platform(path: impl AsRef<Path>) -> Result<Platform, Report> {
    let path = path.as_ref();
    read_platform(path).map_err(|problems| LoadError::report(&format!("cannot load platform `{}`", path.display()), problems))
}

impl Platform {
    /// Parses and validates platform `text` as if read from `path` (whose stem names it).
    pub fn from_source(path: impl AsRef<Path>, text: impl Into<String>) -> Result<Platform, Report> {
        let path = path.as_ref();
        parse_platform(path, text.into())
            .map_err(|problems| LoadError::report(&format!("cannot load platform `{}`", path.display()), problems))
    }
}

/// The `.kdl` files directly in `dir`, sorted so reports and listings are stable.
pub(crate) fn kdl_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "kdl") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn read_platform(path: &Path) -> Result<Platform, Vec<Problem>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Problem::plain(format!("cannot read `{}`: {e}", path.display()))])?;
    parse_platform(path, text)
}

fn parse_platform(path: &Path, text: String) -> Result<Platform, Vec<Problem>> {
    let source = Source::new(path.display().to_string(), text);
    let doc: KdlDocument = source.text().parse().map_err(|e| syntax_problems(&source, e))?;
    let mut d = Decoder::new(&source);
    let platform = decode(&mut d, &doc);
    if !d.problems.is_empty() {
        return Err(d.problems);
    }
    let (description, rust_target, linker, tools, run, host_os, board, gpu) =
        platform.ok_or_else(|| vec![Problem::plain(format!("`{}` could not be decoded", path.display()))])?;
    let name = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    Ok(Platform { name, description, rust_target, linker, tools, run, host_os, board, gpu, source })
}

type Parts = (String, Option<String>, Option<String>, Vec<Tool>, RunSpec, Option<String>, Option<Board>, Option<PlatformGpu>);

fn decode(d: &mut Decoder, doc: &KdlDocument) -> Option<Parts> {
    let file = Parent::File("platform file");
    if !d.not_empty(doc, "platform file", "`target \"host\"; run \"native\"`") {
        return None;
    }
    let top = d.fields(file, Some(doc), TOP, &["tool"]);
    let description = match top.get("description") {
        Some(node) => d.string(node).map(|s| s.value),
        None => Some(String::new()),
    };
    let host_os = match top.get("host-os") {
        Some(node) => d.string(node).and_then(|os| {
            if HOST_OSES.contains(&os.value.as_str()) {
                return Some(Some(os.value));
            }
            let help = crate::suggest::help(&os.value, HOST_OSES, "operating systems");
            d.error(os.span, format!("unknown operating system `{}`", os.value), "not an operating system", help);
            None
        }),
        None => Some(None),
    };
    let target = d
        .require(&top, file, "target", "`target \"aarch64-unknown-linux-gnu\"` or `target \"host\"`")
        .and_then(|node| d.string(node))
        .and_then(|t| rust_target(d, t));
    let tool_nodes: Vec<&KdlNode> = top.all("tool").collect();
    let tools: Vec<Option<Tool>> = tool_nodes.iter().map(|node| tool(d, node)).collect();
    // Names as written, so a tool with a mistake in its block still counts as declared and
    // does not also make its linker or emulator "undeclared".
    let declared: Vec<String> = tool_nodes.iter().filter_map(|n| tool_name(n)).collect();
    let declared: Vec<&str> = declared.iter().map(String::as_str).collect();
    duplicate_tools(d, &tool_nodes);
    let linker = match top.get("linker") {
        Some(node) => d.string(node).and_then(|l| declared_tool(d, l, &declared, "linker")).map(Some),
        None => Some(None),
    };
    let run = d
        .require(&top, file, "run", "`run \"native\"` or `run \"qemu-aarch64\" \"-L\" \"/usr/aarch64-linux-gnu\"`")
        .and_then(|node| run(d, node, &declared));
    debug_assert!(BOARD_NODES.iter().all(|n| TOP.contains(n)));
    let board = decode_board(d, top.get("cpu"), top.get("memory"), top.get("firmware"), top.get("npu"));
    let gpu = match top.get("gpu") {
        Some(node) => d.string(node).and_then(|g| {
            if g.value == "cuda" {
                return Some(Some(PlatformGpu::Cuda));
            }
            d.error(g.span, format!("unknown GPU runtime `{}`", g.value), "not a GPU runtime", "the GPU runtime a platform can need is `cuda`");
            None
        }),
        None => Some(None),
    };
    let tools = tools.into_iter().collect::<Option<Vec<Tool>>>();
    Some((description?, target?, linker?, tools?, run?, host_os?, board?, gpu?))
}

/// `host` means "no cross target"; anything else must at least look like a target triple.
fn rust_target(d: &mut Decoder, target: Spanned<String>) -> Option<Option<String>> {
    if target.value == "host" {
        return Some(None);
    }
    let looks_like_triple = target.value.split('-').count() >= 2
        && target.value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if looks_like_triple {
        return Some(Some(target.value));
    }
    d.error(
        target.span,
        format!("`{}` is not a Rust target triple", target.value),
        "not a target triple",
        "write a triple such as `aarch64-unknown-linux-gnu` (`rustc --print target-list` lists them), or `host`",
    );
    None
}

fn tool(d: &mut Decoder, node: &KdlNode) -> Option<Tool> {
    let name = d.block_name(node, TOOL);
    let fields = d.fields(Parent::Node(node), node.children(), TOOL, &[]);
    let command = match fields.get("command") {
        Some(n) => d.string(n).map(|c| Some(c.value)),
        None => Some(None),
    };
    let version_args = match fields.get("version") {
        Some(n) => d.strings(n).map(|args| args.into_iter().map(|a| a.value).collect()),
        None => Some(vec!["--version".to_string()]),
    };
    let requires = match fields.get("requires") {
        Some(n) => required_files(d, n),
        None => Some(Vec::new()),
    };
    let install = match fields.get("install") {
        Some(n) => install(d, n),
        None => Some(Vec::new()),
    };
    let name = name?.value;
    let command = command?.unwrap_or_else(|| name.clone());
    Some(Tool { name, command, version_args: version_args?, requires: requires?, install: install? })
}

/// `requires "/usr/aarch64-linux-gnu/lib/crti.o" …`: absolute paths only, since a relative
/// one would depend on the folder rbuild happens to run in.
fn required_files(d: &mut Decoder, node: &KdlNode) -> Option<Vec<PathBuf>> {
    let paths = d.strings(node)?;
    let mut files = Some(Vec::new());
    for path in paths {
        if Path::new(&path.value).is_absolute() {
            if let Some(files) = files.as_mut() {
                files.push(PathBuf::from(path.value));
            }
        } else {
            d.error(
                path.span,
                format!("`requires` path `{}` is not absolute", path.value),
                "relative path",
                "write the file's full path, e.g. `requires \"/usr/aarch64-linux-gnu/lib/crti.o\"`",
            );
            files = None;
        }
    }
    files
}

fn install(d: &mut Decoder, node: &KdlNode) -> Option<Vec<InstallStep>> {
    for extra in d.args(node, INSTALL) {
        d.error(extra.span(), "`install` takes no values", "unexpected value", "put the steps in its block: `install { apt \"…\" }`");
    }
    let fields = d.fields(Parent::Node(node), node.children(), INSTALL, INSTALL);
    let mut steps = Some(Vec::new());
    for step in fields.iter() {
        let kind = step.name().value();
        let step = if kind == "manual" {
            d.string(step).map(|text| InstallStep::Manual(text.value))
        } else {
            d.strings(step).map(|items| {
                let items = items.into_iter().map(|i| i.value).collect();
                match kind {
                    "apt" => InstallStep::Apt(items),
                    "pip" => InstallStep::Pip(items),
                    "rustup-target" => InstallStep::RustupTarget(items),
                    _ => InstallStep::Cargo(items),
                }
            })
        };
        match (step, steps.as_mut()) {
            (Some(step), Some(steps)) => steps.push(step),
            _ => steps = None,
        }
    }
    steps
}

/// A `tool` node's name as written (its first value, when that is a string).
fn tool_name(node: &KdlNode) -> Option<String> {
    node.entries().first().and_then(|e| e.value().as_string()).map(str::to_string)
}

fn duplicate_tools(d: &mut Decoder, nodes: &[&KdlNode]) {
    for (i, node) in nodes.iter().enumerate() {
        let Some(name) = tool_name(node) else { continue };
        if let Some(first) = nodes[..i].iter().find(|n| tool_name(n).as_deref() == Some(&name)) {
            let problem = d
                .source
                .problem(node.name().span(), format!("tool `{name}` is declared twice"), "declared again here")
                .also(first.name().span(), "first declared here")
                .help("keep one declaration");
            d.report(problem);
        }
    }
}

/// Programs the platform file names (linker, emulator) must be declared as tools, so
/// `rbuild doctor` checks them and knows how to install them.
fn declared_tool(d: &mut Decoder, program: Spanned<String>, declared: &[&str], role: &str) -> Option<String> {
    if declared.contains(&program.value.as_str()) {
        return Some(program.value);
    }
    let help = format!(
        "declare it so it can be checked and installed: `tool \"{}\" {{ install {{ apt \"…\" }} }}`",
        program.value
    );
    d.error(program.span, format!("{role} `{}` is not declared as a tool", program.value), "not a declared tool", help);
    None
}

fn run(d: &mut Decoder, node: &KdlNode, declared: &[&str]) -> Option<RunSpec> {
    let mut words = d.strings(node)?.into_iter();
    let program = words.next()?;
    if program.value == "none" {
        let why = words.next().map(|w| w.value).unwrap_or_else(|| "no way to run it on this machine".into());
        if let Some(extra) = words.next() {
            d.error(extra.span, "`run \"none\"` takes one explanation", "extra value", "write `run \"none\" \"where it runs\"`");
            return None;
        }
        return Some(RunSpec::Elsewhere(why));
    }
    if program.value == "native" {
        if let Some(extra) = words.next() {
            d.error(extra.span, "`run \"native\"` takes no arguments", "extra value", "remove it, or name an emulator instead of `native`");
            return None;
        }
        return Some(RunSpec::Native);
    }
    let program = declared_tool(d, program, declared, "emulator")?;
    Some(RunSpec::Emulator { program, args: words.map(|w| w.value).collect() })
}
