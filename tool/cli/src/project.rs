//! Where the project's data lives: the folder holding `recipes/`, `toolchains/` and
//! `templates/` (the repository root), and `out/` under it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rbuild_recipe::Probes;

use crate::error::{CliError, CliResult};

pub struct Project {
    pub root: PathBuf,
    /// Tool probes remembered between runs (`out/.cache/tool-probes.json`), opened on first use.
    probes: OnceLock<Probes>,
}

fn is_root(p: &Path) -> bool {
    p.join("recipes").is_dir() && p.join("toolchains").is_dir() && p.join("templates").is_dir()
}

impl Project {
    /// `$RBUILD_ROOT`, else the nearest folder above the current one that has `recipes/`,
    /// `toolchains/` and `templates/`, else the checkout this binary was built from.
    pub fn find() -> CliResult<Project> {
        if let Some(r) = std::env::var_os("RBUILD_ROOT") {
            let root = PathBuf::from(r);
            return if is_root(&root) {
                Ok(Project::at(root))
            } else {
                Err(CliError(format!("RBUILD_ROOT={} has no recipes/, toolchains/ and templates/", root.display())))
            };
        }
        let cwd = std::env::current_dir().map_err(|e| CliError(e.to_string()))?;
        let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        cwd.ancestors()
            .find(|p| is_root(p))
            .map(Path::to_path_buf)
            .or_else(|| is_root(&built_from).then(|| built_from.canonicalize().unwrap_or(built_from)))
            .map(Project::at)
            .ok_or_else(|| CliError("no rbuild project here (a folder with recipes/, toolchains/ and templates/); set RBUILD_ROOT".into()))
    }

    fn at(root: PathBuf) -> Project {
        Project { root, probes: OnceLock::new() }
    }

    /// Version and sysroot probes of the tools builds use, cached under the out folder: a
    /// no-op rebuild starts no compiler just to ask its version.
    pub fn probes(&self) -> &Probes {
        self.probes.get_or_init(|| Probes::at(self.out_dir().join(".cache/tool-probes.json")))
    }

    pub fn recipes_dir(&self) -> PathBuf {
        self.root.join("recipes")
    }
    pub fn toolchains_dir(&self) -> PathBuf {
        self.root.join("toolchains")
    }
    pub fn templates_dir(&self) -> PathBuf {
        self.root.join("templates")
    }
    /// `$RBUILD_OUT`, else `out/` in the project.
    pub fn out_dir(&self) -> PathBuf {
        std::env::var_os("RBUILD_OUT").map(PathBuf::from).unwrap_or_else(|| self.root.join("out"))
    }

    /// Cargo's target directory for runner and firmware builds: `$RBUILD_TARGET_DIR` (shared
    /// by several output folders, e.g. the test suite's), else the target folder this rbuild
    /// was built in (`cargo run --release -p rbuild`: runners reuse the dependencies compiled
    /// for the tool), else `.target/` in the output folder (an installed rbuild).
    pub fn runner_target_dir(&self) -> PathBuf {
        std::env::var_os("RBUILD_TARGET_DIR")
            .map(PathBuf::from)
            .or_else(own_target_dir)
            .unwrap_or_else(|| self.out_dir().join(".target"))
    }

    /// Recipe names (file stems of `recipes/*.kdl`), sorted.
    pub fn recipe_names(&self) -> Vec<String> {
        stems(&self.recipes_dir(), "kdl")
    }

    /// Runner template names as recipes spell them (`image_classifier/` → `image-classifier`):
    /// the crates under `templates/` that build a binary (`support/`, a library the templates
    /// share, is none).
    pub fn runner_names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.templates_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("Cargo.toml").is_file() && e.path().join("src/main.rs").is_file())
            .map(|e| e.file_name().to_string_lossy().replace('_', "-"))
            .collect();
        v.sort();
        v
    }

    /// The template folder for a runner name.
    pub fn template_dir(&self, runner: &str) -> PathBuf {
        self.templates_dir().join(runner.replace('-', "_"))
    }
}

fn stems(dir: &Path, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

/// The cargo target folder holding this executable (`<target>/release/rbuild`, or a
/// `<target>/<triple>/release/rbuild`), recognised by cargo's `CACHEDIR.TAG`.
fn own_target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    exe.ancestors().skip(2).take(2).find(|dir| dir.join("CACHEDIR.TAG").is_file()).map(Path::to_path_buf)
}
