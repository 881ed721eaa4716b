//! Every single-op program of ../shared/testdata/ops, rebuilt through `GraphBuilder` from its
//! kernel calls (each out variant mapped back to its functional op, each argument read by its
//! schema type) the way an importer rebuilds a `torch.export` graph. Shape and dtype inference
//! must give the program's own output metas; the re-exported program must compute in rbuild
//! exactly what the original computes, and in ExecuTorch 1.3.1 exactly what the original
//! computes there, within the case's tolerance of PyTorch. New cases are picked up without
//! code changes; programs with non-contiguous tensors are listed as skipped (rbuild emits
//! contiguous layouts only).

use crate::common;

use std::collections::HashMap;

use rbuild_export::graph::{Arg, ConstData, TensorMeta};
use rbuild_export::{emit, ops, passes, plan, Graph, GraphBuilder, ValueId};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::format::schema::{ExecutionPlan, InstructionArguments, KernelTypes, Tensor};
use rbuild_runtime::format::PteFile;
use rbuild_runtime::{KernelContext, Program, Scalar, ScalarType};

/// Why a program was not rebuilt.
enum Problem {
    /// Beyond what rbuild emits (not an op-coverage failure).
    Skip(String),
    Fail(String),
}

use Problem::{Fail, Skip};

/// Rebuilds `forward` of a program as a builder graph.
struct Rebuilder<'p, 'f> {
    file: &'f PteFile<'p>,
    plan: &'f ExecutionPlan<'p>,
    b: GraphBuilder,
    ids: HashMap<usize, ValueId>,
    /// The builder value last written at each planned location (memory id, offset).
    placed: HashMap<(u32, u64), ValueId>,
}

