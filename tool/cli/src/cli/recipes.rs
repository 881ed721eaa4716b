//! Recipe-level commands: `list`, `plan`, `doctor`, `toolchain install`, `matrix`, `all`,
//! `clean`, and building a recipe by name.

use crate::build;
use crate::error::{bail, CliError, CliResult};
use crate::project::Project;

/// `rbuild list`: every recipe × platform with its model and description, like `make help`.
pub fn list() -> CliResult {
    let project = Project::find()?;
    println!("{:<28} {:<14} {:<16} description", "recipe", "platform", "model");
    for name in project.recipe_names() {
        match build::load(&project, &name, &[]) {
            Ok(l) => {
                let model = model_kind(&l.recipe.model);
                for p in &l.recipe.platforms {
                    println!("{name:<28} {p:<14} {model:<16} {}", l.recipe.description);
                }
            }
            Err(e) => println!("{name:<28} {:<14} {:<16} (does not load: {})", "-", "-", e.0.lines().next().unwrap_or("")),
        }
    }
    Ok(())
}

/// What `rbuild list` says a recipe's model is: the definition rbuild exports, or the file it
/// starts from (`pt2 (import)`, `pte (prebuilt)`).
fn model_kind(model: &rbuild_recipe::ModelSpec) -> String {
    if model.is_prebuilt() {
        format!("{} (prebuilt)", model.arch)
    } else if model.is_imported() {
        format!("{} (import)", model.arch)
    } else {
        model.arch.clone()
    }
}

/// `rbuild doctor`: every platform's tools, found or with their install commands.
pub fn doctor() -> CliResult {
    let project = Project::find()?;
    let mut ok = true;
    for p in build::platforms(&project)? {
        println!("{} — {}", p.name, p.description);
        for s in p.check_with(project.probes()) {
            match &s.found {
                Some((path, version)) => println!("  ok       {:<24} {} ({version})", s.tool, path.display()),
                None => {
                    ok = false;
                    // A tool whose executable exists but whose required files do not says which.
                    let why = if s.missing_files.is_empty() { String::new() } else { format!("{}; ", s.why_missing().unwrap_or_default()) };
                    // Manual steps are instructions ("install Xcode …"), automatic ones commands.
                    let how = if s.needs_a_person() { "needs:" } else { "install:" };
                    println!("  missing  {:<24} {why}{how} {}", s.tool, s.install_hint.replace('\n', "; "));
                }
            }
        }
    }
    // What `gpu "cuda"` platforms need at run time (not to build).
    let platforms = build::platforms(&project)?;
    if let Some(p) = platforms.iter().find(|p| p.gpu == Some(rbuild_recipe::PlatformGpu::Cuda)) {
        println!("gpu cuda — what runs on {} need (builds do not)", p.name);
        for (what, status) in crate::cuda::doctor() {
            match status {
                Ok(found) => println!("  ok       {what:<24} {found}"),
                Err(help) => println!("  missing  {what:<24} {help}"),
            }
        }
    }
    // The compilers of delegate backends (not tied to one platform).
    println!("backend ethos-u — Arm's Vela compiler for the Ethos-U NPU");
    match build::ethosu::locate_vela(&project) {
        Ok(v) => println!("  ok       {:<24} {} ({})", "vela", v.path.display(), v.version),
        Err(e) => {
            ok = false;
            println!("  missing  {:<24} {e}", "vela");
        }
    }
    if !ok {
        println!("some tools are missing: `rbuild toolchain install <platform>` installs those with install commands");
    }
    Ok(())
}

/// `rbuild toolchain install PLATFORM`.
pub fn toolchain_install(platform: &str) -> CliResult {
    let project = Project::find()?;
    let all = build::platforms(&project)?;
    let Some(p) = all.iter().find(|p| p.name == platform) else {
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        bail!("unknown platform `{platform}` (platforms: {})", names.join(", "));
    };
    let done = p.install().map_err(|e| CliError(format!("{platform}: {e}")))?;
    for line in done {
        println!("{line}");
    }
    Ok(())
}

/// (recipe, platform) pairs of the project.
fn combinations(project: &Project) -> CliResult<Vec<(String, String)>> {
    let mut v = Vec::new();
    for name in project.recipe_names() {
        let l = build::load(project, &name, &[])?;
        for p in &l.recipe.platforms {
            v.push((name.clone(), p.clone()));
        }
    }
    Ok(v)
}

/// `rbuild matrix [--json]`: the combinations as a GitHub Actions matrix.
pub fn matrix(json: bool) -> CliResult {
    let project = Project::find()?;
    let combos = combinations(&project)?;
    if json {
        let include: Vec<serde_json::Value> =
            combos.iter().map(|(r, p)| serde_json::json!({"recipe": r, "platform": p})).collect();
        println!("{}", serde_json::json!({ "include": include }));
    } else {
        for (r, p) in combos {
            println!("{r} platform={p}");
        }
    }
    Ok(())
}

