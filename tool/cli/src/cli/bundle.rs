//! `rbuild bundle --check DIR|TARBALL`: a bundle against its SHA256SUMS and manifest.json.

use std::path::PathBuf;

use crate::error::{CliError, CliResult};

#[derive(clap::Args)]
pub struct BundleArgs {
    /// A bundle folder (out/<recipe>/<platform>/bundle) or its .tar.gz: verify every file's
    /// size and sha256 against SHA256SUMS and manifest.json.
    #[arg(long, value_name = "BUNDLE")]
    pub check: PathBuf,
}

pub fn bundle(a: BundleArgs) -> CliResult {
    let path = &a.check;
    let result = if path.is_dir() {
        rbuild_bundle::check_dir(path)
    } else if path.is_file() {
        rbuild_bundle::check_tarball(path)
    } else {
        return Err(CliError(format!("{}: no such bundle folder or tarball", path.display())));
    };
    match result {
        Ok(c) => {
            println!("{}: ok ({} files match SHA256SUMS and manifest.json)", path.display(), c.files);
            Ok(())
        }
        Err(problems) => Err(CliError(format!("{}: bundle check failed:\n  {}", path.display(), problems.join("\n  ")))),
    }
}
