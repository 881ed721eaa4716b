//! The steps of a recipe build and what each one's cache key is made of.

use std::path::{Path, PathBuf};

use rbuild_export::weights::Weights;
use rbuild_export::{emit, passes, plan};
use rbuild_planner::cache::write_atomic;
use rbuild_planner::{Dag, FileHashes, KeyHasher, StepSpec};
use rbuild_recipe::{Backend, Dtype, Quantize, WeightsSource, PTE_MODEL};

use super::{Artifacts, Loaded};
use crate::error::{CliError, CliResult};
use crate::project::Project;

/// How hosted runners are compiled: the release profile rbuild itself is built with (no
/// cross-crate LTO), so a runner built in rbuild's own target folder reuses the dependencies
/// already compiled for the tool (on a fresh clone, the first command's runner compiles ~15
/// crates instead of ~115). ThinLTO would make runners ~1-4 % smaller (MobileNetV2's: 1.80 MB
/// instead of 1.87 MB) at the price of compiling every dependency again with bitcode.
/// Symbols are stripped in the binary's own compile, which leaves the dependencies' alone.
const RUNNER_RUSTC_ARGS: &[&str] = &["-C", "strip=symbols"];

/// What identifies this rbuild: a rebuilt tool invalidates every step.
pub(super) fn tool_version() -> String {
    let exe = std::env::current_exe().ok();
    let stat = exe.as_deref().and_then(|p| rbuild_planner::hash::stat(p).ok());
    format!("{} {:?}", env!("CARGO_PKG_VERSION"), stat)
}

/// The Rust toolchain that compiles runners (`rustc -vV`): a new compiler rebuilds them.
fn rustc_version(probes: &rbuild_recipe::Probes) -> String {
    probes
        .run(Path::new("rustc"), &["-vV".to_string()])
        .ok()
        .filter(|o| o.success)
        .map(|o| o.stdout.lines().filter(|l| l.starts_with("release") || l.starts_with("commit-hash")).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// Content hash of every file under `dir` (templates are small).
fn dir_hash(dir: &Path, hashes: &mut FileHashes) -> CliResult<String> {
    let mut files = Vec::new();
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target" && n != "tests") {
                    walk(&p, out);
                }
            } else {
                out.push(p);
            }
        }
    }
    walk(dir, &mut files);
    files.sort();
    let mut k = KeyHasher::new();
    for f in files {
        let h = hashes.hash(&f).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
        k.add(&f.strip_prefix(dir).unwrap_or(&f).display().to_string(), &h);
    }
    Ok(k.finish())
}

/// Content hash of a runner template and of the template-side crates it depends on by path
/// (`templates/support`): editing either rebuilds the runner. The runtime and kernels it also
/// depends on are part of rbuild itself (the tool version).
fn template_hash(project: &Project, template: &Path, hashes: &mut FileHashes) -> CliResult<String> {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let templates = canonical(&project.templates_dir());
    let mut k = KeyHasher::new();
    k.add("template", &dir_hash(template, hashes)?);
    for dep in rbuild_selective::path_dependencies(template).map_err(CliError)? {
        let dep = canonical(&dep);
        if dep.starts_with(&templates) {
            k.add(&dep.strip_prefix(&templates).unwrap_or(&dep).display().to_string(), &dir_hash(&dep, hashes)?);
        }
    }
    Ok(k.finish())
}