impl Rebuilder<'_, '_> {
    fn value(&self, i: usize) -> Result<&KernelTypes<'_>, Problem> {
        let values = self.plan.values.as_deref().unwrap_or(&[]);
        values.get(i).and_then(|v| v.val.as_ref()).ok_or_else(|| Fail(format!("value {i} is missing")))
    }

    fn meta(t: &Tensor<'_>) -> Result<TensorMeta, Problem> {
        let dtype = ScalarType::from_code(t.scalar_type as i64).ok_or_else(|| Fail(format!("dtype code {}", t.scalar_type)))?;
        let sizes: Vec<usize> = t.sizes.as_deref().unwrap_or(&[]).iter().map(|&s| s as usize).collect();
        let order = t.dim_order.unwrap_or(&[]);
        if !order.iter().enumerate().all(|(i, &d)| d as usize == i) {
            return Err(Skip(format!("dim order {order:?}")));
        }
        Ok(TensorMeta::fixed(dtype, &sizes))
    }

    /// The builder value of tensor value `i`: known, or a constant read from the segment.
    fn tensor(&mut self, i: usize) -> Result<ValueId, Problem> {
        if let Some(&v) = self.ids.get(&i) {
            return Ok(v);
        }
        let KernelTypes::Tensor(t) = self.value(i)? else { return Err(Fail(format!("value {i} is not a tensor"))) };
        let meta = Self::meta(t)?;
        if let Some(at) = Self::location(t) {
            // ExecuTorch plans views as aliases of their source's memory.
            let source = self.placed.get(&at).copied().filter(|&s| {
                let m = self.b.meta(s);
                m.dtype == meta.dtype && m.sizes().map(|s| s.iter().product::<usize>()) == meta.sizes().map(|s| s.iter().product())
            });
            let source = source.ok_or_else(|| Fail(format!("value {i} is read before anything computes it")))?;
            let sizes: Vec<i64> = meta.sizes().unwrap().iter().map(|&s| s as i64).collect();
            let v = self.b.view(source, &sizes).map_err(|e| Fail(format!("view of value {i}: {e}")))?;
            self.ids.insert(i, v);
            return Ok(v);
        }
        if t.data_buffer_idx == 0 {
            return Err(Fail(format!("value {i} has neither data nor planned memory")));
        }
        let (bytes, offsets) = self.file.constant_segment().ok().flatten().ok_or_else(|| Fail("no constant segment".into()))?;
        let start = offsets.get(t.data_buffer_idx as usize).map(|&o| o as usize).ok_or_else(|| Fail("bad constant index".into()))?;
        let len = meta.sizes().unwrap().iter().product::<usize>() * meta.dtype.size();
        let data = bytes.get(start..start + len).ok_or_else(|| Fail(format!("constant {i} out of the segment")))?.to_vec();
        let v = self.b.constant(&format!("c{i}"), meta.dtype, &meta.sizes().unwrap(), ConstData::owned(data)).map_err(|e| Fail(e.to_string()))?;
        self.ids.insert(i, v);
        Ok(v)
    }

    fn location(t: &Tensor<'_>) -> Option<(u32, u64)> {
        t.allocation_info.as_ref().map(|a| (a.memory_id, (a.memory_offset_high as u64) << 32 | a.memory_offset_low as u64))
    }

    /// Maps program value `i` (a tensor) to builder value `v`.
    fn define(&mut self, i: usize, v: ValueId) -> Result<(), Problem> {
        if let KernelTypes::Tensor(t) = self.value(i)? {
            if let Some(at) = Self::location(t) {
                self.placed.insert(at, v);
            }
        }
        self.ids.insert(i, v);
        Ok(())
    }

    fn int_at(&self, i: i64) -> Result<i64, Problem> {
        match self.value(i as usize)? {
            KernelTypes::Int(x) => Ok(x.int_val),
            other => Err(Fail(format!("list item {i} is {other:?}, not an int"))),
        }
    }

    /// Value `i` as an argument of schema type `ty`.
    fn arg(&mut self, ty: &str, i: usize) -> Result<Arg, Problem> {
        let v = self.value(i)?.clone();
        let base = ty.strip_suffix('?').unwrap_or(ty);
        Ok(match (base, v) {
            (_, KernelTypes::Null) if ty.ends_with('?') => Arg::None,
            ("Tensor", KernelTypes::Tensor(_)) => Arg::Tensor(self.tensor(i)?),
            ("Tensor[]", KernelTypes::TensorList(l)) => {
                Arg::Tensors(l.items.unwrap_or_default().iter().map(|&t| self.tensor(t as usize)).collect::<Result<_, _>>()?)
            }
            ("Tensor?[]", KernelTypes::OptionalTensorList(l)) => Arg::OptTensors(
                l.items
                    .unwrap_or_default()
                    .iter()
                    .map(|&t| match t {
                        -1 => Ok(None),
                        t if matches!(self.value(t as usize)?, KernelTypes::Null) => Ok(None),
                        t => self.tensor(t as usize).map(Some),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            ("int" | "SymInt", KernelTypes::Int(x)) => Arg::Int(x.int_val),
            (t, KernelTypes::IntList(l)) if t.starts_with("int[") || t.starts_with("SymInt[") => {
                Arg::Ints(l.items.unwrap_or_default().iter().map(|&x| self.int_at(x)).collect::<Result<_, _>>()?)
            }
            ("float", KernelTypes::Double(x)) => Arg::Float(x.double_val),
            ("float[]", KernelTypes::DoubleList(l)) => Arg::Floats(l.items.unwrap_or_default()),
            ("bool", KernelTypes::Bool(x)) => Arg::Bool(x.bool_val),
            ("Scalar", KernelTypes::Int(x)) => Arg::Scalar(Scalar::Int(x.int_val)),
            ("Scalar", KernelTypes::Double(x)) => Arg::Scalar(Scalar::Double(x.double_val)),
            ("Scalar", KernelTypes::Bool(x)) => Arg::Scalar(Scalar::Bool(x.bool_val)),
            ("ScalarType", KernelTypes::Int(x)) => {
                Arg::ScalarType(ScalarType::from_code(x.int_val).ok_or_else(|| Fail(format!("dtype code {}", x.int_val)))?)
            }
            ("MemoryFormat", KernelTypes::Int(x)) => Arg::Int(x.int_val),
            ("str", KernelTypes::String(s)) => Arg::Str(s.string_val.unwrap_or("").to_string()),
            (_, other) => return Err(Fail(format!("a {ty} argument holds {other:?}"))),
        })
    }

    /// Re-records one kernel call as its functional op; checks the inferred output metas.
    fn call(&mut self, key: &str, call_args: &[i32]) -> Result<(), Problem> {
        let def = ops::all()
            .find(|d| d.out.as_ref().is_some_and(|o| o.key() == key))
            .ok_or_else(|| Fail(format!("{key} has no functional op in rbuild's schema table")))?;
        let out = def.out.as_ref().unwrap();
        let slot = |name: &str| out.args.iter().position(|a| a.name == name).and_then(|k| call_args.get(k)).map(|&x| x as usize);
        // Program values the call writes: its out arguments (a list op's list items).
        let mut written = Vec::new();
        for a in out.args.iter().filter(|a| a.is_out) {
            let i = slot(&a.name).ok_or_else(|| Fail(format!("{key}: no {} argument", a.name)))?;
            match self.value(i)? {
                KernelTypes::TensorList(l) => written.extend(l.items.clone().unwrap_or_default().iter().map(|&t| t as usize)),
                _ => written.push(i),
            }
        }
        let first_out = match written.first().map(|&i| self.value(i)) {
            Some(Ok(KernelTypes::Tensor(t))) => Some(Self::meta(t)?),
            _ => None,
        };
        let mut args = Vec::new();
        for a in &def.functional.args {
            args.push(match slot(&a.name) {
                Some(i) => self.arg(&a.ty, i).map_err(|p| match p {
                    Fail(m) => Fail(format!("{key}: {}: {m}", a.name)),
                    skip => skip,
                })?,
                // Tensor options the out variant drops: the output carries the dtype.
                None if a.name == "dtype" => first_out.as_ref().map_or(Arg::None, |m| Arg::ScalarType(m.dtype)),
                None => Arg::None,
            });
        }
        let key_f = def.functional.key();
        let outputs = self.b.call(&key_f, args).map_err(|e| Fail(format!("{key_f}: {e}")))?;
        if outputs.len() != written.len() {
            return Err(Fail(format!("{key_f}: {} outputs inferred, the program writes {}", outputs.len(), written.len())));
        }
        for (&v, &i) in outputs.iter().zip(&written) {
            let KernelTypes::Tensor(t) = self.value(i)? else { return Err(Fail(format!("{key}: output {i} is not a tensor"))) };
            let want = Self::meta(t)?;
            let got = self.b.meta(v);
            if (got.dtype, &got.shape) != (want.dtype, &want.shape) {
                return Err(Fail(format!("{key_f}: inferred {} {:?}, the program has {} {:?}", got.dtype, got.shape, want.dtype, want.shape)));
            }
            self.define(i, v)?;
        }
        Ok(())
    }
}

fn rebuild(file: &PteFile<'_>) -> Result<Graph, Problem> {
    let plan = file.program.execution_plan.as_deref().and_then(|p| p.iter().find(|p| p.name == Some("forward"))).ok_or_else(|| Fail("no forward".into()))?;
    if plan.delegates.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(Skip("delegated".into()));
    }
    let mut r = Rebuilder { file, plan, b: GraphBuilder::new(), ids: HashMap::new(), placed: HashMap::new() };
    for (n, &i) in plan.inputs.as_deref().unwrap_or(&[]).iter().enumerate() {
        let KernelTypes::Tensor(t) = r.value(i as usize)? else { return Err(Fail(format!("input {n} is not a tensor"))) };
        let meta = Rebuilder::meta(t)?;
        let v = r.b.input(&format!("input{n}"), meta);
        r.define(i as usize, v)?;
    }
    let operators = plan.operators.as_deref().unwrap_or(&[]);
    for chain in plan.chains.as_deref().unwrap_or(&[]) {
        for ins in chain.instructions.as_deref().unwrap_or(&[]) {
            let Some(InstructionArguments::KernelCall(k)) = &ins.instr_args else {
                return Err(Fail(format!("instruction {:?} is not a kernel call", ins.instr_args)));
            };
            let key = operators.get(k.op_index as usize).map(|o| o.key()).ok_or_else(|| Fail("bad operator index".into()))?;
            r.call(&key, k.args.as_deref().unwrap_or(&[]))?;
        }
    }
    for &o in plan.outputs.as_deref().unwrap_or(&[]) {
        let v = r.tensor(o as usize)?;
        r.b.output(v);
    }
    Ok(r.b.finish())
}

fn scalar_type(d: safetensors::Dtype) -> ScalarType {
    use safetensors::Dtype::*;
    match d {
        F32 => ScalarType::Float,
        F64 => ScalarType::Double,
        F16 => ScalarType::Half,
        BF16 => ScalarType::BFloat16,
        I64 => ScalarType::Long,
        I32 => ScalarType::Int,
        I16 => ScalarType::Short,
        I8 => ScalarType::Char,
        U8 => ScalarType::Byte,
        BOOL => ScalarType::Bool,
        d => panic!("input dtype {d:?} not handled by the test"),
    }
}

/// Output bytes of `forward` on the case's inputs, in rbuild with all kernels.
fn run(program: &[u8], io: &safetensors::SafeTensors<'_>) -> Result<Vec<Vec<u8>>, String> {
    let buf = AlignedBuf::from_bytes(program);
    let p = Program::load(buf.as_slice()).map_err(|e| e.to_string())?;
    let mut m = p.load_method("forward", &rbuild_kernels::registry(), &BackendRegistry::new()).map_err(|e| e.to_string())?;
    for i in 0..m.inputs().len() {
        let t = io.tensor(&format!("input.{i}")).map_err(|e| e.to_string())?;
        m.set_input_tensor(i, scalar_type(t.dtype()), t.shape(), t.data()).map_err(|e| e.to_string())?;
    }
    m.execute(&mut KernelContext::default()).map_err(|e| e.to_string())?;
    Ok((0..m.outputs().len()).map(|i| m.output_bytes(i).unwrap_or_default().to_vec()).collect())
}

#[test]
fn every_single_op_case_rebuilds_through_the_builder() {
    let td = common::testdata();
    let cases = common::pte_files(&td.join("ops"));
    assert!(cases.len() > 100, "testdata not found at {}", td.display());
    let dir = tempfile::tempdir().unwrap();
    let (mut manifest, mut skipped, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for pte in &cases {
        let label = pte.strip_prefix(&td).unwrap().display().to_string();
        let Some(meta) = common::case_meta(pte) else { continue };
        let original = std::fs::read(pte).unwrap();
        let buf = AlignedBuf::from_bytes(&original);
        let file = PteFile::parse(buf.as_slice()).unwrap();
        let mut graph = match rebuild(&file) {
            Ok(g) => g,
            Err(Skip(why)) => {
                skipped.push(format!("{label}: {why}"));
                continue;
            }
            Err(Fail(why)) => {
                failures.push(format!("{label}: {why}"));
                continue;
            }
        };
        let program = passes::optimize(&mut graph).and_then(|_| emit::emit(&graph, &plan::plan_memory(&graph), "forward"));
        let program = match program {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{label}: export: {e}"));
                continue;
            }
        };
        let io_path = common::case_io(pte);
        let io_bytes = std::fs::read(&io_path).unwrap();
        let io = safetensors::SafeTensors::deserialize(&io_bytes).unwrap();
        match (run(&program, &io), run(&original, &io)) {
            (Ok(ours), Ok(theirs)) if ours == theirs => {}
            (Ok(_), Ok(_)) => failures.push(format!("{label}: the re-export computes other bits than the original in rbuild")),
            (ours, theirs) => failures.push(format!("{label}: rbuild run failed: {:?} / original {:?}", ours.err(), theirs.err())),
        }
        let ours = dir.path().join(label.replace('/', "__"));
        std::fs::write(&ours, &program).unwrap();
        let n_out = meta["outputs"].as_array().map_or(0, |o| o.len());
        manifest.push(serde_json::json!({
            "label": label, "pte": ours, "io": io_path, "original": pte,
            "atol": meta["atol"].as_f64().unwrap_or(1e-5), "rtol": meta["rtol"].as_f64().unwrap_or(1e-5), "outputs": n_out,
        }));
    }
    eprintln!("re-exported {} of {} single-op cases; {} skipped, {} failed", manifest.len(), cases.len(), skipped.len(), failures.len());
    for s in &skipped {
        eprintln!("  skipped {s}");
    }
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    assert!(failures.is_empty(), "{} cases failed to re-export", failures.len());
    assert!(skipped.len() * 10 < cases.len(), "too many cases skipped");
    let Some(python) = common::oracle_python() else { return };
    eprintln!("{}", common::run_oracle(&python, &manifest, dir.path()).trim());
}
