//! Static int8 MobileNetV2 (testdata weights, calibrated on the testdata images): the fused
//! program (rbuild's int8 kernels) against the reference representation run in rbuild and in
//! ExecuTorch 1.3.1, top-1 against fp32 on every image, sizes and SQNR; ExecuTorch's own int8
//! program still runs.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use rbuild_export::passes::{self, quantize_static::ActQ, Int8Stage};
use rbuild_export::weights::Weights;
use rbuild_export::{emit, plan};
use rbuild_image_classifier::{decode, preprocess};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Program, ScalarType};

struct Programs {
    fp32: Vec<u8>,
    reference: Vec<u8>,
    fused: Vec<u8>,
    /// The logits' int8 parameters (both int8 programs end with the same dequantize).
    out_q: ActQ,
    /// (image name, preprocessed float input bytes).
    images: Vec<(String, Vec<u8>)>,
}

fn image_files() -> Vec<PathBuf> {
    let dir = common::testdata().join("models/images");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "png" || x == "jpg" || x == "jpeg"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no images in {}", dir.display());
    files
}

fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let weights = Weights::open(&common::testdata().join("models/mobilenet_v2/model.safetensors")).unwrap();
        let build = || rbuild_models::build("mobilenet_v2", &weights, &[1, 3, 224, 224]).unwrap();
        let images: Vec<(String, Vec<u8>)> = image_files()
            .iter()
            .map(|p| {
                let img = decode::decode_image(&std::fs::read(p).unwrap()).unwrap();
                let x = preprocess::imagenet_eval(&img, 224, 224);
                (p.file_name().unwrap().to_string_lossy().into_owned(), x.iter().flat_map(|v| v.to_le_bytes()).collect())
            })
            .collect();
        let samples: Vec<Vec<Vec<u8>>> = images.iter().map(|(_, x)| vec![x.clone()]).collect();
        let emit_graph = |g: &rbuild_export::Graph| emit::emit(g, &plan::plan_memory(g), "forward").unwrap();

        let mut g = build();
        passes::optimize(&mut g).unwrap();
        let fp32 = emit_graph(&g);
        let mut g = build();
        let (_, r) = passes::optimize_int8(&mut g, &samples, Int8Stage::Reference).unwrap();
        let reference = emit_graph(&g);
        let out_q = r.quant.output_qparams[0].expect("quantized logits");
        let mut g = build();
        let (_, f) = passes::optimize_int8(&mut g, &samples, Int8Stage::Fused).unwrap();
        let fused = emit_graph(&g);
        assert_eq!(f.quant.output_qparams[0], Some(out_q), "both int8 programs must share the logits' parameters");
        let fuse = f.fuse.unwrap();
        eprintln!("fused: {:?}, unfused quantize nodes: {}", fuse.fused, fuse.unfused);
        // Everything but the input's quantize fuses: 52 convolutions, 10 adds, mean, linear.
        assert_eq!(fuse.fused.get("rbuild::qconv2d"), Some(&52), "{fuse:?}");
        assert_eq!(fuse.fused.get("rbuild::qadd"), Some(&10), "{fuse:?}");
        assert_eq!(fuse.fused.get("rbuild::qmean_hw"), Some(&1), "{fuse:?}");
        assert_eq!(fuse.fused.get("rbuild::qlinear"), Some(&1), "{fuse:?}");
        assert_eq!(fuse.unfused, 1, "only the program input's quantize stays: {fuse:?}");
        Programs { fp32, reference, fused, out_q, images }
    })
}

fn run(bytes: &[u8], input: &[u8]) -> Vec<f32> {
    let buf = AlignedBuf::from_bytes(bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    m.set_input_tensor(0, ScalarType::Float, &[1, 3, 224, 224], input).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    m.output_bytes(0).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Dequantized logits back to their int8 codes (exact: each is `(q − zp) · scale`).
fn codes(q: ActQ, logits: &[f32]) -> Vec<i32> {
    logits.iter().map(|&y| q.quantize(y) as i32).collect()
}

fn max_lsb(a: &[i32], b: &[i32]) -> i32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).max().unwrap()
}

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0
}

fn sqnr_db(reference: &[f32], test: &[f32]) -> f64 {
    let signal: f64 = reference.iter().map(|&x| (x as f64).powi(2)).sum();
    let noise: f64 = reference.iter().zip(test).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
    10.0 * (signal / noise.max(1e-30)).log10()
}

#[test]
fn fused_matches_reference_representation_within_one_lsb() {
    let p = programs();
    for (name, x) in &p.images {
        let reference = codes(p.out_q, &run(&p.reference, x));
        let fused = codes(p.out_q, &run(&p.fused, x));
        let d = max_lsb(&reference, &fused);
        let n_off = reference.iter().zip(&fused).filter(|(a, b)| a != b).count();
        eprintln!("{name}: fused vs reference (rbuild): max {d} LSB, {n_off}/1000 logits differ");
        assert!(d <= 1, "{name}: fused and reference int8 logits differ by {d} LSB");
    }
}

