//! What [`super::XnnpackBackend`] runs, as data (for `rbuild ops`): each XNNPACK node kind it
//! executes (its schema name, as `NodeKind::name` prints it) with the datatype combinations it
//! accepts (datatype names as `XnnDatatype::name` prints them). Kinds not listed are refused at
//! init (ArgMaxPooling2d, ScaledDotProductAttention). `kernels/tests/xnnpack_support.rs`
//! checks the table exactly against the compiler.
//!
//! Entries, in one convention:
//! - `"fp32"`: every tensor operand (inputs, output; a fully connected layer's filter too) is
//!   an activation of that datatype. 8-bit activations (`qint8`, `quint8`) carry per-tensor
//!   quantization; `int32` / `qint32` activations are moved, never computed on.
//! - `"qint8+qcint8w"` (convolutions, fully connected): activations of the first datatype, a
//!   constant filter of the second; per-tensor `qint8w` weights are symmetric, `quint8w` ones
//!   have a zero point, `qcint*w` are per output channel, `qbint4w` per block of input
//!   channels. Biases are not part of the entry (float nodes take float biases, 8-bit ones
//!   int32).
//! - `"qdint8"` / `"qdint8+qcint4w"`: the input is dynamically quantized (a `Convert` to
//!   qdint8 of an fp32 value, folded into the node), the output fp32.
//! - `"fp32->qint8"` (Convert only): input datatype -> output datatype.
//!
//! Rows are sorted by node name (byte order). Within a row, datatypes go in the order fp32,
//! fp16, bf16, qint8, quint8, qdint8, int32, qint32, qcint8, qcint32, qcint4, qbint4: each
//! activation datatype, then its weight forms in that order (a Convert: by input, then output).

/// (node kind, accepted datatype entries), sorted by node kind.
pub const SUPPORTED_NODES: &[(&str, &[&str])] = &[
    ("Abs", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Add", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("AvgPooling2d", &["fp32", "fp16", "bf16"]),
    ("BatchMatrixMultiply", &["fp32", "fp16", "bf16"]),
    ("Ceiling", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Clamp", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Concatenate2", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Concatenate3", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Concatenate4", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Concatenate5", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Conv2d", &[
        "fp32+fp32w", "fp32+fp16w", "fp32+bf16w", "fp16+fp32w", "fp16+fp16w", "fp16+bf16w", "bf16+fp32w", "bf16+fp16w",
        "bf16+bf16w", "qint8+qint8w", "qint8+quint8w", "qint8+qcint8w", "quint8+qint8w", "quint8+quint8w",
        "quint8+qcint8w", "qdint8+qcint8w",
    ]),
    ("ConvTranspose2d", &[
        "fp32+fp32w", "fp32+fp16w", "fp32+bf16w", "fp16+fp32w", "fp16+fp16w", "fp16+bf16w", "bf16+fp32w", "bf16+fp16w",
        "bf16+bf16w", "qint8+qint8w", "qint8+quint8w", "qint8+qcint8w", "quint8+qint8w", "quint8+quint8w",
        "quint8+qcint8w", "qdint8+qcint8w",
    ]),
    ("Convert", &[
        "fp32->fp32", "fp32->fp16", "fp32->bf16", "fp32->qint8", "fp32->quint8", "fp16->fp32", "fp16->fp16",
        "fp16->bf16", "fp16->qint8", "fp16->quint8", "bf16->fp32", "bf16->fp16", "bf16->bf16", "bf16->qint8",
        "bf16->quint8", "qint8->fp32", "qint8->fp16", "qint8->bf16", "qint8->qint8", "qint8->quint8", "quint8->fp32",
        "quint8->fp16", "quint8->bf16", "quint8->qint8", "quint8->quint8",
    ]),
    ("Copy", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Cos", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("DepthwiseConv2d", &[
        "fp32+fp32w", "fp32+fp16w", "fp32+bf16w", "fp16+fp32w", "fp16+fp16w", "fp16+bf16w", "bf16+fp32w", "bf16+fp16w",
        "bf16+bf16w", "qint8+qint8w", "qint8+quint8w", "qint8+qcint8w", "quint8+qint8w", "quint8+quint8w",
        "quint8+qcint8w",
    ]),
    ("Div", &["fp32", "fp16", "bf16"]),
    ("ELU", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Exp", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Floor", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("FullyConnected", &[
        "fp32", "fp32+fp32w", "fp32+fp16w", "fp32+bf16w", "fp32+qcint8w", "fp32+qcint4w", "fp16", "fp16+fp32w",
        "fp16+fp16w", "fp16+bf16w", "bf16", "bf16+fp32w", "bf16+fp16w", "bf16+bf16w", "qint8+qint8w", "qint8+quint8w",
        "qint8+qcint8w", "qint8+qcint4w", "quint8+qint8w", "quint8+quint8w", "quint8+qcint8w", "quint8+qcint4w",
        "qdint8+qint8w", "qdint8+qcint8w", "qdint8+qcint4w", "qdint8+qbint4w",
    ]),
    ("Gelu", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("GlobalAvgPooling2d", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Hardswish", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("LeakyReLU", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Log", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("MaxPooling2d", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Maximum", &["fp32", "fp16", "bf16"]),
    ("Minimum", &["fp32", "fp16", "bf16"]),
    ("Multiply", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Negate", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("PReLU", &["fp32", "fp16", "bf16"]),
    ("ReciprocalSquareRoot", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Sigmoid", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Sin", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Softmax", &["fp32", "fp16", "bf16"]),
    ("Square", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("SquareRoot", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("StaticConstantPad", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("StaticReshape", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("StaticResizeBilinear2D", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("StaticSlice", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("StaticTranspose", &["fp32", "fp16", "bf16", "qint8", "quint8", "int32", "qint32"]),
    ("Subtract", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
    ("Tanh", &["fp32", "fp16", "bf16", "qint8", "quint8"]),
];

#[cfg(test)]
mod tests {
    use super::SUPPORTED_NODES;
    use rbuild_runtime::backends::xnnpack::NodeKind;

    #[test]
    fn rows_are_sorted_node_kinds_with_entries() {
        let kinds: alloc::vec::Vec<&str> = (1..=u8::MAX).map_while(NodeKind::from_tag).map(NodeKind::name).collect();
        for pair in SUPPORTED_NODES.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
        for (kind, entries) in SUPPORTED_NODES {
            assert!(kinds.contains(kind), "{kind} is not a node kind of the payload reader");
            assert!(!entries.is_empty(), "{kind} has no entries");
        }
    }
}
