//! Shape and dtype inference of the ops imported programs use: ATen's rules on the cases that
//! trip importers (promotion, indexing layouts, pooling sizes, dynamic sizes), clear errors on
//! bad arguments, and no panic for any argument list on any op in the table.

use rbuild_export::graph::{Arg, ConstData, Dim, IntOrSym, TensorMeta};
use rbuild_export::{ops, GraphBuilder, ValueId};
use rbuild_runtime::{Scalar, ScalarType};

use ScalarType::{Bool, Float, Long};

fn input(b: &mut GraphBuilder, dtype: ScalarType, sizes: &[usize]) -> ValueId {
    let n = b.graph.inputs.len();
    b.input(&format!("x{n}"), TensorMeta::fixed(dtype, sizes))
}

fn fixed(sizes: &[usize]) -> Vec<Dim> {
    sizes.iter().map(|&s| Dim::Fixed(s)).collect()
}

/// The single output meta of `op(args)`.
fn infer(b: &mut GraphBuilder, op: &str, args: Vec<Arg>) -> TensorMeta {
    let v = b.call1(op, args).unwrap_or_else(|e| panic!("{op}: {e}"));
    b.meta(v).clone()
}

fn error(b: &mut GraphBuilder, op: &str, args: Vec<Arg>) -> String {
    match b.call(op, args) {
        Ok(v) => panic!("{op} accepted bad arguments: {:?}", v.iter().map(|&v| b.meta(v).clone()).collect::<Vec<_>>()),
        Err(e) => e.to_string(),
    }
}

fn num(v: f64) -> Arg {
    Arg::Scalar(Scalar::Double(v))
}

fn inum(v: i64) -> Arg {
    Arg::Scalar(Scalar::Int(v))
}

#[test]
fn arithmetic_promotes_like_aten() {
    let mut b = GraphBuilder::new();
    let (i64s, f32s, flags) = (input(&mut b, Long, &[2, 3]), input(&mut b, Float, &[3]), input(&mut b, Bool, &[2, 1]));
    let m = infer(&mut b, "aten::add.Tensor", vec![Arg::Tensor(i64s), Arg::Tensor(f32s), inum(1)]);
    assert_eq!((m.dtype, m.shape), (Float, fixed(&[2, 3])));
    assert_eq!(infer(&mut b, "aten::div.Tensor", vec![Arg::Tensor(i64s), Arg::Tensor(i64s)]).dtype, Float);
    assert_eq!(infer(&mut b, "aten::mul.Scalar", vec![Arg::Tensor(i64s), inum(2)]).dtype, Long);
    assert_eq!(infer(&mut b, "aten::mul.Scalar", vec![Arg::Tensor(i64s), num(2.0)]).dtype, Float);
    assert_eq!(infer(&mut b, "aten::add.Scalar", vec![Arg::Tensor(flags), inum(1), inum(1)]).dtype, Long);
    assert_eq!(infer(&mut b, "aten::pow.Tensor_Scalar", vec![Arg::Tensor(i64s), num(0.5)]).dtype, Float);
    assert_eq!(infer(&mut b, "aten::sqrt", vec![Arg::Tensor(i64s)]).dtype, Float);
    assert_eq!(infer(&mut b, "aten::neg", vec![Arg::Tensor(i64s)]).dtype, Long);
    assert_eq!(infer(&mut b, "aten::clamp", vec![Arg::Tensor(i64s), num(0.5), Arg::None]).dtype, Float);
    let m = infer(&mut b, "aten::where.self", vec![Arg::Tensor(flags), Arg::Tensor(i64s), Arg::Tensor(f32s)]);
    assert_eq!((m.dtype, m.shape), (Float, fixed(&[2, 3])));
    assert_eq!(infer(&mut b, "aten::lt.Scalar", vec![Arg::Tensor(f32s), inum(0)]).dtype, Bool);
    assert_eq!(infer(&mut b, "aten::logical_not", vec![Arg::Tensor(i64s)]).dtype, Bool);
    assert_eq!(infer(&mut b, "aten::bitwise_and.Tensor", vec![Arg::Tensor(flags), Arg::Tensor(flags)]).dtype, Bool);
    // A float rank-0 tensor makes an int tensor float; an int one does not widen an int32.
    let (scalar_f, i32s) = (input(&mut b, Float, &[]), input(&mut b, ScalarType::Int, &[4]));
    assert_eq!(infer(&mut b, "aten::mul.Tensor", vec![Arg::Tensor(i64s), Arg::Tensor(scalar_f)]).dtype, Float);
    let scalar_i = input(&mut b, Long, &[]);
    assert_eq!(infer(&mut b, "aten::maximum", vec![Arg::Tensor(i32s), Arg::Tensor(scalar_i)]).dtype, ScalarType::Int);

    let e = error(&mut b, "aten::sub.Tensor", vec![Arg::Tensor(flags), Arg::Tensor(flags), inum(1)]);
    assert!(e.contains("aten::sub.Tensor") && e.contains("bool"), "{e}");
    let e = error(&mut b, "aten::bitwise_or.Tensor", vec![Arg::Tensor(f32s), Arg::Tensor(i64s)]);
    assert!(e.contains("integer or bool"), "{e}");
    let e = error(&mut b, "aten::where.self", vec![Arg::Tensor(f32s), Arg::Tensor(f32s), Arg::Tensor(f32s)]);
    assert!(e.contains("condition must be bool"), "{e}");
    let four = input(&mut b, Float, &[4]);
    let e = error(&mut b, "aten::add.Tensor", vec![Arg::Tensor(i64s), Arg::Tensor(four), inum(1)]);
    assert!(e.contains("cannot be broadcast"), "{e}");
    let e = error(&mut b, "aten::clamp", vec![Arg::Tensor(f32s), Arg::None, Arg::None]);
    assert!(e.contains("at least one"), "{e}");
}

