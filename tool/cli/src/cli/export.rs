//! `rbuild export --model NAME (--weights FILE | --random-weights SEED) --out model.pte`.

use std::path::PathBuf;
use std::time::Instant;

use rbuild_export::weights::Weights;
use rbuild_export::{emit, passes, plan};

use crate::error::{bail, CliError, CliResult};
use crate::io::write_atomic;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Model architecture (see --list).
    #[arg(long, required_unless_present = "list")]
    pub model: Option<String>,
    /// safetensors state dict with the architecture's tensor names.
    #[arg(long, conflicts_with = "random_weights")]
    pub weights: Option<PathBuf>,
    /// Use deterministic, well-conditioned random weights instead of a file (a demo, not a model).
    #[arg(long, value_name = "SEED")]
    pub random_weights: Option<u64>,
    /// Where to write the program.
    #[arg(long, required_unless_present = "list")]
    pub out: Option<PathBuf>,
    /// Input shape, e.g. 1,3,224,224.
    #[arg(long, value_delimiter = ',', default_value = "1,3,224,224")]
    pub input_shape: Vec<usize>,
    /// Sequence length of language models (`--model llama`; `--weights` is then the Hugging Face
    /// folder with config.json and model.safetensors).
    #[arg(long, default_value_t = 128)]
    pub seq_len: usize,
    /// Method name in the program.
    #[arg(long, default_value = "forward")]
    pub method: String,
    /// List the known models.
    #[arg(long)]
    pub list: bool,
}

pub fn export(a: ExportArgs) -> CliResult {
    if a.list {
        for m in rbuild_models::names() {
            println!("{m}");
        }
        for m in rbuild_models::language_models() {
            println!("{m} (full-sequence forward; --weights HF_FOLDER --seq-len N)");
        }
        return Ok(());
    }
    let (Some(model), Some(_)) = (a.model.as_deref(), a.out.as_ref()) else { bail!("--model and --out are required") };
    let t0 = Instant::now();
    if rbuild_models::language_models().contains(&model) {
        let Some(dir) = &a.weights else { bail!("--model {model} needs --weights HF_FOLDER (config.json + model.safetensors)") };
        let graph = rbuild_models::build_llama(dir, a.seq_len).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
        return finish(model, graph, &a, t0, t0.elapsed(), t0.elapsed());
    }
    let weights = match (&a.weights, a.random_weights) {
        (Some(p), _) => Weights::open(p).map_err(|e| CliError(e.to_string()))?,
        (None, Some(seed)) => {
            println!("note: random weights (seed {seed}): a demo program, not a trained model");
            rbuild_models::random_weights(model, seed).map_err(|e| CliError(e.to_string()))?
        }
        (None, None) => bail!("give --weights FILE, or --random-weights SEED for a demo"),
    };
    let t_load = t0.elapsed();
    let graph = rbuild_models::build(model, &weights, &a.input_shape).map_err(|e| CliError(format!("{model}: {e}")))?;
    let t_build = t0.elapsed();
    finish(model, graph, &a, t0, t_load, t_build)
}

/// Passes, planning, emission and the report, for any built graph.
fn finish(model: &str, mut graph: rbuild_export::Graph, a: &ExportArgs, t0: Instant, t_load: std::time::Duration, t_build: std::time::Duration) -> CliResult {
    let out = a.out.as_ref().expect("checked by the caller");
    let report = passes::optimize(&mut graph).map_err(|e| CliError(format!("{model}: {e}")))?;
    let t_passes = t0.elapsed();
    let mem = plan::plan_memory(&graph);
    let bytes = emit::emit(&graph, &mem, &a.method).map_err(|e| CliError(format!("{model}: {e}")))?;
    let t_emit = t0.elapsed();
    write_atomic(out, &bytes)?;
    let total = t0.elapsed();

    println!("exported {model} → {} ({} bytes)", out.display(), bytes.len());
    for line in report.to_string().lines() {
        println!("  pass {line}");
    }
    println!("  operators:");
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for n in &graph.nodes {
        *counts.entry(n.op.as_str()).or_default() += 1;
    }
    for (op, n) in counts {
        println!("    {op:<55} x{n}");
    }
    println!(
        "  planned arena: {} bytes (naive, no reuse: {} bytes; {:.1}x smaller)",
        mem.arena_bytes,
        mem.naive_bytes,
        mem.naive_bytes as f64 / mem.arena_bytes.max(1) as f64
    );
    println!("  constants: {} bytes", graph.constant_bytes());
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "  time: {:.1} ms (weights {:.1}, build {:.1}, passes {:.1}, plan+emit {:.1}, write {:.1})",
        ms(total),
        ms(t_load),
        ms(t_build - t_load),
        ms(t_passes - t_build),
        ms(t_emit - t_passes),
        ms(total - t_emit)
    );
    Ok(())
}
