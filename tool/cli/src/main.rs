//! `rbuild`: export, run and inspect ExecuTorch-compatible programs (recipes and builds come
//! next; see README).

mod cli;
mod error;
mod io;

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
    /// Export a model (Rust definition + weights) to an ExecuTorch-compatible .pte program.
    Export(cli::export::ExportArgs),
    /// Describe a .pte program: methods, inputs/outputs, operators, delegates, memory.
    Inspect(cli::inspect::InspectArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cli::run::run(a),
        Command::Inspect(a) => cli::inspect::inspect(a),
        Command::Export(a) => cli::export::export(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