pub(super) fn step_err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Copies `from` to `to` atomically (temporary file in the same folder, then rename).
pub(super) fn copy_atomic(from: &Path, to: &Path) -> Result<(), String> {
    let bytes = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
    write_atomic(to, &bytes).map_err(|e| format!("{}: {e}", to.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(from).map(|m| m.permissions().mode()).unwrap_or(0o755);
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub(super) fn selected_kernels(kernels_json: &Path) -> Result<Vec<(String, String)>, String> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(kernels_json).map_err(step_err)?).map_err(step_err)?;
    Ok(v["kernels"]
        .as_array()
        .map(|a| a.iter().map(|k| (k["op"].as_str().unwrap_or("").to_string(), k["path"].as_str().unwrap_or("").to_string())).collect())
        .unwrap_or_default())
}

/// The operators of the program, from kernels.json (for bundle manifests).
pub(super) fn selected_ops(kernels_json: &Path) -> Result<Vec<String>, String> {
    Ok(selected_kernels(kernels_json)?.into_iter().map(|(op, _)| op).collect())
}

pub fn add_steps(dag: &mut Dag<'_>, project: &Project, l: &Loaded, hashes: &mut FileHashes) -> CliResult<Artifacts> {
    let r = &l.recipe;
    let out = project.out_dir();
    let recipe_out = out.join(&r.name);
    let program = recipe_out.join("program/model.pte");
    let kernels_json = recipe_out.join("program/kernels.json");
    let version = tool_version();
    let int8_quality = (r.model.quantize == Quantize::Int8 && !r.model.is_language_model()).then(|| super::int8_quality::path(&program));

    // A language model's files beside the program, and the sizes it gets (fitted to the model).
    let (extra_files, llm_sizes) = if r.model.is_language_model() {
        let (files, sizes) = super::llm_export::add(dag, r, hashes, &version, &program, &recipe_out.join("program"))?;
        (files, Some(sizes))
    } else if r.model.is_prebuilt() {
        add_prebuilt_program(dag, r, hashes, &version, &program)?;
        (vec![], None)
    } else {
        add_image_export(dag, "export", project, r, hashes, &version, &program)?;
        (vec![], None)
    };

    // select: the program's operators → kernels; fails with every missing op listed.
    let backend = r.backend.kind.as_str();
    add_select(dag, "select", &program, &kernels_json, &version, backend)?;
    // An NPU program also has its CPU lowering (what verify runs without an NPU).
    let cpu_lowering = r.backend.npu.as_ref().map(|_| {
        let [pte, _] = super::ethosu::outputs(&program);
        (pte, recipe_out.join("program/kernels-cpu-lowering.json"))
    });
    if let Some((pte, kernels)) = &cpu_lowering {
        add_select(dag, "select-cpu-lowering", pte, kernels, &version, "cpu")?;
    }
    let verify_input = super::verify_input::add(dag, r, hashes, &version, &program)?;
    // The accuracy gate runs before any runner is compiled: a failing build fails early.
    let accuracy_step = super::accuracy::add(dag, project, r, hashes, &version, &program, &extra_files)?;
    let accuracy_json = accuracy_step.map(|_| super::accuracy::path(&program));

    let template = project.template_dir(&r.runner.template);
    let template_hash = template_hash(project, &template, hashes)?;
    let runner_bin = rbuild_selective::bin_name(&template).map_err(CliError)?;
    let rustc = rustc_version(project.probes());
    let mut files = vec![program.clone(), kernels_json.clone()];
    let mut runners = Vec::new();
    for p in &l.platforms {
        let dir = recipe_out.join(&p.name);
        if r.runner.template == "firmware" {
            if !r.runner.embed_program {
                return Err(CliError(format!(
                    "{}: runner firmware: `embed-program #false` (the program flashed separately at a fixed address) is not supported yet; use `embed-program #true`",
                    r.name
                )));
            }
            let mut job = super::firmware::FirmwareJob {
                recipe: r.name.clone(),
                program: program.clone(),
                kernels_json: kernels_json.clone(),
                template: template.clone(),
                template_hash: template_hash.clone(),
                out_dir: dir.clone(),
                target_dir: project.runner_target_dir(),
                top_k: r.runner.top.unwrap_or(5) as usize,
                tool_version: version.clone(),
                rustc: rustc.clone(),
                kernels: super::firmware::KernelChoice::from_env().map_err(CliError)?,
                verify_input: verify_input.clone().ok_or_else(|| CliError(format!("{}: runner firmware: language models cannot run as firmware yet", r.name)))?,
                npu_base: None,
                variant: None,
                deps: vec!["export".into(), "select".into(), "verify-input".into()],
            };
            let mut extra_bundle_files = Vec::new();
            let mut bundle_deps = vec![format!("firmware:{}", p.name), "select".into(), "verify-input".into()];
            if let Some((pte, kernels)) = &cpu_lowering {
                let npu = p.board.as_ref().and_then(|b| b.npu.as_ref()).ok_or_else(|| {
                    CliError(format!("{}: backend ethos-u needs a platform with an `npu` (toolchains/{}.kdl has none)", r.name, p.name))
                })?;
                let accelerator = r.backend.npu.as_ref().map_or("", |o| o.accelerator.0);
                if !accelerator.starts_with(&npu.name) {
                    return Err(CliError(format!("{}: accelerator {accelerator} does not match platform {}'s NPU `{}`", r.name, p.name, npu.name)));
                }
                // The same firmware on the CPU lowering: what `rbuild verify` boots in QEMU.
                let mut cpu_job = job.clone();
                cpu_job.variant = Some("cpu-lowering");
                cpu_job.program = pte.clone();
                cpu_job.kernels_json = kernels.clone();
                cpu_job.out_dir = dir.join("cpu-lowering");
                cpu_job.deps = vec!["export".into(), "select-cpu-lowering".into(), "verify-input".into()];
                files.extend(super::firmware::add_step(dag, p, cpu_job)?);
                extra_bundle_files.push(recipe_out.join("program/delegation.json"));
                bundle_deps.push(format!("firmware-cpu-lowering:{}", p.name));
                job.npu_base = Some(npu.base);
            }
            let fw = super::firmware::add_step(dag, p, job)?;
            // bundle: firmware.elf → .bin/.hex, manifest, scripts, reproducible tarball.
            let [elf, _, _, _, layout] = super::firmware::outputs(&dir);
            let tarball = super::bundle_step::add(
                dag,
                r,
                p,
                project.probes(),
                super::bundle_step::Inputs {
                    platform_dir: dir.clone(),
                    artifact: elf,
                    artifact_name: "firmware.elf".into(),
                    program: program.clone(),
                    kernels_json: kernels_json.clone(),
                    extra: verify_input.iter().cloned().chain([layout]).chain(extra_bundle_files).collect(),
                    deps: bundle_deps,
                    rustc: rustc.clone(),
                    version: version.clone(),
                    delegation: cpu_lowering.as_ref().map(|_| recipe_out.join("program/delegation.json")),
                    int8_quality: int8_quality.clone(),
                    qemu_firmware: cpu_lowering.as_ref().map(|_| super::firmware_elf(&dir.join("cpu-lowering"))),
                },
            )?;
            files.extend(fw);
            files.push(tarball);
            continue;
        }
        let target = p.rust_target.clone();
        let linker = p.linker.clone();
        // A GPU-delegated program's runner carries the wgpu runtime when its template offers it
        // (the `gpu` feature), and with `api "cuda"` also the CUDA runtime (`cuda`), picked at
        // run time; without them its delegates run on the CPU reference runtime.
        let mut runner_features: Vec<String> = Vec::new();
        if let Some(g) = &r.backend.gpu {
            if template_has_feature(&template, "gpu") {
                runner_features.push("gpu".into());
            }
            if g.api == rbuild_recipe::GpuApi::Cuda && template_has_feature(&template, "cuda") {
                runner_features.push("cuda".into());
            }
        }
        let compile_key = |what: &str| {
            let mut k = KeyHasher::new();
            k.add("tool", &version).add("rustc", &rustc).add("what", what).add("template", &template_hash);
            k.add("target", target.as_deref().unwrap_or("host")).add("linker", linker.as_deref().unwrap_or("default"));
            k.add("embed-program", &r.runner.embed_program.to_string());
            k.add("features", &runner_features.join(","));
            k.add("rustc-args", &RUNNER_RUSTC_ARGS.join(" "));
            k
        };
        let opts = rbuild_selective::CompileOptions {
            target: target.clone(),
            target_dir: project.runner_target_dir(),
            features: runner_features.clone(),
            env: match (&target, &linker) {
                (Some(t), Some(l)) => vec![(format!("CARGO_TARGET_{}_LINKER", t.to_uppercase().replace('-', "_")), l.clone())],
                _ => Vec::new(),
            },
            release: true,
            bin_rustc_args: RUNNER_RUSTC_ARGS.iter().map(|a| a.to_string()).collect(),
        };
        let package = format!("rbuild-runner-{}-{}", r.name, p.name).replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-");

        // generate + compile: the runner with exactly the program's kernels.
        let (src, bin) = (dir.join("runner-src"), dir.join(&runner_bin));
        let (t, s, kj, b, o, pkg) = (template.clone(), src.clone(), kernels_json.clone(), bin.clone(), opts.clone(), package.clone());
        let embed = r.runner.embed_program.then(|| program.clone());
        let rbn = runner_bin.clone();
        let mut deps = vec!["select".to_string()];
        if embed.is_some() {
            deps.push("export".into());
        }
        dag.add(
            StepSpec {
                id: format!("runner:{}", p.name),
                label: format!("generate and build {runner_bin} for {} (selected kernels)", p.name),
                deps,
                key: compile_key("selected"),
                outputs: vec![bin.clone()],
            },
            move |_| {
                let selected = selected_kernels(&kj)?;
                rbuild_selective::generate(&t, &s, &pkg, &selected)?;
                let mut o = o;
                if let Some(pte) = &embed {
                    o.features.push("embed-program".into());
                    o.env.push(("RBUILD_EMBED_PROGRAM".into(), pte.display().to_string()));
                }
                rbuild_selective::compile(&s, &rbn, &o, |exe| copy_atomic(exe, &b))
            },
        )
        .map_err(CliError)?;

        // The same runner with every kernel, for the size comparison: built once per runner
        // target folder (it does not depend on the program) and copied here.
        let all_bin = dir.join(format!("{runner_bin}.all-kernels"));
        let baseline_key = compile_key("all-kernels");
        let store_key = baseline_key.clone().add("template-dir", &template.display().to_string()).finish();
        let (t, b, o) = (template.clone(), all_bin.clone(), opts.clone());
        let rbn = runner_bin.clone();
        dag.add(
            StepSpec {
                id: format!("baseline:{}", p.name),
                label: format!("{runner_bin} with all kernels (size baseline) for {}", p.name),
                deps: vec![],
                key: baseline_key,
                outputs: vec![all_bin.clone()],
            },
            move |_| super::baseline::install(&t, &store_key, &rbn, &o, &b),
        )
        .map_err(CliError)?;

        // package: program + runner + manifest in out/<recipe>/<platform>/.
        let (pte_to, manifest) = (dir.join("model.pte"), dir.join("manifest.json"));
        let (pte_from, pt, mf, kj, rb, ab) = (program.clone(), pte_to.clone(), manifest.clone(), kernels_json.clone(), bin.clone(), all_bin.clone());
        let gpu_report = r.backend.gpu.map(|_| super::gpu::report_path(&program));
        let accuracy = accuracy_json.clone();
        // Tokenizer files (language models) sit next to the program.
        let extras: Vec<(PathBuf, PathBuf)> =
            extra_files.iter().filter_map(|(f, _)| f.file_name().map(|n| (f.clone(), dir.join(n)))).collect();
        let info = serde_json::json!({
            "recipe": r.name,
            "description": r.description,
            "recipe_sha256": rbuild_planner::hash::sha256_file(Path::new(r.source.name())).unwrap_or_default(),
            "model": r.model.arch,
            "weights": r.model.weights.to_string(),
            "input_shape": r.model.input_shape,
            "llm": r.model.llm.as_ref().map(|l| serde_json::json!({
                "max_seq_len": llm_sizes.as_ref().map(|s| s.max_seq_len),
                "quantize": format!("{:?}", r.model.quantize),
                "group_size": l.group_size,
                "embedding_quantize": format!("{:?}", l.embedding_quantize),
                "full_logits": l.full_logits,
            })),
            "backend": r.backend.kind.as_str(),
            "runner": r.runner.template,
            "embed_program": r.runner.embed_program,
            "platform": p.name,
            "rust_target": p.rust_target.clone().unwrap_or_else(|| "host".into()),
            "rbuild": env!("CARGO_PKG_VERSION"),
        });
        let mut deps = vec!["export".to_string(), "select".into(), format!("runner:{}", p.name), format!("baseline:{}", p.name)];
        for step in extra_files.iter().map(|(_, step)| *step).chain(accuracy_step) {
            if !deps.iter().any(|d| d == step) {
                deps.push(step.to_string());
            }
        }
        let mut outputs = vec![pte_to.clone(), manifest.clone()];
        outputs.extend(extras.iter().map(|(_, to)| to.clone()));
        let extra_outputs: Vec<PathBuf> = extras.iter().map(|(_, to)| to.clone()).collect();
        dag.add(
            StepSpec {
                id: format!("package:{}", p.name),
                label: format!("lay out out/{}/{}", r.name, p.name),
                deps,
                key: KeyHasher::new().add("tool", &version).add("info", &info.to_string()).clone(),
                outputs,
            },
            move |_| {
                // Files an earlier layout listed that this one does not (a demo's tokenizer
                // beside a real checkpoint's program) would mislead: they go.
                let keep: Vec<&Path> = [pt.as_path(), rb.as_path()].into_iter().chain(extras.iter().map(|(_, to)| to.as_path())).collect();
                for stale in listed_files(&mf).iter().filter(|f| !keep.contains(&f.as_path())) {
                    let _ = std::fs::remove_file(stale);
                }
                copy_atomic(&pte_from, &pt)?;
                for (from, to) in &extras {
                    copy_atomic(from, to)?;
                }
                let file = |p: &Path| -> Result<serde_json::Value, String> {
                    Ok(serde_json::json!({
                        "path": p.file_name().map(|n| n.to_string_lossy().into_owned()),
                        "bytes": std::fs::metadata(p).map_err(step_err)?.len(),
                        "sha256": rbuild_planner::hash::sha256_file(p).map_err(step_err)?,
                    }))
                };
                let mut info = info;
                let mut listed = vec![file(&pt)?, file(&rb)?];
                for (_, to) in &extras {
                    listed.push(file(to)?);
                }
                info["files"] = serde_json::json!(listed);
                info["kernels"] = serde_json::json!(selected_kernels(&kj)?.iter().map(|(o, _)| o.clone()).collect::<Vec<_>>());
                info["runner_stripped_bytes"] = serde_json::json!(std::fs::metadata(&rb).map_err(step_err)?.len());
                info["runner_all_kernels_stripped_bytes"] = serde_json::json!(std::fs::metadata(&ab).map_err(step_err)?.len());
                // A delegated program's placement report, as the export wrote it.
                if let Some(report) = &gpu_report {
                    let text = std::fs::read_to_string(report).map_err(|e| format!("{}: {e}", report.display()))?;
                    info["delegation"] = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", report.display()))?;
                }
                // The accuracy gate's table (verify { accuracy }).
                if let Some(table) = &accuracy {
                    info["accuracy"] = super::accuracy::manifest_entry(table)?;
                }
                write_atomic(&mf, serde_json::to_string_pretty(&info).map_err(step_err)?.as_bytes()).map_err(step_err)
            },
        )
        .map_err(CliError)?;
        // bundle: out/<recipe>/<platform>/bundle/ and its reproducible tarball.
        let mut bundle_deps = vec![format!("runner:{}", p.name), format!("package:{}", p.name)];
        bundle_deps.extend(verify_input.iter().map(|_| "verify-input".to_string()));
        let tarball = super::bundle_step::add(
            dag,
            r,
            p,
            project.probes(),
            super::bundle_step::Inputs {
                platform_dir: dir.clone(),
                artifact: bin.clone(),
                artifact_name: runner_bin.clone(),
                program: pte_to.clone(),
                kernels_json: kernels_json.clone(),
                extra: extra_outputs.iter().cloned().chain(verify_input.iter().cloned()).collect(),
                deps: bundle_deps,
                rustc: rustc.clone(),
                version: version.clone(),
                delegation: r.backend.gpu.map(|_| super::gpu::report_path(&program)),
                int8_quality: int8_quality.clone(),
                qemu_firmware: None,
            },
        )?;
        files.extend([pte_to, manifest, tarball]);
        files.extend(extra_outputs);
        runners.push((p.name.clone(), bin, all_bin));
    }
    Ok(Artifacts { files, runners })
}

/// The kernel-selection step `id`: the program's operators → kernels.json.
fn add_select(dag: &mut Dag<'_>, id: &str, program: &Path, kernels_json: &Path, version: &str, backend: &'static str) -> CliResult {
    let (p_in, k_out) = (program.to_path_buf(), kernels_json.to_path_buf());
    dag.add(
        StepSpec {
            id: id.into(),
            label: format!("kernel selection for backend {backend} ({})", program.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()),
            deps: vec!["export".into()],
            key: KeyHasher::new().add("tool", version).clone(),
            outputs: vec![kernels_json.to_path_buf()],
        },
        move |_| {
            let bytes = std::fs::read(&p_in).map_err(step_err)?;
            let ops = rbuild_selective::program_ops(&bytes)?;
            let selected = rbuild_selective::select(&ops).map_err(|e| format!("backend {backend}: {e}"))?;
            let json = serde_json::json!({
                "ops": ops,
                "kernels": selected.iter().map(|(o, p)| serde_json::json!({"op": o, "path": p})).collect::<Vec<_>>(),
            });
            write_atomic(&k_out, serde_json::to_string_pretty(&json).map_err(step_err)?.as_bytes()).map_err(step_err)
        },
    )
    .map_err(CliError)
}

/// The step `id` exporting an image model (or a `.pt2` archive) to `program`.
pub(super) fn add_image_export(dag: &mut Dag<'_>, id: &str, project: &Project, r: &rbuild_recipe::Recipe, hashes: &mut FileHashes, version: &str, program: &Path) -> CliResult {
    if r.backend.gpu.is_some() {
        return Err(CliError(format!("{}: backend gpu builds the sequence-model families (whisper, llama) for now; image models use `cpu` or `ethos-u`", r.name)));
    }
    let npu = match &r.backend.npu {
        Some(o) => {
            if r.model.quantize != Quantize::Int8 {
                return Err(CliError(format!("{}: backend ethos-u runs int8 programs: the model needs `quantize \"int8\"`", r.name)));
            }
            Some(super::ethosu::NpuExport::resolve(project, o, r.backend.fallback).map_err(|e| CliError(format!("{}: {e}", r.name)))?)
        }
        None => None,
    };
    // backend "xnnpack": the float program's ops delegated to XnnpackBackend.
    let xnnpack = (r.backend.kind == Backend::Xnnpack).then_some(r.backend.fallback);
    if xnnpack.is_some() && r.model.quantize != Quantize::None {
        return Err(CliError(format!("{}: backend xnnpack delegates float32 programs: set `quantize \"none\"` (int8 is not lowered yet)", r.name)));
    }
    let mut outputs = vec![program.to_path_buf()];
    if npu.is_some() {
        outputs.extend(super::ethosu::outputs(program));
    }
    if r.model.quantize == Quantize::Int8 {
        outputs.push(super::int8_quality::path(program));
    }
    let mut key = KeyHasher::new();
    if let Some(n) = &npu {
        key.add("npu", &n.key());
    }
    if let Some(fallback) = xnnpack {
        key.add("xnnpack", &format!("{fallback:?}"));
    }
    key.add("tool", version).add("model", &r.model.arch).add("input-shape", &format!("{:?}", r.model.input_shape));
    key.add("dtype", &format!("{:?}", r.model.dtype)).add("quantize", &format!("{:?}", r.model.quantize));
    match &r.model.weights {
        // A missing archive fails the export step itself (naming it), so `rbuild plan` and
        // `rbuild list` work on an example recipe before its archive exists.
        WeightsSource::File(p) if r.model.is_imported() && !p.exists() => {
            key.add("weights", &format!("{} (missing)", p.display()));
        }
        WeightsSource::File(p) | WeightsSource::Folder(p) => {
            let h = hashes.hash(p).map_err(|e| CliError(format!("{}: weights file {}: {e}", r.name, p.display())))?;
            key.add("weights", &format!("{} sha256:{h}", p.display()));
        }
        WeightsSource::Random(seed) => {
            key.add("weights", &format!("random seed {seed}"));
        }
        WeightsSource::Package { file, .. } => return Err(CliError(format!("{}: weights {file} were not fetched before the export", r.name))),
    }
    if let Some(pt2) = &r.model.pt2 {
        if matches!(r.model.weights, WeightsSource::Random(_)) {
            return Err(CliError(format!("{}: model \"pt2\" takes its weights from the archive: remove `weights \"random…\"`", r.name)));
        }
        let bounds: Vec<String> = pt2.dim_max.iter().map(|d| format!("{}[{}]<={}", d.input, d.dim, d.max)).collect();
        key.add("dim-max", &bounds.join(","));
    }
    // Calibration inputs are inputs of the export: their contents key the step.
    if let Some(file) = r.model.calibration.as_ref().filter(|p| p.is_file()) {
        let h = hashes.hash(file).map_err(|e| CliError(format!("{}: calibration file {}: {e}", r.name, file.display())))?;
        key.add("calibration", &format!("{} sha256:{h}", file.display()));
    } else if let Some(dir) = &r.model.calibration {
        for f in crate::calibration::image_files(dir)? {
            let h = hashes.hash(&f).map_err(|e| CliError(format!("{}: calibration image {}: {e}", r.name, f.display())))?;
            key.add("calibration", &format!("{} sha256:{h}", f.display()));
        }
    }
    if !r.model.keep_float.is_empty() {
        if npu.is_some() {
            return Err(CliError(format!("{}: `keep-float` is not supported with backend ethos-u yet (the NPU partition takes int8 layers only)", r.name)));
        }
        key.add("keep-float", &r.model.keep_float.join(","));
    }
    let int8_options = passes::Int8Options { keep_float: r.model.keep_float.clone() };
    let calibration = r.model.calibration.clone();
    let (model, weights, shape, dtype, quantize) =
        (r.model.arch.clone(), r.model.weights.clone(), r.model.input_shape.clone(), r.model.dtype, r.model.quantize);
    let pt2_bounds: Option<Vec<(String, usize, usize)>> =
        r.model.pt2.as_ref().map(|p| p.dim_max.iter().map(|d| (d.input.clone(), d.dim, d.max)).collect());
    let program_out = program.to_path_buf();
    let label = match &npu {
        Some(n) => format!("export {} ({}) for {} via Vela {}", model, weights, n.options.accelerator, n.vela.version),
        None => format!("export {} ({})", model, weights),
    };
    dag.add(StepSpec { id: id.into(), label, deps: vec![], key, outputs }, move |_| {
        if dtype != Dtype::Float32 || !matches!(quantize, Quantize::None | Quantize::Int8) {
            return Err(format!("{model}: image models export as float32, unquantized or int8"));
        }
        if calibration.is_some() && quantize != Quantize::Int8 {
            return Err(format!("{model}: `calibration` needs `quantize \"int8\"`"));
        }
        let mut g = match (&pt2_bounds, &weights) {
            (Some(bounds), WeightsSource::File(archive)) => import_pt2(archive, bounds)?,
            (Some(_), _) => return Err(format!("{model}: the archive must be a .pt2 file")),
            (None, WeightsSource::File(p) | WeightsSource::Folder(p)) => {
                let w = Weights::open(p).map_err(step_err)?;
                rbuild_models::build(&model, &w, &shape).map_err(step_err)?
            }
            (None, WeightsSource::Package { file, .. }) => return Err(format!("{model}: weights {file} were not fetched before the export")),
            (None, WeightsSource::Random(seed)) => {
                eprintln!("note: {model} uses random weights (seed {seed}): a demo, its predictions mean nothing");
                let w = rbuild_models::random_weights(&model, *seed).map_err(step_err)?;
                rbuild_models::build(&model, &w, &shape).map_err(step_err)?
            }
        };
        if let Some(npu) = &npu {
            let samples = crate::calibration::samples(&g, calibration.as_deref()).map_err(step_err)?;
            let (int8, matches) = passes::optimize_int8_for_delegation(&mut g, &samples).map_err(step_err)?;
            eprintln!("note: {model} int8: calibrated on {} sample(s)", int8.calibration_samples);
            if let Some(q) = &int8.quality {
                super::int8_quality::write(&program_out, q)?;
            }
            return super::ethosu::export(g, &matches, npu, &program_out);
        }
        if quantize == Quantize::Int8 {
            let samples = crate::calibration::samples(&g, calibration.as_deref()).map_err(step_err)?;
            let (_, int8) = passes::optimize_int8_with(&mut g, &samples, passes::Int8Stage::Fused, &int8_options).map_err(step_err)?;
            if !int8.quant.kept_float.is_empty() {
                eprintln!("note: {model} int8: kept in float32: {}", int8.quant.kept_float.join(", "));
            }
            if let Some(f) = &int8.fuse {
                let fused: Vec<String> = f.fused.iter().map(|(op, n)| format!("{op} x{n}")).collect();
                eprintln!("note: {model} int8: calibrated on {} sample(s); fused {}", int8.calibration_samples, fused.join(", "));
            }
            if let Some(q) = &int8.quality {
                super::int8_quality::write(&program_out, q)?;
            }
        } else if let Some(fallback) = xnnpack {
            passes::optimize_functional(&mut g, &passes::Options::for_xnnpack()).map_err(step_err)?;
            super::xnnpack::delegate(&mut g, fallback, &rbuild_xnnpack::XnnpackOptions::default()).map_err(|e| format!("{model}: {e}"))?;
            // What stayed on the CPU runs on portable kernels, which have no hardswish.
            passes::decompose::decompose(&mut g, &passes::Options::default()).map_err(step_err)?;
            passes::to_out::to_out_variants(&mut g).map_err(step_err)?;
        } else {
            passes::optimize(&mut g).map_err(step_err)?;
        }
        let mem = plan::plan_memory(&g);
        let bytes = emit::emit(&g, &mem, "forward").map_err(step_err)?;
        write_atomic(&program_out, &bytes).map_err(step_err)
    })
    .map_err(CliError)
}

/// The export step of a prebuilt program (`model "pte"`): the file, checked to be an ExecuTorch
/// program, is copied to where an export writes its program, so kernel selection, runners,
/// bundles and verify take it unchanged. The step keeps the id `export` (later steps depend on
/// it). A missing file fails the step itself, naming it, so `rbuild plan` and `rbuild list`
/// work on the shipped example before its program exists.
fn add_prebuilt_program(dag: &mut Dag<'_>, r: &rbuild_recipe::Recipe, hashes: &mut FileHashes, version: &str, program: &Path) -> CliResult {
    let source = r
        .model
        .program_file()
        .ok_or_else(|| CliError(format!("{}: model \"{PTE_MODEL}\" names no program file", r.name)))?
        .to_path_buf();
    let mut key = KeyHasher::new();
    key.add("tool", version).add("model", PTE_MODEL);
    // The program's contents key the step: a changed file rebuilds everything after it.
    if source.is_file() {
        let h = hashes.hash(&source).map_err(|e| CliError(format!("{}: program {}: {e}", r.name, source.display())))?;
        key.add("program", &format!("{} sha256:{h}", source.display()));
    } else {
        key.add("program", &format!("{} (missing)", source.display()));
    }
    let label = format!("copy prebuilt program {}", source.display());
    let to = program.to_path_buf();
    dag.add(StepSpec { id: "export".into(), label, deps: vec![], key, outputs: vec![to.clone()] }, move |_| copy_prebuilt_program(&source, &to))
        .map_err(CliError)
}

/// Copies a prebuilt program (atomically) after checking that it is an ExecuTorch program with
/// the `forward` method rbuild's runners and verify run. Errors name the file.
fn copy_prebuilt_program(from: &Path, to: &Path) -> Result<(), String> {
    let bytes = match std::fs::read(from) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("program {} not found: give an ExecuTorch program (.pte) with program=PATH (or the recipe's `program`)", from.display()))
        }
        Err(e) => return Err(format!("program {}: cannot read it: {e}", from.display())),
    };
    let pte = rbuild_runtime::format::PteFile::parse(&bytes).map_err(|e| match e.kind {
        // Its message says "not an ExecuTorch program" already.
        rbuild_runtime::format::FormatErrorKind::BadIdentifier(_) => format!("program {}: {e}", from.display()),
        _ => format!("program {} is not a valid ExecuTorch program (.pte): {e}", from.display()),
    })?;
    let methods: Vec<&str> = pte.program.execution_plan.iter().flatten().filter_map(|plan| plan.name).collect();
    if !methods.contains(&"forward") {
        return Err(format!(
            "program {} has no `forward` method (it has: {}); rbuild's runners and verify run `forward`",
            from.display(),
            if methods.is_empty() { "none".to_string() } else { methods.join(", ") }
        ));
    }
    write_atomic(to, &bytes).map_err(|e| format!("{}: {e}", to.display()))
}

