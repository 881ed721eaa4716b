//! The model-building API: each call checks its arguments, infers output shapes and records a
//! node. Models in `models/` describe themselves with these calls.

use rbuild_runtime::{Scalar, ScalarType};

use crate::error::{shape_err, Result};
use crate::graph::{Arg, ConstData, Dim, Graph, IntOrSym, Origin, Sym, TensorMeta, ValueId};
use crate::ops;
use crate::shape;

#[derive(Default)]
pub struct GraphBuilder {
    pub graph: Graph,
}

impl GraphBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a symbolic dimension with inclusive bounds.
    pub fn sym(&mut self, name: &str, min: usize, max: usize) -> Dim {
        self.graph.syms.push(Sym { name: name.into(), min, max, value: None });
        Dim::Sym(self.graph.syms.len() - 1)
    }

    pub fn input(&mut self, name: &str, meta: TensorMeta) -> ValueId {
        let n = self.graph.inputs.len();
        let v = self.graph.add_value(meta, Origin::Input(n), name);
        self.graph.inputs.push(v);
        v
    }

    /// A constant tensor; `data` must hold exactly its elements.
    pub fn constant(&mut self, name: &str, dtype: ScalarType, sizes: &[usize], data: ConstData) -> Result<ValueId> {
        check_bytes(name, dtype, sizes, &data)?;
        Ok(self.graph.add_value(TensorMeta::fixed(dtype, sizes), Origin::Const(data), name))
    }

    /// Mutable state (a KV cache): zero at load, kept between executions, written in place by
    /// ops that mark the argument `(a!)`.
    pub fn state(&mut self, name: &str, dtype: ScalarType, sizes: &[usize]) -> ValueId {
        self.graph.add_value(TensorMeta::fixed(dtype, sizes), Origin::State(None), name)
    }

    /// Mutable state that starts from `data` (an imported module's buffer) instead of zeros.
    pub fn state_with_init(&mut self, name: &str, dtype: ScalarType, sizes: &[usize], data: ConstData) -> Result<ValueId> {
        check_bytes(name, dtype, sizes, &data)?;
        Ok(self.graph.add_value(TensorMeta::fixed(dtype, sizes), Origin::State(Some(data)), name))
    }

    /// Stores `value` into `state` for the next execution (`aten::copy_`, a node with no
    /// outputs that passes keep). Readers of `state` recorded before this call see the old
    /// value; `value` must already have the state's dtype and shape.
    pub fn write_state(&mut self, state: ValueId, value: ValueId) -> Result<()> {
        if !matches!(self.graph.values[state].origin, Origin::State(_)) {
            return Err(shape_err("aten::copy_", format!("{} is not mutable state", self.graph.values[state].name)));
        }
        self.call("aten::copy_", vec![Arg::Tensor(state), Arg::Tensor(value), Arg::Bool(false)])?;
        Ok(())
    }

    /// `x.size(dim)` at run time. When that dimension is a symbol, the result becomes the
    /// symbol's run-time value, which [`Self::view_dims`] and friends refer to.
    pub fn sym_size(&mut self, x: ValueId, dim: usize) -> Result<ValueId> {
        let d = *self.meta(x).shape.get(dim).ok_or_else(|| shape_err("aten::sym_size.int", format!("no dim {dim}")))?;
        let v = self.call1("aten::sym_size.int", vec![Arg::Tensor(x), Arg::Int(dim as i64)])?;
        if let Dim::Sym(s) = d {
            self.graph.syms[s].value.get_or_insert(v);
        }
        Ok(v)
    }

    /// `x.item()` of a one-element integer tensor, as a run-time integer.
    pub fn item(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::_local_scalar_dense", vec![Arg::Tensor(x)])
    }

    /// A size list argument for `dims`: fixed sizes as ints, symbols as their run-time values
    /// (which [`Self::sym_size`] must have produced).
    pub fn size_arg(&self, dims: &[Dim]) -> Result<Arg> {
        if let Some(fixed) = dims.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n as i64) } else { None }).collect::<Option<Vec<_>>>() {
            return Ok(Arg::Ints(fixed));
        }
        let items = dims
            .iter()
            .map(|d| match *d {
                Dim::Fixed(n) => Ok(IntOrSym::Int(n as i64)),
                Dim::Sym(s) => self.graph.syms[s].value.map(IntOrSym::Sym).ok_or_else(|| {
                    shape_err("size list", format!("symbol {} has no run-time value (call sym_size first)", self.graph.syms[s].name))
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arg::SymInts(items))
    }

    /// `view_copy` to sizes that may include symbols.
    pub fn view_dims(&mut self, x: ValueId, dims: &[Dim]) -> Result<ValueId> {
        let size = self.size_arg(dims)?;
        self.call1("aten::view_copy", vec![Arg::Tensor(x), size])
    }

    /// `select_copy(x, dim, index)`; a negative index counts from the end at run time.
    pub fn select(&mut self, x: ValueId, dim: i64, index: i64) -> Result<ValueId> {
        self.call1("aten::select_copy.int", vec![Arg::Tensor(x), Arg::Int(dim), Arg::Int(index)])
    }

    pub fn output(&mut self, v: ValueId) {
        self.graph.outputs.push(v);
    }

    pub fn finish(self) -> Graph {
        self.graph
    }

    pub fn meta(&self, v: ValueId) -> &TensorMeta {
        self.graph.meta(v)
    }

    /// Calls `op` (a functional schema key) with all its arguments in schema order.
    pub fn call(&mut self, op: &str, args: Vec<Arg>) -> Result<Vec<ValueId>> {
        self.call_bounded(op, args, None)
    }

    /// [`Self::call`] for an op whose result size depends on the data (`nonzero`): that size
    /// becomes a new symbol, bounded by the op's worst case narrowed to `bound` (required
    /// where the inputs give no worst case, as for `repeat_interleave`).
    pub fn call_bounded(&mut self, op: &str, args: Vec<Arg>, bound: Option<usize>) -> Result<Vec<ValueId>> {
        let def = ops::op(op).ok_or_else(|| crate::ExportError::UnknownOp(op.to_string()))?;
        if args.len() != def.functional.args.len() {
            return Err(shape_err(op, format!("takes {} arguments, {} given", def.functional.args.len(), args.len())));
        }
        let shape::Inferred { metas, new_syms } = shape::infer_with_syms(&self.graph, op, &args, bound)?;
        self.graph.syms.extend(new_syms);
        let short = op.rsplit("::").next().unwrap_or(op);
        let outputs: Vec<ValueId> = metas
            .into_iter()
            .map(|m| {
                let name = format!("{short}_{}", self.graph.values.len());
                let origin = if ops::returns_int(op) { Origin::SymInt } else { Origin::Computed };
                self.graph.add_value(m, origin, name)
            })
            .collect();
        self.graph.nodes.push(crate::graph::Node { op: op.to_string(), args, outputs: outputs.clone() });
        Ok(outputs)
    }

    /// `call` for single-output ops.
    pub fn call1(&mut self, op: &str, args: Vec<Arg>) -> Result<ValueId> {
        Ok(self.call(op, args)?[0])
    }

    /// 2-D convolution (NCHW): weight [out, in/groups, kh, kw].
    pub fn conv2d(
        &mut self,
        x: ValueId,
        w: ValueId,
        b: Option<ValueId>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<ValueId> {
        let pair = |v: usize| Arg::Ints(vec![v as i64, v as i64]);
        self.call1(
            "aten::convolution",
            vec![
                Arg::Tensor(x),
                Arg::Tensor(w),
                b.map_or(Arg::None, Arg::Tensor),
                pair(stride),
                pair(padding),
                pair(dilation),
                Arg::Bool(false),
                pair(0),
                Arg::Int(groups as i64),
            ],
        )
    }

    /// Inference batch norm over dim 1.
    pub fn batch_norm(&mut self, x: ValueId, w: Option<ValueId>, b: Option<ValueId>, mean: ValueId, var: ValueId, eps: f64) -> Result<ValueId> {
        Ok(self.call(
            "aten::_native_batch_norm_legit_no_training",
            vec![
                Arg::Tensor(x),
                w.map_or(Arg::None, Arg::Tensor),
                b.map_or(Arg::None, Arg::Tensor),
                Arg::Tensor(mean),
                Arg::Tensor(var),
                Arg::Float(0.1),
                Arg::Float(eps),
            ],
        )?[0])
    }

    pub fn relu(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::relu", vec![Arg::Tensor(x)])
    }

    pub fn hardtanh(&mut self, x: ValueId, min: f64, max: f64) -> Result<ValueId> {
        self.call1("aten::hardtanh", vec![Arg::Tensor(x), Arg::Scalar(Scalar::Double(min)), Arg::Scalar(Scalar::Double(max))])
    }

    pub fn relu6(&mut self, x: ValueId) -> Result<ValueId> {
        self.hardtanh(x, 0.0, 6.0)
    }

    pub fn hardswish(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::hardswish", vec![Arg::Tensor(x)])
    }

    pub fn hardsigmoid(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::hardsigmoid", vec![Arg::Tensor(x)])
    }

    pub fn sigmoid(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::sigmoid", vec![Arg::Tensor(x)])
    }

    pub fn add(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.call1("aten::add.Tensor", vec![Arg::Tensor(a), Arg::Tensor(b), Arg::Scalar(Scalar::Int(1))])
    }

    pub fn mul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.call1("aten::mul.Tensor", vec![Arg::Tensor(a), Arg::Tensor(b)])
    }

    /// Mean over `dims` (None = all).
    pub fn mean(&mut self, x: ValueId, dims: &[i64], keepdim: bool) -> Result<ValueId> {
        self.call1("aten::mean.dim", vec![Arg::Tensor(x), Arg::Ints(dims.to_vec()), Arg::Bool(keepdim), Arg::None])
    }

    pub fn adaptive_avg_pool2d(&mut self, x: ValueId, out: [usize; 2]) -> Result<ValueId> {
        self.call1("aten::adaptive_avg_pool2d", vec![Arg::Tensor(x), Arg::Ints(vec![out[0] as i64, out[1] as i64])])
    }

    pub fn flatten(&mut self, x: ValueId, start: i64, end: i64) -> Result<ValueId> {
        self.call1("aten::flatten.using_ints", vec![Arg::Tensor(x), Arg::Int(start), Arg::Int(end)])
    }

    /// `x @ w.T + b` with a PyTorch-layout weight [out, in].
    pub fn linear(&mut self, x: ValueId, w: ValueId, b: Option<ValueId>) -> Result<ValueId> {
        self.call1("aten::linear", vec![Arg::Tensor(x), Arg::Tensor(w), b.map_or(Arg::None, Arg::Tensor)])
    }

    /// Inference dropout (identity; removed by the no-op pass).
    pub fn dropout(&mut self, x: ValueId, p: f64) -> Result<ValueId> {
        self.call1("aten::dropout", vec![Arg::Tensor(x), Arg::Float(p), Arg::Bool(false)])
    }

    pub fn view(&mut self, x: ValueId, size: &[i64]) -> Result<ValueId> {
        self.call1("aten::view_copy", vec![Arg::Tensor(x), Arg::Ints(size.to_vec())])
    }

    pub fn permute(&mut self, x: ValueId, dims: &[i64]) -> Result<ValueId> {
        self.call1("aten::permute_copy", vec![Arg::Tensor(x), Arg::Ints(dims.to_vec())])
    }

    pub fn sub(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.call1("aten::sub.Tensor", vec![Arg::Tensor(a), Arg::Tensor(b), Arg::Scalar(Scalar::Int(1))])
    }

    /// `x + s` for a float scalar.
    pub fn add_scalar(&mut self, x: ValueId, s: f64) -> Result<ValueId> {
        self.call1("aten::add.Scalar", vec![Arg::Tensor(x), Arg::Scalar(Scalar::Double(s)), Arg::Scalar(Scalar::Int(1))])
    }

    /// `x * s` for a float scalar.
    pub fn mul_scalar(&mut self, x: ValueId, s: f64) -> Result<ValueId> {
        self.call1("aten::mul.Scalar", vec![Arg::Tensor(x), Arg::Scalar(Scalar::Double(s))])
    }

    pub fn pow_scalar(&mut self, x: ValueId, exponent: f64) -> Result<ValueId> {
        self.call1("aten::pow.Tensor_Scalar", vec![Arg::Tensor(x), Arg::Scalar(Scalar::Double(exponent))])
    }

    pub fn rsqrt(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::rsqrt", vec![Arg::Tensor(x)])
    }

    pub fn neg(&mut self, x: ValueId) -> Result<ValueId> {
        self.call1("aten::neg", vec![Arg::Tensor(x)])
    }

    /// Rows of `weight` [num_embeddings, dim] gathered by integer `indices`.
    pub fn embedding(&mut self, weight: ValueId, indices: ValueId) -> Result<ValueId> {
        self.call1(
            "aten::embedding",
            vec![Arg::Tensor(weight), Arg::Tensor(indices), Arg::Int(-1), Arg::Bool(false), Arg::Bool(false)],
        )
    }

    /// Batched matrix product [b, n, m] @ [b, m, p].
    pub fn bmm(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.call1("aten::bmm", vec![Arg::Tensor(a), Arg::Tensor(b)])
    }

    pub fn softmax(&mut self, x: ValueId, dim: i64) -> Result<ValueId> {
        self.call1("aten::_softmax", vec![Arg::Tensor(x), Arg::Int(dim), Arg::Bool(false)])
    }

    /// `x[start:end]` along `dim` (step 1).
    pub fn slice(&mut self, x: ValueId, dim: i64, start: i64, end: i64) -> Result<ValueId> {
        self.call1("aten::slice_copy.Tensor", vec![Arg::Tensor(x), Arg::Int(dim), Arg::Int(start), Arg::Int(end), Arg::Int(1)])
    }

    pub fn expand(&mut self, x: ValueId, size: &[i64]) -> Result<ValueId> {
        self.call1("aten::expand_copy", vec![Arg::Tensor(x), Arg::Ints(size.to_vec()), Arg::Bool(false)])
    }

    pub fn cat(&mut self, xs: &[ValueId], dim: i64) -> Result<ValueId> {
        self.call1("aten::cat", vec![Arg::Tensors(xs.to_vec()), Arg::Int(dim)])
    }
}

/// `data` must hold exactly the elements of a `dtype` tensor of `sizes`.
fn check_bytes(name: &str, dtype: ScalarType, sizes: &[usize], data: &ConstData) -> Result<()> {
    let need = sizes.iter().product::<usize>() * dtype.size();
    if data.len() != need {
        return Err(crate::ExportError::Weight {
            name: name.into(),
            message: format!("{} bytes given, {dtype} {sizes:?} needs {need}", data.len()),
        });
    }
    Ok(())
}
