//! Fuzzes the `.pt2` reader end to end: zip indexing (CRCs, inflation), the header members,
//! the ExportedProgram and payload-config JSON, signature resolution and every tensor view.
//! Any panic, hang or out-of-bounds access is a bug; errors are the expected outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rbuild_pt2::{payload_view, PayloadKind, Pt2Archive, TensorView};

/// Views whose element bytes exceed this are not gathered (a valid but huge expanded view is
/// not a bug).
const MAX_GATHER: usize = 16 << 20;

fn read_all(view: &TensorView<'_>) {
    if view.nbytes() <= MAX_GATHER {
        assert_eq!(view.contiguous_bytes().len(), view.nbytes(), "{}", view.name);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = Pt2Archive::from_bytes(data.to_vec(), "fuzz.pt2") else { return };
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
