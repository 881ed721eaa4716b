//! The size baseline: a runner template built with every kernel, to show what the selective
//! build saves. It depends on the template, target, features and toolchain only — not on the
//! program — so it is built once per runner target folder and shared by every output folder
//! (and every recipe) that builds into that folder.

use std::path::Path;

use rbuild_selective::CompileOptions;

use super::steps::copy_atomic;

/// Copies the all-kernels build of `template` (identified by `key`) to `to`, building it first
/// when the target folder does not hold it yet.
pub(super) fn install(template: &Path, key: &str, bin: &str, opts: &CompileOptions, to: &Path) -> Result<(), String> {
    let store = opts.target_dir.join("rbuild-baselines").join(key);
    let cached = store.join(bin);
    if cached.is_file() {
        return copy_atomic(&cached, to);
    }
    std::fs::create_dir_all(&store).map_err(|e| format!("{}: {e}", store.display()))?;
    // One builder per baseline: a second process waits here, then finds the binary.
    let _lock = rbuild_selective::lock_file(&store.join(".lock"))?;
    if !cached.is_file() {
        let src = store.join("src");
        rbuild_selective::generate(template, &src, "rbuild-runner-all-kernels", &rbuild_selective::all_kernels())?;
        rbuild_selective::compile(&src, bin, opts, |exe| copy_atomic(exe, &cached))?;
    }
    copy_atomic(&cached, to)
}
