//! The models, built from the shared torchvision state dicts, consume every weight, have the
//! expected structure, and compute PyTorch's logits on the shared reference input, both by eager
//! evaluation of the graph and as an emitted program run in rbuild's runtime.

mod common;

use common::*;
use rbuild_export::{passes, Graph};
use rbuild_models::{build, Weights};
use rbuild_runtime::ScalarType;

const INPUT: [usize; 4] = [1, 3, 224, 224];

/// The reference input, PyTorch's logits and the tolerances of `model.json`.
fn reference(name: &str) -> (Vec<f32>, Vec<f32>, f32, f32) {
    let io = Weights::open(&model_dir(name).join("model.io.safetensors")).unwrap();
    let json = std::fs::read_to_string(model_dir(name).join("model.json")).unwrap();
    (io.f32s("input.0", &INPUT).unwrap(), io.f32s("output.0", &[1, 1000]).unwrap(), json_number(&json, "atol"), json_number(&json, "rtol"))
}

/// Graph evaluation and the emitted program both reproduce PyTorch's logits.
fn check_against_pytorch(name: &str, g: &Graph) {
    let (input, want, atol, rtol) = reference(name);
    assert_close(&run(g, &input), &want, atol, rtol, &format!("{name} eager graph vs PyTorch"));

    let mut g = g.clone();
    passes::optimize(&mut g).unwrap();
    let got = run_emitted(&g, ScalarType::Float, &INPUT, &f32_bytes(&input));
    assert_close(&got, &want, atol, rtol, &format!("{name} emitted program vs PyTorch"));
}

#[test]
fn mobilenet_v2_matches_pytorch() {
    let w = shared_weights("mobilenet_v2");
    let g = build("mobilenet_v2", &w, &INPUT).unwrap();
    assert_eq!(output_sizes(&g), [1, 1000]);
    // Stem + 17 blocks (the first without expansion) + head; 10 blocks keep their shape.
    assert_eq!(count(&g, "aten::convolution"), 1 + 2 + 16 * 3 + 1);
    assert_eq!(count(&g, "aten::_native_batch_norm_legit_no_training"), 52);
    assert_eq!(count(&g, "aten::hardtanh"), 1 + 1 + 16 * 2 + 1);
    assert_eq!(count(&g, "aten::add.Tensor"), 10);
    assert_eq!(
        g.ops(),
        [
            "aten::_native_batch_norm_legit_no_training",
            "aten::adaptive_avg_pool2d",
            "aten::add.Tensor",
            "aten::convolution",
            "aten::dropout",
            "aten::flatten.using_ints",
            "aten::hardtanh",
            "aten::linear",
        ]
    );
    check_against_pytorch("mobilenet_v2", &g);
}

#[test]
fn mobilenet_v3_small_matches_pytorch() {
    let w = shared_weights("mobilenet_v3_small");
    let g = build("mobilenet_v3_small", &w, &INPUT).unwrap();
    assert_eq!(output_sizes(&g), [1, 1000]);
    // Stem, block 1 (dw, SE, project), blocks 2-3 (expand, dw, project), blocks 4-11 (with SE), head.
    assert_eq!(count(&g, "aten::convolution"), 1 + 4 + 2 * 3 + 8 * 5 + 1);
    assert_eq!(count(&g, "aten::_native_batch_norm_legit_no_training"), 1 + 2 + 2 * 3 + 8 * 3 + 1);
    assert_eq!(count(&g, "aten::hardsigmoid"), 9);
    assert_eq!(count(&g, "aten::mul.Tensor"), 9);
    assert_eq!(count(&g, "aten::hardswish"), 1 + 8 * 2 + 1 + 1);
    assert_eq!(count(&g, "aten::relu"), 9 + 1 + 2 * 2);
    assert_eq!(count(&g, "aten::add.Tensor"), 6);
    assert_eq!(count(&g, "aten::linear"), 2);
    check_against_pytorch("mobilenet_v3_small", &g);
}

#[test]
fn other_input_sizes_build() {
    let w = shared_weights("mobilenet_v2");
    let g = build("mobilenet_v2", &w, &[2, 3, 160, 128]).unwrap();
    assert_eq!(output_sizes(&g), [2, 1000]);
    let w = shared_weights("mobilenet_v3_small");
    let g = build("mobilenet_v3_small", &w, &[3, 3, 96, 96]).unwrap();
    assert_eq!(output_sizes(&g), [3, 1000]);
}