#[test]
fn creation_ops_take_dtype_from_the_fill_or_the_options() {
    let mut b = GraphBuilder::new();
    let options = |dtype: Arg| vec![dtype, Arg::None, Arg::None, Arg::None];
    let full = |b: &mut GraphBuilder, fill: Arg, dtype: Arg| {
        let mut args = vec![Arg::Ints(vec![2, 3]), fill];
        args.extend(options(dtype));
        infer(b, "aten::full", args)
    };
    assert_eq!(full(&mut b, inum(1), Arg::None).dtype, Long);
    assert_eq!(full(&mut b, num(1.0), Arg::None).dtype, Float);
    assert_eq!(full(&mut b, Arg::Scalar(Scalar::Bool(true)), Arg::None).dtype, Bool);
    assert_eq!(full(&mut b, inum(1), Arg::ScalarType(Float)).dtype, Float);
    let arange = |b: &mut GraphBuilder, start: Arg, end: Arg, step: Arg| {
        let mut args = vec![start, end, step];
        args.extend(options(Arg::None));
        b.call1("aten::arange.start_step", args).map(|v| b.meta(v).clone())
    };
    let m = arange(&mut b, inum(0), inum(10), inum(3)).unwrap();
    assert_eq!((m.dtype, m.shape), (Long, fixed(&[4])));
    let m = arange(&mut b, num(0.0), num(1.0), num(0.1)).unwrap();
    assert_eq!((m.dtype, m.shape), (Float, fixed(&[10])));
    let m = arange(&mut b, inum(5), inum(-5), inum(-4)).unwrap();
    assert_eq!(m.shape, fixed(&[3]));
    let e = arange(&mut b, inum(0), inum(10), inum(-1)).unwrap_err().to_string();
    assert!(e.contains("aten::arange.start_step") && e.contains("sign"), "{e}");
    let e = arange(&mut b, inum(0), inum(10), inum(0)).unwrap_err().to_string();
    assert!(e.contains("step"), "{e}");
    let mut args = vec![Arg::Ints(vec![2]), inum(0), Arg::None, Arg::Int(0)];
    args.extend([Arg::None, Arg::None]);
    let e = error(&mut b, "aten::full", args);
    assert!(e.contains("layout"), "{e}");
    let x = input(&mut b, Float, &[2]);
    let e = error(&mut b, "aten::_to_copy", vec![Arg::Tensor(x), Arg::ScalarType(Long), Arg::None, Arg::None, Arg::None, Arg::Bool(true), Arg::None]);
    assert!(e.contains("non_blocking"), "{e}");
}

