//! `rbuild verify RECIPE [key=value …]`: run each platform's built artifact on this machine
//! (natively, under qemu-user, or firmware under qemu-system) on the recipe's verify input,
//! and compare what it prints (the `RBUILD_OUTPUT` protocol) with the host reference: the
//! same program run in-process on all of rbuild's kernels.
//!
//! How an artifact runs is the platform's business: its `run` spec gives the command before
//! the binary. A hosted runner gets `--model model.pte --verify-input FILE`; firmware (a
//! bare-metal target) gets nothing, as it embeds its program and input at build time.

pub mod compare;
pub mod protocol;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rbuild_recipe::Platform;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runner_support::binding::{self, Signature};
use rbuild_runtime::{KernelContext, Program};

use crate::build::{bundle_step::is_firmware, Loaded};
use crate::error::{CliError, CliResult};
use crate::io::tensors::{numbered, read_safetensors};
use crate::project::Project;
use compare::Comparison;
use protocol::Printed;

/// How long one artifact may run before it counts as hung (firmware that never exits).
fn run_timeout() -> Duration {
    let secs = std::env::var("RBUILD_VERIFY_TIMEOUT").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    Duration::from_secs(secs)
}

/// One platform's verdict.
#[derive(Clone, Debug)]
pub struct Row {
    pub platform: String,
    /// `native`, `qemu-aarch64`, … or why it was not run.
    pub how: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    Compared { comparison: Comparison, stats: Vec<(String, String)>, seconds: f64 },
    /// The artifact failed to run or printed nothing usable.
    Failed(String),
    /// No way to run it here (a phone platform): not a failure.
    Skipped(String),
}

impl Row {
    pub fn failed(&self) -> bool {
        match &self.outcome {
            Outcome::Compared { comparison, .. } => !comparison.passed(),
            Outcome::Failed(_) => true,
            Outcome::Skipped(_) => false,
        }
    }

    pub fn verdict(&self) -> String {
        match &self.outcome {
            Outcome::Compared { comparison: c, .. } if c.passed() => "pass".into(),
            Outcome::Compared { comparison: c, .. } => match &c.problem {
                Some(p) => format!("FAIL: {p}"),
                None => format!("FAIL: {} of {} values outside the tolerance", c.mismatched, c.elements),
            },
            Outcome::Failed(why) => format!("FAIL: {why}"),
            Outcome::Skipped(why) => format!("skipped: {why}"),
        }
    }
}

/// Why a loaded recipe cannot be verified at all (before running anything), if so.
pub fn unsupported(l: &Loaded) -> Option<String> {
    (l.recipe.model.is_language_model() && !takes_audio(l)).then(|| "language-model runners have no verify mode yet".to_string())
}

/// Speech models: the program's input is audio, verified through the runner's pipeline.
fn takes_audio(l: &Loaded) -> bool {
    rbuild_models::family::family(&l.recipe.model.arch).is_some_and(|f| f.takes_audio())
}

/// A speech program's reference: the asr runner's verify pipeline (features, encoder output,
/// greedy tokens) run in-process on all of rbuild's kernels.
fn speech_reference(program_path: &std::path::Path, input: PathBuf) -> CliResult<Reference> {
    use rbuild_asr_runner::{decode::Task, program::WhisperProgram, verify};
    let fail = |e: String| CliError(format!("{}: {e}", program_path.display()));
    let bytes = crate::io::program::read_program(program_path)?;
    let program = Program::load(bytes.as_slice()).map_err(|e| fail(e.to_string()))?;
    let kernels = rbuild_kernels::registry();
    let mut model = WhisperProgram::load(&program, &kernels, &reference_backends(), 1).map_err(fail)?;
    let data = std::fs::read(&input).map_err(|e| CliError(format!("{}: {e}", input.display())))?;
    let pcm = verify::read_pcm(&data).map_err(|e| CliError(format!("{}: {e}", input.display())))?;
    Ok(Reference { input, outputs: printed(verify::outputs(&mut model, &pcm, None, Task::Transcribe).map_err(fail)?) })
}

/// An audio LLM's reference: the audio-llm runner's verify pipeline (log-mel chunks, audio
/// embeddings, greedy tokens after the audio) run in-process on all of rbuild's kernels.
fn audio_llm_reference(program_path: &std::path::Path, input: PathBuf) -> CliResult<Reference> {
    use rbuild_audio_llm_runner::{program::VoxtralProgram, verify};
    let fail = |e: String| CliError(format!("{}: {e}", program_path.display()));
    let bytes = crate::io::program::read_program(program_path)?;
    let program = Program::load(bytes.as_slice()).map_err(|e| fail(e.to_string()))?;
    let kernels = rbuild_kernels::registry();
    let mut model = VoxtralProgram::load(&program, &kernels, &reference_backends(), 1).map_err(fail)?;
    let data = std::fs::read(&input).map_err(|e| CliError(format!("{}: {e}", input.display())))?;
    let pcm = rbuild_runner_support::protocol::read_pcm(&data).map_err(|e| CliError(format!("{}: {e}", input.display())))?;
    Ok(Reference { input, outputs: printed(verify::outputs(&mut model, &pcm).map_err(fail)?) })
}

