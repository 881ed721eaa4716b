//! `pte_runner --model model.pte [--inputs in.safetensors] [--output out.safetensors]`: run one
//! method of an ExecuTorch-compatible program on `input.0`, `input.1`, … of a safetensors file
//! (or on made-up inputs of the method's shapes), write `output.0`, … and print a summary of
//! each output with a stats line on stderr (or one JSON object on stdout with `--json`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use rbuild_runner_support::binding::{self, Signature};
use rbuild_runner_support::program::{self, ProgramFile};
use rbuild_runner_support::tensors::{self, HostTensor};
use rbuild_runner_support::cli::{self, emit};
use rbuild_runner_support::{in_file, protocol, stats, Failure, Outcome};
use rbuild_runtime::KernelContext;
use rbuild_tensor_io_runner::report::{self, Stats};
use rbuild_tensor_io_runner::{kernels, synthetic};

#[derive(Parser)]
#[command(name = "pte_runner", about = "Run a method of an ExecuTorch-compatible program on tensors from a safetensors file")]
struct Args {
    /// The .pte program (optional when one was embedded at build time).
    #[arg(long)]
    model: Option<PathBuf>,
    /// safetensors file with `input.0`, `input.1`, … in the method's dtypes and shapes (a
    /// dynamic-shape input may be smaller than its bound); without it, made-up inputs of the
    /// method's (upper-bound) shapes.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// The method to run.
    #[arg(long, default_value = "forward")]
    method: String,
    /// Write `output.0`, `output.1`, … to this safetensors file (whole or not at all).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Threads kernels may use.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Executions to time; the median is reported (outputs are the last run's).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Print one JSON object (inputs, output summaries, stats) instead of text.
    #[arg(long)]
    json: bool,
    /// Read the program into memory instead of mapping the file.
    #[arg(long)]
    no_mmap: bool,
    /// Run `forward` once on `input.0`, … of this safetensors file and print the outputs as
    /// `RBUILD_OUTPUT` lines and an `RBUILD_STATS` line (`rbuild verify`).
    #[arg(long, conflicts_with_all = ["inputs", "output", "json", "runs", "method"])]
    verify_input: Option<PathBuf>,
    /// Print the registered kernels' op names, one per line, and exit.
    #[arg(long)]
    list_kernels: bool,
}

fn main() -> std::process::ExitCode {
    cli::main(std::env::args_os(), run)
}

fn run(a: Args) -> Outcome {
    if a.list_kernels {
        return cli::print_kernel_ops(&kernels::registry());
    }
    cli::check_threads(a.threads)?;
    if a.runs == 0 {
        return Err(Failure("--runs must be at least 1".into()));
    }
    // The input file first: a bad file fails before the (possibly large) program is touched.
    let given = match &a.inputs {
        Some(p) => Some(tensors::read_numbered(p, "input")?),
        None => None,
    };

    let t_load = Instant::now();
    let file = program::open(a.model.as_deref(), !a.no_mmap, rbuild_runner_support::embedded_program!())?;
    let prog = file.load()?;
    let registry = kernels::registry();
    let model = file.name();
    let mut method = in_file(prog.load_method(&a.method, &registry, &kernels::backends()), model)?;
    if let Some(path) = &a.verify_input {
        return protocol::verify_run(&mut method, path, model, a.threads);
    }
    let sig = Signature::of(&method);
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;

    let (inputs, source) = match (given, &a.inputs) {
        (Some(t), Some(p)) => {
            in_file(sig.check(&t), p)?;
            (t, p.display().to_string())
        }
        _ => (in_file(synthetic::inputs(&sig), model)?, "synthetic".to_string()),
    };
    let mut ctx = KernelContext { threads: a.threads };
    let mut times = stats::RunTimes::default();
    for _ in 0..a.runs {
        // Bound before every run: planned memory may reuse an input's bytes once it is dead.
        in_file(sig.bind(&mut method, &inputs), Path::new(&source))?;
        let t = Instant::now();
        in_file(method.execute(&mut ctx), model)?;
        times.push(t.elapsed());
    }
    let outputs = in_file(binding::outputs(&method), model)?;
    let named: Vec<(String, HostTensor)> = outputs.into_iter().enumerate().map(|(i, t)| (format!("output.{i}"), t)).collect();
    if let Some(p) = &a.output {
        tensors::write_file(p, &named)?;
    }
    let stats = Stats { load_ms, times, threads: ctx.threads, peak_rss_bytes: stats::peak_rss_bytes() };
    print_report(&a, &file, &inputs, &source, &named, &stats)
}

/// The report: one JSON object, or text on stdout with the stats line on stderr.
fn print_report(a: &Args, file: &ProgramFile, inputs: &[HostTensor], source: &str, outputs: &[(String, HostTensor)], stats: &Stats) -> Outcome {
    let input_name = |i: usize| format!("input.{i}");
    let mut out = std::io::stdout().lock();
    if a.json {
        let inputs: Vec<_> = inputs.iter().enumerate().map(|(i, t)| report::tensor_json(&input_name(i), t)).collect();
        let obj = serde_json::json!({
            "model": file.name().display().to_string(),
            "method": a.method,
            "inputs_from": source,
            "inputs": inputs,
            "outputs": outputs.iter().map(|(n, t)| report::tensor_json(n, t)).collect::<Vec<_>>(),
            "output_file": a.output.as_ref().map(|p| p.display().to_string()),
            "stats": stats.to_json(),
        });
        return emit(&mut out, &format!("{obj}\n")).map_err(Failure);
    }
    let mut text = format!("{} '{}' on {source} inputs\n", file.name().display(), a.method);
    for (i, t) in inputs.iter().enumerate() {
        text.push_str(&format!("  {}\n", report::tensor_line(&input_name(i), t)));
    }
    for (n, t) in outputs {
        text.push_str(&format!("  {}\n", report::tensor_line(n, t)));
    }
    if let Some(p) = &a.output {
        text.push_str(&format!("wrote {}\n", p.display()));
    }
    emit(&mut out, &text)?;
    eprintln!("{}", stats.line());
    Ok(())
}
