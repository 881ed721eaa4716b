//! The recipe's accuracy gate (`verify { accuracy { … } }`): the reference program exported from
//! the same weights without quantization (step `reference-export`), both programs measured on
//! the held-out data with `rbuild eval`'s code (step `accuracy`, before any runner is built),
//! and the build failed when the built program is worse than the reference by more than
//! `max-regression`. The table lands in `program/accuracy.json`, is printed by every build and
//! is recorded in each platform's `manifest.json` as `accuracy`.

use std::path::{Path, PathBuf};

use rbuild_planner::cache::write_atomic;
use rbuild_planner::{Dag, FileHashes, KeyHasher, StepSpec};
use rbuild_recipe::{AccuracyMetric, AccuracySpec, Backend, Choice, Dtype, EmbeddingQuantize, Fallback, Quantize, Recipe};
use serde_json::{json, Value};

use super::steps::step_err;
use crate::cli::eval::{measure, EvalData};
use crate::error::{CliError, CliResult};
use crate::project::Project;

/// The step whose output the package step records.
pub const STEP: &str = "accuracy";

pub fn path(program: &Path) -> PathBuf {
    program.with_file_name("accuracy.json")
}

/// Where the reference program is exported to.
fn reference_path(program: &Path) -> PathBuf {
    program.with_file_name("reference-fp32.pte")
}

/// Whether the recipe's program differs from its unquantized float32 export (else the built
/// program is its own reference).
fn needs_reference(r: &Recipe) -> bool {
    let embedding = r.model.llm.as_ref().map_or(EmbeddingQuantize::None, |l| l.embedding_quantize);
    let gpu_16bit = r.backend.gpu.is_some_and(|g| g.dtype != Dtype::Float32);
    r.model.quantize != Quantize::None || embedding != EmbeddingQuantize::None || r.model.dtype != Dtype::Float32 || gpu_16bit || r.backend.npu.is_some()
}

/// The recipe as its `fp32` reference: the same model, weights and shapes, unquantized float32
/// on the CPU kernels.
fn reference_recipe(r: &Recipe) -> Recipe {
    let mut f = r.clone();
    f.model.quantize = Quantize::None;
    f.model.dtype = Dtype::Float32;
    f.model.calibration = None;
    f.model.keep_float.clear();
    if let Some(l) = &mut f.model.llm {
        l.embedding_quantize = EmbeddingQuantize::None;
    }
    f.backend.kind = Backend::Cpu;
    f.backend.fallback = Fallback::Allow;
    f.backend.npu = None;
    f.backend.gpu = None;
    f
}