/// A `torch.export` archive lowered to a graph, with the recipe's `dim-max` bounds; prints
/// what was imported. Errors name the archive.
fn import_pt2(archive_path: &Path, bounds: &[(String, usize, usize)]) -> Result<rbuild_export::Graph, String> {
    if !archive_path.exists() {
        return Err(format!(
            "archive {} not found: export the model with torch.export.save(ep, \"model.pt2\") and give weights=PATH/model.pt2 (or the recipe's `archive`)",
            archive_path.display()
        ));
    }
    let archive = rbuild_pt2::Pt2Archive::open(archive_path).map_err(step_err)?;
    let model = archive.default_model().map_err(step_err)?;
    let in_archive = |e: rbuild_pt2::LowerError| format!("{}: {e}", archive_path.display());
    let options = rbuild_pt2::LowerOptions::from_input_dims(&model, bounds).map_err(in_archive)?;
    let lowered = rbuild_pt2::lower(&model, &options).map_err(in_archive)?;
    let report = &lowered.report;
    eprintln!(
        "note: imported {} ({} nodes, {} constants; inputs {})",
        archive_path.display(),
        report.ops.values().sum::<usize>(),
        report.constants,
        report.inputs.join("; ")
    );
    Ok(lowered.graph)
}

/// Whether the runner template's Cargo.toml declares `feature`.
fn template_has_feature(template: &Path, feature: &str) -> bool {
    std::fs::read_to_string(template.join("Cargo.toml")).is_ok_and(|t| {
        let features = t.split("[features]").nth(1).map(|rest| rest.split("\n[").next().unwrap_or("")).unwrap_or("");
        features.lines().any(|l| l.trim_start().starts_with(&format!("{feature} =")))
    })
}

