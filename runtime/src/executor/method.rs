//! A loaded method: bind inputs, execute instructions, read outputs.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::backend::DelegateHandle;
use crate::frame::Frame;
use crate::kernel::{KernelContext, KernelFn};
use crate::tensor::{Dynamism, Shape, Storage, TensorImpl};
use crate::value::Value;
use crate::ScalarType;

/// ExecuTorch's cap on executed instructions per run (guards against jump loops).
const MAX_INSTRUCTIONS: usize = 10_000_000;

pub(super) enum Instr {
    Kernel { op: u32, kernel: KernelFn, args: Vec<u32> },
    View { op: u32, args: Vec<u32> },
    Delegate { delegate: u32, args: Vec<u32> },
    Move { from: u32, to: u32 },
    JumpFalse { cond: u32, dest: u32 },
    Free { value: u32 },
}

/// Sees each kernel or delegate call of an execution (name = `name.overload` or `delegate N`).
pub trait Observer {
    fn begin(&mut self, name: &str);
    fn end(&mut self, name: &str);
}

/// No observation.
impl Observer for () {
    fn begin(&mut self, _: &str) {}
    fn end(&mut self, _: &str) {}
}

/// A failure while executing: which instruction and why.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodError {
    pub method: String,
    pub chain: usize,
    pub instruction: usize,
    /// The operator (`name.overload`) or instruction kind.
    pub what: String,
    pub message: String,
}

impl fmt::Display for MethodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "method '{}', chain {} instruction {} ({}): {}",
            self.method, self.chain, self.instruction, self.what, self.message
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for MethodError {}

/// A bad input binding.
#[derive(Clone, Debug, PartialEq)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for InputError {}

pub struct Method<'p> {
    pub name: String,
    pub frame: Frame<'p>,
    pub(super) chains: Vec<Vec<Instr>>,
    pub(super) op_names: Vec<String>,
    pub(super) delegates: Vec<Box<dyn DelegateHandle>>,
    pub(super) inputs: Vec<u32>,
    pub(super) outputs: Vec<u32>,
    pub(super) input_set: Vec<bool>,
    pub(super) folded_bytes: usize,
}

impl<'p> Method<'p> {
    /// Memory holding results of constant calls folded at load (see `fold`).
    pub fn folded_bytes(&self) -> usize {
        self.folded_bytes
    }

    /// Instructions left to execute.
    pub fn instruction_count(&self) -> usize {
        self.chains.iter().map(|c| c.len()).sum()
    }

    pub fn inputs(&self) -> &[u32] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[u32] {
        &self.outputs
    }

    pub fn input_value(&self, i: usize) -> Option<&Value> {
        self.frame.values.get(*self.inputs.get(i)? as usize)
    }

    pub fn output_value(&self, i: usize) -> Option<&Value> {
        self.frame.values.get(*self.outputs.get(i)? as usize)
    }

    /// Bytes of output `i` when it is a tensor.
    pub fn output_bytes(&self, i: usize) -> Option<&[u8]> {
        self.frame.tensor_bytes(*self.outputs.get(i)?)
    }

