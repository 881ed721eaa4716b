//! The XNNPACK payload decoder on every XNNPACK-delegated program of the shared testdata (found
//! by walking `models/`), and on malformed payloads derived from them: each must fail with a
//! message, never panic.

use std::path::{Path, PathBuf};

use rbuild_runtime::backends::xnnpack::{parse_payload, split_payload, NodeKind, Quant, Scales, XnnDatatype, XNNPACK_BACKEND_ID};
use rbuild_runtime::format::PteFile;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata")
}

fn pte_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pte_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "pte") {
            out.push(p);
        }
    }
}

/// (program path, program bytes, each XNNPACK delegate's processed blob range in the file).
fn xnnpack_programs() -> Vec<(PathBuf, Vec<u8>)> {
    xnnpack_programs_in("models")
}

/// The XNNPACK-delegated programs under `testdata/<folder>`.
fn xnnpack_programs_in(folder: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    pte_files(&testdata().join(folder), &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let bytes = std::fs::read(&p).ok()?;
            let file = PteFile::parse(&bytes).ok()?;
            let has = file.program.execution_plan.as_deref()?.iter().any(|plan| {
                plan.delegates.as_deref().unwrap_or(&[]).iter().any(|d| d.id == Some(XNNPACK_BACKEND_ID))
            });
            has.then_some((p, bytes))
        })
        .collect()
}

fn blobs(bytes: &[u8]) -> Vec<Vec<u8>> {
    let file = PteFile::parse(bytes).unwrap();
    let mut out = Vec::new();
    for plan in file.program.execution_plan.as_deref().unwrap() {
        for d in plan.delegates.as_deref().unwrap_or(&[]) {
            if d.id == Some(XNNPACK_BACKEND_ID) {
                out.push(file.delegate_data(d).unwrap().to_vec());
            }
        }
    }
    out
}

#[test]
fn every_xnnpack_program_in_testdata_decodes() {
    let programs = xnnpack_programs();
    assert!(programs.len() >= 4, "expected the MobileNet XNNPACK programs under {}", testdata().display());
    for (path, bytes) in &programs {
        let file = PteFile::parse(bytes).unwrap();
        for blob in blobs(bytes) {
            let p = parse_payload(&blob).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let g = &p.graph;
            assert!(!g.nodes.is_empty() && !g.values.is_empty(), "{}", path.display());
            assert_eq!(g.num_externs as usize, g.input_ids.len() + g.output_ids.len(), "{}", path.display());
            // Every constant with a key resolves in the program's named data; scale buffers too.
            for (i, c) in g.constants.iter().enumerate().skip(1) {
                match &c.named_key {
                    Some(k) => {
                        let data = file.named_data(k).unwrap().unwrap_or_else(|| panic!("{}: constant {i}: key {k} missing", path.display()));
                        assert!(data.len() as u64 >= c.size, "{}: constant {i} shorter than declared", path.display());
                    }
                    None => assert!(c.offset + c.size <= p.constants.len() as u64),
                }
            }
            for v in &g.values {
                if let Quant::PerChannel { scales: Scales::Buffer { index, count }, .. } = &v.quant {
                    assert!(g.constants[*index as usize].size >= 4 * *count as u64);
                }
            }
            let convs = g.nodes.iter().filter(|n| n.kind == NodeKind::Conv2d).count();
            assert!(convs > 10, "{}: {convs} Conv2d nodes", path.display());
            let int8 = path.to_string_lossy().contains("int8");
            assert_eq!(g.values.iter().any(|v| v.datatype == XnnDatatype::QcInt8), int8, "{}", path.display());
        }
    }
}

/// Every prefix of a payload either decodes or fails with a message (no panic).
#[test]
fn truncated_payloads_fail_cleanly() {
    let (_, bytes) = &xnnpack_programs()[0];
    let blob = &blobs(bytes)[0];
    let (fb, _) = split_payload(blob).unwrap();
    let fb_end = 32 + fb.len();
    let mut failed = 0;
    for cut in (0..fb_end).step_by(97).chain([4, 8, 29, 31]) {
        if parse_payload(&blob[..cut]).is_err() {
            failed += 1;
        }
    }
    assert!(failed > 0);
    let e = parse_payload(&blob[..fb_end - 1]).err().expect("flatbuffer cut by one byte");
    assert!(e.contains("extends past") || e.contains("truncated"), "{e}");
}

