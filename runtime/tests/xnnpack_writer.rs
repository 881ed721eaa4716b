//! The XNNPACK payload writer against every XNNPACK-delegated program of the shared testdata:
//! each payload decoded, re-encoded and decoded again gives the same graph, and the written
//! payload keeps the constant region.

use std::path::{Path, PathBuf};

use rbuild_runtime::backends::xnnpack::{encode_graph, decode_graph, parse_payload, write_payload, XNNPACK_BACKEND_ID};
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

/// (program path, each XNNPACK delegate's processed blob).
fn xnnpack_blobs() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    pte_files(&testdata().join("models"), &mut files);
    let mut out = Vec::new();
    for p in files {
        let Ok(bytes) = std::fs::read(&p) else { continue };
        let Ok(file) = PteFile::parse(&bytes) else { continue };
        for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
            for d in plan.delegates.as_deref().unwrap_or(&[]) {
                if d.id == Some(XNNPACK_BACKEND_ID) {
                    out.push((p.clone(), file.delegate_data(d).unwrap().to_vec()));
                }
            }
        }
    }
    out
}

#[test]
fn every_testdata_payload_round_trips_through_the_writer() {
    let blobs = xnnpack_blobs();
    assert!(blobs.len() >= 4, "expected the MobileNet XNNPACK programs under {}", testdata().display());
    for (path, blob) in &blobs {
        let original = parse_payload(blob).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fb = encode_graph(&original.graph);
        assert_eq!(&fb[4..8], b"XN01", "{}", path.display());
        let again = decode_graph(&fb).unwrap_or_else(|e| panic!("{}: re-encoded graph: {e}", path.display()));
        assert_eq!(again, original.graph, "{}", path.display());

        let payload = write_payload(&original.graph, original.constants);
        let reparsed = parse_payload(&payload).unwrap_or_else(|e| panic!("{}: re-written payload: {e}", path.display()));
        assert_eq!(reparsed.graph, original.graph, "{}", path.display());
        assert_eq!(reparsed.constants, original.constants, "{}", path.display());
    }
}
