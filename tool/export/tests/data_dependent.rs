//! Ops whose result size depends on the data (`nonzero`, `masked_select`,
//! `repeat_interleave`): the size is a new symbol bounded by the op's worst case, planned at the
//! bound and emitted as a DYNAMIC_BOUND tensor; later ops carry the symbol.

use rbuild_export::graph::{Arg, Dim, TensorMeta};
use rbuild_export::{emit, passes, plan, shape, GraphBuilder};
use rbuild_runtime::format::schema::KernelTypes;
use rbuild_runtime::ScalarType;

#[test]
fn nonzero_rows_are_a_new_symbol_bounded_by_the_input_size() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[3, 4]));
    let rows = b.call1("aten::nonzero", vec![Arg::Tensor(x)]).unwrap();
    let shape = b.meta(rows).shape.clone();
    let Dim::Sym(s) = shape[0] else { panic!("{shape:?}") };
    assert_eq!(shape[1], Dim::Fixed(2));
    assert_eq!((b.graph.syms[s].min, b.graph.syms[s].max, b.graph.syms[s].value), (0, 12, None));
    assert_eq!(b.meta(rows).dtype, ScalarType::Long);
    // Later ops carry the symbol; its run-time value is the result's size.
    let n = b.sym_size(rows, 0).unwrap();
    assert_eq!(b.graph.syms[s].value, Some(n));
    let picked = b.call1("aten::index_select", vec![Arg::Tensor(rows), Arg::Int(1), Arg::Tensor(rows)]);
    assert!(picked.is_err(), "a 2-D index is rejected");
    let col = b.call1("aten::select_copy.int", vec![Arg::Tensor(rows), Arg::Int(1), Arg::Int(0)]).unwrap();
    assert_eq!(b.meta(col).shape, [Dim::Sym(s)]);
}

#[test]
fn masked_select_bound_is_narrowed_by_the_caller() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Int, &[2, 5]));
    let mask = b.input("mask", TensorMeta::fixed(ScalarType::Bool, &[5]));
    let picked = b.call_bounded("aten::masked_select", vec![Arg::Tensor(x), Arg::Tensor(mask)], Some(6)).unwrap()[0];
    let Dim::Sym(s) = b.meta(picked).shape[0] else { panic!() };
    assert_eq!(b.graph.syms[s].max, 6, "the caller's bound is below the worst case 10");
    let wide = b.call_bounded("aten::masked_select", vec![Arg::Tensor(x), Arg::Tensor(mask)], Some(99)).unwrap()[0];
    let Dim::Sym(t) = b.meta(wide).shape[0] else { panic!() };
    assert_eq!(b.graph.syms[t].max, 10, "never above the worst case");
    let e = b.call1("aten::masked_select", vec![Arg::Tensor(x), Arg::Tensor(x)]).unwrap_err().to_string();
    assert!(e.contains("mask must be bool"), "{e}");
}

#[test]
fn boolean_mask_indexing_replaces_the_masked_dims_by_a_count() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[2, 3, 4]));
    let mask = b.input("mask", TensorMeta::fixed(ScalarType::Bool, &[3, 4]));
    let picked = b.call1("aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(vec![None, Some(mask)])]).unwrap();
    let shape = b.meta(picked).shape.clone();
    let Dim::Sym(s) = shape[1] else { panic!("{shape:?}") };
    assert_eq!((shape[0], b.graph.syms[s].max), (Dim::Fixed(2), 12));
    let rows = b.input("rows", TensorMeta::fixed(ScalarType::Long, &[2]));
    let e = b.call1("aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(vec![Some(rows), Some(mask)])]).unwrap_err().to_string();
    assert!(e.contains("only index tensor"), "{e}");
    let small = b.input("small", TensorMeta::fixed(ScalarType::Bool, &[3]));
    let e = b.call1("aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(vec![None, None, Some(small)])]).unwrap_err().to_string();
    assert!(e.contains("does not match"), "{e}");
    // Integer indices keep their static sizes.
    let fixed = b.call1("aten::index.Tensor", vec![Arg::Tensor(x), Arg::OptTensors(vec![Some(rows)])]).unwrap();
    assert_eq!(b.meta(fixed).sizes(), Some(vec![2, 3, 4]));
}

#[test]
fn repeat_interleave_needs_an_output_size_or_a_bound() {
    let mut b = GraphBuilder::new();
    let r = b.input("repeats", TensorMeta::fixed(ScalarType::Long, &[4]));
    let fixed = b.call1("aten::repeat_interleave.Tensor", vec![Arg::Tensor(r), Arg::Int(7)]).unwrap();
    assert_eq!(b.meta(fixed).shape, [Dim::Fixed(7)]);
    let e = b.call1("aten::repeat_interleave.Tensor", vec![Arg::Tensor(r), Arg::None]).unwrap_err().to_string();
    assert!(e.contains("give its bound"), "{e}");
    let bounded = b.call_bounded("aten::repeat_interleave.Tensor", vec![Arg::Tensor(r), Arg::None], Some(32)).unwrap()[0];
    let Dim::Sym(s) = b.meta(bounded).shape[0] else { panic!() };
    assert_eq!(b.graph.syms[s].max, 32);
    // The plain inference entry point refuses to make symbols the caller would not declare.
    let e = shape::infer(&b.graph, "aten::nonzero", &[Arg::Tensor(r)]).unwrap_err().to_string();
    assert!(e.contains("depends on the data"), "{e}");
}

#[test]
fn a_data_dependent_result_is_planned_at_its_bound_and_emitted_dynamic() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[3, 4]));
    let mask = b.call1("aten::gt.Scalar", vec![Arg::Tensor(x), Arg::Scalar(rbuild_runtime::Scalar::Int(0))]).unwrap();
    let picked = b.call1("aten::masked_select", vec![Arg::Tensor(x), Arg::Tensor(mask)]).unwrap();
    let doubled = b.call1("aten::mul.Scalar", vec![Arg::Tensor(picked), Arg::Scalar(rbuild_runtime::Scalar::Int(2))]).unwrap();
    b.output(doubled);
    let mut g = b.finish();
    passes::optimize(&mut g).unwrap();
    assert!(g.ops().contains(&"aten::masked_select.out".to_string()), "{:?}", g.ops());
    let p = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &p, "forward").unwrap();
    let file = rbuild_runtime::format::PteFile::parse(&bytes).unwrap();
    let plan = &file.program.execution_plan.as_ref().unwrap()[0];
    let values = plan.values.as_ref().unwrap();
    let output = &values[plan.outputs.as_ref().unwrap()[0] as usize];
    let Some(KernelTypes::Tensor(t)) = &output.val else { panic!("the output is a tensor") };
    assert_eq!(t.sizes.as_deref(), Some(&[12][..]), "sizes are the bound");
    assert_eq!(t.shape_dynamism, 1, "DYNAMIC_BOUND");
}
