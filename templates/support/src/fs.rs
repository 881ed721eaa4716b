//! Writing result files whole or not at all.

use std::io::Write;
use std::path::Path;

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so
/// an interrupted run never leaves half a file. The folder must exist (a mistyped output
/// folder is an error, not created silently).
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), String> {
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let name = path.file_name().ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(at)
}