fn printed(outputs: Vec<rbuild_runner_support::protocol::VerifyOutput>) -> Vec<Printed> {
    outputs
        .into_iter()
        .map(|o| {
            let dtype = if o.dtype == "int64" { rbuild_runtime::ScalarType::Long } else { rbuild_runtime::ScalarType::Float };
            Printed { index: o.index, dtype, shape: o.shape, data: o.bytes }
        })
        .collect()
}

/// The host reference runs GPU delegates on the payload's CPU reference runtime (the twin the
/// GPU kernels are tested against) and XNNPACK delegates on rbuild's NHWC kernels.
pub fn reference_backends() -> BackendRegistry {
    let mut b = BackendRegistry::new();
    b.register(Box::new(rbuild_kernels::gpu_reference::ReferenceGpuBackend));
    b.register(Box::new(rbuild_kernels::xnnpack::XnnpackBackend));
    b
}

/// The verify input and host reference outputs of a built recipe.
pub struct Reference {
    pub input: PathBuf,
    pub outputs: Vec<Printed>,
}

/// Runs the recipe's program in-process on every kernel rbuild has, on the verify input.
pub fn host_reference(project: &Project, l: &Loaded) -> CliResult<Reference> {
    let dir = project.out_dir().join(&l.recipe.name).join("program");
    // An NPU program's reference is its CPU lowering (no NPU here).
    let pte = if l.recipe.backend.npu.is_some() { "model-cpu-lowering.pte" } else { "model.pte" };
    let (program_path, input) = (dir.join(pte), dir.join(crate::build::VERIFY_INPUT));
    if takes_audio(l) {
        return match l.recipe.runner.template.as_str() {
            "audio-llm" => audio_llm_reference(&program_path, input),
            _ => speech_reference(&program_path, input),
        };
    }
    let bytes = crate::io::program::read_program(&program_path)?;
    let program = Program::load(bytes.as_slice()).map_err(|e| CliError(format!("{}: {e}", program_path.display())))?;
    let kernels = rbuild_kernels::registry();
    let mut method = program
        .load_method("forward", &kernels, &reference_backends())
        .map_err(|e| CliError(format!("{}: {e}", program_path.display())))?;
    let inputs = numbered(&read_safetensors(&input)?, "input");
    Signature::of(&method).bind(&mut method, &inputs).map_err(|e| CliError(format!("{}: {e}", input.display())))?;
    method.execute(&mut KernelContext { threads: 1 }).map_err(|e| CliError(format!("{}: {e}", program_path.display())))?;
    let outputs = binding::outputs(&method).map_err(|e| CliError(format!("{}: {e}", program_path.display())))?;
    let outputs = outputs.into_iter().enumerate().map(|(index, t)| Printed { index, dtype: t.dtype, shape: t.shape, data: t.data }).collect();
    Ok(Reference { input, outputs })
}

/// Runs `cmd` to its end or the timeout; returns (success, stdout, stderr tail).
fn run_captured(mut cmd: Command) -> Result<(bool, String, String), String> {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    // Drain both pipes on threads so a chatty artifact cannot block on a full pipe.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_thread = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let (started, limit) = (Instant::now(), run_timeout());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {} s: stopped (RBUILD_VERIFY_TIMEOUT sets the limit)", limit.as_secs()));
            }
            Err(e) => return Err(format!("waiting for {shown}: {e}")),
        }
    };
    let stdout = String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned();
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
    let why = if status.success() { String::new() } else { format!("exited with {status}{}", if tail.is_empty() { String::new() } else { format!(": {tail}") }) };
    Ok((status.success(), stdout, why))
}

