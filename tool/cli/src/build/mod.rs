//! `rbuild <recipe> [key=value …]`: recipe → export → kernel selection → runner crate →
//! cargo build → package, as a cached step DAG (see `rbuild-planner`).

pub mod accuracy;
mod baseline;
pub mod bundle_step;
pub mod ethosu;
pub mod gpu;
pub mod xnnpack;
mod firmware;
pub mod int8_quality;
mod llm_export;
mod llm_sizes;
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
use rbuild_recipe::{Backend, Catalog, Platform, Probes, Recipe, ToolStatus};

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
        backends: &[Backend::Cpu, Backend::EthosU, Backend::Gpu, Backend::Xnnpack],
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

/// A platform of the recipe that cannot be built on this machine, and the tools it lacks.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub platform: String,
    pub missing: Vec<ToolStatus>,
}

impl Skipped {
    /// The missing tools' names: `aarch64-linux-gnu-gcc, qemu-aarch64`.
    pub fn tool_names(&self) -> String {
        self.missing.iter().map(|s| s.tool.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Whether the platform builds only on another OS (its first missing "tool" is the build
    /// machine itself): no install here can fix it.
    pub fn needs_other_os(&self) -> bool {
        self.missing.first().is_some_and(|s| s.tool.ends_with(" build machine"))
    }

    /// `rbuild toolchain install <platform>` when it can install at least one missing tool.
    pub fn install_command(&self) -> Option<String> {
        self.missing.iter().any(|s| !s.needs_a_person()).then(|| format!("rbuild toolchain install {}", self.platform))
    }

    /// One line per missing tool with why it counts as missing and how to get it.
    fn tool_lines(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|s| {
                let hint = s.install_hint.replace('\n', "; ");
                // A person must act (Xcode, the NDK, another OS): say what to do, not "install with".
                if s.needs_a_person() {
                    let what = if s.tool.contains(' ') { format!("a {}", s.tool) } else { format!("`{}`", s.tool) };
                    format!("needs {what}: {hint}")
                } else {
                    format!("`{}` {}; install with: {hint}", s.tool, s.why_missing().unwrap_or_default())
                }
            })
            .collect()
    }

    /// The notice a build prints for a platform it leaves out.
    pub fn notice(&self) -> String {
        let mut text = format!("skipped platform {}: missing {}", self.platform, self.tool_names());
        for line in self.tool_lines() {
            text.push_str(&format!("\n    {line}"));
        }
        if let Some(command) = self.install_command() {
            text.push_str(&format!("\n  install them with: {command}"));
        }
        text
    }
}

/// The platforms among `platforms` that lack a tool (probes answered by `probes`).
pub fn missing_tools(platforms: &[Platform], probes: &Probes) -> Vec<Skipped> {
    platforms
        .iter()
        .filter_map(|p| {
            let missing: Vec<ToolStatus> = p.check_with(probes).into_iter().filter(|s| s.found.is_none()).collect();
            (!missing.is_empty()).then(|| Skipped { platform: p.name.clone(), missing })
        })
        .collect()
}

/// The error for platforms that had to be built but lack tools: nothing was built.
fn missing_tools_error(skipped: &[Skipped], why: &str) -> CliError {
    let mut lines = Vec::new();
    for s in skipped {
        lines.extend(s.tool_lines().into_iter().map(|l| format!("platform {}: {l}", s.platform)));
    }
    let commands: Vec<String> = skipped.iter().filter_map(Skipped::install_command).collect();
    let hint = if commands.is_empty() { String::new() } else { format!("\n(or run `{}`)", commands.join("` and `")) };
    CliError(format!("missing tools (nothing was built; {why}):\n  {}{hint}", lines.join("\n  ")))
}

/// How `rbuild <recipe>` treats platforms whose tools are missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Only plan: print the steps and what is cached.
    pub dry_run: bool,
    /// Fail when any platform of the recipe this machine can build would be skipped (CI: every
    /// expected platform must be built; platforms that build only on another OS are still
    /// skipped with their notice).
    pub strict: bool,
}

/// What a build left out, and the weights it used (a package source made local).
#[derive(Debug)]
pub struct Built {
    pub skipped: Vec<Skipped>,
    pub weights: rbuild_recipe::WeightsSource,
}

/// Drops the platforms that lack tools from `loaded` and returns them, or fails (before any
/// work) when a missing platform was asked for by name, when `strict`, or when no platform
/// is left to build.
fn leave_out_unbuildable(project: &Project, loaded: &mut Loaded, overrides: &[String], strict: bool) -> CliResult<Vec<Skipped>> {
    let skipped = missing_tools(&loaded.platforms, project.probes());
    if skipped.is_empty() {
        return Ok(skipped);
    }
    // `platform=…` names exactly what the user wants built: leaving it out would be a lie.
    if overrides.iter().any(|w| w.starts_with("platform=")) {
        return Err(missing_tools_error(&skipped, "the platform was asked for by name"));
    }
    // --strict asks for every platform this machine can build: one that builds only on
    // another OS (macOS with Xcode) is still left out, with its notice.
    let here: Vec<&Skipped> = skipped.iter().filter(|s| !s.needs_other_os()).collect();
    if strict && !here.is_empty() {
        let here: Vec<Skipped> = here.into_iter().map(|s| Skipped { platform: s.platform.clone(), missing: s.missing.clone() }).collect();
        return Err(missing_tools_error(&here, "--strict builds every platform of the recipe this machine can build, or none"));
    }
    if skipped.len() == loaded.platforms.len() {
        return Err(missing_tools_error(&skipped, "no platform of the recipe can be built here"));
    }
    loaded.platforms.retain(|p| !skipped.iter().any(|s| s.platform == p.name));
    Ok(skipped)
}

fn print_skipped(skipped: &[Skipped]) {
    for s in skipped {
        eprintln!("{}", s.notice());
    }
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

/// Builds (or, with `dry_run`, plans) a recipe on every platform whose tools are present.
pub fn build(project: &Project, name: &str, overrides: &[String], options: Options) -> CliResult<Built> {
    let t0 = Instant::now();
    let mut loaded = load(project, name, overrides)?;
    let skipped = leave_out_unbuildable(project, &mut loaded, overrides, options.strict)?;
    loaded.recipe.model.weights = crate::fetch::resolve(&loaded.recipe.model.weights, name, !options.dry_run).map_err(CliError)?;
    // Said before the work too, so a long build does not hide it until the end.
    print_skipped(&skipped);
    let dry_run = options.dry_run;
    let out = project.out_dir();
    let mut hashes = FileHashes::load(&out.join(".cache/file-hashes.json"));
    // Step ids repeat across recipes (`export`, `runner_host`, …): one record folder per recipe.
    let mut dag = Dag::new(Cache::new(&out.join(".cache/steps").join(&loaded.recipe.name)));
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
        return Ok(Built { skipped, weights: loaded.recipe.model.weights });
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
            if loaded.recipe.verify.accuracy.is_some() {
                accuracy::print(&program);
            }
            steps::print_artifacts(&artifacts);
            for p in loaded.platforms.iter().filter(|p| p.gpu == Some(rbuild_recipe::PlatformGpu::Cuda)) {
                if let Err(e) = crate::cuda::ready() {
                    eprintln!("note: platform {}: built; running it on the GPU (and `rbuild verify {name}`) needs an NVIDIA GPU: {e}", p.name);
                }
            }
            print_skipped(&skipped);
            Ok(Built { skipped, weights: loaded.recipe.model.weights })
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
