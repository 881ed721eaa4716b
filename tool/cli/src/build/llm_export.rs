//! The export and tokenizer steps of a language-model recipe (Llama, Whisper, Voxtral).

use std::path::{Path, PathBuf};

use rbuild_models::family::{ExportOptions, Fitted, Source};
use rbuild_planner::cache::write_atomic;
use rbuild_planner::{Dag, FileHashes, KeyHasher, StepSpec};
use rbuild_recipe::{Backend, Choice, Quantize, WeightsSource};

use super::steps::{copy_atomic, step_err};
use crate::error::{CliError, CliResult};

/// Every file of a checkpoint folder that defines the model (config, weights, index); a
/// single-file checkpoint (GGUF) is itself.
fn checkpoint_files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name == "config.json" || name == "generation_config.json" || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")
        })
        .collect();
    files.sort();
    files
}

/// The export and tokenizer steps of a language model; returns the tokenizer files the
/// runner needs next to the program, and the sizes the program gets.
pub(super) fn add(dag: &mut Dag<'_>, r: &rbuild_recipe::Recipe, hashes: &mut FileHashes, version: &str, program: &Path, dir: &Path) -> CliResult<(Vec<(PathBuf, &'static str)>, Fitted)> {
    let (checkpoint, fitted) = add_program_export(dag, "export", r, hashes, version, program)?;
    let llm = r.model.llm.clone().ok_or_else(|| CliError(format!("{}: not a language model", r.name)))?;
    let family = crate::family::family(&r.model.arch)?;
    let tokenizer_arch = r.model.arch.clone();
    // Files the family's runner gets beside the program (the speech demo's WAV).
    let mut outputs = Vec::new();
    let runner_files = family.runner_files();
    if !runner_files.is_empty() {
        let mut key = KeyHasher::new();
        key.add("tool", version).add("family", family.name());
        let paths: Vec<PathBuf> = runner_files.iter().map(|(name, _)| dir.join(name)).collect();
        let names: Vec<&str> = runner_files.iter().map(|(name, _)| *name).collect();
        let label = format!("runner files: {}", names.join(", "));
        let to = paths.clone();
        dag.add(StepSpec { id: "runner-files".into(), label, deps: vec![], key, outputs: paths.clone() }, move |_| {
            for ((_, bytes), path) in runner_files.iter().zip(&to) {
                write_atomic(path, bytes).map_err(step_err)?;
            }
            Ok(())
        })
        .map_err(CliError)?;
        outputs.extend(paths.into_iter().map(|p| (p, "runner-files")));
    }

    // tokenizer: the recipe's file, else the checkpoint's (the family's file names in order:
    // Voxtral's tekken.json before tokenizer.json), else the demo's; tokenizer_config.json
    // (chat template) travels with it when present.
    let tokenizer_names = family.tokenizer_files();
    // A GGUF file carries its tokenizer: converted to tokenizer.json + tokenizer_config.json.
    let gguf = checkpoint.clone().filter(|d| rbuild_models::llama::gguf::is_gguf(d));
    if let (Some(file), None) = (&gguf, &llm.tokenizer) {
        return Ok((add_gguf_tokenizer(dag, file, hashes, version, dir, outputs)?, fitted));
    }
    let tokenizer_source = llm
        .tokenizer
        .clone()
        .or_else(|| checkpoint.as_ref().and_then(|d| tokenizer_names.iter().map(|n| d.join(n)).find(|p| p.is_file())));
    if checkpoint.is_some() && tokenizer_source.is_none() {
        if !family.tokenizer_required() {
            eprintln!("note: {}: {} has no {} (give one with tokenizer=PATH); the runner will print token ids", r.name, r.model.weights, tokenizer_names.join(" or "));
            return Ok((outputs, fitted));
        }
        return Err(CliError(format!(
            "{}: {} has no {}; give one with tokenizer=PATH",
            r.name,
            r.model.weights,
            tokenizer_names.join(" or ")
        )));
    }
    // Whisper's tiktoken vocabularies and Mistral's tekken.json keep their names (runners and
    // bundles tell them by name); the demo's takes the family's first tokenizer name.
    let tok_name = match tokenizer_source.as_ref().and_then(|s| s.file_name()).and_then(|n| n.to_str()) {
        Some(n) if n.ends_with(".tiktoken") || n == "tekken.json" => n.to_string(),
        Some(_) => "tokenizer.json".to_string(),
        None => tokenizer_names.first().copied().unwrap_or("tokenizer.json").to_string(),
    };
    let tok_out = dir.join(tok_name);
    let cfg_out = dir.join("tokenizer_config.json");
    let cfg_in = tokenizer_source.as_ref().and_then(|s| s.parent().map(|p| p.join("tokenizer_config.json"))).filter(|p| p.is_file());
    let mut key = KeyHasher::new();
    key.add("tool", version);
    for f in tokenizer_source.iter().chain(cfg_in.iter()) {
        let h = hashes.hash(f).map_err(|e| CliError(format!("{}: {}: {e}", r.name, f.display())))?;
        key.add(&f.display().to_string(), &h);
    }
    // The demo's chat template, when its family has one (so `--chat` works offline too).
    let demo_cfg = if tokenizer_source.is_none() { family.demo_tokenizer_config_json() } else { None };
    let mut tokenizer_outputs = vec![tok_out.clone()];
    if cfg_in.is_some() || demo_cfg.is_some() {
        tokenizer_outputs.push(cfg_out.clone());
    }
    outputs.extend(tokenizer_outputs.iter().map(|p| (p.clone(), "tokenizer")));
    let label = match &tokenizer_source {
        Some(s) => format!("tokenizer from {}", s.display()),
        None => "demo tokenizer".into(),
    };
    let (to, co) = (tok_out.clone(), cfg_out.clone());
    dag.add(StepSpec { id: "tokenizer".into(), label, deps: vec![], key, outputs: tokenizer_outputs }, move |_| {
        match &tokenizer_source {
            Some(s) => copy_atomic(s, &to)?,
            None => {
                let demo = family.demo_tokenizer_json().ok_or_else(|| format!("{tokenizer_arch}: the demo model has no tokenizer; give one with tokenizer=PATH"))?;
                write_atomic(&to, demo.as_bytes()).map_err(step_err)?
            }
        }
        if let Some(c) = &cfg_in {
            copy_atomic(c, &co)?;
        }
        if let Some(c) = &demo_cfg {
            write_atomic(&co, c.as_bytes()).map_err(step_err)?;
        }
        Ok(())
    })
    .map_err(CliError)?;
    Ok((outputs, fitted))
}

