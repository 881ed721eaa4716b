//! Inputs for a run without an input file, so a bundle can be smoke-tested: every tensor in
//! its static shape or at its upper bound. Deterministic, and valid for the usual meanings of
//! each dtype: floats a fixed pseudo-random sequence in [-1, 1), integers zero (a valid token
//! id, position or index), bools true (an attention mask that masks nothing); scalars 0, 1.0
//! and true.

use rbuild_runner_support::binding::{InputSpec, Signature};
use rbuild_runner_support::tensors::HostTensor;
use rbuild_runtime::ScalarType;

/// A fixed sequence in [-1, 1) (a 64-bit LCG, the high bits), the same on every platform.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// The element bytes of `n` floats of a floating dtype.
fn float_bytes(dtype: ScalarType, n: usize, seq: &mut Sequence) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let v = seq.next();
        match dtype {
            ScalarType::Double => out.extend(f64::from(v).to_le_bytes()),
            ScalarType::Half => out.extend(half::f16::from_f32(v).to_le_bytes()),
            ScalarType::BFloat16 => out.extend(half::bf16::from_f32(v).to_le_bytes()),
            _ => out.extend(v.to_le_bytes()),
        }
    }
    out
}

/// One input per entry of `sig`; an input no file can give (a list) is an error naming it.
pub fn inputs(sig: &Signature) -> Result<Vec<HostTensor>, String> {
    let mut seq = Sequence(0x5eed);
    sig.inputs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            Ok(match spec {
                InputSpec::Tensor { dtype, shape, .. } => {
                    let n: usize = shape.iter().product();
                    let data = if dtype.is_floating() {
                        float_bytes(*dtype, n, &mut seq)
                    } else if *dtype == ScalarType::Bool {
                        vec![1; n]
                    } else {
                        vec![0; n * dtype.size()]
                    };
                    HostTensor { dtype: *dtype, shape: shape.clone(), data }
                }
                InputSpec::Int => HostTensor::scalar(ScalarType::Long, 0i64.to_le_bytes().to_vec()),
                InputSpec::Double => HostTensor::scalar(ScalarType::Double, 1f64.to_le_bytes().to_vec()),
                InputSpec::Bool => HostTensor::scalar(ScalarType::Bool, vec![1]),
                InputSpec::Other(kind) => {
                    return Err(format!("method '{}': input {i} is a {kind}, which cannot be made up; give --inputs", sig.method))
                }
            })
        })
        .collect()
}
