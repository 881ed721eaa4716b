//! Bad state dicts and bad requests give errors that name the problem; generated weights are
//! deterministic, fit every model and give logits of a useful size.

mod common;

use common::*;
use rbuild_export::{ExportError, Graph};
use rbuild_models::{build, names, random_weights, Weights};
use rbuild_runtime::ScalarType;

const INPUT: [usize; 4] = [1, 3, 224, 224];

/// `w` without `skip` (Weights has no remove; copy what stays).
fn without(w: &Weights, skip: &str) -> Weights {
    let mut out = Weights::default();
    out.source = w.source.clone();
    for n in w.names() {
        if n != skip {
            let shape = w.shape(n).unwrap().to_vec();
            out.insert(n, ScalarType::Float, &shape, f32_bytes(&w.f32s(n, &shape).unwrap()));
        }
    }
    out
}

/// The error of a build that must fail (without printing a whole graph when it does not).
fn err(r: Result<Graph, ExportError>) -> ExportError {
    match r {
        Ok(g) => panic!("built a graph with {} nodes; expected an error", g.nodes.len()),
        Err(e) => e,
    }
}

fn weight_error(r: Result<Graph, ExportError>) -> (String, String) {
    match err(r) {
        ExportError::Weight { name, message } => (name, message),
        other => panic!("expected a weight error, got {other:?}"),
    }
}

#[test]
fn missing_weight_is_named() {
    let w = without(&random_weights("mobilenet_v2", 1).unwrap(), "features.5.conv.1.1.running_var");
    let (name, message) = weight_error(build("mobilenet_v2", &w, &INPUT));
    assert_eq!(name, "features.5.conv.1.1.running_var");
    assert!(message.contains("missing"), "{message}");
}

#[test]
fn misshaped_weight_is_named_with_both_shapes() {
    let mut w = random_weights("mobilenet_v3_small", 1).unwrap();
    w.insert("features.4.block.1.0.weight", ScalarType::Float, &[96, 1, 3, 3], vec![0; 96 * 9 * 4]);
    let (name, message) = weight_error(build("mobilenet_v3_small", &w, &INPUT));
    assert_eq!(name, "features.4.block.1.0.weight");
    assert!(message.contains("[96, 1, 3, 3]") && message.contains("[96, 1, 5, 5]"), "{message}");
}

#[test]
fn wrong_architecture_is_rejected() {
    // v3 weights for v2: no v2 classifier.
    let (name, message) = weight_error(build("mobilenet_v2", &shared_weights("mobilenet_v3_small"), &INPUT));
    assert_eq!((name.as_str(), message.contains("missing")), ("classifier.1.weight", true));
    // The small and large configurations share names but not structure.
    assert!(build("mobilenet_v3_large", &shared_weights("mobilenet_v3_small"), &INPUT).is_err());
    // A tensor the model never reads.
    let mut w = random_weights("mobilenet_v2", 1).unwrap();
    w.insert("features.19.0.weight", ScalarType::Float, &[4], vec![0; 16]);
    let e = err(build("mobilenet_v2", &w, &INPUT)).to_string();
    assert!(e.contains("features.19.0.weight") && e.contains("not used"), "{e}");
}

#[test]
fn bad_requests_are_errors() {
    let w = random_weights("mobilenet_v2", 1).unwrap();
    let e = err(build("mobilenet_v4", &w, &INPUT)).to_string();
    assert!(names().iter().all(|n| e.contains(n)) && e.contains("mobilenet_v4"), "{e}");
    assert!(random_weights("resnet18", 0).is_err());
    for shape in [&[1, 3, 224][..], &[1, 1, 224, 224], &[0, 3, 224, 224]] {
        let e = err(build("mobilenet_v2", &w, shape)).to_string();
        assert!(e.contains(&format!("{shape:?}")), "{e}");
    }
    // Padding keeps even a 1x1 image valid, as in PyTorch.
    assert!(build("mobilenet_v2", &w, &[1, 3, 1, 1]).is_ok());
}

#[test]
fn class_count_comes_from_the_classifier() {
    let mut w = random_weights("mobilenet_v3_small", 1).unwrap();
    w.insert("classifier.3.weight", ScalarType::Float, &[10, 1024], vec![0; 10 * 1024 * 4]);
    w.insert("classifier.3.bias", ScalarType::Float, &[10], vec![0; 40]);
    let g = build("mobilenet_v3_small", &w, &INPUT).unwrap();
    assert_eq!(output_sizes(&g), [1, 10]);
}

#[test]
fn random_weights_are_deterministic() {
    for name in names() {
        let (a, b) = (random_weights(name, 42).unwrap(), random_weights(name, 42).unwrap());
        let c = random_weights(name, 43).unwrap();
        assert_eq!(a.names(), b.names());
        let mut differs = false;
        for n in a.names() {
            let shape = a.shape(n).unwrap().to_vec();
            let (x, y, z) = (a.f32s(n, &shape).unwrap(), b.f32s(n, &shape).unwrap(), c.f32s(n, &shape).unwrap());
            assert!(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()), "{name} {n} differs between runs");
            differs |= x != z;
        }
        assert!(differs, "{name}: seeds 42 and 43 give the same weights");
    }
}

#[test]
fn random_weights_match_torchvision_names_and_shapes() {
    // The shared files are torchvision state dicts: generated ones must have the same tensors.
    for name in ["mobilenet_v2", "mobilenet_v3_small"] {
        let file = shared_weights(name);
        let gen = random_weights(name, 0).unwrap();
        let want: Vec<&str> = file.names().into_iter().filter(|n| !n.ends_with("num_batches_tracked")).collect();
        assert_eq!(gen.names().into_iter().collect::<Vec<_>>(), want, "{name}");
        for n in want {
            assert_eq!(gen.shape(n), file.shape(n), "{name} {n}");
        }
    }
}

#[test]
fn random_weights_are_well_conditioned() {
    // Another image-like batch than the calibration one, at another size.
    let input = rbuild_models::random::image_like(9, [2, 3, 160, 160]);
    for name in names() {
        let w = random_weights(name, 5).unwrap();
        let g = build(name, &w, &[2, 3, 160, 160]).unwrap();
        assert_eq!(output_sizes(&g), [2, 1000]);
        let logits = run(&g, &input);
        let rms = (logits.iter().map(|v| v * v).sum::<f32>() / logits.len() as f32).sqrt();
        let max = logits.iter().fold(0f32, |m, v| m.max(v.abs()));
        eprintln!("{name}: logits rms {rms}, max {max}");
        assert!(logits.iter().all(|v| v.is_finite()) && (0.5..=10.0).contains(&rms) && max < 40.0, "{name}: rms {rms}, max {max}");
    }
}

/// Learnable parameters (BatchNorm running statistics are buffers).
fn parameter_count(w: &Weights) -> usize {
    w.names()
        .into_iter()
        .filter(|n| !n.contains("running_") && !n.ends_with("num_batches_tracked"))
        .map(|n| w.shape(n).unwrap().iter().product::<usize>())
        .sum()
}

#[test]
fn parameter_counts_match_torchvision() {
    // torchvision's published counts; large has no shared weights file to compare names with.
    for (name, count) in [("mobilenet_v2", 3_504_872), ("mobilenet_v3_small", 2_542_856), ("mobilenet_v3_large", 5_483_032)] {
        assert_eq!(parameter_count(&random_weights(name, 0).unwrap()), count, "{name}");
    }
}