/// `rbuild all [-j N] [--strict]`: builds every combination whose toolchain is present, `jobs`
/// at a time, then verifies each built one that has a runner here; prints a table, then each
/// skipped platform with its missing tools and install command. Fails when a build or a
/// verification failed, and with `strict` when a combination was skipped for missing tools.
pub fn all(jobs: usize, strict: bool) -> CliResult {
    let project = Project::find()?;
    let platforms = build::platforms(&project)?;
    let combos = combinations(&project)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let rows = std::sync::Mutex::new(Vec::new());
    // Platforms skipped for missing tools, to say once each how to install them.
    let notices = std::sync::Mutex::new(Vec::<build::Skipped>::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1).min(combos.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((recipe, platform)) = combos.get(i) else { break };
                let skipped = build::missing_tools(platforms.iter().filter(|p| &p.name == platform).cloned().collect::<Vec<_>>().as_slice(), project.probes());
                let mut missing: Vec<String> = skipped.iter().map(build::Skipped::tool_names).collect();
                // An NPU recipe also needs the NPU's compiler.
                let npu = build::load(&project, recipe, &[]).is_ok_and(|l| l.recipe.backend.npu.is_some());
                if npu && build::ethosu::locate_vela(&project).is_err() {
                    missing.push("vela".into());
                }
                let words = [format!("platform={platform}")];
                let (built, verified) = if !missing.is_empty() {
                    notices.lock().unwrap_or_else(|e| e.into_inner()).extend(skipped);
                    (format!("skipped: missing {}", missing.join(", ")), "-".to_string())
                } else {
                    match build::build(&project, recipe, &words, build::Options::default()) {
                        Ok(_) => ("ok".to_string(), verify_one(&project, recipe, &words)),
                        Err(e) => (format!("FAILED: {}", e.0.lines().next().unwrap_or("")), "-".to_string()),
                    }
                };
                rows.lock().unwrap_or_else(|e| e.into_inner()).push((i, recipe.clone(), platform.clone(), built, verified));
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|e| e.into_inner());
    rows.sort();
    println!("{:<24} {:<14} {:<28} verify", "recipe", "platform", "build");
    for (_, r, p, b, v) in &rows {
        println!("{r:<24} {p:<14} {b:<28} {v}");
    }
    let count = |f: &dyn Fn(&(usize, String, String, String, String)) -> bool| rows.iter().filter(|r| f(r)).count();
    let built = count(&|r| r.3 == "ok");
    let passed = count(&|r| r.4.starts_with("pass"));
    let failed = count(&|r| r.3.starts_with("FAILED") || r.4.starts_with("FAIL"));
    let unverified = count(&|r| r.4.starts_with("skipped"));
    println!(
        "{} combinations: {built} built ({} skipped for missing tools), {passed} verified, {unverified} without a way to verify here, {failed} failed",
        rows.len(),
        count(&|r| r.3.starts_with("skipped"))
    );
    let mut notices = notices.into_inner().unwrap_or_else(|e| e.into_inner());
    notices.sort_by(|a, b| a.platform.cmp(&b.platform));
    notices.dedup_by(|a, b| a.platform == b.platform);
    for s in &notices {
        println!("{}", s.notice());
    }
    if failed > 0 {
        bail!("some builds or verifications failed");
    }
    let skipped = count(&|r| r.3.starts_with("skipped"));
    if strict && skipped > 0 {
        bail!("--strict: {skipped} combination(s) skipped for missing tools (listed above)");
    }
    Ok(())
}

/// Verifies one built combination; the verdict as one table cell.
fn verify_one(project: &Project, recipe: &str, words: &[String]) -> String {
    let loaded = match build::load(project, recipe, words) {
        Ok(l) => l,
        Err(e) => return format!("FAIL: {}", e.0.lines().next().unwrap_or("")),
    };
    if let Some(why) = crate::verify::unsupported(&loaded) {
        return format!("skipped: {why}");
    }
    match crate::verify::verify_loaded(project, &loaded) {
        Ok(rows) => rows
            .iter()
            .map(|r| match &r.outcome {
                crate::verify::Outcome::Compared { comparison: c, .. } if c.passed() => format!("pass ({}, max abs {:.1e})", r.how, c.max_abs),
                _ => r.verdict(),
            })
            .collect::<Vec<_>>()
            .join("; "),
        Err(e) => format!("FAIL: {}", e.0.lines().next().unwrap_or("")),
    }
}

/// `rbuild clean`: removes out/.
pub fn clean() -> CliResult {
    let project = Project::find()?;
    let out = project.out_dir();
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| CliError(format!("{}: {e}", out.display())))?;
        println!("removed {}", out.display());
    }
    Ok(())
}

/// `rbuild <recipe> [key=value …] [--strict]`. The words come unparsed (an external
/// subcommand), so `--strict` is picked out here, anywhere after the recipe.
pub fn build_recipe(words: &[String]) -> CliResult {
    let project = Project::find()?;
    let (name, rest) = words.split_first().ok_or_else(|| CliError("no recipe given".into()))?;
    let strict = rest.iter().any(|w| w == "--strict");
    let overrides: Vec<String> = rest.iter().filter(|w| *w != "--strict").cloned().collect();
    if let Some(flag) = overrides.iter().find(|w| w.starts_with('-')) {
        bail!("unknown option `{flag}` for `rbuild {name}` (options: --strict; settings are key=value words)");
    }
    build::build(&project, name, &overrides, build::Options { dry_run: false, strict }).map(drop)
}

/// `rbuild plan <recipe> [key=value …] [--strict]`: the DAG and what is cached; runs nothing.
/// It leaves out (or, when strict, fails on) the platforms a build would skip.
pub fn plan(words: &[String], strict: bool) -> CliResult {
    let project = Project::find()?;
    let (name, overrides) = words.split_first().ok_or_else(|| CliError("no recipe given".into()))?;
    build::build(&project, name, overrides, build::Options { dry_run: true, strict }).map(drop)
}