#[test]
fn reference_program_in_executorch_within_one_lsb_of_fused() {
    let Some(python) = common::oracle_python() else { return };
    let p = programs();
    let dir = tempfile::tempdir().unwrap();
    let pte = dir.path().join("mv2.int8.reference.pte");
    std::fs::write(&pte, &p.reference).unwrap();
    for (name, x) in &p.images {
        let inp = dir.path().join("in.safetensors");
        let out = dir.path().join("out.safetensors");
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 3, 224, 224], x).unwrap();
        std::fs::write(&inp, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
        let r = std::process::Command::new(&python)
            .arg(common::repo().join("tool/python/et_run.py"))
            .args([&pte, &inp])
            .arg("input.0")
            .arg(&out)
            .output()
            .unwrap();
        assert!(r.status.success(), "ExecuTorch failed on the reference program:\n{}", String::from_utf8_lossy(&r.stderr));
        let data = std::fs::read(&out).unwrap();
        let st = safetensors::SafeTensors::deserialize(&data).unwrap();
        let et: Vec<f32> = st.tensor("output.0").unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let et_codes = codes(p.out_q, &et);
        let ours_ref = codes(p.out_q, &run(&p.reference, x));
        let fused = codes(p.out_q, &run(&p.fused, x));
        let (d_fused, d_ref) = (max_lsb(&et_codes, &fused), max_lsb(&et_codes, &ours_ref));
        eprintln!("{name}: ExecuTorch 1.3.1 reference vs rbuild fused: max {d_fused} LSB; vs rbuild reference: max {d_ref} LSB");
        assert!(d_fused <= 1, "{name}: ExecuTorch's run of the reference program differs from our fused run by {d_fused} LSB");
    }
}

#[test]
fn int8_top1_equals_fp32_top1_on_every_image() {
    let p = programs();
    for (name, x) in &p.images {
        let f = run(&p.fp32, x);
        let q = run(&p.fused, x);
        eprintln!("{name}: fp32 top-1 {}, int8 top-1 {}, SQNR {:.1} dB", argmax(&f), argmax(&q), sqnr_db(&f, &q));
        assert_eq!(argmax(&q), argmax(&f), "{name}: int8 top-1 differs from fp32");
    }
}

#[test]
fn int8_size_and_sqnr_vs_fp32() {
    let p = programs();
    eprintln!(
        "program sizes: fp32 {} bytes, int8 reference {} bytes, int8 fused {} bytes ({:.2}x smaller than fp32)",
        p.fp32.len(),
        p.reference.len(),
        p.fused.len(),
        p.fp32.len() as f64 / p.fused.len() as f64
    );
    assert!(p.fused.len() * 3 < p.fp32.len(), "int8 program should be under a third of fp32");
    assert!(p.reference.len() * 3 < p.fp32.len(), "reference weights are int8 too");
    for (name, x) in &p.images {
        let s = sqnr_db(&run(&p.fp32, x), &run(&p.fused, x));
        eprintln!("{name}: SQNR int8 fused vs fp32 logits: {s:.1} dB");
        // ExecuTorch's own int8 program of this model reaches 10.8 dB against fp32 (testdata json).
        assert!(s > 10.0, "{name}: SQNR {s:.1} dB");
    }
}

#[test]
fn executorch_int8_program_still_runs() {
    let pte = common::testdata().join("models/mobilenet_v2/model.int8.pte");
    let io = std::fs::read(common::case_io(&pte)).unwrap();
    let st = safetensors::SafeTensors::deserialize(&io).unwrap();
    let input = st.tensor("input.0").unwrap().data().to_vec();
    let et: Vec<f32> = st.tensor("et_output.0").unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let ours = run(&std::fs::read(&pte).unwrap(), &input);
    let s = sqnr_db(&et, &ours);
    eprintln!("ExecuTorch's model.int8.pte in rbuild vs ExecuTorch 1.5.1's output: SQNR {s:.1} dB, top-1 {} vs {}", argmax(&ours), argmax(&et));
    assert_eq!(argmax(&ours), argmax(&et));
    assert!(s > 20.0, "SQNR {s:.1} dB");
}

#[test]
fn cli_exports_int8_with_calibration_folder_and_rejects_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mv2.int8.pte");
    let weights = common::testdata().join("models/mobilenet_v2/model.safetensors");
    let images = common::testdata().join("models/images");
    let bin = env!("CARGO_BIN_EXE_rbuild");
    let r = std::process::Command::new(bin)
        .args(["export", "--model", "mobilenet_v2", "--quant", "int8", "--weights"])
        .arg(&weights)
        .arg("--calibration")
        .arg(&images)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout).into_owned() + &String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{text}");
    assert!(text.contains("rbuild::qconv2d x52") && text.contains("calibration: 3 sample(s)"), "{text}");
    assert!(std::fs::metadata(&out).unwrap().len() > 3_000_000);

    // Random calibration is announced; --reference-only keeps ExecuTorch's representation.
    let r = std::process::Command::new(bin)
        .args(["export", "--model", "mobilenet_v2", "--quant", "int8", "--reference-only", "--random-weights", "1", "--out"])
        .arg(dir.path().join("ref.pte"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(r.status.success() && text.contains("seeded random inputs") && !text.contains("fuse_int8"), "{text}");

    for (args, want) in [
        (vec!["--quant", "int4"], "image models take fp32 or int8"),
        (vec!["--calibration", "/nonexistent"], "go with --quant int8"),
    ] {
        let r = std::process::Command::new(bin)
            .args(["export", "--model", "mobilenet_v2", "--random-weights", "1", "--out"])
            .arg(dir.path().join("x.pte"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success() && err.contains(want), "{args:?}: {err}");
    }
    let r = std::process::Command::new(bin)
        .args(["export", "--model", "mobilenet_v2", "--random-weights", "1", "--quant", "int8", "--calibration", "/nonexistent/dir", "--out"])
        .arg(dir.path().join("x.pte"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("/nonexistent/dir"), "{err}");
}
