//! `XnnpackBackend` on every XNNPACK-delegated single-node-kind program of the shared testdata
//! (`xnnpack_ops/`, found by walking the folder, so new cases run without code changes): each
//! output within the case's tolerance of the PyTorch reference (`output.N`); quantized cases
//! (`min_sqnr_db` in their metadata) also within one quantization step of ExecuTorch's own run
//! (`et_output.N`) and above their SQNR floor; 1 and 2 threads giving the same bytes. Prints
//! `xnnpack_ops: N passed, M failed`.
//!
//! `RBUILD_XNNPACK_OPS_FILTER=substring` runs only the cases whose name contains it. A second
//! test compiles (and runs, when small) the payloads with single bytes changed: no panics.

use std::path::{Path, PathBuf};

use rbuild_kernels::xnnpack::XnnpackBackend;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, Program, ScalarType};
use safetensors::{Dtype, SafeTensors};

mod testdata;
mod xnnpack_mutate;
use testdata::{pte_files, testdata};
use xnnpack_mutate::mutate_graph;

fn cases() -> Vec<PathBuf> {
    pte_files(&testdata().join("xnnpack_ops"))
}

fn scalar_type(d: Dtype) -> Result<ScalarType, String> {
    Ok(match d {
        Dtype::F32 => ScalarType::Float,
        Dtype::F16 => ScalarType::Half,
        Dtype::BF16 => ScalarType::BFloat16,
        Dtype::I8 => ScalarType::Char,
        Dtype::U8 => ScalarType::Byte,
        Dtype::I32 => ScalarType::Int,
        Dtype::I64 => ScalarType::Long,
        Dtype::BOOL => ScalarType::Bool,
        d => return Err(format!("dtype {d:?} not handled by the test")),
    })
}

/// Elements as f64.
fn values(dtype: Dtype, data: &[u8]) -> Result<Vec<f64>, String> {
    macro_rules! conv {
        ($t:ty) => {
            data.chunks_exact(std::mem::size_of::<$t>()).map(|c| <$t>::from_le_bytes(c.try_into().unwrap()) as f64).collect()
        };
    }
    Ok(match dtype {
        Dtype::F32 => conv!(f32),
        Dtype::I8 => conv!(i8),
        Dtype::U8 | Dtype::BOOL => conv!(u8),
        Dtype::I32 => conv!(i32),
        Dtype::I64 => conv!(i64),
        Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        d => return Err(format!("dtype {d:?} not handled by the test")),
    })
}

fn backends() -> BackendRegistry {
    let mut b = BackendRegistry::new();
    b.register(Box::new(XnnpackBackend));
    b
}

/// Runs `forward` with every `input.N` of the io file on `threads`; the outputs' bytes.
fn run(pte: &[u8], io: &SafeTensors<'_>, outputs: usize, threads: usize) -> Result<Vec<Vec<u8>>, String> {
    let program = Program::load(pte).map_err(|e| format!("load: {e}"))?;
    let kernels = rbuild_kernels::registry();
    let mut m = program.load_method("forward", &kernels, &backends()).map_err(|e| format!("load_method: {e}"))?;
    let mut i = 0;
    while let Ok(x) = io.tensor(&format!("input.{i}")) {
        m.set_input_tensor(i, scalar_type(x.dtype())?, x.shape(), x.data()).map_err(|e| format!("input {i}: {e:?}"))?;
        i += 1;
    }
    m.execute(&mut KernelContext { threads }).map_err(|e| format!("execute: {e}"))?;
    (0..outputs).map(|j| m.output_bytes(j).map(<[u8]>::to_vec).ok_or_else(|| format!("output {j} is not a tensor"))).collect()
}

/// Signal-to-quantization-noise ratio of `got` against `want`, in dB.
fn sqnr_db(got: &[f64], want: &[f64]) -> f64 {
    let signal: f64 = want.iter().map(|w| w * w).sum();
    let noise: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

/// The largest distance of `got` from ExecuTorch's `et`, in quantization steps (the smallest
/// gap between distinct values ExecuTorch produced; integer outputs: steps of 1).
fn steps_from(got: &[f64], et: &[f64], integer: bool) -> f64 {
    let step = if integer {
        1.0
    } else {
        let mut levels = et.to_vec();
        levels.sort_by(f64::total_cmp);
        levels.dedup();
        levels.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min)
    };
    let worst = got.iter().zip(et).map(|(g, e)| (g - e).abs()).fold(0.0, f64::max);
    if step.is_finite() {
        worst / step
    } else if worst <= 1e-6 {
        0.0
    } else {
        f64::INFINITY
    }
}

