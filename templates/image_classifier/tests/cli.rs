//! The built binary end to end: MobileNet V2 (portable ExecuTorch program) on the test cards,
//! against the PyTorch logits; and failures that must be clean errors naming the file.

use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::testdata;

use safetensors::SafeTensors;

const BIN: &str = env!("CARGO_BIN_EXE_image_classifier");
fn model() -> String {
    testdata("models/mobilenet_v2/model.pte")
}

fn image(case: &str) -> String {
    testdata(&format!("models/images/{case}.png"))
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run image_classifier")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `rank index label probability` rows (labels may contain spaces).
fn rows(out: &str) -> Vec<(usize, usize, String, f64)> {
    out.lines()
        .filter(|l| !l.starts_with("latency"))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let n = f.len();
            assert!(n >= 4, "row {l:?}");
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2..n - 1].join(" "), f[n - 1].parse().unwrap())
        })
        .collect()
}

/// Top-5 (index, probability) of softmax(`output.0`) in `models/<model>/model.io.safetensors`:
/// the PyTorch logits for the `pil.normalized` input of one test card.
fn reference_top5(model: &str) -> Vec<(usize, f64)> {
    let bytes = std::fs::read(testdata(&format!("models/{model}/model.io.safetensors"))).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let logits: Vec<f64> = st
        .tensor("output.0")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
        .collect();
    let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logits.iter().map(|v| (v - max).exp()).sum();
    let mut p: Vec<(usize, f64)> = logits.iter().map(|v| (v - max).exp() / sum).enumerate().collect();
    p.sort_by(|a, b| b.1.total_cmp(&a.1));
    p.truncate(5);
    p
}

