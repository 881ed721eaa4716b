//! Reading a .pte file into 16-aligned memory (constants are viewed in place).

use std::io::Read;
use std::path::Path;

use rbuild_runtime::buffer::AlignedBuf;

use crate::error::{CliResult, InFile};

pub fn read_program(path: &Path) -> CliResult<AlignedBuf> {
    let mut f = std::fs::File::open(path).in_file(path)?;
    let len = f.metadata().in_file(path)?.len();
    let mut buf = AlignedBuf::zeroed(usize::try_from(len).map_err(|e| crate::error::CliError(format!("{}: {e}", path.display())))?);
    f.read_exact(buf.as_mut_slice()).in_file(path)?;
    Ok(buf)
}
