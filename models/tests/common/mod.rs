#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rbuild_export::passes::decompose;
use rbuild_export::{eval, Graph};
use rbuild_models::Weights;

/// `../shared/testdata/models/<name>` beside the checkout.
pub fn model_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/models").join(name)
}

pub fn shared_weights(name: &str) -> Weights {
    let p = model_dir(name).join("model.safetensors");
    Weights::open(&p).unwrap_or_else(|e| panic!("shared test weights: {e}"))
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Nodes calling `op`.
pub fn count(g: &Graph, op: &str) -> usize {
    g.nodes.iter().filter(|n| n.op == op).count()
}

pub fn output_sizes(g: &Graph) -> Vec<usize> {
    g.meta(g.outputs[0]).sizes().unwrap()
}

/// Runs the builder's graph eagerly: non-core ops are first decomposed (eval needs out variants).
pub fn run(g: &Graph, input: &[f32]) -> Vec<f32> {
    let mut g = g.clone();
    decompose::decompose(&mut g, &Default::default()).unwrap();
    floats(&eval::evaluate(&g, &[f32_bytes(input)]).unwrap()[0])
}

/// A number field of the flat `model.json` (`"atol": 0.0001`).
pub fn json_number(json: &str, key: &str) -> f32 {
    let at = json.find(&format!("\"{key}\":")).unwrap_or_else(|| panic!("{key} not in model.json")) + key.len() + 3;
    let rest = json[at..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c))).unwrap_or(rest.len());
    rest[..end].parse().unwrap()
}

/// Every `got` within `atol + rtol * |want|`; reports the worst element.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = (0usize, 0f32);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let excess = (a - b).abs() - (atol + rtol * b.abs());
        assert!(a.is_finite(), "{what}: element {i} is {a}");
        if excess > worst.1 {
            worst = (i, excess);
        }
    }
    let max_abs = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    eprintln!("{what}: max abs error {max_abs:e}");
    let i = worst.0;
    assert!(worst.1 <= 0.0, "{what}: element {i}: {} vs {} (atol {atol}, rtol {rtol})", got[i], want[i]);
}

/// Plans and emits an optimized graph, loads the program in rbuild's runtime with every kernel,
/// runs `forward` on one input and returns output 0 as f32.
pub fn run_emitted(g: &Graph, dtype: rbuild_runtime::ScalarType, sizes: &[usize], input: &[u8]) -> Vec<f32> {
    use rbuild_runtime::backend::BackendRegistry;
    use rbuild_runtime::buffer::AlignedBuf;
    use rbuild_runtime::{KernelContext, Program};
    let p = rbuild_export::plan::plan_memory(g);
    let bytes = rbuild_export::emit::emit(g, &p, "forward").unwrap();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, dtype, sizes, input).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    floats(m.output_bytes(0).unwrap())
}
