//! `rbuild run PROGRAM.pte --inputs IO.safetensors`: bind `input.N`, execute, write `output.N`.

use std::path::PathBuf;
use std::time::Instant;

use rbuild_runner_support::binding::{output_tensor, Signature};
use rbuild_runtime::{KernelContext, Program};

use crate::error::{CliResult, InFile};
use crate::io::program::read_program;
use crate::io::tensors::{numbered, read_safetensors, write_safetensors};

#[derive(clap::Args)]
pub struct RunArgs {
    /// The .pte program.
    pub program: PathBuf,
    /// safetensors file with `input.0`, `input.1`, … in the method's dtypes and shapes.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Method to run.
    #[arg(long, default_value = "forward")]
    pub method: String,
    /// Write `output.0`, `output.1`, … to this safetensors file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Threads kernels may use.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Executions to time; the median is reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Print time per operator (summed over all runs).
    #[arg(long)]
    pub profile: bool,
    /// Kernel set: `optimized` (fast f32 paths, the portable kernels for everything else) or
    /// `portable` (the reference kernels alone: f32 convolutions, matrix products and means sum
    /// in ExecuTorch's portable order, so float and int8-reference programs reproduce
    /// ExecuTorch's portable run bit for bit).
    #[arg(long, value_enum, default_value_t = KernelSet::Optimized)]
    pub kernels: KernelSet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelSet {
    Optimized,
    Portable,
}

/// Per-operator wall time.
#[derive(Default)]
struct Profile {
    started: Option<Instant>,
    per_op: std::collections::BTreeMap<String, (usize, f64)>,
}

impl rbuild_runtime::executor::Observer for Profile {
    fn begin(&mut self, _: &str) {
        self.started = Some(Instant::now());
    }
    fn end(&mut self, name: &str) {
        if let Some(t) = self.started.take() {
            let e = self.per_op.entry(name.to_string()).or_default();
            e.0 += 1;
            e.1 += t.elapsed().as_secs_f64() * 1e3;
        }
    }
}

pub fn run(a: RunArgs) -> CliResult {
    let bytes = read_program(&a.program)?;
    let program = Program::load(bytes.as_slice()).in_file(&a.program)?;
    let inputs = match &a.inputs {
        Some(p) => numbered(&read_safetensors(p)?, "input"),
        None => Vec::new(),
    };
    let kernels = match a.kernels {
        KernelSet::Optimized => rbuild_kernels::registry(),
        KernelSet::Portable => rbuild_kernels::portable_registry(),
    };
    // GPU delegates run on the payload's CPU reference runtime here (the CLI has no GPU runtime).
    let backends = crate::verify::reference_backends();
    let t0 = Instant::now();
    let mut method = program.load_method(&a.method, &kernels, &backends).in_file(&a.program)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let signature = Signature::of(&method);
    let in_path = a.inputs.clone().unwrap_or_else(|| PathBuf::from("no --inputs file"));
    signature.check(&inputs).in_file(&in_path)?;
    let mut ctx = KernelContext { threads: a.threads.max(1) };
    let mut times = Vec::with_capacity(a.repeat.max(1));
    let mut profile = Profile::default();
    for _ in 0..a.repeat.max(1) {
        // Inputs are re-bound every run: planned memory may reuse an input's bytes once it is
        // dead, so a second execute without set_input would read garbage (as in ExecuTorch).
        let t = Instant::now();
        signature.bind(&mut method, &inputs).in_file(&in_path)?;
        if a.profile {
            method.execute_observed(&mut ctx, &mut profile).in_file(&a.program)?;
        } else {
            method.execute(&mut ctx).in_file(&a.program)?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{} '{}': load {load_ms:.2} ms ({} instructions, {} bytes of constants folded), {} run(s), median {median:.3} ms, min {:.3} ms, {} thread(s)",
        a.program.display(),
        a.method,
        method.instruction_count(),
        method.folded_bytes(),
        times.len(),
        times[0],
        ctx.threads
    );

    if a.profile {
        let total: f64 = profile.per_op.values().map(|v| v.1).sum();
        let mut rows: Vec<_> = profile.per_op.iter().collect();
        rows.sort_by(|x, y| y.1 .1.total_cmp(&x.1 .1));
        println!("  {:<50} {:>7} {:>10} {:>6}", "operator", "calls", "ms/run", "share");
        for (name, (calls, ms)) in rows {
            let runs = times.len() as f64;
            println!("  {name:<50} {:>7} {:>10.3} {:>5.1}%", *calls as f64 / runs, ms / runs, 100.0 * ms / total.max(1e-9));
        }
    }
    let mut outs = Vec::new();
    for i in 0..method.outputs().len() {
        let t = output_tensor(&method, i).ok_or_else(|| crate::error::CliError(format!("{}: output {i} is not readable", a.program.display())))?;
        println!("  output.{i}: {} {:?}", t.dtype, t.shape);
        outs.push((format!("output.{i}"), t));
    }
    if let Some(p) = &a.output {
        write_safetensors(p, &outs)?;
        println!("wrote {}", p.display());
    }
    Ok(())
}
