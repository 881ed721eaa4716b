//! Delegation of the MobileNets built from the shared testdata weights: which ops XNNPACK takes
//! and that each payload decodes back to the graph it was written from.

use std::path::{Path, PathBuf};

use rbuild_export::passes;
use rbuild_export::weights::Weights;
use rbuild_runtime::backends::xnnpack::{parse_payload, NodeKind};
use rbuild_xnnpack::{delegate_method, XnnpackOptions};

fn weights(model: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/models").join(model).join("model.safetensors");
    p.is_file().then_some(p)
}

fn delegated(arch: &str, folder: &str) {
    let Some(path) = weights(folder) else {
        eprintln!("skipped: no testdata weights for {folder}");
        return;
    };
    let w = Weights::open(&path).unwrap();
    let mut g = rbuild_models::build(arch, &w, &[1, 3, 224, 224]).unwrap();
    passes::optimize_functional(&mut g, &passes::Options::default()).unwrap();
    let mut ops: std::collections::BTreeMap<String, usize> = Default::default();
    for n in &g.nodes {
        *ops.entry(n.op.clone()).or_default() += 1;
    }
    eprintln!("{arch} functional ops: {ops:?}");
    let report = delegate_method("forward", &mut g, &XnnpackOptions::default()).unwrap();
    eprintln!("{}", report.summary());
    assert!(report.cpu_ops().is_empty(), "{}", report.summary());
    assert_eq!(report.partitioning.partitions.len(), 1);
    assert_eq!(g.delegates.len(), 1);
    let payload = parse_payload(&g.delegates[0].processed).unwrap();
    let x = &payload.graph;
    assert_eq!(x.input_ids.len(), 1);
    assert_eq!(x.output_ids.len(), 1);
    assert_eq!(x.values[x.input_ids[0] as usize].dims, vec![1, 3, 224, 224]);
    assert_eq!(x.values[x.output_ids[0] as usize].dims, vec![1, 1000]);
    let count = |k: NodeKind| x.nodes.iter().filter(|n| n.kind == k).count();
    eprintln!(
        "{arch}: {} nodes: conv {} depthwise {} clamp {} transpose {} reshape {}",
        x.nodes.len(),
        count(NodeKind::Conv2d),
        count(NodeKind::DepthwiseConv2d),
        count(NodeKind::Clamp),
        count(NodeKind::StaticTranspose),
        count(NodeKind::StaticReshape)
    );
    assert!(count(NodeKind::DepthwiseConv2d) > 0);
    for c in x.constants.iter().skip(1) {
        let key = c.named_key.as_ref().unwrap();
        assert!(g.named_data.iter().any(|(k, d)| k == key && d.len() as u64 == c.size), "constant {key} missing from the named data");
    }
}

#[test]
fn mobilenet_v2_is_delegated_whole() {
    delegated("mobilenet_v2", "mobilenet_v2");
}

#[test]
fn mobilenet_v3_small_is_delegated_whole() {
    delegated("mobilenet_v3_small", "mobilenet_v3_small");
}
