//! Keeps `rbuild_kernels::dtypes` truthful.
//!
//! 1. A probe calls every kernel with made-up arguments of each probe dtype; a dtype is accepted
//!    when some out dtype succeeds, and the accepted set must equal the declared set exactly
//!    (over- and under-declaration both fail). The elementwise operators — out-variants of the
//!    shapes `(Tensor self, *, out)`, `(Tensor self, Tensor other, *, out)`,
//!    `(Tensor self, Scalar other, *, out)`, optionally with `Scalar alpha` — are called from
//!    their schemas ([2, 3] inputs); every other operator from a hand-made recipe.
//! 2. Every kernel call in the shared test programs (the single-operator `ops/` and
//!    `ops_portable/`, plus `models/` and `xnnpack_ops/`) has its primary argument's dtype
//!    declared: real programs' dtypes, where the probe's are made up.
//!
//! The probe's recipes also name each operator's primary argument, which check 2 reads.

mod dtype_probe;
mod testdata;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use dtype_probe::recipes::RECIPES;
use testdata::pte_files;
use dtype_probe::schemas::{probed_recipe, PROBED_SCHEMAS};
use dtype_probe::{primary, probe, rejections, R, PROBE_DTYPES};
use rbuild_kernels::dtypes;
use rbuild_runtime::format::schema::{EValue, InstructionArguments, KernelTypes};
use rbuild_runtime::format::PteFile;
use rbuild_runtime::ScalarType;

fn names(set: &BTreeSet<ScalarType>) -> String {
    set.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(", ")
}

