//! `--verify-input FILE`: the protocol between hosted runners and `rbuild verify`. The file is
//! a safetensors file holding `input.0`, `input.1`, …; each output is printed as
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,d1,…> hex=<little-endian bytes>` and one
//! `RBUILD_STATS key=value …` line follows.

use std::path::Path;
use std::time::Instant;

use rbuild_runtime::{KernelContext, Method, ScalarType};

use crate::binding::{self, Signature};
use crate::cli::{in_file, Failure, Outcome};
use crate::tensors;

/// The dtypes the protocol carries, by their names (PyTorch's spelling).
const DTYPES: &[ScalarType] = &[
    ScalarType::Float,
    ScalarType::Double,
    ScalarType::Half,
    ScalarType::BFloat16,
    ScalarType::Char,
    ScalarType::Byte,
    ScalarType::Short,
    ScalarType::Int,
    ScalarType::Long,
    ScalarType::Bool,
];

/// The dtype a protocol name stands for.
pub fn dtype_from_name(name: &str) -> Option<ScalarType> {
    DTYPES.iter().copied().find(|t| t.name() == name)
}

/// One `RBUILD_OUTPUT` line; `dtype` is the protocol's name ("float32", "int64", …).
pub fn output_line(index: usize, dtype: &str, shape: &[usize], bytes: &[u8]) -> String {
    let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
    let mut line = format!("RBUILD_OUTPUT index={index} dtype={dtype} shape={} hex=", shape.join(","));
    line.reserve(bytes.len() * 2);
    for b in bytes {
        line.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        line.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    line
}

/// The verify run of a freshly loaded method: binds `input.N` of the file at `path`,
/// runs once on `threads` threads and prints every output and the stats line. Errors name the
/// input file (bad inputs) or the program (`model_name`, a failed run).
pub fn verify_run(method: &mut Method<'_>, path: &Path, model_name: &Path, threads: usize) -> Outcome {
    let inputs = tensors::read_numbered(path, "input")?;
    in_file(Signature::of(method).bind(method, &inputs), path)?;
    let mut ctx = KernelContext { threads: threads.max(1) };
    let t = Instant::now();
    in_file(method.execute(&mut ctx), model_name)?;
    let elapsed_us = t.elapsed().as_micros();
    for (i, out) in binding::outputs(method).map_err(|e| Failure(format!("{}: {e}", model_name.display())))?.iter().enumerate() {
        println!("{}", output_line(i, out.dtype.name(), &out.shape, &out.data));
    }
    println!("RBUILD_STATS elapsed_us={elapsed_us} threads={}", ctx.threads);
    Ok(())
}

/// One output of the verify run.
pub struct VerifyOutput {
    pub index: usize,
    /// The protocol's name: "float32" or "int64".
    pub dtype: &'static str,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// `input.0` as f32 samples (any shape; its elements in order).
pub fn read_pcm(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let all = tensors::parse(bytes)?;
    let pcm = all.get("input.0").ok_or("no tensor named input.0")?;
    if pcm.dtype != ScalarType::Float {
        return Err(format!("input.0 is {}; the audio must be float32 PCM", pcm.dtype));
    }
    if pcm.data.is_empty() {
        return Err("input.0 holds no samples".into());
    }
    Ok(pcm.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Prints the outputs of a runner's own verify pipeline and the stats line.
pub fn print_outputs(outputs: &[VerifyOutput], elapsed_us: u128, threads: usize) {
    for o in outputs {
        println!("{}", output_line(o.index, o.dtype, &o.shape, &o.bytes));
    }
    println!("RBUILD_STATS elapsed_us={elapsed_us} threads={}", threads.max(1));
}