fn assert_clean_failure(o: &Output, names: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, stdout: {}", stdout(o));
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(names), "stderr should name {names}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The printed top-5 equals PyTorch's on the reference input (indices exact, probabilities 1e-4).
fn assert_top5_matches_pytorch(model: &str, case: &str) {
    let program = testdata(&format!("models/{model}/model.pte"));
    let o = run(&["--model", &program, "--image", &image(case), "--repeat", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = rows(&stdout(&o));
    let want = reference_top5(model);
    assert_eq!(got.len(), 5);
    for (r, ((rank, index, label, p), (wi, wp))) in got.iter().zip(&want).enumerate() {
        assert_eq!((*rank, *index), (r + 1, *wi), "rank {} of\n{}", r + 1, stdout(&o));
        assert_eq!(label, &wi.to_string());
        assert!((p - wp).abs() <= 1e-4, "index {index}: probability {p} vs PyTorch {wp}");
    }
    assert!(stdout(&o).contains("median"), "latency line missing");
}

#[test]
fn img2_top5_matches_pytorch() {
    assert_top5_matches_pytorch("mobilenet_v2", "img2_shapes_w300_h300");
}

#[test]
fn img3_top5_matches_pytorch_on_mobilenet_v3_small() {
    assert_top5_matches_pytorch("mobilenet_v3_small", "img3_wide_w480_h360");
}

#[test]
fn other_images_give_five_rows() {
    for case in ["img1_gradients_w320_h256", "img3_wide_w480_h360"] {
        let o = run(&["--model", &model(), "--image", &image(case)]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let rows = rows(&stdout(&o));
        assert_eq!(rows.len(), 5, "{case}");
        assert!(rows.windows(2).all(|w| w[0].3 >= w[1].3), "{case}: not sorted");
    }
}

#[test]
fn json_and_labels() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("image_classifier_labels");
    std::fs::create_dir_all(&dir).unwrap();
    let labels = dir.join("labels.txt");
    let text: String = (0..1000).map(|i| format!("class number {i}\n")).collect();
    std::fs::write(&labels, text).unwrap();
    let o = run(&[
        "--model",
        &model(),
        "--image",
        &image("img2_shapes_w300_h300"),
        "--labels",
        labels.to_str().unwrap(),
        "--top",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let top = v["top"].as_array().unwrap();
    assert_eq!(top.len(), 3);
    let want = reference_top5("mobilenet_v2");
    assert_eq!(top[0]["index"].as_u64(), Some(want[0].0 as u64));
    assert_eq!(top[0]["label"].as_str(), Some(format!("class number {}", want[0].0).as_str()));
    assert!((top[0]["probability"].as_f64().unwrap() - want[0].1).abs() <= 1e-4);
    assert_eq!(v["input_shape"], serde_json::json!([1, 3, 224, 224]));
    assert!(v["latency_ms"]["median"].as_f64().unwrap() > 0.0);

    // A label file that does not fit the model is an error naming it.
    std::fs::write(&labels, "a\nb\n").unwrap();
    let o =
        run(&["--model", &model(), "--image", &image("img2_shapes_w300_h300"), "--labels", labels.to_str().unwrap()]);
    assert_clean_failure(&o, labels.to_str().unwrap());
}

#[test]
fn list_kernels_prints_the_table() {
    let o = run(&["--list-kernels"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: Vec<String> = stdout(&o).lines().map(String::from).collect();
    let want: Vec<String> = rbuild_image_classifier::kernels::OPS.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, want);
}

fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("image_classifier_bad");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn bad_inputs_fail_cleanly_naming_the_file() {
    let missing = "/nonexistent/photo.png";
    assert_clean_failure(&run(&["--model", &model(), "--image", missing]), missing);
    let missing_model = "/nonexistent/model.pte";
    assert_clean_failure(
        &run(&["--model", missing_model, "--image", &image("img1_gradients_w320_h256")]),
        missing_model,
    );

    let text = scratch("notes.png", b"this is not an image\n");
    assert_clean_failure(&run(&["--model", &model(), "--image", text.to_str().unwrap()]), text.to_str().unwrap());

    let png = std::fs::read(image("img2_shapes_w300_h300")).unwrap();
    let truncated = scratch("truncated.png", &png[..png.len() / 2]);
    assert_clean_failure(
        &run(&["--model", &model(), "--image", truncated.to_str().unwrap()]),
        truncated.to_str().unwrap(),
    );

    let jpeg = scratch("truncated.jpg", &[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F']);
    assert_clean_failure(&run(&["--model", &model(), "--image", jpeg.to_str().unwrap()]), jpeg.to_str().unwrap());

    // A PNG given as the program.
    let img = image("img1_gradients_w320_h256");
    assert_clean_failure(&run(&["--model", &img, "--image", &img]), &img);
    for bad in ["truncated_mid_flatbuffer.pte", "random_bytes.pte", "empty.pte"] {
        let p = testdata(&format!("bad/{bad}"));
        assert_clean_failure(&run(&["--model", &p, "--image", &img]), &p);
    }
}

#[test]
fn model_is_required_without_an_embedded_program() {
    if cfg!(feature = "embed-program") {
        return; // the binary may carry a program
    }
    let o = run(&["--image", &image("img1_gradients_w320_h256")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--model"), "{}", stderr(&o));
}

/// `--verify-input`: the protocol lines `rbuild verify` reads, on the shared MobileNetV2 input.
#[test]
fn verify_input_prints_outputs_in_the_protocol() {
    let io = testdata("models/mobilenet_v2/model.io.safetensors");
    let o = run(&["--model", &model(), "--verify-input", &io]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let hex = lines[0].strip_prefix("RBUILD_OUTPUT index=0 dtype=float32 shape=1,1000 hex=").unwrap_or_else(|| panic!("{}", &lines[0][..80]));
    assert_eq!(hex.len(), 8000);
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let got: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let file = std::fs::read(&io).unwrap();
    let want: Vec<f32> = SafeTensors::deserialize(&file).unwrap().tensor("output.0").unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let max = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(max < 1e-3, "max |diff| vs PyTorch {max}");
    assert!(lines[1].starts_with("RBUILD_STATS elapsed_us="), "{}", lines[1]);

    // A file without input.0, or not safetensors at all: a clean error naming it.
    let weights = testdata("models/mobilenet_v2/model.safetensors");
    assert_clean_failure(&run(&["--model", &model(), "--verify-input", &weights]), &weights);
    let img = image("img1_gradients_w320_h256");
    assert_clean_failure(&run(&["--model", &model(), "--verify-input", &img]), &img);
}