/// Probes each (op, recipe) against its declared dtypes; returns how many matched exactly.
fn check_probes(calls: &[(&str, Vec<R>)]) -> usize {
    let registry = rbuild_kernels::registry();
    let (mut verified, mut errors) = (0, Vec::new());
    for (op, recipe) in calls {
        let kernel = registry.lookup(op).unwrap_or_else(|| panic!("{op} is probed but has no kernel"));
        let (accepted, panics) = probe(op, kernel, recipe);
        errors.extend(panics);
        let declared: BTreeSet<ScalarType> = dtypes::declared(op).iter().copied().collect();
        if let Some(d) = declared.iter().find(|d| !PROBE_DTYPES.contains(d)) {
            errors.push(format!("{op}: declares {d:?}, which the probe cannot check"));
        }
        if accepted == declared {
            verified += 1;
        } else {
            let mut e = format!("{op}: accepts [{}] but declares [{}]", names(&accepted), names(&declared));
            // Why a declared dtype is rejected (or Float, when nothing is accepted: a bad recipe?).
            let first_missing = declared.difference(&accepted).next().copied();
            if let Some(d) = first_missing.or(accepted.is_empty().then_some(ScalarType::Float)) {
                e += &format!("\n    {d:?} rejected: {}", rejections(kernel, recipe, d).join("\n      "));
            }
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "{} problems:\n{}", errors.len(), errors.join("\n"));
    verified
}

#[test]
fn elementwise_ops_accept_exactly_the_declared_dtypes() {
    let calls: Vec<(&str, Vec<R>)> = PROBED_SCHEMAS
        .iter()
        .map(|s| probed_recipe(s).unwrap_or_else(|| panic!("not a probed shape: {s}")))
        .collect();
    let verified = check_probes(&calls);
    eprintln!("dtype probe (schemas): {verified} of {} ops accept exactly their declared dtypes", calls.len());
}

#[test]
fn other_ops_accept_exactly_the_declared_dtypes() {
    let calls: Vec<(&str, Vec<R>)> = RECIPES.iter().map(|(op, r)| (*op, r.to_vec())).collect();
    for (op, r) in &calls {
        assert!(primary(r).is_some(), "{op}: the recipe has no primary argument");
    }
    let verified = check_probes(&calls);
    eprintln!("dtype probe (recipes): {verified} of {} ops accept exactly their declared dtypes", calls.len());
}

/// Every kernel is probed once, and only kernels are probed.
#[test]
fn every_kernel_is_probed() {
    let catalog: BTreeSet<&str> = rbuild_kernels::catalog().into_iter().map(|(op, _)| op).collect();
    let mut probed = BTreeSet::new();
    for op in PROBED_SCHEMAS.iter().map(|s| s.split_once('(').unwrap().0).chain(RECIPES.iter().map(|r| r.0)) {
        assert!(probed.insert(op), "{op} is probed twice");
        assert!(catalog.contains(op), "{op} is probed but has no kernel");
    }
    let missing: Vec<_> = catalog.difference(&probed).collect();
    assert!(missing.is_empty(), "kernels without a probe: {missing:?}");
    eprintln!("dtype probe covers all {} kernels", catalog.len());
}

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

/// Every kernel op whose schema in the shared spec has an elementwise shape is probed from
/// that schema (so the schema list cannot silently miss one).
#[test]
fn every_op_of_a_probed_shape_is_probed() {
    let catalog: BTreeSet<&str> = rbuild_kernels::catalog().into_iter().map(|(op, _)| op).collect();
    let mut checked = 0;
    for file in ["spec/core_aten_schemas.txt", "spec/extra_op_schemas.txt"] {
        let Ok(text) = std::fs::read_to_string(shared().join(file)) else { continue };
        for line in text.lines().map(str::trim) {
            let Some((op, _)) = probed_recipe(line) else { continue };
            if catalog.contains(op) {
                checked += 1;
                assert!(PROBED_SCHEMAS.contains(&line), "{op} has a probed shape but is not probed from it: {line}");
            }
        }
    }
    eprintln!("spec schemas of a probed shape: {checked}, all probed");
}

/// Which argument of a kernel call is the primary one (as the probe's recipe marks it; the
/// elementwise ops' `self`). None for the scalar primitives (their programs pass no tensor).
fn primary_arg(op: &str) -> Option<usize> {
    if op.starts_with("executorch_prim::") {
        return None;
    }
    Some(RECIPES.iter().find(|r| r.0 == op).and_then(|r| primary(r.1)).unwrap_or(0))
}


/// The dtype of value `index` (a tensor, or a list's first tensor).
fn value_dtype(values: &[EValue<'_>], index: i64) -> Option<ScalarType> {
    match values.get(usize::try_from(index).ok()?)?.val.as_ref()? {
        KernelTypes::Tensor(t) => ScalarType::from_code(t.scalar_type as i64),
        KernelTypes::TensorList(l) => value_dtype(values, *l.items.as_ref()?.first()? as i64),
        KernelTypes::OptionalTensorList(l) => {
            let first = l.items.as_ref()?.iter().find(|&&i| i >= 0)?;
            value_dtype(values, *first as i64)
        }
        _ => None,
    }
}

/// The shared test programs: the single-operator ones (`ops/`, `ops_portable/`, with a
/// `target_op`), the model and XNNPACK ones (their non-delegated calls).
const PROGRAM_FOLDERS: [&str; 4] = ["ops", "ops_portable", "models", "xnnpack_ops"];

#[test]
fn testdata_programs_use_declared_dtypes() {
    let testdata = shared().join("testdata");
    let mut cases = Vec::new();
    for folder in PROGRAM_FOLDERS {
        cases.extend(pte_files(&testdata.join(folder)));
    }
    let schema_probed: BTreeSet<&str> = PROBED_SCHEMAS.iter().map(|s| s.split_once('(').unwrap().0).collect();
    // op → primary dtypes seen; errors.
    let (mut seen, mut errors) = (BTreeMap::<String, BTreeSet<ScalarType>>::new(), Vec::new());
    for pte_path in &cases {
        let label = pte_path.strip_prefix(&testdata).unwrap().display().to_string();
        let target = std::fs::read_to_string(pte_path.with_extension("json"))
            .ok()
            .and_then(|json| serde_json::from_str::<serde_json::Value>(&json.replace("Infinity", "null").replace("NaN", "null")).ok())
            .and_then(|meta| meta["target_op"].as_str().map(str::to_string));
        let data = std::fs::read(pte_path).unwrap();
        let file = PteFile::parse(&data).unwrap_or_else(|e| panic!("{label}: {e}"));
        for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
            let values = plan.values.as_deref().unwrap_or(&[]);
            let operators = plan.operators.as_deref().unwrap_or(&[]);
            for chain in plan.chains.as_deref().unwrap_or(&[]) {
                for ins in chain.instructions.as_deref().unwrap_or(&[]) {
                    let Some(InstructionArguments::KernelCall(call)) = &ins.instr_args else { continue };
                    let op = operators[call.op_index as usize].key();
                    let args = call.args.as_deref().unwrap_or(&[]);
                    let Some(arg) = primary_arg(&op) else { continue };
                    let Some(dtype) = args.get(arg).and_then(|&i| value_dtype(values, i as i64)) else {
                        errors.push(format!("{label}: {op}: argument {arg} is not a tensor"));
                        continue;
                    };
                    if !dtypes::declared(&op).contains(&dtype) {
                        errors.push(format!("{label}: {op} is called with {dtype:?}, not declared"));
                    }
                    seen.entry(op).or_default().insert(dtype);
                }
            }
        }
        if let Some(t) = target.filter(|t| !t.starts_with("executorch_prim::")) {
            assert!(seen.contains_key(&t), "{label}: no call of its target_op {t}");
        }
    }
    let pairs: usize = seen.values().map(BTreeSet::len).sum();
    let outside = seen.keys().filter(|op| !schema_probed.contains(op.as_str())).count();
    eprintln!(
        "testdata: {} programs call {} ops ({outside} of them outside the schema probe) with {pairs} \
         (op, primary dtype) pairs; all declared: {}",
        cases.len(),
        seen.len(),
        errors.is_empty()
    );
    assert!(!cases.is_empty(), "no programs under {}", testdata.display());
    assert!(errors.is_empty(), "{} problems:\n{}", errors.len(), errors.join("\n"));
}