/// Runs platform `p`'s artifact of the built recipe and compares it with `reference`.
pub fn verify_platform(project: &Project, l: &Loaded, p: &Platform, reference: &Reference) -> Row {
    let how = p.run.describe();
    let row = |outcome| Row { platform: p.name.clone(), how: how.clone(), outcome };
    let dir = project.out_dir().join(&l.recipe.name).join(&p.name);
    let bin = if is_firmware(p) && l.recipe.backend.npu.is_some() {
        // QEMU has no NPU: the same firmware with each delegate replaced by its CPU lowering.
        crate::build::firmware_elf(&dir.join("cpu-lowering"))
    } else if is_firmware(p) {
        crate::build::firmware_elf(&dir)
    } else {
        match rbuild_selective::bin_name(&project.template_dir(&l.recipe.runner.template)) {
            Ok(name) => dir.join(name),
            Err(e) => return row(Outcome::Failed(e)),
        }
    };
    if !bin.is_file() {
        return row(Outcome::Failed(format!("{} was not built", bin.display())));
    }
    let Some(mut cmd) = p.run.command(&bin) else {
        return row(Outcome::Skipped(how.trim_start_matches("not here: ").to_string()));
    };
    if p.gpu == Some(rbuild_recipe::PlatformGpu::Cuda) {
        // The GPU delegate on CUDA itself, not a fallback; without a GPU there is nothing to run.
        if let Err(e) = crate::cuda::ready() {
            return row(Outcome::Skipped(format!("needs an NVIDIA GPU: {e}")));
        }
        cmd.arg("--device").arg("cuda");
    }
    if !is_firmware(p) {
        if !l.recipe.runner.embed_program {
            cmd.arg("--model").arg(dir.join("model.pte"));
        }
        cmd.arg("--verify-input").arg(&reference.input);
    }
    let t = Instant::now();
    let (ok, stdout, why) = match run_captured(cmd) {
        Ok(r) => r,
        Err(e) => return row(Outcome::Failed(e)),
    };
    let seconds = t.elapsed().as_secs_f64();
    if !ok {
        return row(Outcome::Failed(why));
    }
    let run = match protocol::parse(&stdout) {
        Ok(run) => run,
        Err(e) => return row(Outcome::Failed(e)),
    };
    if run.outputs.is_empty() {
        return row(Outcome::Failed("it printed no RBUILD_OUTPUT line".into()));
    }
    let (atol, rtol) = l.recipe.verify.tolerance(&l.recipe.model);
    let comparison = compare::compare(&run.outputs, &reference.outputs, atol, rtol);
    row(Outcome::Compared { comparison, stats: run.stats.into_iter().collect(), seconds })
}

fn short(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else {
        format!("{x:.2e}")
    }
}

/// The verdict table.
pub fn print_table(rows: &[Row]) {
    println!("{:<16} {:<16} {:>10} {:>10}  verdict", "platform", "ran with", "max abs", "max rel");
    for r in rows {
        let (abs, rel) = match &r.outcome {
            Outcome::Compared { comparison: c, .. } if c.problem.is_none() => (short(c.max_abs), short(c.max_rel)),
            _ => ("-".into(), "-".into()),
        };
        println!("{:<16} {:<16} {abs:>10} {rel:>10}  {}", r.platform, r.how.split(':').next().unwrap_or(""), r.verdict());
        if let Outcome::Compared { stats, seconds, .. } = &r.outcome {
            let stats: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("{:<16} ran {seconds:.2}s {}", "", stats.join(" "));
        }
    }
}

/// Verifies every platform of a built recipe.
pub fn verify_loaded(project: &Project, l: &Loaded) -> CliResult<Vec<Row>> {
    if let Some(why) = unsupported(l) {
        return Ok(l.platforms.iter().map(|p| Row { platform: p.name.clone(), how: "-".into(), outcome: Outcome::Skipped(why.clone()) }).collect());
    }
    let reference = host_reference(project, l)?;
    Ok(l.platforms.iter().map(|p| verify_platform(project, l, p, &reference)).collect())
}

/// `rbuild verify RECIPE [key=value …] [--strict]`: platforms the build skipped for missing
/// tools get a "skipped" row (a failure only where the build itself fails for them).
pub fn verify(words: &[String], strict: bool) -> CliResult {
    let project = Project::find()?;
    let (name, overrides) = words.split_first().ok_or_else(|| CliError("no recipe given".into()))?;
    let mut loaded = crate::build::load(&project, name, overrides)?;
    if let Some(why) = unsupported(&loaded) {
        return Err(CliError(format!("{name}: cannot verify: {why}")));
    }
    let built = crate::build::build(&project, name, overrides, crate::build::Options { dry_run: false, strict })?;
    // What the build used: a package source fetched, or its offline demo.
    loaded.recipe.model.weights = built.weights.clone();
    let order: Vec<String> = loaded.platforms.iter().map(|p| p.name.clone()).collect();
    loaded.platforms.retain(|p| !built.skipped.iter().any(|s| s.platform == p.name));
    let mut rows = verify_loaded(&project, &loaded)?;
    for s in &built.skipped {
        let install = s.install_command().map(|c| format!("; {c}")).unwrap_or_default();
        let why = format!("not built: missing {}{install}", s.tool_names());
        rows.push(Row { platform: s.platform.clone(), how: "-".into(), outcome: Outcome::Skipped(why) });
    }
    // The recipe's platform order, whatever was skipped.
    rows.sort_by_key(|r| order.iter().position(|p| p == &r.platform));
    let (atol, rtol) = loaded.recipe.verify.tolerance(&loaded.recipe.model);
    if loaded.recipe.backend.npu.is_some() {
        println!(
            "verify {name}: no NPU here: the firmware runs each Ethos-U delegate's CPU lowering (the same int8 subgraph on rbuild's kernels); host reference = that program on all rbuild kernels; tolerance atol={atol} rtol={rtol}"
        );
    } else {
        println!("verify {name}: host reference = the same program on all rbuild kernels; tolerance atol={atol} rtol={rtol}");
    }
    print_table(&rows);
    let failed: Vec<&str> = rows.iter().filter(|r| r.failed()).map(|r| r.platform.as_str()).collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError(format!("{name}: verification failed on {}", failed.join(", "))))
    }
}
