//! `rbuild <recipe> [key=value …]`: recipe → export → kernel selection → runner crate →
//! cargo build → package, as a cached step DAG (see `rbuild-planner`).

pub mod bundle_step;
pub mod ethosu;
mod firmware;
pub mod int8_quality;
mod steps;
mod verify_input;

pub use verify_input::FILE as VERIFY_INPUT;

/// The firmware image a firmware build writes in its platform folder.
pub fn firmware_elf(platform_dir: &std::path::Path) -> PathBuf {
    firmware::outputs(platform_dir)[0].clone()
}

use std::path::PathBuf;
use std::time::Instant;

use rbuild_planner::dag::Event;
use rbuild_planner::{cache::Cache, Dag, FileHashes, StepOutcome, Summary};
use rbuild_recipe::{Backend, Catalog, Platform, Recipe};

use crate::error::{CliError, CliResult};
use crate::project::Project;

/// A recipe with its overrides applied and its platforms resolved.
pub struct Loaded {
    pub recipe: Recipe,
    pub platforms: Vec<Platform>,
}

fn report(r: miette::Report) -> CliError {
    CliError(rbuild_recipe::render(&r).trim_end().to_string())
}

/// Every platform file of the project.
pub fn platforms(project: &Project) -> CliResult<Vec<Platform>> {
    rbuild_recipe::load_platforms(project.toolchains_dir()).map_err(report)
}

/// Loads `name` (a recipe in `recipes/`) and applies `overrides`.
pub fn load(project: &Project, name: &str, overrides: &[String]) -> CliResult<Loaded> {
    let all = platforms(project)?;
    let platform_names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    let runners = project.runner_names();
    let runner_names: Vec<&str> = runners.iter().map(String::as_str).collect();
    let catalog = Catalog {
        models: rbuild_models::names(),
        language_models: rbuild_models::language_models(),
        backends: &[Backend::Cpu, Backend::EthosU],
        runners: &runner_names,
        platforms: &platform_names,
    };
    // A missing recipe is reported with the closest known name.
    let path = Recipe::find(project.recipes_dir(), name).map_err(report)?;
    let mut recipe = Recipe::load(&path, &catalog).map_err(report)?;
    recipe.apply_overrides(overrides, &catalog).map_err(report)?;
    let platforms = recipe
        .platforms
        .iter()
        .map(|n| all.iter().find(|p| &p.name == n).cloned().ok_or_else(|| CliError(format!("unknown platform {n}"))))
        .collect::<CliResult<Vec<_>>>()?;
    Ok(Loaded { recipe, platforms })
}

/// Fails, before any work, when a platform lacks a tool — naming it and how to install it.
pub fn check_toolchains(platforms: &[Platform]) -> CliResult {
    let mut missing = Vec::new();
    let mut automatic = false;
    for p in platforms {
        for s in p.check() {
            if s.found.is_some() {
                continue;
            }
            // A person must act (Xcode, the NDK, another OS): say what to do, not "install with".
            if s.steps.iter().all(|step| matches!(step, rbuild_recipe::InstallStep::Manual(_))) {
                let what = if s.tool.contains(' ') { format!("a {}", s.tool) } else { format!("`{}`", s.tool) };
                missing.push(format!("platform {}: needs {what}: {}", p.name, s.install_hint));
            } else {
                automatic = true;
                missing.push(format!("platform {}: `{}` not found; install with: {}", p.name, s.tool, s.install_hint));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let hint = if automatic { "\n(or run `rbuild toolchain install <platform>`)" } else { "" };
    Err(CliError(format!("missing tools (nothing was built):\n  {}{hint}", missing.join("\n  "))))
}

fn print_summary(s: &Summary, total: f64) {
    eprintln!("{:<28} {:<10} {}", "step", "result", "what");
    for (id, label, outcome, _) in &s.steps {
        let result = match outcome {
            StepOutcome::Cached => "cached".to_string(),
            StepOutcome::Ran { seconds } => format!("ran {seconds:.2}s"),
            StepOutcome::WouldRun(why) => format!("would run ({why})"),
            StepOutcome::Failed(_) => "FAILED".into(),
        };
        eprintln!("{id:<28} {result:<10} {label}");
    }
    eprintln!("{} steps: {} ran, {} cached, {total:.3}s", s.steps.len(), s.ran(), s.cached());
}

/// Builds (or, with `dry_run`, plans) a recipe.
pub fn build(project: &Project, name: &str, overrides: &[String], dry_run: bool) -> CliResult {
    let t0 = Instant::now();
    let loaded = load(project, name, overrides)?;
    let out = project.out_dir();
    let mut hashes = FileHashes::load(&out.join(".cache/file-hashes.json"));
    let mut dag = Dag::new(Cache::new(&out.join(".cache/steps")));
    let artifacts = steps::add_steps(&mut dag, project, &loaded, &mut hashes)?;
    let _ = hashes.save();
    let plan = dag.plan();
    if dry_run {
        println!("plan for {name} ({}):", loaded.recipe.description);
        for spec in dag.specs() {
            let deps = if spec.deps.is_empty() { String::new() } else { format!(" ← {}", spec.deps.join(", ")) };
            let state = plan.steps.iter().find(|s| s.0 == spec.id).map(|s| match &s.2 {
                StepOutcome::Cached => "cached".to_string(),
                StepOutcome::WouldRun(why) => format!("would run: {why}"),
                o => format!("{o:?}"),
            });
            println!("  {:<26} {:<36} {}{deps}", spec.id, state.unwrap_or_default(), spec.label);
            for (k, v) in &spec.key.parts {
                println!("      {k} = {v}");
            }
        }
        println!("{} steps: {} cached, {} would run", plan.steps.len(), plan.cached(), plan.steps.len() - plan.cached());
        return Ok(());
    }
    if plan.cached() < plan.steps.len() {
        check_toolchains(&loaded.platforms)?;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let result = dag.run(|e| match e {
        Event::Start(spec) => bar.set_message(format!("{}: {}", spec.id, spec.label)),
        Event::Done(spec, StepOutcome::Ran { seconds }) => bar.println(format!("  {:<26} ran in {seconds:.2}s", spec.id)),
        Event::Done(..) => {}
    });
    bar.finish_and_clear();
    match result {
        Ok(summary) => {
            print_summary(&summary, t0.elapsed().as_secs_f64());
            let program = out.join(&loaded.recipe.name).join("program/model.pte");
            if loaded.recipe.backend.npu.is_some() {
                let [_, report] = ethosu::outputs(&program);
                ethosu::print_report(&report);
            }
            int8_quality::print(&program);
            steps::print_artifacts(&artifacts);
            Ok(())
        }
        Err((summary, e)) => {
            print_summary(&summary, t0.elapsed().as_secs_f64());
            Err(CliError(format!("{name}: {e}")))
        }
    }
}

/// Files a build produced, for the final listing.
pub struct Artifacts {
    pub files: Vec<PathBuf>,
    pub runners: Vec<(String, PathBuf, PathBuf)>,
}
