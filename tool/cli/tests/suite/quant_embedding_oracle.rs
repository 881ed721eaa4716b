//! `quantized_decomposed::embedding_byte` / `embedding_4bit`: rbuild's kernels against
//! ExecuTorch 1.3.1 bit for bit, on small programs holding one lookup each (per-row and grouped
//! scales, with and without zero points, Char and Byte tables, 1-D and 2-D indices). Needs the
//! oracle venv (skipped locally without it, required in CI).

use crate::common;

use rbuild_export::graph::{Arg, TensorMeta};
use rbuild_export::{emit, passes, plan, ConstData, GraphBuilder};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Program, ScalarType};

struct Case {
    label: &'static str,
    op: &'static str,
    table: ScalarType,
    rows: usize,
    dim: usize,
    groups: Option<usize>,
    zero_points: bool,
    indices: Vec<usize>,
}

fn lcg(seed: &mut u64) -> u32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*seed >> 33) as u32
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The program's bytes and the index input.
fn program(c: &Case, seed: &mut u64) -> (Vec<u8>, Vec<i64>) {
    let mut b = GraphBuilder::new();
    let idx = b.input("indices", TensorMeta::fixed(ScalarType::Long, &c.indices));
    let packed = if c.op.ends_with("4bit") { c.dim / 2 } else { c.dim };
    let table: Vec<u8> = (0..c.rows * packed).map(|_| lcg(seed) as u8).collect();
    let t = b.constant("table", c.table, &[c.rows, packed], ConstData::owned(table)).unwrap();
    let sshape: Vec<usize> = match c.groups {
        Some(g) => vec![c.rows, g],
        None => vec![c.rows],
    };
    let n: usize = sshape.iter().product();
    // Scales with full mantissas, so any difference in arithmetic shows.
    let scales: Vec<f32> = (0..n).map(|_| 1e-3 + (lcg(seed) % 100_000) as f32 * 1.37e-7).collect();
    let s = b.constant("scales", ScalarType::Float, &sshape, ConstData::owned(f32_bytes(&scales))).unwrap();
    let zp = if c.zero_points {
        let z: Vec<f32> = (0..n).map(|_| (lcg(seed) % 9) as f32 - 4.0).collect();
        Arg::Tensor(b.constant("zero_points", ScalarType::Float, &sshape, ConstData::owned(f32_bytes(&z))).unwrap())
    } else {
        Arg::None
    };
    let (lo, hi) = if c.op.ends_with("4bit") { (-8, 7) } else { (-128, 127) };
    let y = b.call1(c.op, vec![Arg::Tensor(t), Arg::Tensor(s), zp, Arg::Int(lo), Arg::Int(hi), Arg::Tensor(idx)]).unwrap();
    b.output(y);
    let mut g = b.finish();
    passes::optimize(&mut g).unwrap();
    let p = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &p, "forward").unwrap();
    let n_idx: usize = c.indices.iter().product();
    let ids = (0..n_idx).map(|_| (lcg(seed) as usize % c.rows) as i64).collect();
    (bytes, ids)
}

fn run_rbuild(bytes: &[u8], sizes: &[usize], ids: &[i64]) -> Vec<u8> {
    let buf = AlignedBuf::from_bytes(bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    let input: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Long, sizes, &input).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    m.output_bytes(0).unwrap().to_vec()
}

fn run_executorch(python: &std::path::Path, dir: &std::path::Path, label: &str, bytes: &[u8], sizes: &[usize], ids: &[i64]) -> Vec<u8> {
    let pte = dir.join(format!("{label}.pte"));
    std::fs::write(&pte, bytes).unwrap();
    let raw: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (dtype, out) = common::et_run_one(python, &pte, (safetensors::Dtype::I64, sizes.to_vec(), &raw), dir, label);
    assert_eq!(dtype, safetensors::Dtype::F32, "{label}");
    out
}

#[test]
fn quantized_embeddings_match_executorch_bit_for_bit() {
    let Some(python) = common::oracle_python() else { return };
    let cases = [
        Case { label: "byte_char_per_row", op: "quantized_decomposed::embedding_byte", table: ScalarType::Char, rows: 7, dim: 12, groups: None, zero_points: false, indices: vec![5] },
        Case { label: "byte_char_groups_zp", op: "quantized_decomposed::embedding_byte", table: ScalarType::Char, rows: 9, dim: 12, groups: Some(3), zero_points: true, indices: vec![1, 6] },
        Case { label: "byte_uint8_groups", op: "quantized_decomposed::embedding_byte", table: ScalarType::Byte, rows: 5, dim: 16, groups: Some(2), zero_points: true, indices: vec![2, 3] },
        Case { label: "4bit_per_row", op: "quantized_decomposed::embedding_4bit", table: ScalarType::Byte, rows: 6, dim: 10, groups: None, zero_points: false, indices: vec![4] },
        Case { label: "4bit_g32", op: "quantized_decomposed::embedding_4bit", table: ScalarType::Byte, rows: 11, dim: 64, groups: Some(2), zero_points: false, indices: vec![1, 8] },
        Case { label: "4bit_g4_zp", op: "quantized_decomposed::embedding_4bit", table: ScalarType::Byte, rows: 4, dim: 16, groups: Some(4), zero_points: true, indices: vec![3, 2] },
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut seed = 12345u64;
    for c in &cases {
        let (bytes, ids) = program(c, &mut seed);
        let ours = run_rbuild(&bytes, &c.indices, &ids);
        let theirs = run_executorch(&python, dir.path(), c.label, &bytes, &c.indices, &ids);
        assert_eq!(ours.len(), theirs.len(), "{}: output sizes differ", c.label);
        assert!(ours == theirs, "{}: outputs differ bit for bit (ids {ids:?})", c.label);
        assert!(ours.chunks_exact(4).any(|b| f32::from_le_bytes(b.try_into().unwrap()) != 0.0), "{}: all zeros", c.label);
    }
}