/// Adds the gate's steps when the recipe has one; returns the step the package waits for.
/// `extra_files` are the language-model export's files (its tokenizer among them).
pub(super) fn add(
    dag: &mut Dag<'_>,
    project: &Project,
    r: &Recipe,
    hashes: &mut FileHashes,
    version: &str,
    program: &Path,
    extra_files: &[(PathBuf, &'static str)],
) -> CliResult<Option<&'static str>> {
    let Some(spec) = r.verify.accuracy.clone() else { return Ok(None) };
    let mut deps = vec!["export".to_string()];
    // An NPU program's delegate does not run here; its CPU lowering computes the same int8.
    let built = if r.backend.npu.is_some() { super::ethosu::outputs(program)[0].clone() } else { program.to_path_buf() };
    let reference = if needs_reference(r) {
        let to = reference_path(program);
        let f = reference_recipe(r);
        if r.model.is_language_model() {
            super::llm_export::add_program_export(dag, "reference-export", &f, hashes, version, &to)?;
        } else {
            super::steps::add_image_export(dag, "reference-export", project, &f, hashes, version, &to)?;
        }
        deps.push("reference-export".into());
        Some(to)
    } else {
        None
    };
    let tokenizer = extra_files
        .iter()
        .find(|(f, step)| *step == "tokenizer" && f.file_name().is_some_and(|n| n != "tokenizer_config.json"))
        .map(|(f, _)| f.clone());
    let data = match spec.metric {
        AccuracyMetric::Perplexity | AccuracyMetric::Wer => {
            let tokenizer = tokenizer.ok_or_else(|| {
                CliError(format!("{}: the accuracy metric `{}` needs a tokenizer; give one with tokenizer=PATH", r.name, spec.metric.as_str()))
            })?;
            deps.push("tokenizer".into());
            if spec.metric == AccuracyMetric::Perplexity {
                EvalData::Text { file: spec.data.clone(), tokenizer, ctx: spec.ctx }
            } else {
                EvalData::Audio { dir: spec.data.clone(), tokenizer }
            }
        }
        AccuracyMetric::Top1 | AccuracyMetric::Top5 => EvalData::Images { dir: spec.data.clone(), labels: None },
    };
    let mut key = KeyHasher::new();
    key.add("tool", version).add("metric", spec.metric.as_str()).add("reference", spec.reference.name());
    key.add("max-regression", &spec.max_regression.to_string()).add("ctx", &format!("{:?}", spec.ctx));
    for f in data_files(&spec.data) {
        let h = hashes.hash(&f).map_err(|e| CliError(format!("{}: accuracy data {}: {e}", r.name, f.display())))?;
        key.add(&f.display().to_string(), &h);
    }
    let out = path(program);
    let label = format!("accuracy: {} on {} vs the fp32 reference (at most {} worse)", spec.metric.as_str(), spec.data.display(), percent(spec.max_regression));
    dag.add(StepSpec { id: STEP.into(), label, deps, key, outputs: vec![out.clone()] }, move |_| run(&spec, &data, &built, reference.as_deref(), &out))
        .map_err(CliError)?;
    Ok(Some(STEP))
}

/// The data's files (a folder's, recursively), sorted: their contents key the step.
fn data_files(data: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(read) = std::fs::read_dir(dir) else { return };
        for entry in read.flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    if data.is_dir() {
        walk(data, &mut files);
    } else {
        files.push(data.to_path_buf());
    }
    files.sort();
    files
}

/// Measures both programs, writes the table and fails when the regression exceeds the limit.
fn run(spec: &AccuracySpec, data: &EvalData, built: &Path, reference: Option<&Path>, out: &Path) -> Result<(), String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let metric = spec.metric.as_str();
    let value_of = |program: &Path| -> Result<(f64, Value), String> {
        let report = measure(program, data, threads).map_err(|e| e.0)?;
        let v = report.value_of(metric).ok_or_else(|| format!("{}: the evaluation measured no {metric}", program.display()))?;
        Ok((v, report.to_json()))
    };
    let (value, built_json) = value_of(built)?;
    let (reference_value, reference_json) = match reference {
        Some(p) => value_of(p)?,
        None => (value, built_json.clone()),
    };
    let regression = spec.metric.regression(reference_value, value);
    // NaN (a broken program) never passes.
    let passed = regression <= spec.max_regression;
    let table = json!({
        "metric": metric,
        "data": spec.data.display().to_string(),
        "reference": spec.reference.name(),
        "reference_program": reference.and_then(|p| p.file_name()).map_or_else(|| "the built program (it is unquantized float32)".to_string(), |n| n.to_string_lossy().into_owned()),
        "reference_value": finite(reference_value),
        "value": finite(value),
        "regression": finite(regression),
        "max_regression": spec.max_regression,
        "passed": passed,
        "built_report": built_json,
        "reference_report": reference_json,
    });
    write_atomic(out, serde_json::to_string_pretty(&table).map_err(step_err)?.as_bytes()).map_err(|e| format!("{}: {e}", out.display()))?;
    if passed {
        return Ok(());
    }
    Err(format!(
        "accuracy gate failed: {metric} {} for the built program vs {} for the fp32 reference ({} worse), above the limit of {} (`max-regression` in verify {{ accuracy }})\n{}",
        number(value),
        number(reference_value),
        percent(regression),
        percent(spec.max_regression),
        table_text(&table)
    ))
}

/// JSON has no infinities or NaN: those are written as null.
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        x.to_string()
    }
}

fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:.2}%", x * 100.0)
    } else {
        "unbounded".into()
    }
}

/// The gate's table as the build prints it.
fn table_text(t: &Value) -> String {
    let num = |v: &Value| v.as_f64().map_or_else(|| "n/a".to_string(), number);
    let regression = t["regression"].as_f64().map_or_else(|| "unbounded".to_string(), |r| format!("{}{}", if r > 0.0 { "+" } else { "" }, percent(r)));
    format!(
        "  {:<12} {:>18} {:>12} {:>12} {:>8}  result\n  {:<12} {:>18} {:>12} {:>12} {:>8}  {}",
        "metric",
        "reference (fp32)",
        "built",
        "regression",
        "limit",
        t["metric"].as_str().unwrap_or("?"),
        num(&t["reference_value"]),
        num(&t["value"]),
        regression,
        t["max_regression"].as_f64().map_or_else(|| "?".to_string(), percent),
        if t["passed"].as_bool() == Some(true) { "pass" } else { "FAIL" }
    )
}

/// Prints the gate's table from the build's `accuracy.json`, if the recipe has a gate.
pub fn print(program: &Path) {
    let Ok(text) = std::fs::read(path(program)) else { return };
    let Ok(t) = serde_json::from_slice::<Value>(&text) else { return };
    println!("accuracy gate on {} (reference: {}):\n{}", t["data"].as_str().unwrap_or("?"), t["reference_program"].as_str().unwrap_or("?"), table_text(&t));
}

/// The manifest's `accuracy` entry: the table without the full reports.
pub fn manifest_entry(file: &Path) -> Result<Value, String> {
    let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut t: Value = serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    for (report, counts) in [("built_report", "counts"), ("reference_report", "reference_counts")] {
        let mut r = t[report].take();
        if let Some(o) = r.as_object_mut() {
            o.remove("per_file");
        }
        t[counts] = r;
        if let Some(o) = t.as_object_mut() {
            o.remove(report);
        }
    }
    Ok(t)
}