    /// Copies `bytes` into input `i` after checking dtype and shape (a DYNAMIC_BOUND input may
    /// take any shape of the same rank within its bound).
    pub fn set_input_tensor(&mut self, i: usize, dtype: ScalarType, sizes: &[usize], bytes: &[u8]) -> Result<(), InputError> {
        let id = *self.inputs.get(i).ok_or_else(|| InputError(format!("input {i} does not exist ({} inputs)", self.inputs.len())))?;
        let t: &TensorImpl = match &self.frame.values[id as usize] {
            Value::Tensor(t) => t,
            v => return Err(InputError(format!("input {i} is {}, not a tensor", v.kind()))),
        };
        if t.dtype != dtype {
            return Err(InputError(format!("input {i}: expected dtype {}, got {dtype}", t.dtype)));
        }
        let shape = Shape::new(sizes).ok_or_else(|| InputError(format!("input {i}: rank above 16")))?;
        let ok_shape = match t.dynamism {
            Dynamism::Static => shape == t.shape,
            Dynamism::DynamicBound => {
                shape.rank() == t.shape.rank() && shape.numel().saturating_mul(dtype.size()) <= t.capacity
            }
        };
        if !ok_shape {
            let mut m = format!("input {i}: expected shape ");
            push_dims(&mut m, t.shape.as_slice());
            m.push_str(if t.dynamism == Dynamism::DynamicBound { " (upper bound), got " } else { ", got " });
            push_dims(&mut m, sizes);
            return Err(InputError(m));
        }
        let need = shape.numel() * dtype.size();
        if bytes.len() != need {
            return Err(InputError(format!("input {i}: {} bytes given, shape needs {need}", bytes.len())));
        }
        if let Value::Tensor(t) = &mut self.frame.values[id as usize] {
            t.shape = shape;
        }
        let dst = self.frame.tensor_bytes_mut(id).ok_or_else(|| InputError(format!("input {i} has no writable memory")))?;
        dst[..need].copy_from_slice(bytes);
        self.input_set[i] = true;
        Ok(())
    }

    /// Sets a non-tensor input (Int/Double/Bool), keeping its kind.
    pub fn set_input_value(&mut self, i: usize, v: Value) -> Result<(), InputError> {
        let id = *self.inputs.get(i).ok_or_else(|| InputError(format!("input {i} does not exist")))?;
        let cur = &mut self.frame.values[id as usize];
        if core::mem::discriminant(cur) != core::mem::discriminant(&v) {
            return Err(InputError(format!("input {i} is {}, got {}", cur.kind(), v.kind())));
        }
        *cur = v;
        self.input_set[i] = true;
        Ok(())
    }

    /// Runs every chain. Fails if a tensor input was never set.
    pub fn execute(&mut self, ctx: &mut KernelContext) -> Result<(), MethodError> {
        self.execute_observed(ctx, &mut ())
    }

    /// As `execute`, telling `obs` when each kernel or delegate call starts and ends
    /// (profiling without a std dependency here).
    pub fn execute_observed(&mut self, ctx: &mut KernelContext, obs: &mut dyn Observer) -> Result<(), MethodError> {
        let err = |m: &Method, chain: usize, instruction: usize, what: String, message: String| MethodError {
            method: m.name.clone(),
            chain,
            instruction,
            what,
            message,
        };
        for (i, &id) in self.inputs.iter().enumerate() {
            if !self.input_set[i] && matches!(self.frame.values[id as usize], Value::Tensor(_)) {
                return Err(err(self, 0, 0, "input".into(), format!("input {i} was not set")));
            }
        }
        let raws = self.frame.raw_buffers();
        let mut executed = 0usize;
        for c in 0..self.chains.len() {
            let mut pc = 0usize;
            while pc < self.chains[c].len() {
                executed += 1;
                if executed > MAX_INSTRUCTIONS {
                    return Err(err(self, c, pc, "limit".into(), "more than 10^7 instructions executed".into()));
                }
                let mut next = pc + 1;
                match &self.chains[c][pc] {
                    Instr::Kernel { op, kernel, args } => {
                        obs.begin(&self.op_names[*op as usize]);
                        let r = Frame::call_with(&mut self.frame.values, &raws, *kernel, ctx, args);
                        obs.end(&self.op_names[*op as usize]);
                        if let Err(e) = r {
                            return Err(err(self, c, pc, self.op_names[*op as usize].clone(), e.message));
                        }
                    }
                    Instr::View { op, args } => {
                        if let Err(m) = et_view(&mut self.frame.values, args) {
                            return Err(err(self, c, pc, self.op_names[*op as usize].clone(), m));
                        }
                    }
                    Instr::Delegate { delegate, args } => {
                        let handle = &mut self.delegates[*delegate as usize];
                        let pending = core::cell::RefCell::new(Vec::new());
                        // SAFETY: `raws` were made from this frame's buffers above and the frame's
                        // buffers are not moved or resized during execute.
                        let kargs = unsafe { crate::kernel::KernelArgs::new(&self.frame.values, args, &raws, &pending) };
                        if let Err(e) = handle.execute(ctx, &kargs) {
                            return Err(err(self, c, pc, format!("delegate {delegate}"), e.message));
                        }
                        drop(kargs);
                        apply_shapes(&mut self.frame.values, pending.into_inner());
                    }
                    Instr::Move { from, to } => {
                        let v = self.frame.values[*from as usize].clone();
                        self.frame.values[*to as usize] = v;
                    }
                    Instr::JumpFalse { cond, dest } => {
                        let truth = match self.truth(*cond) {
                            Ok(t) => t,
                            Err(m) => return Err(err(self, c, pc, "jump_false".into(), m)),
                        };
                        if !truth {
                            next = *dest as usize;
                        }
                    }
                    Instr::Free { value } => {
                        if let Value::Tensor(t) = &mut self.frame.values[*value as usize] {
                            t.storage = Storage::None;
                        }
                    }
                }
                pc = next;
            }
        }
        Ok(())
    }

