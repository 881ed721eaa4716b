//! Calls one kernel with made-up arguments of each probe dtype, to find which dtypes it takes.

pub mod recipes;
pub mod schemas;

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

use half::{bf16, f16};
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::kernel::KernelFn;
use rbuild_runtime::value::Value;
use rbuild_runtime::ScalarType::{self, *};

/// The dtypes the probe tries (the ones `rbuild_kernels::dtypes` declares over).
pub const PROBE_DTYPES: [ScalarType; 12] =
    [Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long, Bool, ComplexFloat, ComplexDouble];

/// One argument of a kernel call, in KernelCall order (the schema's arguments, then the
/// returned values again). `D` is the probed dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum R {
    /// The primary tensor: dtype D, values 1..=numel.
    X(&'static [usize]),
    /// The primary tensor list: two tensors like `X`.
    Xs(&'static [usize]),
    /// The primary scalar (prim ops): D's kind (Long: Int, Double: Double, Bool: Bool).
    P,
    /// The primary out (creation ops): dtype D, dynamic-bound of this rank.
    OX(usize),
    /// Another tensor of dtype D.
    Like(&'static [usize]),
    /// A tensor of a fixed dtype with these values (cycled).
    T(ScalarType, &'static [usize], &'static [f64]),
    /// `Tensor?[]` holding one Long index tensor with these values.
    Idx(&'static [f64]),
    I(i64),
    F(f64),
    B(bool),
    N,
    /// A Scalar, tried as Int(2), Double(2.0) and Bool(true).
    S,
    L(&'static [i64]),
    BL(&'static [bool]),
    Str(&'static str),
    /// A ScalarType argument: D.
    DtX,
    /// A ScalarType argument: the out dtype tried.
    DtO,
    Dt(ScalarType),
    /// An out of the out dtype tried, dynamic-bound of this rank.
    O(usize),
    /// An out of the out dtype tried, with static sizes.
    Os(&'static [usize]),
    /// An out of a fixed dtype, dynamic-bound of this rank.
    OT(ScalarType, usize),
    /// `Tensor(a!)[]`: two outs of the out dtype tried, dynamic-bound of this rank.
    OL(usize),
    /// Argument k's value again (a returned value).
    Ret(usize),
    /// A slot for a scalar result.
    Slot,
}

/// Every dimension of a dynamic-bound out may grow to this.
const BOUND: usize = 8;

/// Index of the primary argument of a recipe.
pub fn primary(recipe: &[R]) -> Option<usize> {
    recipe.iter().position(|r| matches!(r, R::X(_) | R::Xs(_) | R::P | R::OX(_)))
}

/// A tensor of `dtype` with `values` cycled over its elements.
fn tensor(h: &mut OpHarness, dtype: ScalarType, sizes: &[usize], values: &[f64]) -> u32 {
    let n = sizes.iter().product::<usize>();
    let v: Vec<f64> = (0..n).map(|i| values[i % values.len()]).collect();
    match dtype {
        Float => h.tensor(dtype, sizes, &v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        Double => h.tensor(dtype, sizes, &v),
        Half => h.tensor(dtype, sizes, &v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>()),
        BFloat16 => h.tensor(dtype, sizes, &v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>()),
        Byte => h.tensor(dtype, sizes, &v.iter().map(|&x| x as u8).collect::<Vec<_>>()),
        Char => h.tensor(dtype, sizes, &v.iter().map(|&x| x as i8).collect::<Vec<_>>()),
        Short => h.tensor(dtype, sizes, &v.iter().map(|&x| x as i16).collect::<Vec<_>>()),
        Int => h.tensor(dtype, sizes, &v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        Long => h.tensor(dtype, sizes, &v.iter().map(|&x| x as i64).collect::<Vec<_>>()),
        Bool => h.tensor(dtype, sizes, &v.iter().map(|&x| (x != 0.0) as u8).collect::<Vec<_>>()),
        ComplexFloat => h.tensor(dtype, sizes, &v.iter().map(|&x| [x as f32, 0.0]).collect::<Vec<_>>()),
        ComplexDouble => h.tensor(dtype, sizes, &v.iter().map(|&x| [x, 0.0]).collect::<Vec<_>>()),
        d => panic!("no probe values for {d}"),
    }
}

/// Values 1..=numel.
fn counting(sizes: &[usize]) -> Vec<f64> {
    (1..=sizes.iter().product::<usize>().max(1)).map(|v| v as f64).collect()
}

/// One call: Ok if the kernel accepts it.
fn call(kernel: KernelFn, recipe: &[R], dtype: ScalarType, out_dtype: ScalarType, scalar_kind: u8) -> Result<(), String> {
    let mut h = OpHarness::new();
    let mut ids: Vec<u32> = Vec::new();
    for r in recipe {
        let id = match *r {
            R::X(s) | R::Like(s) => tensor(&mut h, dtype, s, &counting(s)),
            R::Xs(s) => {
                let items = [tensor(&mut h, dtype, s, &counting(s)), tensor(&mut h, dtype, s, &counting(s))];
                h.tensor_list(&items)
            }
            R::P => match dtype {
                Long => h.int(2),
                Double => h.double(2.0),
                Bool => h.bool(true),
                d => return Err(format!("no scalar of {d}")),
            },
            R::OX(rank) => h.out_dynamic(dtype, &vec![BOUND; rank]),
            R::T(d, s, v) => tensor(&mut h, d, s, v),
            R::Idx(v) => {
                let t = tensor(&mut h, Long, &[v.len()], v);
                h.opt_tensor_list(&[Some(t)])
            }
            R::I(v) => h.int(v),
            R::F(v) => h.double(v),
            R::B(v) => h.bool(v),
            R::N | R::Slot => h.none(),
            R::S => match scalar_kind {
                0 => h.int(2),
                1 => h.double(2.0),
                _ => h.bool(true),
            },
            R::L(v) => h.int_list(v),
            R::BL(v) => h.bool_list(v),
            R::Str(s) => {
                h.frame.values.push(Value::String(s.into()));
                (h.frame.values.len() - 1) as u32
            }
            R::DtX => h.scalar_type(dtype),
            R::DtO => h.scalar_type(out_dtype),
            R::Dt(d) => h.scalar_type(d),
            R::O(rank) => h.out_dynamic(out_dtype, &vec![BOUND; rank]),
            R::Os(s) => h.out(out_dtype, s),
            R::OT(d, rank) => h.out_dynamic(d, &vec![BOUND; rank]),
            R::OL(rank) => {
                let items = [h.out_dynamic(out_dtype, &vec![BOUND; rank]), h.out_dynamic(out_dtype, &vec![BOUND; rank])];
                h.tensor_list(&items)
            }
            R::Ret(k) => ids[k],
        };
        ids.push(id);
    }
    h.call(kernel, &ids).map_err(|e| format!("{e:?}"))
}

/// Out dtypes tried for an input dtype.
fn out_candidates(dtype: ScalarType) -> Vec<ScalarType> {
    let mut c = vec![dtype, Float, Double, Bool, Long, ComplexFloat, ComplexDouble];
    c.sort();
    c.dedup();
    c
}

/// The probe dtypes `kernel` accepts with `recipe` (some out dtype and scalar kind succeeds),
/// and a description of every panic.
pub fn probe(op: &str, kernel: KernelFn, recipe: &[R]) -> (BTreeSet<ScalarType>, Vec<String>) {
    let (mut accepted, mut panics) = (BTreeSet::new(), Vec::new());
    let has_out = recipe.iter().any(|r| matches!(r, R::O(_) | R::Os(_) | R::OL(_) | R::DtO));
    let scalar_kinds: &[u8] = if recipe.contains(&R::S) { &[0, 1, 2] } else { &[0] };
    for dtype in PROBE_DTYPES {
        let outs = if has_out { out_candidates(dtype) } else { vec![dtype] };
        'found: for out_dtype in outs {
            for &kind in scalar_kinds {
                match catch_unwind(AssertUnwindSafe(|| call(kernel, recipe, dtype, out_dtype, kind))) {
                    Ok(Ok(())) => {
                        accepted.insert(dtype);
                        break 'found;
                    }
                    Ok(Err(_)) => {}
                    Err(_) => panics.push(format!("{op}: {dtype:?} -> {out_dtype:?} panicked")),
                }
            }
        }
    }
    (accepted, panics)
}

/// Why `op` rejects `dtype` with every out dtype (for diagnosing a recipe).
pub fn rejections(kernel: KernelFn, recipe: &[R], dtype: ScalarType) -> Vec<String> {
    out_candidates(dtype)
        .into_iter()
        .filter_map(|o| call(kernel, recipe, dtype, o, 0).err().map(|e| format!("{o:?}: {e}")))
        .collect()
}
