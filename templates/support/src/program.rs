//! Where a runner's program comes from: a `.pte` file, mapped (weights paged in as the first
//! calls touch them, so a multi-GB model loads in milliseconds) or read into 16-aligned memory
//! (the runtime views constants in place), or the program compiled into the binary.

use std::path::{Path, PathBuf};

use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::Program;

use crate::cli::{in_file, Failure, Outcome};

/// What [`crate::embedded_program!`] found in the runner crate being built.
#[derive(Clone, Copy, Debug)]
pub struct Embedded {
    /// The program compiled in (`--features embed-program` with `RBUILD_EMBED_PROGRAM` set).
    pub program: Option<&'static [u8]>,
    /// Whether the runner was built with the `embed-program` feature (to explain a missing
    /// program).
    pub feature_on: bool,
}

impl Embedded {
    /// No embedded program (tests, and crates without the feature).
    pub const NONE: Embedded = Embedded { program: None, feature_on: false };
}

/// The program compiled into the runner with `--features embed-program` (16-aligned, as the
/// runtime views constants in place), as an [`Embedded`]. A macro because the bytes and the
/// `cfg(rbuild_embedded)` set by the template's build script belong to the runner crate.
#[macro_export]
macro_rules! embedded_program {
    () => {{
        #[cfg(rbuild_embedded)]
        fn program() -> Option<&'static [u8]> {
            #[repr(C, align(16))]
            struct Aligned<T: ?Sized>(T);
            static PROGRAM: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/program.pte")));
            Some(&PROGRAM.0)
        }
        #[cfg(not(rbuild_embedded))]
        fn program() -> Option<&'static [u8]> {
            None
        }
        $crate::program::Embedded { program: program(), feature_on: cfg!(feature = "embed-program") }
    }};
}

enum Bytes {
    Mapped(memmap2::Mmap),
    Read(AlignedBuf),
    Embedded(&'static [u8]),
}

/// A program's bytes and the name errors give it (its path, or `<embedded program>`).
pub struct ProgramFile {
    bytes: Bytes,
    name: PathBuf,
}

impl ProgramFile {
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Read(b) => b.as_slice(),
            Bytes::Embedded(b) => b,
        }
    }

    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The parsed program; errors name the file.
    pub fn load(&self) -> Outcome<Program<'_>> {
        in_file(Program::load(self.bytes()), &self.name)
    }
}

/// The program at `model` if given, else the embedded one, else an error saying why there is
/// none.
pub fn open(model: Option<&Path>, mmap: bool, embedded: Embedded) -> Outcome<ProgramFile> {
    match (model, embedded.program) {
        (Some(p), _) => read(p, mmap),
        (None, Some(bytes)) => Ok(ProgramFile { bytes: Bytes::Embedded(bytes), name: PathBuf::from("<embedded program>") }),
        (None, None) => {
            let why = if embedded.feature_on { " (built with embed-program, but RBUILD_EMBED_PROGRAM was not set)" } else { "" };
            Err(Failure(format!("--model is required: this binary has no embedded program{why}")))
        }
    }
}

/// The file at `path`: mapped when `mmap` and the file can be mapped (not a pipe, not some
/// network file systems), else read into aligned memory.
pub fn read(path: &Path, mmap: bool) -> Outcome<ProgramFile> {
    use std::io::Read;
    let name = path.to_path_buf();
    let mut f = in_file(std::fs::File::open(path), path)?;
    let len = in_file(f.metadata(), path)?.len();
    if mmap && len > 0 {
        // SAFETY: the map is only read, and lives as long as the program borrowed from it. A
        // file truncated by another process while mapped would fault on access (as with any
        // mmap-based loader); rbuild writes programs by rename, so its own rebuilds never
        // truncate a mapped file.
        if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
            return Ok(ProgramFile { bytes: Bytes::Mapped(m), name });
        }
    }
    let mut buf = usize::try_from(len)
        .ok()
        .and_then(AlignedBuf::try_zeroed)
        .ok_or_else(|| Failure(format!("{}: cannot allocate {len} bytes for the program", path.display())))?;
    in_file(f.read_exact(buf.as_mut_slice()), path)?;
    Ok(ProgramFile { bytes: Bytes::Read(buf), name })
}
