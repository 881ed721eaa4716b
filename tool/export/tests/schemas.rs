//! Every schema the pipeline emits is exactly PyTorch's (as listed in shared/spec).

use std::path::Path;

#[test]
fn emitted_schemas_match_the_spec_files() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec");
    let text = std::fs::read_to_string(spec.join("core_aten_schemas.txt")).unwrap()
        + &std::fs::read_to_string(spec.join("extra_op_schemas.txt")).unwrap();
    let lines: std::collections::HashSet<&str> = text.lines().map(str::trim).collect();
    let mut checked = 0;
    for def in rbuild_export::ops::all() {
        if def.out_text.is_empty() {
            // Decomposed before emission; never reaches a program.
            continue;
        }
        // rbuild's own fused ops: only ours to define.
        if def.functional.name.starts_with("rbuild::") {
            assert!(def.out.as_ref().is_some_and(|o| o.name == def.functional.name), "{}", def.functional_text);
            continue;
        }
        for s in [def.functional_text, def.out_text] {
            if !lines.contains(s) && !NOT_IN_SPEC.contains(&s) {
                assert_copy_variant_of_spec(s, &lines);
            }
            checked += 1;
        }
        if rbuild_export::ops::returns_int(&def.functional.key()) || rbuild_export::ops::writes_in_place(&def.functional.key()) {
            // Prim ops and in-place writes are emitted under their functional schema.
            assert_eq!(def.functional_text, def.out_text);
            continue;
        }
        // Parsing keeps every argument; outputs are the keyword-only `Tensor(a!)` ones. Out
        // variants take the functional arguments in order, less the tensor options their
        // output tensor carries.
        let out = def.out.as_ref().unwrap();
        let out_names: Vec<&str> = out.inputs().map(|a| a.name.as_str()).collect();
        let (kept, dropped): (Vec<&str>, Vec<&str>) = def.functional.args.iter().map(|a| a.name.as_str()).partition(|n| out_names.contains(n));
        assert_eq!(out_names, kept, "{}", out.key());
        assert!(dropped.iter().all(|n| TENSOR_OPTIONS.contains(n)), "{} drops {dropped:?}", out.key());
        assert_eq!(out.args.iter().filter(|a| a.is_out).count(), def.functional.returns, "{}", out.key());
    }
    assert!(checked >= 30, "only {checked} schemas checked");
}

/// Factory-op arguments the out variants drop (the output tensor carries them).
const TENSOR_OPTIONS: &[&str] = &["dtype", "layout", "device", "pin_memory"];

/// ExecuTorch runs these but the spec files (Core ATen + ExecuTorch's extra namespaces) do
/// not list them: `aten::linear` is CompositeImplicit in PyTorch; ExecuTorch's portable and
/// optimized libraries register `linear.out` with PyTorch's schema.
///
/// The `quantized_decomposed` out variants are registered by ExecuTorch's quantized kernel
/// library (kernels/quantized/quantized.yaml); the spec lists only their functional forms.
const NOT_IN_SPEC: &[&str] = &[
    // ExecuTorch's extension/llm/custom_ops schema, not in the spec's list.
    "llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) -> Tensor",
    "llama::custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None, *, Tensor(a!) out) -> Tensor(a!)",
    // Not Core ATen (decomposed by `run_decompositions`), but in ExecuTorch's portable library
    // with PyTorch's schemas; programs in the training IR map onto them directly.
    "aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::ones.out(SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::zeros.out(SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor",
    "aten::transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out) -> Tensor(a!)",
    // The in-place copy ExecuTorch's portable library registers as `aten::copy_` (the spec
    // lists functional ops and out variants only).
    "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    "aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
];

/// The spec lists `aten::view`/`aten::permute` but not their `_copy` forms (what ExecuTorch
/// runs): those must take the same arguments as the aliasing op.
fn assert_copy_variant_of_spec(schema: &str, lines: &std::collections::HashSet<&str>) {
    let parsed = rbuild_export::ops::parse_schema(schema).unwrap();
    let base = parsed.name.strip_suffix("_copy").unwrap_or_else(|| panic!("schema not in shared/spec: {schema}"));
    // `slice_copy.Tensor(_out)` copies `slice.Tensor`; `view_copy(.out)` copies `view`: the same
    // overload when the spec has one, else the default.
    let overload = parsed.overload.strip_suffix("_out").unwrap_or(&parsed.overload).to_string();
    let candidates: Vec<_> = lines.iter().filter_map(|l| rbuild_export::ops::parse_schema(l)).filter(|s| s.name == base).collect();
    let spec = candidates
        .iter()
        .find(|s| s.overload == overload)
        .or_else(|| candidates.iter().find(|s| s.overload.is_empty() || s.overload == "default"))
        .unwrap_or_else(|| panic!("{schema}: neither it nor {base} is in shared/spec"));
    let ins: Vec<_> = parsed.inputs().map(|a| (&a.ty, &a.name)).collect();
    let want: Vec<_> = spec.inputs().map(|a| (&a.ty, &a.name)).collect();
    assert_eq!(ins, want, "{schema} does not take {base}'s arguments");
}
