//! A method's inputs as tensor files give them: what each input takes (read before anything is
//! bound), checks that name the offending tensor, binding, and outputs as host tensors.

use rbuild_runtime::tensor::Dynamism;
use rbuild_runtime::{Method, ScalarType, Value};

use crate::tensors::HostTensor;

/// What one method input takes.
#[derive(Clone, Debug, PartialEq)]
pub enum InputSpec {
    /// A tensor; `dynamic`: `shape` is an upper bound (each dim may be smaller, the rank not).
    Tensor { dtype: ScalarType, shape: Vec<usize>, dynamic: bool },
    /// Scalars, given as one-element tensors of int64, float64 or bool.
    Int,
    Double,
    Bool,
    /// Another kind (a list, a string): a tensor file cannot give it.
    Other(&'static str),
}

impl InputSpec {
    /// `float32 [1, 3, 224, 224]`, `int64 [1, ≤128]`-style text for messages.
    pub fn describe(&self) -> String {
        match self {
            InputSpec::Tensor { dtype, shape, dynamic } => {
                let dims: Vec<String> = shape.iter().map(|d| if *dynamic { format!("≤{d}") } else { d.to_string() }).collect();
                format!("{dtype} [{}]", dims.join(", "))
            }
            InputSpec::Int => "an Int (one int64 element)".into(),
            InputSpec::Double => "a Double (one float64 element)".into(),
            InputSpec::Bool => "a Bool (one bool element)".into(),
            InputSpec::Other(kind) => format!("a {kind}"),
        }
    }

    /// Whether `t` can be bound to this input; the error says how it differs.
    pub fn check(&self, t: &HostTensor) -> Result<(), String> {
        let need = t.numel().checked_mul(t.dtype.size());
        if need != Some(t.data.len()) {
            let need = need.map_or("more than usize::MAX".into(), |n| n.to_string());
            return Err(format!("{} {:?} needs {need} bytes, has {}", t.dtype, t.shape, t.data.len()));
        }
        let scalar = |dtype: ScalarType| {
            if t.dtype == dtype && t.numel() == 1 {
                Ok(())
            } else {
                Err(format!("expected {}, got {} {:?}", self.describe(), t.dtype, t.shape))
            }
        };
        match self {
            InputSpec::Tensor { dtype, shape, dynamic: false } => {
                if t.dtype != *dtype {
                    return Err(format!("expected dtype {dtype}, got {}", t.dtype));
                }
                if t.shape != *shape {
                    return Err(format!("expected shape {shape:?}, got {:?}", t.shape));
                }
                Ok(())
            }
            InputSpec::Tensor { dtype, shape, dynamic: true } => {
                if t.dtype != *dtype {
                    return Err(format!("expected dtype {dtype}, got {}", t.dtype));
                }
                let above = (0..shape.len()).find(|&d| t.shape.get(d).is_some_and(|&n| n > shape[d]));
                if t.shape.len() != shape.len() || above.is_some() {
                    let why = match above {
                        Some(d) if t.shape.len() == shape.len() => format!("dim {d} is above its bound {}", shape[d]),
                        _ => format!("rank {}, not {}", t.shape.len(), shape.len()),
                    };
                    return Err(format!("expected shape {shape:?} or smaller in any dim (dynamic shape), got {:?}: {why}", t.shape));
                }
                Ok(())
            }
            InputSpec::Int => scalar(ScalarType::Long),
            InputSpec::Double => scalar(ScalarType::Double),
            InputSpec::Bool => scalar(ScalarType::Bool),
            InputSpec::Other(kind) => Err(format!("the method's input is a {kind}, which a tensor file cannot give")),
        }
    }
}

/// A method's name and what its inputs take.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    pub method: String,
    pub inputs: Vec<InputSpec>,
}

