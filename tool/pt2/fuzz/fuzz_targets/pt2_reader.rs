//! Fuzzes the `.pt2` reader end to end: zip indexing (CRCs, inflation), the header members,
//! the ExportedProgram and payload-config JSON, signature resolution, every tensor view and
//! the lowering to the export IR (shape inference over whatever the program claims).
//! Any panic, hang or out-of-bounds access is a bug; errors are the expected outcome.
//!
//! Input starting with `PK` is opened as an archive as is. Anything else is split at NUL
//! bytes into `models/model.json`, the weights config, the constants config and the bytes of
//! storages `weight_0`/`tensor_0`, and zipped with valid header members first: random edits
//! of a real archive mostly fail its CRCs, so this path is what reaches the JSON and views.
#![no_main]

use std::io::{Cursor, Write};

use libfuzzer_sys::fuzz_target;
use rbuild_pt2::{lower, payload_view, LowerOptions, PayloadKind, Pt2Archive, TensorView};
use zip::write::SimpleFileOptions;

/// Views whose element bytes exceed this are not gathered (a valid but huge expanded view is
/// not a bug).
const MAX_GATHER: usize = 16 << 20;

fn read_all(view: &TensorView<'_>) {
    if view.nbytes() <= MAX_GATHER {
        assert_eq!(view.contiguous_bytes().len(), view.nbytes(), "{}", view.name);
    }
}

/// A stored zip of a program built from NUL-separated parts of `data`.
fn archive_from_parts(data: &[u8]) -> Vec<u8> {
    let mut parts = data.splitn(4, |&b| b == 0);
    let mut next = || parts.next().unwrap_or_default();
    let (program, weights, constants, storage) = (next(), next(), next(), next());
    let members: [(&str, &[u8]); 8] = [
        ("archive_format", b"pt2"),
        ("archive_version", b"0"),
        ("byteorder", b"little"),
        ("models/model.json", program),
        ("data/weights/model_weights_config.json", weights),
        ("data/constants/model_constants_config.json", constants),
        ("data/weights/weight_0", storage),
        ("data/constants/tensor_0", storage),
    ];
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        writer.start_file(format!("fuzz/{name}"), options).expect("zip writer");
        writer.write_all(bytes).expect("zip writer");
    }
    writer.finish().expect("zip writer").into_inner()
}

fuzz_target!(|data: &[u8]| {
    let bytes = if data.starts_with(b"PK") { data.to_vec() } else { archive_from_parts(data) };
    let Ok(archive) = Pt2Archive::from_bytes(bytes, "fuzz.pt2") else { return };
    for name in archive.model_names() {
        if let Ok(model) = archive.model(name) {
            for input in &model.graph_inputs {
                if let Some(view) = input.tensor() {
                    read_all(view);
                }
            }
            for node in &model.graph().nodes {
                let _ = node.op_name();
            }
            for meta in model.graph().tensor_values.values() {
                let _ = model.dims(meta);
            }
            let _ = model.in_place_buffer_writes();
            let _ = lower(&model, &LowerOptions::default());
        }
        // Config entries resolve on their own too, whether or not the program parsed.
        for kind in [PayloadKind::Weights, PayloadKind::Constants] {
            let Ok(config) = archive.payload_config(kind, name) else { continue };
            for (fqn, meta) in &config.config {
                if let Ok(view) = payload_view(&archive, kind, name, fqn, meta) {
                    read_all(&view);
                }
            }
        }
    }
});