#[test]
fn sizes_from_run_time_values_become_symbols() {
    let mut b = GraphBuilder::new();
    let s = b.sym("seq", 1, 64);
    let x = b.input("x", TensorMeta::new(Float, vec![Dim::Fixed(1), s]));
    let n = b.sym_size(x, 1).unwrap();
    let mut args = vec![Arg::Scalar(Scalar::Int(0)), Arg::SymInt(n), Arg::Scalar(Scalar::Int(1))];
    args.extend([Arg::None, Arg::None, Arg::None, Arg::None]);
    let m = infer(&mut b, "aten::arange.start_step", args);
    assert_eq!((m.dtype, m.shape), (Long, vec![s]));
    let size = Arg::SymInts(vec![IntOrSym::Sym(n), IntOrSym::Int(4)]);
    let m = infer(&mut b, "aten::full", vec![size, num(0.0), Arg::None, Arg::None, Arg::None, Arg::None]);
    assert_eq!(m.shape, vec![s, Dim::Fixed(4)]);
    // Elementwise ops and reductions keep the symbol.
    let y = b.input("y", TensorMeta::new(Float, vec![s]));
    let m = infer(&mut b, "aten::eq.Tensor", vec![Arg::Tensor(x), Arg::Tensor(y)]);
    assert_eq!((m.dtype, m.shape), (Bool, vec![Dim::Fixed(1), s]));
    let m = infer(&mut b, "aten::cumsum", vec![Arg::Tensor(x), Arg::Int(-1), Arg::None]);
    assert_eq!(m.shape, vec![Dim::Fixed(1), s]);
    let m = infer(&mut b, "aten::amax", vec![Arg::Tensor(x), Arg::Ints(vec![0]), Arg::Bool(false)]);
    assert_eq!(m.shape, vec![s]);
    // A table sliced to the run-time length; slices of other dims keep the symbol.
    let table = input(&mut b, Float, &[64, 8]);
    let slice = |b: &mut GraphBuilder, x: ValueId, dim: i64, start: Arg, end: Arg| {
        b.call1("aten::slice_copy.Tensor", vec![Arg::Tensor(x), Arg::Int(dim), start, end, Arg::Int(1)]).map(|v| b.meta(v).shape.clone())
    };
    assert_eq!(slice(&mut b, table, 0, Arg::Int(0), Arg::SymInt(n)).unwrap(), vec![s, Dim::Fixed(8)]);
    let hidden = b.input("h", TensorMeta::new(Float, vec![s, Dim::Fixed(8)]));
    assert_eq!(slice(&mut b, hidden, -1, Arg::None, Arg::Int(-2)).unwrap(), vec![s, Dim::Fixed(6)]);
    assert_eq!(slice(&mut b, hidden, 0, Arg::Int(0), Arg::Int(i64::MAX)).unwrap(), vec![s, Dim::Fixed(8)]);
    let e = slice(&mut b, table, 0, Arg::Int(1), Arg::SymInt(n)).unwrap_err().to_string();
    assert!(e.contains("start 0"), "{e}");
    let e = slice(&mut b, hidden, 0, Arg::Int(1), Arg::None).unwrap_err().to_string();
    assert!(e.contains("run-time size"), "{e}");
    let short = input(&mut b, Float, &[16, 8]);
    let e = slice(&mut b, short, 0, Arg::Int(0), Arg::SymInt(n)).unwrap_err().to_string();
    assert!(e.contains("at least 64"), "{e}");
    let row = input(&mut b, Long, &[1, 1]);
    let size = Arg::SymInts(vec![IntOrSym::Int(3), IntOrSym::Sym(n)]);
    let m = infer(&mut b, "aten::expand_copy", vec![Arg::Tensor(row), size, Arg::Bool(false)]);
    assert_eq!(m.shape, vec![Dim::Fixed(3), s]);
}

