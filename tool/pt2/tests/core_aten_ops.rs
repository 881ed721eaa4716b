//! Core ATen operators and training-IR forms the testdata archives do not exercise, in small
//! archives written here (a testdata archive's container with a graph of our own): each
//! imports to the runtime operators ExecuTorch runs, with the shapes PyTorch gives; size
//! arithmetic folds or becomes prim ops; data-dependent sizes become bounded symbols; the
//! training gradients ExecuTorch lacks fail with their reason. A few programs also run.

mod common;

use std::collections::BTreeMap;

use common::{read_members, testdata, write_zip};
use rbuild_export::graph::{Dim, Graph};
use rbuild_export::{emit, passes, plan};
use rbuild_pt2::{lower, LowerError, LowerOptions, Pt2Archive};
use serde_json::{json, Value};

// torch.export's serialized dtype numbers.
const I64: i64 = 5;
const F32: i64 = 7;
const C64: i64 = 10;

/// A size: fixed, or a symbol (`"u0"`, `"s0"`).
#[derive(Clone, Copy)]
enum S {
    N(usize),
    Sym(&'static str),
}

fn sizes_json(sizes: &[S]) -> Vec<Value> {
    sizes
        .iter()
        .map(|s| match s {
            S::N(n) => json!({"as_int": n}),
            S::Sym(name) => json!({"as_expr": {"expr_str": name, "hint": null}}),
        })
        .collect()
}

fn meta(dtype: i64, sizes: &[S]) -> Value {
    // Contiguous strides (symbols stand in as 1: nothing here reads them).
    let mut strides = vec![json!({"as_int": 1}); sizes.len()];
    let mut acc = 1usize;
    for (i, s) in sizes.iter().enumerate().rev() {
        strides[i] = json!({"as_int": acc});
        acc *= if let S::N(n) = s { *n } else { 1 };
    }
    json!({"dtype": dtype, "sizes": sizes_json(sizes), "requires_grad": false, "device": {"type": "cpu", "index": null},
           "strides": strides, "storage_offset": {"as_int": 0}, "layout": 7})
}

fn t(name: &str) -> Value {
    json!({"as_tensor": {"name": name}})
}

fn sym(name: &str) -> Value {
    json!({"as_sym_int": {"as_name": name}})
}

/// A graph written by hand: user inputs, nodes, user outputs.
#[derive(Default)]
struct Synth {
    inputs: Vec<String>,
    values: serde_json::Map<String, Value>,
    sym_ints: serde_json::Map<String, Value>,
    nodes: Vec<Value>,
    outputs: Vec<String>,
    ranges: serde_json::Map<String, Value>,
}

impl Synth {
    fn input(mut self, name: &str, dtype: i64, sizes: &[S]) -> Self {
        self.inputs.push(name.into());
        self.values.insert(name.into(), meta(dtype, sizes));
        self
    }

    /// A node with tensor results `(name, dtype, sizes)`.
    fn node(mut self, target: &str, args: &[(&str, Value)], results: &[(&str, i64, &[S])]) -> Self {
        for (name, dtype, sizes) in results {
            self.values.insert((*name).into(), meta(*dtype, sizes));
        }
        let outputs: Vec<Value> = results.iter().map(|(n, _, _)| t(n)).collect();
        self.raw(target, args, outputs)
    }

    /// A node with a SymInt (or SymBool) result, the archive's value of it `expr` (a symbol or
    /// a number).
    fn sym_node(mut self, target: &str, args: &[(&str, Value)], result: &str, expr: Value) -> Self {
        self.sym_ints.insert(result.into(), expr);
        let kind = if target.contains("_operator.g") || target.contains("_operator.l") || target.contains("_operator.eq") {
            json!({"as_sym_bool": {"as_name": result}})
        } else {
            sym(result)
        };
        self.raw(target, args, vec![kind])
    }

    fn raw(mut self, target: &str, args: &[(&str, Value)], outputs: Vec<Value>) -> Self {
        // `aten::sort` → `torch.ops.aten.sort.default`; Python operators keep their name.
        let target = match target.split_once("::") {
            Some((ns, op)) if op.contains('.') => format!("torch.ops.{ns}.{op}"),
            Some((ns, op)) => format!("torch.ops.{ns}.{op}.default"),
            None => target.to_string(),
        };
        let inputs: Vec<Value> = args.iter().map(|(n, a)| json!({"name": n, "arg": a, "kind": 1})).collect();
        self.nodes.push(json!({"target": target, "inputs": inputs, "outputs": outputs, "metadata": {}, "name": format!("n{}", self.nodes.len())}));
        self
    }

    fn output(mut self, name: &str) -> Self {
        self.outputs.push(name.into());
        self
    }

    fn range(mut self, symbol: &str, min: i64, max: i64) -> Self {
        self.ranges.insert(symbol.into(), json!({"min_val": min, "max_val": max}));
        self
    }

    /// The archive: `aten__atan2.out/broadcast.pt2`'s container with this graph.
    fn archive(&self) -> Vec<u8> {
        let base = std::fs::read(testdata().join("pt2_ops/aten__atan2.out/broadcast.pt2")).unwrap();
        let members: Vec<(String, Vec<u8>)> = read_members(&base)
            .into_iter()
            .map(|(name, bytes)| {
                if !name.ends_with("models/model.json") {
                    return (name, bytes);
                }
                let mut v: Value = serde_json::from_slice(&bytes).unwrap();
                let g = &mut v["graph_module"]["graph"];
                g["inputs"] = json!(self.inputs.iter().map(|n| t(n)).collect::<Vec<_>>());
                g["outputs"] = json!(self.outputs.iter().map(|n| t(n)).collect::<Vec<_>>());
                g["nodes"] = json!(self.nodes);
                g["tensor_values"] = Value::Object(self.values.clone());
                g["sym_int_values"] = Value::Object(self.sym_ints.clone());
                let sig = &mut v["graph_module"]["signature"];
                sig["input_specs"] = json!(self.inputs.iter().map(|n| json!({"user_input": {"arg": t(n)}})).collect::<Vec<_>>());
                sig["output_specs"] = json!(self.outputs.iter().map(|n| json!({"user_output": {"arg": t(n)}})).collect::<Vec<_>>());
                v["range_constraints"] = Value::Object(self.ranges.clone());
                (name, serde_json::to_vec(&v).unwrap())
            })
            .collect();
        write_zip(&members, zip::CompressionMethod::Stored)
    }