fn close(g: f64, w: f64, atol: f64, rtol: f64) -> bool {
    (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()) || (g.is_infinite() && g == w)
}

/// The case's metadata. Python's `json` writes infinite SQNRs as bare `Infinity` (and NaN as
/// `NaN`), which JSON lacks: outside strings those become `null` first.
fn metadata(text: &str) -> Result<serde_json::Value, String> {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else if let Some(word) = ["-Infinity", "Infinity", "NaN"].into_iter().find(|w| rest.starts_with(w)) {
            out.push_str("null");
            rest = &rest[word.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    serde_json::from_str(&out).map_err(|e| e.to_string())
}

fn check_case(pte_path: &Path) -> Result<String, String> {
    let name = pte_path.file_name().unwrap().to_string_lossy().trim_end_matches(".pte").to_string();
    let dir = pte_path.parent().unwrap();
    let meta = metadata(&std::fs::read_to_string(dir.join(format!("{name}.json"))).map_err(|e| e.to_string())?)?;
    let io_bytes = std::fs::read(dir.join(format!("{name}.io.safetensors"))).map_err(|e| e.to_string())?;
    let io = SafeTensors::deserialize(&io_bytes).map_err(|e| e.to_string())?;
    let pte = std::fs::read(pte_path).map_err(|e| e.to_string())?;
    let outputs = (0..).take_while(|j| io.tensor(&format!("output.{j}")).is_ok()).count();
    let got = run(&pte, &io, outputs, 1)?;
    let (atol, rtol) = (meta["atol"].as_f64().unwrap_or(1e-5), meta["rtol"].as_f64().unwrap_or(0.0));
    let quantized = meta.get("min_sqnr_db").and_then(|v| v.as_f64());
    let mut notes = Vec::new();
    for (j, bytes) in got.iter().enumerate() {
        let want = io.tensor(&format!("output.{j}")).map_err(|e| e.to_string())?;
        let dtype = want.dtype();
        let g = values(dtype, bytes)?;
        let w = values(dtype, want.data())?;
        if g.len() != w.len() {
            return Err(format!("output {j}: {} values, the reference has {}", g.len(), w.len()));
        }
        let integer = matches!(dtype, Dtype::I8 | Dtype::U8 | Dtype::I32 | Dtype::I64 | Dtype::BOOL);
        if quantized.is_none() {
            if let Some(i) = (0..g.len()).find(|&i| !if integer { g[i] == w[i] } else { close(g[i], w[i], atol, rtol) }) {
                return Err(format!("output {j}[{i}]: {} vs reference {} (atol {atol}, rtol {rtol})", g[i], w[i]));
            }
            continue;
        }
        // Quantized: ExecuTorch's kernels are the reference for the int8 arithmetic.
        let et = io.tensor(&format!("et_output.{j}")).map_err(|e| e.to_string())?;
        let e = values(et.dtype(), et.data())?;
        let steps = steps_from(&g, &e, integer);
        if steps > 1.01 {
            return Err(format!("output {j}: {steps:.2} quantization steps from ExecuTorch's output"));
        }
        if !integer {
            if let Some(i) = (0..g.len()).find(|&i| !close(g[i], w[i], atol, rtol)) {
                return Err(format!("output {j}[{i}]: {} vs reference {} (atol {atol}, rtol {rtol})", g[i], w[i]));
            }
            let db = sqnr_db(&g, &w);
            if db < quantized.unwrap_or(0.0) {
                return Err(format!("output {j}: SQNR {db:.1} dB below the case's {} dB", quantized.unwrap_or(0.0)));
            }
        }
        notes.push(format!("output {j} within {steps:.2} steps of ExecuTorch"));
    }
    if run(&pte, &io, outputs, 2)? != got {
        return Err(String::from("2 threads give other bytes than 1"));
    }
    Ok(notes.join(", "))
}

#[test]
fn xnnpack_ops_match_reference_and_executorch() {
    let filter = std::env::var("RBUILD_XNNPACK_OPS_FILTER").unwrap_or_default();
    let all = cases();
    assert!(!all.is_empty(), "no programs under shared/testdata/xnnpack_ops");
    let (mut passed, mut failed) = (0, Vec::new());
    for p in all.iter().filter(|p| p.to_string_lossy().contains(&filter)) {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        match std::panic::catch_unwind(|| check_case(p)) {
            Ok(Ok(note)) => {
                passed += 1;
                if !note.is_empty() {
                    eprintln!("{name}: {note}");
                }
            }
            Ok(Err(e)) => failed.push(format!("{name}: {e}")),
            Err(_) => failed.push(format!("{name}: panicked")),
        }
    }
    for f in &failed {
        eprintln!("FAILED {f}");
    }
    eprintln!("xnnpack_ops: {passed} passed, {} failed", failed.len());
    assert!(failed.is_empty(), "{} of {} xnnpack_ops cases failed", failed.len(), passed + failed.len());
}

/// The payloads of `xnnpack_ops/` with single bytes changed (deterministically): each either
/// fails to compile with a message or compiles and runs (small plans, on zeros) — never a
/// panic. A cheap, fixed sample of what the `xnnpack_payload` fuzz target explores.
#[test]
fn mutated_payloads_fail_cleanly_or_run() {
    use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID;
    use rbuild_runtime::format::PteFile;
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let (mut compiled, mut rejected) = (0, 0);
    for p in cases() {
        let bytes = std::fs::read(&p).unwrap();
        let file = PteFile::parse(&bytes).unwrap();
        let named = |key: &str| file.named_data(key).ok().flatten();
        for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
            for d in plan.delegates.as_deref().unwrap_or(&[]).iter().filter(|d| d.id == Some(XNNPACK_BACKEND_ID)) {
                let blob = file.delegate_data(d).unwrap();
                for _ in 0..64 {
                    let mut m = blob.to_vec();
                    let at = next() % m.len();
                    m[at] = next() as u8;
                    let m = &m[..];
                    let named = &named;
                    let r = std::panic::catch_unwind(move || match rbuild_kernels::xnnpack::compile_payload(m, &|key: &str| named(key), 64 << 20) {
                        Ok(mut plan) => {
                            if plan.activation_elements() <= 1 << 20 {
                                let _ = plan.run_in_place(1);
                            }
                            true
                        }
                        Err(e) => {
                            assert!(!e.is_empty());
                            false
                        }
                    });
                    match r {
                        Ok(true) => compiled += 1,
                        Ok(false) => rejected += 1,
                        Err(_) => panic!("{}: byte {at} changed: panicked", p.display()),
                    }
                }
            }
        }
    }
    eprintln!("mutated payloads: {compiled} compiled and ran, {rejected} rejected");
}

/// The payloads of `xnnpack_ops/` with one field of their graph changed (decoded, changed,
/// written again), deterministically: each fails to compile with a message or compiles and
/// runs — never a panic.
#[test]
fn payloads_with_changed_fields_fail_cleanly_or_run() {
    use rbuild_runtime::backends::xnnpack::{parse_payload, write_payload, XNNPACK_BACKEND_ID};
    use rbuild_runtime::format::PteFile;
    let mut seed = 0x2545f4914f6cdd1du64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let (mut compiled, mut rejected) = (0, 0);
    for p in cases() {
        let bytes = std::fs::read(&p).unwrap();
        let file = PteFile::parse(&bytes).unwrap();
        let named = |key: &str| file.named_data(key).ok().flatten();
        for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
            for d in plan.delegates.as_deref().unwrap_or(&[]).iter().filter(|d| d.id == Some(XNNPACK_BACKEND_ID)) {
                let payload = parse_payload(file.delegate_data(d).unwrap()).unwrap();
                for _ in 0..(std::env::var("RBUILD_XNNPACK_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(64)) {
                    let mut g = payload.graph.clone();
                    for _ in 0..1 + next() % 2 {
                        mutate_graph(&mut g, &mut next);
                    }
                    let m = write_payload(&g, payload.constants);
                    let (m, named) = (&m[..], &named);
                    let r = std::panic::catch_unwind(move || match rbuild_kernels::xnnpack::compile_payload(m, &|key: &str| named(key), 64 << 20) {
                        Ok(mut plan) => {
                            if plan.activation_elements() <= 1 << 20 {
                                let _ = plan.run_in_place(1);
                            }
                            true
                        }
                        Err(e) => {
                            assert!(!e.is_empty());
                            false
                        }
                    });
                    match r {
                        Ok(true) => compiled += 1,
                        Ok(false) => rejected += 1,
                        Err(_) => panic!("{}: graph {g:?}: panicked", p.display()),
                    }
                }
            }
        }
    }
    eprintln!("changed payloads: {compiled} compiled and ran, {rejected} rejected");
}