#[test]
fn indexing_and_layout_shapes() {
    let mut b = GraphBuilder::new();
    let x = input(&mut b, Float, &[4, 5, 6]);
    let (i2, i3) = (input(&mut b, Long, &[2, 1]), input(&mut b, Long, &[3]));
    let index = |b: &mut GraphBuilder, idx: Vec<Option<ValueId>>| infer(b, "aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(idx)]).shape;
    assert_eq!(index(&mut b, vec![None, Some(i3)]), fixed(&[4, 3, 6]));
    assert_eq!(index(&mut b, vec![Some(i2), Some(i3)]), fixed(&[2, 3, 6]));
    assert_eq!(index(&mut b, vec![None, Some(i2), Some(i3)]), fixed(&[4, 2, 3]));
    // Indexed dims separated by a slice go first.
    assert_eq!(index(&mut b, vec![Some(i2), None, Some(i3)]), fixed(&[2, 3, 5]));
    // A boolean mask selects a data-dependent count of rows (tests/data_dependent.rs); mixed
    // with integer indices it is refused.
    let mask = input(&mut b, Bool, &[4]);
    let picked = index(&mut b, vec![Some(mask)]);
    assert!(matches!(picked[0], Dim::Sym(_)) && picked[1..] == fixed(&[5, 6])[..], "{picked:?}");
    let e = error(&mut b, "aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(vec![Some(mask), Some(i3)])]);
    assert!(e.contains("mask"), "{e}");

    assert_eq!(infer(&mut b, "aten::transpose_copy.int", vec![Arg::Tensor(x), Arg::Int(-1), Arg::Int(0)]).shape, fixed(&[6, 5, 4]));
    assert_eq!(infer(&mut b, "aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(-1)]).shape, fixed(&[4, 5, 6, 1]));
    let e = error(&mut b, "aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(5)]);
    assert!(e.contains("out of range"), "{e}");
    let ones = input(&mut b, Float, &[1, 3, 1]);
    assert_eq!(infer(&mut b, "aten::squeeze_copy.dims", vec![Arg::Tensor(ones), Arg::Ints(vec![0, 1, -1])]).shape, fixed(&[3]));
    assert_eq!(infer(&mut b, "aten::repeat", vec![Arg::Tensor(ones), Arg::Ints(vec![2, 1, 2, 3])]).shape, fixed(&[2, 1, 6, 3]));
    let parts = b.call("aten::split_with_sizes_copy", vec![Arg::Tensor(x), Arg::Ints(vec![1, 2, 3]), Arg::Int(-1)]).unwrap();
    assert_eq!(parts.iter().map(|&p| b.meta(p).shape.clone()).collect::<Vec<_>>(), [fixed(&[4, 5, 1]), fixed(&[4, 5, 2]), fixed(&[4, 5, 3])]);
    let e = error(&mut b, "aten::split_with_sizes_copy", vec![Arg::Tensor(x), Arg::Ints(vec![1, 2]), Arg::Int(-1)]);
    assert!(e.contains("add up"), "{e}");
    let e = error(&mut b, "aten::index_select", vec![Arg::Tensor(x), Arg::Int(0), Arg::Tensor(mask)]);
    assert!(e.contains("int64 or int32"), "{e}");
}

#[test]
fn reductions_pooling_and_resampling_sizes() {
    let mut b = GraphBuilder::new();
    let x = input(&mut b, Float, &[1, 3, 7, 6]);
    let any = infer(&mut b, "aten::any.dims", vec![Arg::Tensor(x), Arg::None, Arg::Bool(false)]);
    assert_eq!((any.dtype, any.shape), (Bool, vec![]));
    let flags = input(&mut b, Bool, &[2, 3]);
    let sum = infer(&mut b, "aten::sum.dim_IntList", vec![Arg::Tensor(flags), Arg::Ints(vec![-1]), Arg::Bool(true), Arg::None]);
    assert_eq!((sum.dtype, sum.shape), (Long, fixed(&[2, 1])));
    let e = error(&mut b, "aten::amax", vec![Arg::Tensor(x), Arg::Ints(vec![1, -3]), Arg::Bool(false)]);
    assert!(e.contains("twice"), "{e}");

    let pool = b
        .call(
            "aten::max_pool2d_with_indices",
            vec![Arg::Tensor(x), Arg::Ints(vec![3]), Arg::Ints(vec![2]), Arg::Ints(vec![1]), Arg::Ints(vec![1]), Arg::Bool(true)],
        )
        .unwrap();
    assert_eq!((b.meta(pool[0]).shape.clone(), b.meta(pool[1]).dtype), (fixed(&[1, 3, 4, 4]), Long));
    let avg = |b: &mut GraphBuilder, k: i64, p: i64, ceil: bool| {
        let args = vec![Arg::Tensor(x), Arg::Ints(vec![k]), Arg::Ints(vec![]), Arg::Ints(vec![p]), Arg::Bool(ceil), Arg::Bool(true), Arg::None];
        b.call1("aten::avg_pool2d", args).map(|v| b.meta(v).shape.clone())
    };
    assert_eq!(avg(&mut b, 2, 0, false).unwrap(), fixed(&[1, 3, 3, 3]));
    assert_eq!(avg(&mut b, 2, 0, true).unwrap(), fixed(&[1, 3, 4, 3]));
    let e = avg(&mut b, 2, 2, false).unwrap_err().to_string();
    assert!(e.contains("half the kernel"), "{e}");

    let up = |b: &mut GraphBuilder, op: &str, size: Arg, scales: Arg| {
        let mut args = vec![Arg::Tensor(x), size];
        if op.contains("bilinear") {
            args.push(Arg::Bool(false));
        }
        args.push(scales);
        b.call1(op, args).map(|v| b.meta(v).shape.clone())
    };
    let nearest = "aten::upsample_nearest2d.vec";
    let bilinear = "aten::upsample_bilinear2d.vec";
    assert_eq!(up(&mut b, nearest, Arg::None, Arg::Floats(vec![1.5, 0.75])).unwrap(), fixed(&[1, 3, 10, 4]));
    assert_eq!(up(&mut b, bilinear, Arg::Ints(vec![9, 2]), Arg::None).unwrap(), fixed(&[1, 3, 9, 2]));
    let e = up(&mut b, bilinear, Arg::Ints(vec![9, 2]), Arg::Floats(vec![2.0, 2.0])).unwrap_err().to_string();
    assert!(e.contains("either"), "{e}");
    let e = up(&mut b, nearest, Arg::None, Arg::Floats(vec![0.1, 1.0])).unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
    let ints = input(&mut b, Long, &[1, 1, 2, 2]);
    let e = error(&mut b, bilinear, vec![Arg::Tensor(ints), Arg::Ints(vec![4, 4]), Arg::Bool(true), Arg::None]);
    assert!(e.contains("floating"), "{e}");
}

/// Values of every kind a schema argument could be handed, right or wrong, each tagged with
/// the schema type it fits (`Tensor`, `int`, `int[]`, …).
fn candidates(b: &mut GraphBuilder) -> Vec<(&'static str, Arg)> {
    let mut t = |d: ScalarType, s: &[usize]| ("Tensor", Arg::Tensor(input(b, d, s)));
    let mut out = vec![
        t(Float, &[]),
        t(Float, &[1, 2, 3, 3]),
        t(Float, &[0, 4]),
        t(Long, &[3]),
        t(Long, &[]),
        t(Bool, &[2, 2]),
        t(ScalarType::Byte, &[1, 1, 5, 5]),
        t(Float, &[2, 3, 4]),
    ];
    let c = b.constant("c", Long, &[2], ConstData::owned([1i64, -9].iter().flat_map(|v| v.to_le_bytes()).collect())).unwrap();
    out.push(("Tensor", Arg::Tensor(c)));
    let (x, i) = (input(b, Float, &[2, 2]), input(b, Long, &[2]));
    out.extend([
        ("Tensor[]", Arg::Tensors(vec![])),
        ("Tensor[]", Arg::Tensors(vec![x, i])),
        ("Tensor?[]", Arg::OptTensors(vec![None])),
        ("Tensor?[]", Arg::OptTensors(vec![Some(i), None, Some(c)])),
        ("int", Arg::Int(0)),
        ("int", Arg::Int(-1)),
        ("int", Arg::Int(3)),
        ("int", Arg::Int(-(1 << 40))),
        ("int", Arg::Int(i64::MAX)),
        ("int[]", Arg::Ints(vec![])),
        ("int[]", Arg::Ints(vec![-1])),
        ("int[]", Arg::Ints(vec![2, 0])),
        ("int[]", Arg::Ints(vec![1, 1])),
        ("int[]", Arg::Ints(vec![1 << 40, -(1 << 40)])),
        ("int[]", Arg::Ints(vec![i64::MAX, i64::MAX, 2])),
        ("float", Arg::Float(f64::NAN)),
        ("float", Arg::Float(0.5)),
        ("float[]", Arg::Floats(vec![f64::INFINITY, 0.5])),
        ("float[]", Arg::Floats(vec![1e30, 1e30])),
        ("float[]", Arg::Floats(vec![2.0, 0.5])),
        ("bool", Arg::Bool(true)),
        ("bool", Arg::Bool(false)),
        ("Scalar", Arg::Scalar(Scalar::Double(f64::NAN))),
        ("Scalar", Arg::Scalar(Scalar::Double(1e300))),
        ("Scalar", Arg::Scalar(Scalar::Int(i64::MIN))),
        ("Scalar", Arg::Scalar(Scalar::Int(2))),
        ("Scalar", Arg::Scalar(Scalar::Bool(false))),
        ("ScalarType", Arg::ScalarType(ScalarType::ComplexFloat)),
        ("ScalarType", Arg::ScalarType(Bool)),
        ("ScalarType", Arg::ScalarType(Float)),
        ("str", Arg::Str("none".into())),
        ("None", Arg::None),
    ]);
    out
}

/// The candidate tag a schema type takes (`SymInt[2]?` → `int[]`).
fn kind(ty: &str) -> &'static str {
    const KINDS: [&str; 10] = ["Tensor", "Tensor[]", "Tensor?[]", "int", "float", "bool", "Scalar", "ScalarType", "str", "None"];
    let ty = ty.strip_suffix('?').unwrap_or(ty).replace("SymInt", "int");
    if ty.starts_with("int[") {
        "int[]"
    } else if ty.starts_with("float[") {
        "float[]"
    } else {
        KINDS.into_iter().find(|k| *k == ty).unwrap_or("None")
    }
}

#[test]
fn no_argument_list_makes_inference_panic() {
    let mut b = GraphBuilder::new();
    let pool = candidates(&mut b);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // Mostly arguments of the right kind (so inference gets past its first checks), some not.
    let mut pick = |ty: &str| {
        let fitting: Vec<&Arg> = pool.iter().filter(|(k, _)| *k == kind(ty) || (ty.ends_with('?') && *k == "None")).map(|(_, a)| a).collect();
        let r = next();
        if r % 5 != 0 && !fitting.is_empty() { fitting[(r / 5) as usize % fitting.len()].clone() } else { pool[(r / 5) as usize % pool.len()].1.clone() }
    };
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut panicked = Vec::new();
    let mut keys: Vec<String> = ops::all().map(|d| d.functional.key()).collect();
    keys.sort();
    for key in keys {
        let types: Vec<String> = ops::op(&key).unwrap().functional.args.iter().map(|a| a.ty.clone()).collect();
        for _ in 0..2000 {
            let args: Vec<Arg> = types.iter().map(|t| pick(t)).collect();
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = b.call(&key, args.clone());
            }));
            if run.is_err() {
                panicked.push(format!("{key}{args:?}"));
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    assert!(panicked.is_empty(), "inference panicked on:\n{}", panicked.join("\n"));
}
