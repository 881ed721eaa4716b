//! `rbuild export --model NAME (--weights FILE | --random-weights SEED) --out model.pte`, or
//! `rbuild export --pt2 model.pt2 --out model.pte` (see `export_pt2`).

use std::path::PathBuf;
use std::time::Instant;

use rbuild_export::weights::Weights;
use rbuild_export::{emit, passes, plan};

use crate::error::{bail, CliError, CliResult};
use crate::io::write_atomic;
use rbuild_models::family::{ExportOptions, SizeRequest, Source};

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Model architecture (see --list).
    #[arg(long, required_unless_present_any = ["list", "pt2"], conflicts_with = "pt2")]
    pub model: Option<String>,
    /// A `torch.export.save` archive (.pt2) to import instead of a built-in model.
    #[arg(long, value_name = "ARCHIVE", conflicts_with_all = ["weights", "random_weights"])]
    pub pt2: Option<PathBuf>,
    /// With --pt2: the largest size of a dynamic dim, by symbol or input name (`s27=128`,
    /// `ids=128`), narrowing the archive's bound; required where it has none. Repeatable.
    #[arg(long = "max-dim", value_name = "SYMBOL_OR_INPUT=N", requires = "pt2")]
    pub max_dims: Vec<String>,
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
    /// Language models (`--model llama`; `--weights` is the Hugging Face folder, or
    /// `--random-weights SEED` for the built-in demo): the longest prompt + generation
    /// (default 128, or the model's max_position_embeddings when that is shorter). Speech
    /// models: the decoder's cache length (default: the model's max_target_positions). A value
    /// the model cannot hold is an error.
    #[arg(long, alias = "seq-len")]
    pub max_seq_len: Option<usize>,
    /// Speech models: the longest audio the program's preprocessor accepts, in seconds
    /// (default 600).
    #[arg(long, value_name = "SECONDS")]
    pub max_audio_seconds: Option<f64>,
    /// Model families: write only these methods (repeatable), e.g. `--methods preprocessor`.
    #[arg(long = "methods", value_name = "METHOD")]
    pub methods: Vec<String>,
    /// With one `--methods` entry: name it `forward` (ExecuTorch's separate preprocessor
    /// program).
    #[arg(long)]
    pub as_forward: bool,
    /// Language and speech models: linear weights as fp32, fp16 (float16 storage, f32
    /// arithmetic), int8 (per channel), int4 (groupwise) or 8da4w.
    /// Image models: fp32, or int8 (static: calibrated int8 activations, per-channel int8
    /// weights, fused into rbuild's int8 kernels); with --backend xnnpack also 8da8w / 8da4w
    /// (int8 activations quantized per row at run time, int8 / int4 linear weights).
    #[arg(long, default_value = "fp32")]
    pub quant: String,
    /// Image models with --quant int8: a folder of images (PNG/JPEG), or a .safetensors file of
    /// sample inputs (`input.K` = [N, ...input K shape]), to calibrate activation
    /// ranges on; without it, seeded random inputs are used (announced).
    #[arg(long, value_name = "DIR")]
    pub calibration: Option<PathBuf>,
    /// Image models with --quant int8: stop at ExecuTorch's reference representation
    /// (quantize/dequantize around float ops; ExecuTorch runs it) instead of fusing into
    /// rbuild's int8 kernels.
    #[arg(long)]
    pub reference_only: bool,
    /// Image models with --quant int8: also rank the N quantized activations that cost the most
    /// accuracy, each alone rounded to int8 in the float graph (one graph run per activation
    /// and calibration image).
    #[arg(long, value_name = "N")]
    pub sensitivity: Option<usize>,
    /// Image models with --quant int8: keep this layer (a weight-name prefix such as
    /// `features.0`) in float32; repeat for more layers.
    #[arg(long, value_name = "LAYER")]
    pub keep_float: Vec<String>,
    /// Language models: group size of int4 / 8da4w / 4-bit embeddings (32, 64, 128, 256).
    /// `--backend xnnpack --quant 8da4w` also takes 0: one scale per output channel.
    #[arg(long, default_value_t = 32)]
    pub group_size: usize,
    /// Language models: embedding table as none (fp32), int8 or int4.
    #[arg(long, default_value = "none")]
    pub embedding_quant: String,
    /// Language models: return logits for every position, not just the last.
    #[arg(long)]
    pub full_logits: bool,
    /// Language models: Core ATen only — full-sequence forward of exactly --max-seq-len tokens,
    /// no KV cache, no custom ops (ExecuTorch runs it as is).
    #[arg(long)]
    pub core_aten: bool,
    /// Image models and `--pt2` archives: `cpu` (rbuild's kernels) or `xnnpack` (the float ops
    /// delegated to `XnnpackBackend`, ExecuTorch's XNNPACK payload format; with `--quant 8da8w`
    /// or `8da4w` the linear layers are dynamically quantized, as ExecuTorch's
    /// `XnnpackDynamicallyQuantizedPartitioner` does).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
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
        for f in rbuild_models::family::FAMILIES {
            println!("{} ({})", f.name(), f.summary());
        }
        return Ok(());
    }
    if let Some(archive) = &a.pt2 {
        return super::export_pt2::export_pt2(archive, &a);
    }
    let (Some(model), Some(_)) = (a.model.as_deref(), a.out.as_ref()) else { bail!("--model and --out are required") };
    let t0 = Instant::now();
    if rbuild_models::family::family(model).is_some() {
        if a.calibration.is_some() || a.reference_only || a.sensitivity.is_some() || !a.keep_float.is_empty() {
            bail!("--calibration, --reference-only, --sensitivity and --keep-float are for static int8 of image models; --model {model} quantizes weights without calibration");
        }
        if a.weights.is_none() && a.random_weights.is_none() {
            bail!("--model {model} needs --weights HF_FOLDER (config.json + *.safetensors) or a .gguf file, or --random-weights SEED for the demo model");
        }
        let source = match (&a.weights, a.random_weights) {
            (Some(dir), _) => Source::Checkpoint(dir.clone()),
            (None, seed) => Source::Demo { seed: seed.unwrap_or(0) },
        };
        // Flags the user gave are exact; without them the family's defaults apply, lowered
        // (with a note) to what the model holds.
        let options = ExportOptions {
            max_seq_len: a.max_seq_len.map(SizeRequest::Exactly),
            full_logits: a.full_logits,
            core_aten: a.core_aten,
            max_audio_seconds: a.max_audio_seconds.map(SizeRequest::Exactly),
            only_methods: (!a.methods.is_empty()).then(|| a.methods.clone()),
            as_forward: a.as_forward,
            linear: crate::family::parse_linear_quant(&a.quant, a.group_size)?,
            embedding: crate::family::parse_embedding_quant(&a.embedding_quant, a.group_size)?,
        };
        let (bytes, report) = crate::family::export(model, &source, &options)?;
        let out = a.out.as_ref().expect("checked above");
        write_atomic(out, &bytes)?;
        report.print(out);
        if let Some(gguf) = a.weights.as_deref().filter(|w| rbuild_models::llama::gguf::is_gguf(w)) {
            write_gguf_tokenizer(gguf, out)?;
        }
        return Ok(());
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
    match a.quant.as_str() {
        "8da8w" | "8da4w" if a.backend != "xnnpack" => bail!("--quant {}: dynamically quantized linear layers run in the XNNPACK delegate (add --backend xnnpack)", a.quant),
        "fp32" | "8da8w" | "8da4w" => {
            if !matches!(a.backend.as_str(), "cpu" | "xnnpack") {
                bail!("--backend {}: image models take cpu or xnnpack", a.backend);
            }
            if a.calibration.is_some() || a.reference_only || a.sensitivity.is_some() || !a.keep_float.is_empty() {
                bail!("--calibration, --reference-only, --sensitivity and --keep-float go with --quant int8");
            }
            finish(model, graph, &a, t0, t_load, t_build)
        }
        "int8" if a.backend != "cpu" => bail!("--backend {} exports float32 programs (drop --quant int8)", a.backend),
        "int8" => finish_int8(model, graph, &a, t0),
        other => bail!("--quant {other}: image models take fp32, int8, or with --backend xnnpack 8da8w / 8da4w"),
    }
}

