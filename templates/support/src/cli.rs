//! The runners' command-line frame: one error type whose message names the file or argument
//! concerned, `error: …` on stderr and exit status 1 for every failure (usage errors included).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// A user-facing failure: the message names the file or argument concerned.
#[derive(Debug)]
pub struct Failure(pub String);

pub type Outcome<T = ()> = Result<T, Failure>;

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure(s)
    }
}

/// Prefixes an error with the file it concerns.
pub fn in_file<T, E: std::fmt::Display>(r: Result<T, E>, path: &Path) -> Outcome<T> {
    r.map_err(|e| Failure(format!("{}: {e}", path.display())))
}

/// Parses the command line; on `--help`/`--version` (stdout, success) or a usage error
/// (stderr, failure) the exit code to return instead.
pub fn parse_args<A: clap::Parser>(args: impl IntoIterator<Item = OsString>) -> Result<A, ExitCode> {
    A::try_parse_from(args).map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// A runner's `main`: parse, run, report a failure as `error: …` with exit status 1.
pub fn main<A: clap::Parser>(args: impl IntoIterator<Item = OsString>, run: impl FnOnce(A) -> Outcome) -> ExitCode {
    let args = match parse_args::<A>(args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `text` and flushes (streamed output appears as it is made); a closed stdout is an
/// error, not a panic.
pub fn emit(out: &mut impl std::io::Write, text: &str) -> Result<(), String> {
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|e| format!("stdout: {e}"))
}

/// `--list-kernels`: the registered kernels' op names, one per line (a closed stdout is an
/// error, not a panic).
pub fn print_kernel_ops(registry: &rbuild_runtime::KernelRegistry) -> Outcome {
    let mut out = std::io::stdout().lock();
    for op in registry.ops() {
        emit(&mut out, &format!("{op}\n"))?;
    }
    Ok(())
}

/// `--threads N` must be at least 1.
pub fn check_threads(threads: usize) -> Outcome {
    if threads == 0 {
        return Err(Failure("--threads must be at least 1".into()));
    }
    Ok(())
}