/// The files an earlier `manifest.json` at `manifest` lists (beside it); none when absent.
fn listed_files(manifest: &Path) -> Vec<PathBuf> {
    let Some(dir) = manifest.parent() else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(manifest) else { return Vec::new() };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { return Vec::new() };
    v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str())
        // Names only: a manifest never points outside its folder.
        .filter(|n| !n.contains('/') && !n.contains('\\') && *n != ".." && *n != ".")
        .map(|n| dir.join(n))
        .collect()
}

/// Prints the artifacts with sizes, and each runner next to its all-kernels twin.
pub fn print_artifacts(a: &Artifacts) {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    for f in &a.files {
        eprintln!("  {:>12} bytes  {}", size(f), f.display());
        if f.file_name().is_some_and(|n| n == "kernels.json") {
            if let Ok(k) = selected_kernels(f) {
                let ops: Vec<&str> = k.iter().map(|(o, _)| o.as_str()).collect();
                eprintln!("  {:>12} kernels: {}", ops.len(), ops.join(", "));
            }
        }
    }
    for (platform, bin, all) in &a.runners {
        let (s, t) = (size(bin), size(all));
        eprintln!(
            "  {:>12} bytes  {} (stripped; with all kernels {} bytes, {:.0}% smaller) [{platform}]",
            s,
            bin.display(),
            t,
            100.0 * (1.0 - s as f64 / t.max(1) as f64)
        );
    }
}