fn patch_u32(blob: &mut [u8], at: usize, v: u32) {
    blob[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn header_offsets_out_of_range_fail_cleanly() {
    let (_, bytes) = &xnnpack_programs()[0];
    let blob = blobs(bytes).remove(0);
    for (field, value) in [(10usize, u32::MAX), (14, u32::MAX - 1), (18, 1 << 30), (10, 0), (14, 3)] {
        let mut b = blob.clone();
        patch_u32(&mut b, field, value);
        let e = parse_payload(&b).err().unwrap_or_else(|| panic!("header field at {field} = {value} accepted"));
        assert!(e.starts_with("XNNPACK payload"), "{e}");
    }
    // Flatbuffer and constant offsets swapped.
    let mut b = blob.clone();
    let (fo, co) = (u32::from_le_bytes(b[10..14].try_into().unwrap()), u32::from_le_bytes(b[18..22].try_into().unwrap()));
    patch_u32(&mut b, 10, co);
    patch_u32(&mut b, 18, fo);
    assert!(parse_payload(&b).is_err());
}

/// Walks the flatbuffer by hand to the first node's union tag and the first Conv2d's input id.
fn node_fields(fb: &[u8]) -> (usize, usize) {
    let u32_at = |p: usize| u32::from_le_bytes(fb[p..p + 4].try_into().unwrap()) as usize;
    let u16_at = |p: usize| u16::from_le_bytes(fb[p..p + 2].try_into().unwrap()) as usize;
    let field = |table: usize, slot: usize| {
        let vt = (table as i64 - i32::from_le_bytes(fb[table..table + 4].try_into().unwrap()) as i64) as usize;
        let off = if 4 + 2 * slot < u16_at(vt) { u16_at(vt + 4 + 2 * slot) } else { 0 };
        assert!(off != 0);
        table + off
    };
    let root = u32_at(0);
    let nodes_f = field(root, 1);
    let nodes = nodes_f + u32_at(nodes_f);
    let first = nodes + 4 + u32_at(nodes + 4);
    let tag_pos = field(first, 0);
    // The first Conv2d (tag 7) among the nodes, and its input1_id (slot 15).
    let n = u32_at(nodes);
    for i in 0..n {
        let node = nodes + 4 + 4 * i + u32_at(nodes + 4 + 4 * i);
        if fb[field(node, 0)] == 7 {
            let body_f = field(node, 1);
            let body = body_f + u32_at(body_f);
            return (tag_pos, field(body, 15));
        }
    }
    panic!("no Conv2d");
}

#[test]
fn unknown_node_kind_and_bad_value_ids_fail_naming_them() {
    let (_, bytes) = &xnnpack_programs()[0];
    let blob = blobs(bytes).remove(0);
    let fb_off = u32::from_le_bytes(blob[10..14].try_into().unwrap()) as usize;
    let (tag_pos, input_pos) = node_fields(&blob[fb_off..]);

    let mut b = blob.clone();
    b[fb_off + tag_pos] = 200;
    let e = parse_payload(&b).err().expect("unknown node kind accepted");
    assert!(e.contains("unknown node type 200"), "{e}");

    let mut b = blob.clone();
    patch_u32(&mut b, fb_off + input_pos, 1_000_000);
    let e = parse_payload(&b).err().expect("value id out of range accepted");
    assert!(e.contains("Conv2d") && e.contains("1000000") && e.contains("out of range"), "{e}");
}

#[test]
fn payload_without_header_is_a_bare_flatbuffer() {
    let (_, bytes) = &xnnpack_programs()[0];
    let blob = blobs(bytes).remove(0);
    let (fb, _) = split_payload(&blob).unwrap();
    let bare = parse_payload(fb).unwrap();
    assert!(bare.constants.is_empty());
    assert!(!bare.graph.nodes.is_empty());
    let e = parse_payload(b"\0\0\0\0NOPE....").err().unwrap();
    assert!(e.contains("identifier"), "{e}");
}

/// Writes each XNNPACK payload of the testdata (the MobileNets and every single-node-kind
/// program of `xnnpack_ops/`) to `runtime/fuzz/seeds/xnnpack_payload/` (the fuzz target's seed
/// corpus).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/xnnpack_payload");
    std::fs::create_dir_all(&dir).unwrap();
    // More programs (e.g. rbuild's own `--quant 8da4w` exports, whose payloads the testdata
    // lacks): RBUILD_FUZZ_SEED_PROGRAMS=a.pte:b.pte.
    let extra = std::env::var("RBUILD_FUZZ_SEED_PROGRAMS").unwrap_or_default();
    let extra = extra.split(':').filter(|p| !p.is_empty()).map(|p| (PathBuf::from(p), std::fs::read(p).unwrap()));
    for (path, bytes) in xnnpack_programs().into_iter().chain(xnnpack_programs_in("xnnpack_ops")).chain(extra) {
        for (i, blob) in blobs(&bytes).iter().enumerate() {
            let name = format!("{}-{i}", path.strip_prefix(testdata()).unwrap_or(&path).display()).replace('/', "_");
            std::fs::write(dir.join(name), blob).unwrap();
        }
    }
}