    /// A Bool value, or a Bool tensor that is true only when every element is.
    fn truth(&self, id: u32) -> Result<bool, String> {
        match &self.frame.values[id as usize] {
            Value::Bool(b) => Ok(*b),
            Value::Tensor(t) if t.dtype == ScalarType::Bool => {
                let bytes = self.frame.tensor_bytes(id).ok_or("condition tensor has no data")?;
                Ok(bytes.iter().all(|&b| b != 0))
            }
            v => Err(format!("condition is {}, not Bool", v.kind())),
        }
    }
}

/// The shapes a delegate set on its outputs. Out of line: inlined into the executor, the shape
/// copy became a call to memmove, which nothing else in a firmware needs.
#[inline(never)]
fn apply_shapes(values: &mut [Value], pending: Vec<(u32, crate::kernel::Pending)>) {
    for (id, p) in pending {
        if let (Some(Value::Tensor(t)), crate::kernel::Pending::Shape(s)) = (values.get_mut(id as usize), p) {
            t.shape = s;
        }
    }
}

/// Appends `[2, 8]` (as `{:?}` would, without linking Debug formatting into firmware).
fn push_dims(out: &mut String, d: &[usize]) {
    use core::fmt::Write;
    out.push('[');
    for (k, x) in d.iter().enumerate() {
        let _ = write!(out, "{}{x}", if k > 0 { ", " } else { "" });
    }
    out.push(']');
}

/// `et_view(Tensor self, int[] size) -> Tensor`: the output shares the input's memory.
fn et_view(values: &mut [Value], args: &[u32]) -> Result<(), String> {
    let [src, size, out, ..] = args else { return Err("et_view takes 3 arguments".into()) };
    let src_t = match &values[*src as usize] {
        Value::Tensor(t) => t.clone(),
        v => return Err(format!("self is {}, not a tensor", v.kind())),
    };
    let dims: Vec<i64> = match &values[*size as usize] {
        Value::IntList(ids) => ids
            .iter()
            .map(|&i| match values[i as usize] {
                Value::Int(v) => Ok(v),
                _ => Err(String::from("size list item is not an Int")),
            })
            .collect::<Result<_, _>>()?,
        v => return Err(format!("size is {}, not an int list", v.kind())),
    };
    let numel = src_t.shape.numel();
    let known: i64 = dims.iter().filter(|&&d| d != -1).product();
    let sizes: Vec<usize> = dims
        .iter()
        .map(|&d| if d == -1 && known > 0 { numel / known as usize } else { d.max(0) as usize })
        .collect();
    let shape = Shape::new(&sizes).ok_or("rank above 16")?;
    if shape.numel() != numel {
        let mut m = String::from("cannot view ");
        push_dims(&mut m, src_t.shape.as_slice());
        m.push_str(" as ");
        push_dims(&mut m, &sizes);
        return Err(m);
    }
    match &mut values[*out as usize] {
        Value::Tensor(t) if t.dtype == src_t.dtype => {
            t.shape = shape;
            t.storage = src_t.storage;
            t.capacity = src_t.capacity;
            Ok(())
        }
        _ => Err("out is not a tensor of the same dtype".into()),
    }
}
