//! Every schema the pipeline emits is exactly PyTorch's (as listed in shared/spec).

use std::path::Path;

#[test]
fn emitted_schemas_match_the_spec_files() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec");
    let text = std::fs::read_to_string(spec.join("core_aten_schemas.txt")).unwrap()
        + &std::fs::read_to_string(spec.join("extra_op_schemas.txt")).unwrap();
    let lines: std::collections::HashSet<&str> = text.lines().map(str::trim).collect();
    let portable = executorch_portable_ops();
    let (mut checked, mut portable_only) = (0, 0);
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
        // Not in the spec files (Core ATen and ExecuTorch's extra namespaces), an op must be in
        // ExecuTorch's portable library (functions.yaml, which takes PyTorch's schemas): its
        // out variant's name is checked there, and its two schemas against each other below.
        let in_portable = def.out.as_ref().is_some_and(|o| portable.contains(&o.key()));
        for s in [def.functional_text, def.out_text] {
            if lines.contains(s) || NOT_IN_SPEC.contains(&s) || copy_variant_of_spec(s, &lines) {
                checked += 1;
            } else {
                assert!(in_portable, "schema neither in shared/spec nor of an ExecuTorch portable op: {s}");
                portable_only += 1;
            }
        }
        if rbuild_export::ops::returns_int(&def.functional.key()) || rbuild_export::ops::writes_in_place(&def.functional.key()) {
            // Prim ops and in-place writes are emitted under their functional schema.
            assert_eq!(def.functional_text, def.out_text);
            continue;
        }
        // Parsing keeps every argument; outputs are the keyword-only `Tensor(a!)` ones. Out
        // variants take the functional arguments in order (same types, defaults and keyword
        // placement), less the tensor options their output tensor carries.
        let out = def.out.as_ref().unwrap();
        let out_args: Vec<_> = out.inputs().collect();
        let kept: Vec<_> = def.functional.args.iter().filter(|a| out_args.iter().any(|o| o.name == a.name)).collect();
        let dropped: Vec<&str> = def.functional.args.iter().filter(|a| !out_args.iter().any(|o| o.name == a.name)).map(|a| a.name.as_str()).collect();
        let shape = |a: &&rbuild_export::ops::SchemaArg| (a.name.clone(), a.ty.clone(), a.default.clone());
        assert_eq!(out_args.iter().map(shape).collect::<Vec<_>>(), kept.iter().map(shape).collect::<Vec<_>>(), "{}", out.key());
        assert!(dropped.iter().all(|n| TENSOR_OPTIONS.contains(n)), "{} drops {dropped:?}", out.key());
        assert_eq!(out.args.iter().filter(|a| a.is_out).count(), def.functional.returns, "{}", out.key());
    }
    assert!(checked >= 200, "only {checked} schemas checked against the spec");
    assert!(portable_only >= 40, "only {portable_only} schemas of ExecuTorch's portable ops outside the spec");
}

/// ExecuTorch's portable operators (kernels/portable/functions.yaml of executorch 1.5.1), as
/// the portable-set testdata index lists them: entries with cases, with cases from the model
/// set, and skipped ones.
fn executorch_portable_ops() -> std::collections::HashSet<String> {
    let index = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/ops_portable/index.json");
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    let mut ops: std::collections::HashSet<String> = std::collections::HashSet::new();
    ops.extend(index["cases"].as_object().unwrap().keys().cloned());
    ops.extend(index["skipped"].as_object().unwrap().keys().cloned());
    ops.extend(index["preexisting_op_dirs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()));
    assert_eq!(ops.len(), index["functions_yaml_entries"].as_u64().unwrap() as usize, "functions.yaml entries");
    ops
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
    // Core ATen's `sort` has no out variant in the spec nor in ExecuTorch's portable library;
    // rbuild's kernel takes PyTorch's `sort.values`.
    "aten::sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
    "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    "aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
];

/// The spec lists `aten::view`/`aten::permute` but not their `_copy` forms (what ExecuTorch
/// runs): a `_copy` form of a spec op must take the same arguments as the aliasing op.
fn copy_variant_of_spec(schema: &str, lines: &std::collections::HashSet<&str>) -> bool {
    let parsed = rbuild_export::ops::parse_schema(schema).unwrap();
    let Some(base) = parsed.name.strip_suffix("_copy") else { return false };
    // `slice_copy.Tensor(_out)` copies `slice.Tensor`; `view_copy(.out)` copies `view`: the same
    // overload when the spec has one, else the default.
    let overload = parsed.overload.strip_suffix("_out").unwrap_or(&parsed.overload).to_string();
    let candidates: Vec<_> = lines.iter().filter_map(|l| rbuild_export::ops::parse_schema(l)).filter(|s| s.name == base).collect();
    let Some(spec) = candidates
        .iter()
        .find(|s| s.overload == overload)
        .or_else(|| candidates.iter().find(|s| s.overload.is_empty() || s.overload == "default"))
    else {
        return false;
    };
    let ins: Vec<_> = parsed.inputs().map(|a| (&a.ty, &a.name)).collect();
    let want: Vec<_> = spec.inputs().map(|a| (&a.ty, &a.name)).collect();
    assert_eq!(ins, want, "{schema} does not take {base}'s arguments");
    true
}