/// Static int8: calibration, the reference representation, fusion (unless --reference-only).
pub(super) fn finish_int8(model: &str, mut graph: rbuild_export::Graph, a: &ExportArgs, t0: Instant) -> CliResult {
    let out = a.out.as_ref().expect("checked by the caller");
    let samples = crate::calibration::samples(&graph, a.calibration.as_deref())?;
    let options = passes::Int8Options { keep_float: a.keep_float.clone() };
    let ranked = match a.sensitivity {
        Some(n) => Some((n, passes::int8_sensitivity(&graph, &samples, &options).map_err(|e| CliError(format!("{model}: {e}")))?)),
        None => None,
    };
    let stage = if a.reference_only { passes::Int8Stage::Reference } else { passes::Int8Stage::Fused };
    let (report, int8) = passes::optimize_int8_with(&mut graph, &samples, stage, &options).map_err(|e| CliError(format!("{model}: {e}")))?;
    let mem = plan::plan_memory(&graph);
    let bytes = emit::emit(&graph, &mem, &a.method).map_err(|e| CliError(format!("{model}: {e}")))?;
    write_atomic(out, &bytes)?;
    let what = if a.reference_only { "int8 reference representation" } else { "int8, fused" };
    println!("exported {model} ({what}) → {} ({} bytes)", out.display(), bytes.len());
    for line in report.to_string().lines() {
        println!("  pass {line}");
    }
    println!("  calibration: {} sample(s)", int8.calibration_samples);
    println!("  quantize_static: {} activations quantized, {} weights int8", int8.quant.activations.len(), int8.quant.weights);
    if !int8.quant.float_ops.is_empty() {
        println!("  left in float: {}", int8.quant.float_ops.join(", "));
    }
    if !int8.quant.kept_float.is_empty() {
        println!("  kept in float32 (--keep-float): {}", int8.quant.kept_float.join(", "));
    }
    if let Some(f) = &int8.fuse {
        let fused: Vec<String> = f.fused.iter().map(|(op, n)| format!("{op} x{n}")).collect();
        println!("  fuse_int8: {} ({} quantize nodes left unfused)", fused.join(", "), f.unfused);
    }
    for (i, q) in int8.quant.output_qparams.iter().enumerate() {
        if let Some(q) = q {
            println!("  output {i}: int8 scale {} zero point {} (dequantized to float32)", q.scale, q.zero_point);
        }
    }
    println!("  planned arena: {} bytes; constants: {} bytes", mem.arena_bytes, graph.constant_bytes());
    if let Some(q) = &int8.quality {
        println!("  {}", q.summary());
    }
    if let Some((n, rows)) = &ranked {
        println!("  most sensitive activations (output SQNR with only that one rounded to int8):");
        for (label, db) in rows.iter().take(*n) {
            println!("    {db:6.1} dB  {label}");
        }
    }
    println!("  time: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

/// Passes, planning, emission and the report, for any built graph.
pub(super) fn finish(model: &str, mut graph: rbuild_export::Graph, a: &ExportArgs, t0: Instant, t_load: std::time::Duration, t_build: std::time::Duration) -> CliResult {
    let out = a.out.as_ref().expect("checked by the caller");
    let report = if a.backend == "xnnpack" {
        let mut r = passes::optimize_functional(&mut graph, &passes::Options::for_xnnpack()).map_err(|e| CliError(format!("{model}: {e}")))?;
        let options = crate::build::xnnpack::options_for(&a.quant, a.group_size).ok_or_else(|| CliError(format!("--backend xnnpack: --quant {} is not known (fp32, 8da8w, 8da4w)", a.quant)))?;
        if matches!(options.linear, rbuild_xnnpack::LinearMode::DynamicInt4 { .. }) && a.group_size != 0 && ![32, 64, 128, 256].contains(&a.group_size) {
            bail!("--group-size {}: 8da4w takes 32, 64, 128, 256, or 0 (one scale per output channel)", a.group_size);
        }
        crate::build::xnnpack::delegate(&mut graph, rbuild_recipe::Fallback::Allow, &options).map_err(|e| CliError(format!("{model}: {e}")))?;
        // What stayed on the CPU runs on portable kernels, which have no hardswish.
        passes::decompose::decompose(&mut graph, &passes::Options::default()).map_err(|e| CliError(format!("{model}: {e}")))?;
        passes::to_out::to_out_variants(&mut graph).map_err(|e| CliError(format!("{model}: {e}")))?;
        r.nodes_after = graph.nodes.len();
        r
    } else {
        passes::optimize(&mut graph).map_err(|e| CliError(format!("{model}: {e}")))?
    };
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

/// A GGUF file's tokenizer beside the exported program: `tokenizer.json` and
/// `tokenizer_config.json` (chat template, special tokens), as the runners read them.
fn write_gguf_tokenizer(gguf: &std::path::Path, program: &std::path::Path) -> CliResult<()> {
    let file = rbuild_gguf::GgufFile::open(gguf).map_err(|e| CliError(e.to_string()))?;
    let dir = program.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let tokenizer = rbuild_models::gguf_tokenizer::tokenizer_json(&file).map_err(|e| CliError(e.to_string()))?;
    let config = rbuild_models::gguf_tokenizer::tokenizer_config_json(&file).map_err(|e| CliError(e.to_string()))?;
    for (name, text) in [("tokenizer.json", tokenizer), ("tokenizer_config.json", config)] {
        let path = dir.join(name);
        write_atomic(&path, text.as_bytes())?;
        println!("wrote {} (from {})", path.display(), gguf.display());
    }
    Ok(())
}