/// The tokenizer step of a GGUF checkpoint: its `tokenizer.ggml.*` vocabulary as
/// `tokenizer.json`, the chat template and special tokens as `tokenizer_config.json`.
fn add_gguf_tokenizer(
    dag: &mut Dag<'_>,
    file: &Path,
    hashes: &mut FileHashes,
    version: &str,
    dir: &Path,
    mut outputs: Vec<(PathBuf, &'static str)>,
) -> CliResult<Vec<(PathBuf, &'static str)>> {
    let mut key = KeyHasher::new();
    key.add("tool", version);
    let h = hashes.hash(file).map_err(|e| CliError(format!("{}: {e}", file.display())))?;
    key.add(&file.display().to_string(), &h);
    let (tok_out, cfg_out) = (dir.join("tokenizer.json"), dir.join("tokenizer_config.json"));
    let files = vec![tok_out.clone(), cfg_out.clone()];
    outputs.extend(files.iter().map(|p| (p.clone(), "tokenizer")));
    let source = file.to_path_buf();
    let label = format!("tokenizer from {}", file.display());
    dag.add(StepSpec { id: "tokenizer".into(), label, deps: vec![], key, outputs: files }, move |_| {
        let gguf = rbuild_gguf::GgufFile::open(&source).map_err(|e| e.to_string())?;
        let tokenizer = rbuild_models::gguf_tokenizer::tokenizer_json(&gguf).map_err(step_err)?;
        let config = rbuild_models::gguf_tokenizer::tokenizer_config_json(&gguf).map_err(step_err)?;
        write_atomic(&tok_out, tokenizer.as_bytes()).map_err(step_err)?;
        write_atomic(&cfg_out, config.as_bytes()).map_err(step_err)
    })
    .map_err(CliError)?;
    Ok(outputs)
}

/// The step `id` that exports the recipe's language model to `program`; returns the checkpoint
/// (None for the demo's seeded weights) and the sizes the program gets (fitted to the model).
pub(super) fn add_program_export(dag: &mut Dag<'_>, id: &str, r: &rbuild_recipe::Recipe, hashes: &mut FileHashes, version: &str, program: &Path) -> CliResult<(Option<PathBuf>, Fitted)> {
    let llm = r.model.llm.clone().ok_or_else(|| CliError(format!("{}: not a language model", r.name)))?;
    let mut key = KeyHasher::new();
    key.add("tool", version).add("model", &r.model.arch).add("llm", &format!("{llm:?}")).add("quantize", &format!("{:?}", r.model.quantize));
    let checkpoint = match &r.model.weights {
        WeightsSource::Folder(d) | WeightsSource::File(d) => {
            for f in checkpoint_files(d) {
                let h = hashes.hash(&f).map_err(|e| CliError(format!("{}: {}: {e}", r.name, f.display())))?;
                key.add(&f.display().to_string(), &h);
            }
            Some(d.clone())
        }
        WeightsSource::Random(seed) => {
            key.add("weights", &format!("demo seed {seed}"));
            None
        }
        WeightsSource::Package { file, .. } => return Err(CliError(format!("{}: weights {file} were not fetched before the export", r.name))),
    };
    // The recipe's names are the export's names (one table: the recipe crate's choices).
    let linear = r.model.quantize.name();
    let embedding = llm.embedding_quantize.name();
    let source = match (&checkpoint, &r.model.weights) {
        (Some(d), _) => Source::Checkpoint(d.clone()),
        (None, WeightsSource::Random(seed)) => Source::Demo { seed: *seed },
        (None, _) => Source::Demo { seed: 0 },
    };
    let base = ExportOptions {
        full_logits: llm.full_logits,
        linear: crate::family::parse_linear_quant(linear, llm.group_size)?,
        embedding: crate::family::parse_embedding_quant(embedding, llm.group_size)?,
        ..ExportOptions::default()
    };
    let family = crate::family::family(&r.model.arch)?;
    let (options, fitted) = super::llm_sizes::fit(&r.name, family, &source, &llm, base)?;
    let sizes = super::llm_sizes::describe(&fitted);
    key.add("sizes", &sizes);
    let arch = r.model.arch.clone();
    let program_out = program.to_path_buf();
    let mut label = format!("export {} ({}, {linear}, {sizes})", r.model.arch, r.model.weights);
    let mut export_outputs = vec![program.to_path_buf()];
    // backend "gpu": the float program with its GPU subgraphs delegated; weights stored in the
    // backend's dtype (quantization is the CPU backends' business).
    if r.backend.kind == Backend::Xnnpack {
        return Err(CliError(format!("{}: backend xnnpack delegates the image models (CNNs) for now; {} uses `cpu` or `gpu`", r.name, r.model.arch)));
    }
    let gpu = r.backend.gpu.map(|g| (g, r.backend.fallback));
    if let Some((g, fallback)) = gpu {
        if r.model.quantize != Quantize::None {
            return Err(CliError(format!(
                "{}: backend gpu runs float programs: set `quantize \"none\"` and the weights' precision with the backend's `dtype \"float16\"`",
                r.name
            )));
        }
        key.add("gpu", &format!("{:?} {:?} {:?}", g.api, g.dtype, fallback));
        label += &format!(", GPU delegate ({} weights)", g.dtype.name());
        export_outputs.push(super::gpu::report_path(program));
    }
    dag.add(StepSpec { id: id.into(), label, deps: vec![], key, outputs: export_outputs }, move |_| {
        if let Some((g, fallback)) = gpu {
            return super::gpu::export(&arch, &source, &options, g.api, super::gpu::weight_dtype(g.dtype), fallback, &program_out);
        }
        let (bytes, report) = crate::family::export(&arch, &source, &options).map_err(|e| e.0)?;
        for n in &report.notes {
            eprintln!("note: {n}");
        }
        write_atomic(&program_out, &bytes).map_err(step_err)
    })
    .map_err(CliError)?;
    Ok((checkpoint, fitted))
}