    fn lower_with(&self, options: &LowerOptions) -> Result<Graph, LowerError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("synth.pt2");
        std::fs::write(&path, self.archive()).unwrap();
        let archive = Pt2Archive::open(&path).unwrap();
        let model = archive.default_model().unwrap();
        lower(&model, options).map(|p| p.graph)
    }

    fn lower(&self) -> Graph {
        self.lower_with(&LowerOptions::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The runtime operators of the imported program (out variants, before optimization).
    fn runtime_ops(&self) -> Vec<String> {
        let mut g = self.lower();
        passes::to_out::to_out_variants(&mut g).unwrap();
        g.ops()
    }
}

fn ops(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn sort_and_scatter_reduce_import_as_their_out_variants() {
    let sort = Synth::default()
        .input("x", F32, &[S::N(3), S::N(5)])
        .node("aten::sort", &[("self", t("x")), ("dim", json!({"as_int": 0})), ("descending", json!({"as_bool": true}))], &[
            ("values", F32, &[S::N(3), S::N(5)]),
            ("indices", I64, &[S::N(3), S::N(5)]),
        ])
        .output("values")
        .output("indices");
    assert_eq!(sort.runtime_ops(), ops(&["aten::sort.values"]));

    let scatter = Synth::default()
        .input("x", F32, &[S::N(3), S::N(4)])
        .input("index", I64, &[S::N(3), S::N(2)])
        .input("src", F32, &[S::N(3), S::N(2)])
        .node(
            "aten::scatter_reduce.two",
            &[
                ("self", t("x")),
                ("dim", json!({"as_int": 1})),
                ("index", t("index")),
                ("src", t("src")),
                ("reduce", json!({"as_string": "amax"})),
                ("include_self", json!({"as_bool": false})),
            ],
            &[("y", F32, &[S::N(3), S::N(4)])],
        )
        .output("y");
    assert_eq!(scatter.runtime_ops(), ops(&["aten::scatter_reduce.two_out"]));
}

#[test]
fn three_d_pooling_col2im_and_embedding_bags_import() {
    let x5 = [S::N(1), S::N(2), S::N(4), S::N(4), S::N(4)];
    let half = [S::N(1), S::N(2), S::N(2), S::N(2), S::N(2)];
    let k = json!({"as_ints": [2, 2, 2]});
    let avg = Synth::default()
        .input("x", F32, &x5)
        .node("aten::avg_pool3d", &[("self", t("x")), ("kernel_size", k.clone())], &[("y", F32, &half)])
        .output("y");
    assert_eq!(avg.runtime_ops(), ops(&["aten::avg_pool3d.out"]));
    let max = Synth::default()
        .input("x", F32, &x5)
        .node("aten::max_pool3d_with_indices", &[("self", t("x")), ("kernel_size", k.clone())], &[("y", F32, &half), ("i", I64, &half)])
        .output("y")
        .output("i");
    assert_eq!(max.runtime_ops(), ops(&["aten::max_pool3d_with_indices.out"]));
    let max_values = Synth::default()
        .input("x", F32, &x5)
        .node("aten::max_pool3d", &[("self", t("x")), ("kernel_size", k.clone())], &[("y", F32, &half)])
        .output("y");
    assert_eq!(max_values.runtime_ops(), ops(&["aten::max_pool3d_with_indices.out"]));
    for target in ["aten::_adaptive_avg_pool3d", "aten::adaptive_avg_pool3d"] {
        let adaptive = Synth::default()
            .input("x", F32, &x5)
            .node(target, &[("self", t("x")), ("output_size", k.clone())], &[("y", F32, &half)])
            .output("y");
        assert_eq!(adaptive.runtime_ops(), ops(&["aten::_adaptive_avg_pool3d.out"]), "{target}");
    }
    let pair = |a: i64, b: i64| json!({"as_ints": [a, b]});
    let col2im = Synth::default()
        .input("cols", F32, &[S::N(1), S::N(8), S::N(9)])
        .node(
            "aten::col2im",
            &[
                ("self", t("cols")),
                ("output_size", pair(4, 4)),
                ("kernel_size", pair(2, 2)),
                ("dilation", pair(1, 1)),
                ("padding", pair(0, 0)),
                ("stride", pair(1, 1)),
            ],
            &[("img", F32, &[S::N(1), S::N(2), S::N(4), S::N(4)])],
        )
        .output("img");
    assert_eq!(col2im.runtime_ops(), ops(&["aten::col2im.out"]));
    let bag = Synth::default()
        .input("w", F32, &[S::N(10), S::N(3)])
        .input("indices", I64, &[S::N(6)])
        .input("offsets", I64, &[S::N(2)])
        .node("aten::_embedding_bag", &[("weight", t("w")), ("indices", t("indices")), ("offsets", t("offsets")), ("mode", json!({"as_int": 1}))], &[
            ("bags", F32, &[S::N(2), S::N(3)]),
            ("offset2bag", I64, &[S::N(6)]),
            ("bag_size", I64, &[S::N(2)]),
            ("max_indices", I64, &[S::N(2)]),
        ])
        .output("bags");
    assert_eq!(bag.runtime_ops(), ops(&["aten::_embedding_bag.out"]));
}

#[test]
fn one_dimensional_pools_run_as_two_dimensional_ones() {
    let x: Vec<u8> = [1.0f32, 2.0, 3.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let input = [(rbuild_runtime::ScalarType::Float, vec![1, 1, 4], x)];
    let pool = |target: &str, args: &[(&str, Value)]| {
        let mut all = vec![("self", t("x"))];
        all.extend(args.iter().cloned());
        Synth::default().input("x", F32, &[S::N(1), S::N(1), S::N(4)]).node(target, &all, &[("y", F32, &[S::N(1), S::N(1), S::N(2)])]).output("y").lower()
    };
    let avg = pool("aten::avg_pool1d", &[("kernel_size", json!({"as_ints": [2]}))]);
    assert_eq!(f32s(&run(avg, &input)), [1.5, 4.5]);
    let max = pool("aten::max_pool1d", &[("kernel_size", json!({"as_ints": [2]})), ("stride", json!({"as_ints": [2]}))]);
    assert_eq!(f32s(&run(max, &input)), [2.0, 6.0]);
    let adaptive = pool("aten::adaptive_avg_pool1d", &[("output_size", json!({"as_ints": [2]}))]);
    assert_eq!(f32s(&run(adaptive, &input)), [1.5, 4.5]);

    let std = Synth::default()
        .input("x", F32, &[S::N(3), S::N(4)])
        .node("aten::std.correction", &[("self", t("x")), ("dim", json!({"as_ints": [1]})), ("correction", json!({"as_int": 1}))], &[("y", F32, &[S::N(3)])])
        .output("y");
    assert_eq!(std.runtime_ops(), ops(&["aten::sqrt.out", "aten::var.correction_out"]));
    let bag = Synth::default()
        .input("w", F32, &[S::N(10), S::N(3)])
        .input("indices", I64, &[S::N(6)])
        .input("offsets", I64, &[S::N(2)])
        .node("aten::_embedding_bag_forward_only", &[("weight", t("w")), ("indices", t("indices")), ("offsets", t("offsets"))], &[
            ("bags", F32, &[S::N(2), S::N(3)]),
            ("offset2bag", I64, &[S::N(0)]),
            ("bag_size", I64, &[S::N(2)]),
            ("max_indices", I64, &[S::N(2)]),
        ])
        .output("bags");
    assert_eq!(bag.runtime_ops(), ops(&["aten::_embedding_bag.out"]));
}

#[test]
fn all_and_vector_norms_decompose_and_run() {
    let x: Vec<u8> = [3.0f32, 0.0, -4.0, 1.0, 2.0, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let input = [(rbuild_runtime::ScalarType::Float, vec![2, 3], x)];
    let all = Synth::default()
        .input("x", F32, &[S::N(2), S::N(3)])
        .node("aten::all.dim", &[("self", t("x")), ("dim", json!({"as_int": 1}))], &[("y", 12, &[S::N(2)])])
        .output("y")
        .lower();
    assert_eq!(run(all, &input), [0, 1]);
    let norm = |ord: Value| {
        Synth::default()
            .input("x", F32, &[S::N(2), S::N(3)])
            .node("aten::linalg_vector_norm", &[("self", t("x")), ("ord", ord), ("dim", json!({"as_ints": [1]}))], &[("y", F32, &[S::N(2)])])
            .output("y")
            .lower()
    };
    assert_eq!(f32s(&run(norm(json!({"as_int": 2})), &input)), [5.0, 3.0]);
    assert_eq!(f32s(&run(norm(json!({"as_int": 1})), &input)), [7.0, 5.0]);
    assert_eq!(f32s(&run(norm(json!({"as_float": "Infinity"})), &input)), [4.0, 2.0]);

    let like = |target: &str, extra: &[(&str, Value)]| {
        let mut args = vec![("self", t("x"))];
        args.extend(extra.iter().cloned());
        Synth::default().input("x", F32, &[S::N(2), S::N(3)]).node(target, &args, &[("y", F32, &[S::N(2), S::N(3)])]).output("y").runtime_ops()
    };
    assert_eq!(like("aten::empty_like", &[]), ops(&["aten::empty.out"]));
    assert_eq!(like("aten::new_empty", &[("size", json!({"as_ints": [2, 3]}))]), ops(&["aten::empty.out"]));
    assert_eq!(like("aten::randn_like", &[]), ops(&["aten::randn.out"]));
}

#[test]
fn creation_ffts_and_padding_modes_import() {
    let randperm = Synth::default()
        .input("x", F32, &[S::N(2)])
        .node("aten::randperm", &[("n", json!({"as_int": 5}))], &[("p", I64, &[S::N(5)])])
        .output("p");
    assert_eq!(randperm.runtime_ops(), ops(&["aten::randperm.out"]), "dtype defaults to int64 (ATen's code 4)");
    let empty = Synth::default()
        .input("x", F32, &[S::N(2)])
        .node("aten::empty_strided", &[("size", json!({"as_ints": [2, 3]})), ("stride", json!({"as_ints": [1, 2]}))], &[("e", F32, &[S::N(2), S::N(3)])])
        .node("aten::fill_.Scalar", &[("self", t("e")), ("value", json!({"as_float": 1.5}))], &[("f", F32, &[S::N(2), S::N(3)])])
        .output("f");
    assert_eq!(empty.runtime_ops(), ops(&["aten::empty.out", "aten::full_like.out"]));
    let rfft = Synth::default()
        .input("x", F32, &[S::N(4), S::N(8)])
        .node("aten::_fft_r2c", &[("self", t("x")), ("dim", json!({"as_ints": [1]})), ("normalization", json!({"as_int": 0})), ("onesided", json!({"as_bool": true}))], &[
            ("z", C64, &[S::N(4), S::N(5)]),
        ])
        .node("aten::_fft_c2r", &[("self", t("z")), ("dim", json!({"as_ints": [1]})), ("normalization", json!({"as_int": 2})), ("last_dim_size", json!({"as_int": 8}))], &[
            ("y", F32, &[S::N(4), S::N(8)]),
        ])
        .output("y");
    assert_eq!(rfft.runtime_ops(), ops(&["aten::_fft_c2r.out", "aten::_fft_r2c.out"]));

    let pad = |mode: &str, x: &[S], pads: &[i64], y: &[S]| {
        Synth::default()
            .input("x", F32, x)
            .node("aten::pad", &[("self", t("x")), ("pad", json!({"as_ints": pads})), ("mode", json!({"as_string": mode}))], &[("y", F32, y)])
            .output("y")
            .runtime_ops()
    };
    let x3 = [S::N(1), S::N(2), S::N(5)];
    assert_eq!(pad("reflect", &x3, &[2, 1], &[S::N(1), S::N(2), S::N(8)]), ops(&["aten::reflection_pad1d.out"]));
    assert_eq!(pad("replicate", &[S::N(1), S::N(2), S::N(4), S::N(5)], &[1, 1, 2, 0], &[S::N(1), S::N(2), S::N(6), S::N(7)]), ops(&["aten::replication_pad2d.out"]));
    assert_eq!(pad("circular", &x3, &[2, 1], &[S::N(1), S::N(2), S::N(8)]), ops(&["aten::cat.out", "aten::slice_copy.Tensor_out"]));
    assert_eq!(pad("constant", &x3, &[-1, 3], &[S::N(1), S::N(2), S::N(7)]), ops(&["aten::constant_pad_nd.out"]));
}

#[test]
fn normalizations_with_batch_statistics_or_running_ones() {
    let x = [S::N(2), S::N(3), S::N(4), S::N(4)];
    let instance = Synth::default()
        .input("x", F32, &x)
        .input("w", F32, &[S::N(3)])
        .input("b", F32, &[S::N(3)])
        .node(
            "aten::instance_norm",
            &[
                ("input", t("x")),
                ("weight", t("w")),
                ("bias", t("b")),
                ("running_mean", json!({"as_none": true})),
                ("running_var", json!({"as_none": true})),
                ("use_input_stats", json!({"as_bool": true})),
                ("momentum", json!({"as_float": 0.1})),
                ("eps", json!({"as_float": 1e-5})),
                ("cudnn_enabled", json!({"as_bool": false})),
            ],
            &[("y", F32, &x)],
        )
        .output("y");
    assert_eq!(instance.runtime_ops(), ops(&["aten::_native_batch_norm_legit.no_stats_out", "aten::repeat.out", "aten::view_copy.out"]));

    let legit = |training: bool| {
        Synth::default()
            .input("x", F32, &x)
            .input("mean", F32, &[S::N(3)])
            .input("var", F32, &[S::N(3)])
            .node(
                "aten::_native_batch_norm_legit",
                &[
                    ("input", t("x")),
                    ("weight", json!({"as_none": true})),
                    ("bias", json!({"as_none": true})),
                    ("running_mean", t("mean")),
                    ("running_var", t("var")),
                    ("training", json!({"as_bool": training})),
                    ("momentum", json!({"as_float": 0.1})),
                    ("eps", json!({"as_float": 1e-5})),
                ],
                &[("y", F32, &x), ("m", F32, &[S::N(0)]), ("r", F32, &[S::N(0)])],
            )
            .output("y")
    };
    assert_eq!(legit(false).runtime_ops(), ops(&["aten::_native_batch_norm_legit_no_training.out"]));
    let e = legit(true).lower_with(&LowerOptions::default()).unwrap_err().to_string();
    assert!(e.contains("running statistics") && e.contains(".eval()"), "{e}");
}

#[test]
fn size_arithmetic_folds_at_export() {
    let x = [S::N(3), S::N(4)];
    let g = Synth::default()
        .input("x", F32, &x)
        .sym_node("aten::sym_numel", &[("self", t("x"))], "n", json!({"as_int": 12}))
        .sym_node("_operator.floordiv", &[("a", sym("n")), ("b", json!({"as_int": 5}))], "m", json!({"as_int": 2}))
        .sym_node("_operator.ge", &[("a", sym("m")), ("b", json!({"as_int": 2}))], "ok", json!({"as_int": 1}))
        .raw("aten::_assert_scalar", &[("self", json!({"as_sym_bool": {"as_name": "ok"}})), ("assert_msg", json!({"as_string": "m >= 2"}))], vec![])
        .sym_node("aten::sym_stride.int", &[("self", t("x")), ("dim", json!({"as_int": 0}))], "stride", json!({"as_int": 4}))
        .sym_node("_operator.sub", &[("a", sym("stride")), ("b", sym("m"))], "two", json!({"as_int": 2}))
        .node("aten::full", &[("size", json!({"as_sym_ints": [{"as_name": "two"}, {"as_name": "m"}]})), ("fill_value", json!({"as_float": 1.0}))], &[
            ("y", F32, &[S::N(2), S::N(2)]),
        ])
        .output("y")
        .lower();
    let ops: Vec<String> = g.nodes.iter().map(|n| n.op.clone()).collect();
    assert_eq!(ops, ["aten::full"], "every size was known at export");
}

type Input = (rbuild_runtime::ScalarType, Vec<usize>, Vec<u8>);

/// Builds, plans and emits a lowered graph, runs it on `inputs` (dtype, sizes, bytes) in
/// rbuild's runtime; returns every output's bytes.
fn run_all(mut g: Graph, inputs: &[Input]) -> Vec<Vec<u8>> {
    use rbuild_runtime::backend::BackendRegistry;
    use rbuild_runtime::buffer::AlignedBuf;
    passes::optimize(&mut g).unwrap();
    let p = plan::plan_memory(&g);
    let bytes = emit::emit(&g, &p, "forward").unwrap();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = rbuild_runtime::Program::load(buf.as_slice()).unwrap();
    let mut m = program.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).unwrap();
    for (i, (dtype, sizes, data)) in inputs.iter().enumerate() {
        m.set_input_tensor(i, *dtype, sizes, data).unwrap();
    }
    m.execute(&mut rbuild_runtime::KernelContext::default()).unwrap_or_else(|e| panic!("{e:?}"));
    (0..m.outputs().len()).map(|i| m.output_bytes(i).unwrap().to_vec()).collect()
}

/// Output 0 of [`run_all`].
fn run(g: Graph, inputs: &[Input]) -> Vec<u8> {
    run_all(g, inputs).swap_remove(0)
}

fn f32_input(sizes: &[usize], values: &[f32]) -> Input {
    (rbuild_runtime::ScalarType::Float, sizes.to_vec(), values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

fn i64_input(sizes: &[usize], values: &[i64]) -> Input {
    (rbuild_runtime::ScalarType::Long, sizes.to_vec(), values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn run_time_sizes_become_prim_ops_and_run() {
    // x[x.size(0) - 1] of a dynamic-length vector; the range check folds away.
    let g = Synth::default()
        .input("x", F32, &[S::Sym("s0")])
        .range("s0", 2, 16)
        .sym_node("aten::sym_size.int", &[("self", t("x")), ("dim", json!({"as_int": 0}))], "n", json!({"as_expr": {"expr_str": "s0", "hint": null}}))
        .sym_node("_operator.ge", &[("a", sym("n")), ("b", json!({"as_int": 2}))], "big", json!({"as_expr": {"expr_str": "s0 >= 2", "hint": null}}))
        .raw("aten::_assert_scalar", &[("self", json!({"as_sym_bool": {"as_name": "big"}})), ("assert_msg", json!({"as_string": "s0 >= 2"}))], vec![])
        .sym_node("_operator.sub", &[("a", sym("n")), ("b", json!({"as_int": 1}))], "last", json!({"as_expr": {"expr_str": "s0 - 1", "hint": null}}))
        .node("aten::select.int", &[("self", t("x")), ("dim", json!({"as_int": 0})), ("index", sym("last"))], &[("y", F32, &[])])
        .output("y")
        .lower();
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.as_str()).collect();
    assert!(ops.contains(&"executorch_prim::sub.Scalar") && ops.contains(&"executorch_prim::ge.Scalar"), "{ops:?}");
    let x: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(f32s(&run(g, &[(rbuild_runtime::ScalarType::Float, vec![5], x)])), [5.0]);
}

#[test]
fn item_values_become_bounded_symbols_that_size_tensors() {
    // torch.arange(n.item()) with the archive's range 0..=10 for u0.
    let g = Synth::default()
        .input("n", I64, &[S::N(1)])
        .range("u0", 0, 10)
        .sym_node("aten::_local_scalar_dense", &[("self", t("n"))], "u", json!({"as_expr": {"expr_str": "u0", "hint": null}}))
        .node("aten::arange", &[("end", sym("u"))], &[("r", I64, &[S::Sym("u0")])])
        .output("r")
        .lower();
    let r = *g.outputs.last().unwrap();
    let Dim::Sym(s) = g.meta(r).shape[0] else { panic!("{:?}", g.meta(r).shape) };
    assert_eq!((g.syms[s].name.as_str(), g.syms[s].max), ("u0", 10));
    let got = run(g, &[(rbuild_runtime::ScalarType::Long, vec![1], 4i64.to_le_bytes().to_vec())]);
    let got: Vec<i64> = got.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, [0, 1, 2, 3]);
}

#[test]
fn data_dependent_results_take_the_archive_bound_and_max_dim() {
    let nonzero = Synth::default()
        .input("x", F32, &[S::N(3), S::N(4)])
        .range("u0", 0, 12)
        .node("aten::nonzero", &[("self", t("x"))], &[("nz", I64, &[S::Sym("u0"), S::N(2)])])
        .sym_node("aten::sym_size.int", &[("self", t("nz")), ("dim", json!({"as_int": 0}))], "rows", json!({"as_expr": {"expr_str": "u0", "hint": null}}))
        .sym_node("_operator.le", &[("a", sym("rows")), ("b", json!({"as_int": 12}))], "fits", json!({"as_expr": {"expr_str": "u0 <= 12", "hint": null}}))
        .raw("aten::_assert_scalar", &[("self", json!({"as_sym_bool": {"as_name": "fits"}})), ("assert_msg", json!({"as_string": "u0 <= 12"}))], vec![])
        .node("aten::select.int", &[("self", t("nz")), ("dim", json!({"as_int": 1})), ("index", json!({"as_int": 0}))], &[("col", I64, &[S::Sym("u0")])])
        .output("col");
    let bound_of = |g: &Graph| {
        let out = *g.outputs.last().unwrap();
        let Dim::Sym(s) = g.meta(out).shape[0] else { panic!("{:?}", g.meta(out).shape) };
        g.syms[s].max
    };
    assert_eq!(bound_of(&nonzero.lower()), 12);
    let narrowed = LowerOptions { max_dims: BTreeMap::from([("u0".to_string(), 5)]) };
    assert_eq!(bound_of(&nonzero.lower_with(&narrowed).unwrap()), 5, "--max-dim narrows a data-dependent size");
    assert_eq!(nonzero.runtime_ops(), ops(&["aten::nonzero.out", "aten::select_copy.int_out", "aten::sym_size.int", "executorch_prim::le.Scalar"]));
    // The kernel sizes the rows from the data; later ops see that size.
    let x = [0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 4.0];
    assert_eq!(i64s(&run(nonzero.lower(), &[f32_input(&[3, 4], &x)])), [0, 0, 2, 2]);

    let masked = Synth::default()
        .input("x", F32, &[S::N(2), S::N(3)])
        .input("mask", 12, &[S::N(2), S::N(3)])
        .range("u1", 0, 6)
        .node("aten::index.Tensor", &[("self", t("x")), ("indices", json!({"as_optional_tensors": [{"as_tensor": {"name": "mask"}}]}))], &[
            ("picked", F32, &[S::Sym("u1")]),
        ])
        .output("picked");
    assert_eq!(bound_of(&masked.lower()), 6);
    assert_eq!(masked.runtime_ops(), ops(&["aten::index.Tensor_out"]));
    let mask = (rbuild_runtime::ScalarType::Bool, vec![2, 3], vec![1u8, 0, 1, 0, 0, 1]);
    assert_eq!(f32s(&run(masked.lower(), &[f32_input(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), mask])), [1.0, 3.0, 6.0]);

    let repeat = Synth::default()
        .input("r", I64, &[S::N(4)])
        .range("u0", 0, 20)
        .node("aten::repeat_interleave.Tensor", &[("repeats", t("r"))], &[("idx", I64, &[S::Sym("u0")])])
        .output("idx");
    assert_eq!(bound_of(&repeat.lower()), 20);
    assert_eq!(i64s(&run(repeat.lower(), &[i64_input(&[4], &[2, 0, 1, 3])])), [0, 0, 2, 3, 3, 3]);
    let unbounded = Synth::default()
        .input("r", I64, &[S::N(4)])
        .node("aten::repeat_interleave.Tensor", &[("repeats", t("r"))], &[("idx", I64, &[S::Sym("u0")])])
        .output("idx");
    let e = unbounded.lower_with(&LowerOptions::default()).unwrap_err().to_string();
    assert!(e.contains("bound"), "{e}");
}

#[test]
fn out_variants_dunders_and_masked_fill_with_a_tensor_import() {
    let atan2_out = Synth::default()
        .input("a", F32, &[S::N(3)])
        .input("b", F32, &[S::N(3)])
        .node("aten::empty.memory_format", &[("size", json!({"as_ints": [3]}))], &[("buf", F32, &[S::N(3)])])
        .node("aten::atan2.out", &[("self", t("a")), ("other", t("b")), ("out", t("buf"))], &[("y", F32, &[S::N(3)])])
        .output("y");
    let mut g = atan2_out.lower();
    passes::optimize(&mut g).unwrap();
    assert_eq!(g.ops(), ["aten::atan2.out"], "the result is written into `out`, whose empty memory is dead");

    let shift = Synth::default()
        .input("x", 4, &[S::N(4)])
        .node("aten::__lshift__.Scalar", &[("self", t("x")), ("other", json!({"as_int": 2}))], &[("y", 4, &[S::N(4)])])
        .output("y");
    assert_eq!(shift.runtime_ops(), ops(&["aten::bitwise_left_shift.Tensor_Scalar_out"]));

    let fill = Synth::default()
        .input("x", F32, &[S::N(2), S::N(3)])
        .input("mask", 12, &[S::N(3)])
        .input("v", F32, &[])
        .node("aten::masked_fill.Tensor", &[("self", t("x")), ("mask", t("mask")), ("value", t("v"))], &[("y", F32, &[S::N(2), S::N(3)])])
        .output("y");
    assert_eq!(fill.runtime_ops(), ops(&["aten::where.self_out"]));
}

#[test]
fn training_gradients_without_kernels_fail_with_their_reason_next_to_unmapped_ops() {
    let g = Synth::default()
        .input("grad", F32, &[S::N(1), S::N(2), S::N(2), S::N(2)])
        .input("x", F32, &[S::N(1), S::N(2), S::N(4), S::N(4)])
        .node(
            "aten::avg_pool2d_backward",
            &[
                ("grad_output", t("grad")),
                ("self", t("x")),
                ("kernel_size", json!({"as_ints": [2, 2]})),
                ("stride", json!({"as_ints": [2, 2]})),
                ("padding", json!({"as_ints": [0, 0]})),
                ("ceil_mode", json!({"as_bool": false})),
                ("count_include_pad", json!({"as_bool": true})),
                ("divisor_override", json!({"as_none": true})),
            ],
            &[("dx", F32, &[S::N(1), S::N(2), S::N(4), S::N(4)])],
        )
        .node("aten::no_such_op", &[("self", t("dx"))], &[("y", F32, &[S::N(1), S::N(2), S::N(4), S::N(4)])])
        .output("y");
    let err = g.lower_with(&LowerOptions::default()).unwrap_err();
    let LowerError::Unmapped(unmapped, excluded) = &err else { panic!("{err}") };
    assert_eq!(unmapped, &[("aten::no_such_op.default".to_string(), 1)]);
    assert_eq!(excluded.len(), 1);
    let text = err.to_string();
    assert!(text.contains("aten::avg_pool2d_backward") && text.contains("training gradient") && text.contains("no_such_op"), "{text}");
}

/// Every operator of the Core ATen set (the spec's ops tagged `core`) is mapped or a named
/// exception with a reason.
#[test]
fn every_core_aten_operator_is_mapped_or_a_named_exception() {
    let spec = std::fs::read_to_string(testdata().join("../spec/core_aten_schemas.txt")).unwrap();
    let core: Vec<&str> = spec.lines().filter(|l| l.trim_end().ends_with(" core")).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert!(core.len() >= 180, "{} core overloads", core.len());
    let exceptions: Vec<&str> = rbuild_pt2::exceptions().iter().map(|(op, _)| *op).collect();
    let missing: Vec<&str> = core.iter().copied().filter(|op| !rbuild_pt2::is_mapped(op) && !exceptions.contains(op)).collect();
    assert!(missing.is_empty(), "core ops neither mapped nor named exceptions: {missing:?}");
    for (op, why) in rbuild_pt2::exceptions() {
        assert!(core.contains(op) && !rbuild_pt2::is_mapped(op) && !why.is_empty(), "{op}");
    }
    let mapped = rbuild_pt2::mapped_targets();
    fn names<'a>(ops: &[&'a str]) -> std::collections::BTreeSet<&'a str> {
        ops.iter().map(|op| op.split('.').next().unwrap()).collect()
    }
    let (core_names, excepted) = (names(&core), names(&exceptions));
    eprintln!(
        "{} mapped targets; Core ATen: {} of {} overloads ({} of {} operators) mapped, {} named exceptions",
        mapped.len(),
        core.iter().filter(|op| rbuild_pt2::is_mapped(op)).count(),
        core.len(),
        core_names.len() - excepted.len(),
        core_names.len(),
        exceptions.len()
    );
    assert!(mapped.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    assert!(mapped.contains(&"aten::group_norm") && mapped.contains(&"_operator.ge"), "{mapped:?}");
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    assert!(got.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-4), "{got:?} vs {want:?}");
}

/// The Core ATen ops without testdata run on the runtime's kernels with the sizes the import
/// plans for them, and compute what PyTorch does (values worked out by hand).
#[test]
fn core_ops_without_testdata_run_on_the_runtime_kernels() {
    // sort, descending along dim 1: values and indices.
    let sort = Synth::default()
        .input("x", F32, &[S::N(2), S::N(3)])
        .node("aten::sort", &[("self", t("x")), ("dim", json!({"as_int": 1})), ("descending", json!({"as_bool": true}))], &[
            ("v", F32, &[S::N(2), S::N(3)]),
            ("i", I64, &[S::N(2), S::N(3)]),
        ])
        .output("v")
        .output("i")
        .lower();
    let outs = run_all(sort, &[f32_input(&[2, 3], &[3.0, 1.0, 2.0, 0.0, 5.0, 4.0])]);
    assert_eq!((f32s(&outs[0]), i64s(&outs[1])), (vec![3.0, 2.0, 1.0, 5.0, 4.0, 0.0], vec![0, 2, 1, 1, 2, 0]));

    // scatter_reduce amax without self: the scattered maximum replaces the entry.
    let scatter = Synth::default()
        .input("x", F32, &[S::N(1), S::N(4)])
        .input("index", I64, &[S::N(1), S::N(2)])
        .input("src", F32, &[S::N(1), S::N(2)])
        .node(
            "aten::scatter_reduce.two",
            &[("self", t("x")), ("dim", json!({"as_int": 1})), ("index", t("index")), ("src", t("src")), ("reduce", json!({"as_string": "amax"})), ("include_self", json!({"as_bool": false}))],
            &[("y", F32, &[S::N(1), S::N(4)])],
        )
        .output("y")
        .lower();
    let got = run(scatter, &[f32_input(&[1, 4], &[9.0, 1.0, 1.0, 1.0]), i64_input(&[1, 2], &[0, 0]), f32_input(&[1, 2], &[5.0, 7.0])]);
    assert_eq!(f32s(&got), [7.0, 1.0, 1.0, 1.0]);

    // 3-D pooling of 0..8 over the whole 2x2x2 volume.
    let cube: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let x5 = [S::N(1), S::N(1), S::N(2), S::N(2), S::N(2)];
    let one5 = [S::N(1), S::N(1), S::N(1), S::N(1), S::N(1)];
    let k = json!({"as_ints": [2, 2, 2]});
    let pool3d = |target: &str, extra: (&str, Value), results: &[(&str, i64, &[S])]| {
        let mut g = Synth::default().input("x", F32, &x5).node(target, &[("self", t("x")), extra], results);
        for (name, _, _) in results {
            g = g.output(name);
        }
        run_all(g.lower(), &[f32_input(&[1, 1, 2, 2, 2], &cube)])
    };
    assert_eq!(f32s(&pool3d("aten::avg_pool3d", ("kernel_size", k.clone()), &[("y", F32, &one5)])[0]), [3.5]);
    let max = pool3d("aten::max_pool3d_with_indices", ("kernel_size", k.clone()), &[("y", F32, &one5), ("i", I64, &one5)]);
    assert_eq!((f32s(&max[0]), i64s(&max[1])), (vec![7.0], vec![7]));
    let adaptive = pool3d("aten::_adaptive_avg_pool3d", ("output_size", json!({"as_ints": [1, 1, 1]})), &[("y", F32, &one5)]);
    assert_eq!(f32s(&adaptive[0]), [3.5]);

    // col2im of ones: how many 2x2 blocks cover each pixel of a 2x3 image.
    let pair = |a: i64, b: i64| json!({"as_ints": [a, b]});
    let col2im = Synth::default()
        .input("cols", F32, &[S::N(1), S::N(4), S::N(2)])
        .node(
            "aten::col2im",
            &[("self", t("cols")), ("output_size", pair(2, 3)), ("kernel_size", pair(2, 2)), ("dilation", pair(1, 1)), ("padding", pair(0, 0)), ("stride", pair(1, 1))],
            &[("img", F32, &[S::N(1), S::N(1), S::N(2), S::N(3)])],
        )
        .output("img")
        .lower();
    assert_eq!(f32s(&run(col2im, &[f32_input(&[1, 4, 2], &[1.0; 8])])), [1.0, 2.0, 1.0, 1.0, 2.0, 1.0]);

    // Embedding bags of rows [i, i, i]: means and sums of two bags, with the bookkeeping
    // outputs sized as PyTorch's meta function does.
    let weights: Vec<f32> = (0..10).flat_map(|i| [i as f32; 3]).collect();
    for (mode, offset2bag, want) in [(1, 6, [1.5, 4.5]), (0, 0, [3.0, 18.0])] {
        let bag = Synth::default()
            .input("w", F32, &[S::N(10), S::N(3)])
            .input("indices", I64, &[S::N(6)])
            .input("offsets", I64, &[S::N(2)])
            .node("aten::_embedding_bag", &[("weight", t("w")), ("indices", t("indices")), ("offsets", t("offsets")), ("mode", json!({"as_int": mode}))], &[
                ("bags", F32, &[S::N(2), S::N(3)]),
                ("offset2bag", I64, &[S::N(offset2bag)]),
                ("bag_size", I64, &[S::N(2)]),
                ("max_indices", I64, &[S::N(2)]),
            ])
            .output("bags")
            .lower();
        let got = run(bag, &[f32_input(&[10, 3], &weights), i64_input(&[6], &[1, 2, 3, 4, 5, 6]), i64_input(&[2], &[0, 2])]);
        close(&f32s(&got), &[want[0], want[0], want[0], want[1], want[1], want[1]]);
    }

    // randperm: a permutation of 0..5.
    let randperm = Synth::default()
        .input("x", F32, &[S::N(1)])
        .node("aten::randperm", &[("n", json!({"as_int": 5}))], &[("p", I64, &[S::N(5)])])
        .output("p")
        .lower();
    let mut perm = i64s(&run(randperm, &[f32_input(&[1], &[0.0])]));
    perm.sort();
    assert_eq!(perm, [0, 1, 2, 3, 4]);

    // rfft then irfft (normalized by n) is the identity.
    let fft = Synth::default()
        .input("x", F32, &[S::N(1), S::N(4)])
        .node("aten::_fft_r2c", &[("self", t("x")), ("dim", json!({"as_ints": [1]})), ("normalization", json!({"as_int": 0})), ("onesided", json!({"as_bool": true}))], &[
            ("z", C64, &[S::N(1), S::N(3)]),
        ])
        .node("aten::_fft_c2r", &[("self", t("z")), ("dim", json!({"as_ints": [1]})), ("normalization", json!({"as_int": 2})), ("last_dim_size", json!({"as_int": 4}))], &[
            ("y", F32, &[S::N(1), S::N(4)]),
        ])
        .output("y")
        .lower();
    close(&f32s(&run(fft, &[f32_input(&[1, 4], &[1.0, 2.0, -1.0, 0.5])])), &[1.0, 2.0, -1.0, 0.5]);

    // Padding modes of [1, 2, 3, 4, 5] by (2, 1).
    for (mode, want) in [("reflect", [3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 4.0]), ("replicate", [1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0]), ("circular", [4.0, 5.0, 1.0, 2.0, 3.0, 4.0, 5.0, 1.0])] {
        let pad = Synth::default()
            .input("x", F32, &[S::N(1), S::N(1), S::N(5)])
            .node("aten::pad", &[("self", t("x")), ("pad", json!({"as_ints": [2, 1]})), ("mode", json!({"as_string": mode}))], &[("y", F32, &[S::N(1), S::N(1), S::N(8)])])
            .output("y")
            .lower();
        assert_eq!(f32s(&run(pad, &[f32_input(&[1, 1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0])])), want, "{mode}");
    }

    // Instance norm with an affine transform; the unbiased standard deviation.
    let instance = Synth::default()
        .input("x", F32, &[S::N(1), S::N(1), S::N(2), S::N(2)])
        .input("w", F32, &[S::N(1)])
        .input("b", F32, &[S::N(1)])
        .node(
            "aten::instance_norm",
            &[
                ("input", t("x")),
                ("weight", t("w")),
                ("bias", t("b")),
                ("running_mean", json!({"as_none": true})),
                ("running_var", json!({"as_none": true})),
                ("use_input_stats", json!({"as_bool": true})),
                ("momentum", json!({"as_float": 0.1})),
                ("eps", json!({"as_float": 0.0})),
                ("cudnn_enabled", json!({"as_bool": false})),
            ],
            &[("y", F32, &[S::N(1), S::N(1), S::N(2), S::N(2)])],
        )
        .output("y")
        .lower();
    let got = run(instance, &[f32_input(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]), f32_input(&[1], &[2.0]), f32_input(&[1], &[1.0])]);
    let z = 1.0 / 1.25f32.sqrt();
    close(&f32s(&got), &[1.0 - 3.0 * z, 1.0 - z, 1.0 + z, 1.0 + 3.0 * z]);
    let std = Synth::default()
        .input("x", F32, &[S::N(4)])
        .node("aten::std.correction", &[("self", t("x"))], &[("y", F32, &[])])
        .output("y")
        .lower();
    close(&f32s(&run(std, &[f32_input(&[4], &[1.0, 2.0, 3.0, 4.0])])), &[(5.0f32 / 3.0).sqrt()]);
}