impl Signature {
    /// Read from a freshly loaded method: binding a dynamic-shape input replaces its sizes (the
    /// upper bound) with the bound ones.
    pub fn of(method: &Method<'_>) -> Signature {
        let inputs = (0..method.inputs().len())
            .map(|i| match method.input_value(i) {
                Some(Value::Tensor(t)) => InputSpec::Tensor {
                    dtype: t.dtype,
                    shape: t.shape.as_slice().to_vec(),
                    dynamic: t.dynamism == Dynamism::DynamicBound,
                },
                Some(Value::Int(_)) => InputSpec::Int,
                Some(Value::Double(_)) => InputSpec::Double,
                Some(Value::Bool(_)) => InputSpec::Bool,
                Some(v) => InputSpec::Other(v.kind()),
                None => InputSpec::Other("missing value"),
            })
            .collect();
        Signature { method: method.name.clone(), inputs }
    }

    /// Checks `input.0`, `input.1`, … against the inputs: count, then each (errors name the
    /// tensor).
    pub fn check(&self, tensors: &[HostTensor]) -> Result<(), String> {
        let n = self.inputs.len();
        if tensors.len() < n {
            let names = if n == 1 { "input.0".to_string() } else { format!("input.0 … input.{}", n - 1) };
            return Err(format!("no tensor input.{}: method '{}' takes {n} input(s) ({names})", tensors.len(), self.method));
        }
        if tensors.len() > n {
            return Err(format!("input.{n} is one more than method '{}' takes ({n} input(s))", self.method));
        }
        for (i, (spec, t)) in self.inputs.iter().zip(tensors).enumerate() {
            spec.check(t).map_err(|e| format!("input.{i}: {e}"))?;
        }
        Ok(())
    }

    /// Checks, then binds every input (again before each run: planned memory may reuse an
    /// input's bytes once it is dead, as in ExecuTorch).
    pub fn bind(&self, method: &mut Method<'_>, tensors: &[HostTensor]) -> Result<(), String> {
        self.check(tensors)?;
        for (i, (spec, t)) in self.inputs.iter().zip(tensors).enumerate() {
            let bound = match spec {
                InputSpec::Tensor { .. } => method.set_input_tensor(i, t.dtype, &t.shape, &t.data),
                InputSpec::Int => method.set_input_value(i, Value::Int(i64::from_le_bytes(eight(&t.data)))),
                InputSpec::Double => method.set_input_value(i, Value::Double(f64::from_le_bytes(eight(&t.data)))),
                InputSpec::Bool => method.set_input_value(i, Value::Bool(t.data[0] != 0)),
                InputSpec::Other(_) => unreachable!("rejected by check"),
            };
            bound.map_err(|e| format!("input.{i}: {e}"))?;
        }
        Ok(())
    }
}

/// The first eight bytes (the caller checked there are eight).
fn eight(b: &[u8]) -> [u8; 8] {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    a
}

/// Output `i` as a host tensor; scalar outputs become 0-d tensors; None for other kinds.
pub fn output_tensor(method: &Method<'_>, i: usize) -> Option<HostTensor> {
    Some(match method.output_value(i)? {
        Value::Tensor(t) => HostTensor { dtype: t.dtype, shape: t.shape.as_slice().to_vec(), data: method.output_bytes(i)?.to_vec() },
        Value::Int(v) => HostTensor::scalar(ScalarType::Long, v.to_le_bytes().to_vec()),
        Value::Double(v) => HostTensor::scalar(ScalarType::Double, v.to_le_bytes().to_vec()),
        Value::Bool(v) => HostTensor::scalar(ScalarType::Bool, vec![u8::from(*v)]),
        _ => return None,
    })
}

/// Every output as a host tensor.
pub fn outputs(method: &Method<'_>) -> Result<Vec<HostTensor>, String> {
    (0..method.outputs().len())
        .map(|i| {
            output_tensor(method, i).ok_or_else(|| {
                let kind = method.output_value(i).map_or("missing", Value::kind);
                format!("method '{}': output {i} is a {kind}, not a tensor or scalar", method.name)
            })
        })
        .collect()
}
