//! The `verify-input` step: the tensors `rbuild verify` feeds a built artifact, written next to
//! the program as `verify-input.safetensors` (`input.0`, …). Hosted runners read it with
//! `--verify-input`; firmware embeds it at build time; bundles ship it.

use std::path::{Path, PathBuf};

use rbuild_planner::{Dag, FileHashes, KeyHasher, StepSpec};
use rbuild_recipe::{Recipe, VerifyInput};
use rbuild_runtime::{Program, ScalarType};

use crate::error::{CliError, CliResult};
use crate::io::tensors::{write_safetensors, HostTensor};

pub const FILE: &str = "verify-input.safetensors";

/// Adds the step (image models; language models have no verify input yet) and returns the
/// file it writes.
pub fn add(dag: &mut Dag<'_>, r: &Recipe, hashes: &mut FileHashes, version: &str, program: &Path) -> CliResult<Option<PathBuf>> {
    if r.model.is_language_model() {
        return add_audio(dag, r, version, program);
    }
    let out = program.with_file_name(FILE);
    let mut key = KeyHasher::new();
    key.add("tool", version);
    match &r.verify.input {
        VerifyInput::Image(p) => {
            let h = hashes.hash(p).map_err(|e| CliError(format!("{}: verify input {}: {e}", r.name, p.display())))?;
            key.add("image", &format!("{} sha256:{h}", p.display()));
        }
        VerifyInput::Random(seed) => {
            key.add("random seed", &seed.to_string());
        }
    }
    let (input, program, to) = (r.verify.input.clone(), program.to_path_buf(), out.clone());
    let label = match &input {
        VerifyInput::Image(p) => format!("verify input from {}", p.display()),
        VerifyInput::Random(seed) => format!("verify input: random values (seed {seed})"),
    };
    dag.add(StepSpec { id: "verify-input".into(), label, deps: vec!["export".into()], key, outputs: vec![out.clone()] }, move |_| {
        let tensors = make_inputs(&program, &input)?;
        let named: Vec<(String, HostTensor)> = tensors.into_iter().enumerate().map(|(i, t)| (format!("input.{i}"), t)).collect();
        write_safetensors(&to, &named).map_err(|e| e.0)
    })
    .map_err(CliError)?;
    Ok(Some(out))
}

/// splitmix64: a tiny, well-mixed generator; the same seed gives the same input everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// One tensor per method input, in its dtype and shape.
fn make_inputs(program_path: &Path, input: &VerifyInput) -> Result<Vec<HostTensor>, String> {
    let bytes = crate::io::program::read_program(program_path).map_err(|e| e.0)?;
    let program = Program::load(bytes.as_slice()).map_err(|e| format!("{}: {e}", program_path.display()))?;
    let mut metas = Vec::new();
    let inputs = program.input_tensor_metas("forward").map_err(|e| format!("{}: {e}", program_path.display()))?;
    for (i, meta) in inputs.into_iter().enumerate() {
        metas.push(meta.ok_or_else(|| format!("{}: input {i} is not a tensor; verify needs tensor inputs", program_path.display()))?);
    }
    match input {
        VerifyInput::Image(path) => {
            let [(ScalarType::Float, shape)] = metas.as_slice() else {
                return Err(format!("{}: an image verify input needs one float32 input; the program takes {metas:?}", path.display()));
            };
            let [1, 3, h, w] = shape.as_slice() else {
                return Err(format!("{}: an image verify input needs a [1, 3, H, W] input; the program takes {shape:?}", path.display()));
            };
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let image = rbuild_image_classifier::decode::decode_image(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            let data = rbuild_image_classifier::preprocess::imagenet_eval(&image, *h, *w);
            Ok(vec![HostTensor { dtype: ScalarType::Float, shape: shape.clone(), data: data.iter().flat_map(|v| v.to_le_bytes()).collect() }])
        }
        VerifyInput::Random(seed) => {
            let mut rng = SplitMix(*seed);
            metas
                .into_iter()
                .map(|(dtype, shape)| {
                    let n: usize = shape.iter().product();
                    let data: Vec<u8> = match dtype {
                        ScalarType::Float => (0..n).flat_map(|_| rng.unit().to_le_bytes()).collect(),
                        ScalarType::Char | ScalarType::Byte => (0..n).map(|_| rng.next() as u8).collect(),
                        ScalarType::Int => (0..n).flat_map(|_| ((rng.next() % 256) as i32).to_le_bytes()).collect(),
                        ScalarType::Long => (0..n).flat_map(|_| ((rng.next() % 256) as i64).to_le_bytes()).collect(),
                        other => return Err(format!("{}: no random verify input for {other} inputs", program_path.display())),
                    };
                    Ok(HostTensor { dtype, shape, data })
                })
                .collect()
        }
    }
}

/// Speech models: `input.0` is 2.5 s of 16 kHz PCM, the demo voice plus seeded noise, which
/// the runner's `--verify-input` mode transcribes. Token-id models have no verify input yet.
fn add_audio(dag: &mut Dag<'_>, r: &Recipe, version: &str, program: &Path) -> CliResult<Option<PathBuf>> {
    if !rbuild_models::family::family(&r.model.arch).is_some_and(|f| f.takes_audio()) {
        return Ok(None);
    }
    let seed = match &r.verify.input {
        VerifyInput::Random(seed) => *seed,
        VerifyInput::Image(p) => {
            return Err(CliError(format!("{}: verify input {}: {} takes audio; use `seed N` in the verify block", r.name, p.display(), r.model.arch)))
        }
    };
    let out = program.with_file_name(FILE);
    let mut key = KeyHasher::new();
    key.add("tool", version).add("audio seed", &seed.to_string());
    let to = out.clone();
    let label = format!("verify input: 2.5 s of demo voice + noise (seed {seed})");
    dag.add(StepSpec { id: "verify-input".into(), label, deps: vec![], key, outputs: vec![out.clone()] }, move |_| {
        let mut rng = SplitMix(seed);
        let pcm: Vec<f32> = rbuild_models::whisper::demo_audio::demo_samples(2.5).into_iter().map(|s| s + 0.01 * rng.unit()).collect();
        let data = pcm.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = HostTensor { dtype: ScalarType::Float, shape: vec![pcm.len()], data };
        write_safetensors(&to, &[("input.0".to_string(), t)]).map_err(|e| e.0)
    })
    .map_err(CliError)?;
    Ok(Some(out))
}
