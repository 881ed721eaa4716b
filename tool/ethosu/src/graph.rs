//! A typed int8 subgraph: what a partitioner hands to the Ethos-U lowering.
//!
//! Tensors are NHWC (TFLite's layout, which Vela reads). Activations are int8 with per-tensor
//! quantization; convolution / fully-connected weights are int8 with per-output-channel scales
//! (zero point 0); biases are int32 with scale `input_scale × weight_scale[c]`, zero point 0.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    I8,
    I32,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::I8 => 1,
            DType::I32 => 4,
        }
    }
}

/// Affine quantization: one (scale, zero point) per tensor, or per channel along `axis`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quant {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub axis: i32,
}

impl Quant {
    pub fn per_tensor(scale: f32, zero_point: i64) -> Quant {
        Quant { scale: vec![scale], zero_point: vec![zero_point], axis: 0 }
    }
    pub fn per_channel(scale: Vec<f32>, axis: i32) -> Quant {
        let zp = vec![0; scale.len()];
        Quant { scale, zero_point: zp, axis }
    }
}

pub type TensorId = usize;

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<i32>,
    pub dtype: DType,
    pub quant: Quant,
    /// Constant data (little-endian), or None for activations.
    pub data: Option<Vec<u8>>,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    Same,
    Valid,
}

/// Activation fused into the op's output clamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    None,
    Relu,
    Relu6,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// weight [O, KH, KW, I], bias [O] int32.
    Conv2d {
        stride: [i32; 2],
        dilation: [i32; 2],
        padding: Padding,
        act: Activation,
    },
    /// weight [1, KH, KW, C × multiplier], bias [C × multiplier].
    DepthwiseConv2d {
        stride: [i32; 2],
        dilation: [i32; 2],
        padding: Padding,
        depth_multiplier: i32,
        act: Activation,
    },
    Add {
        act: Activation,
    },
    /// weight [O, I], bias [O].
    FullyConnected {
        act: Activation,
    },
    AveragePool2d {
        filter: [i32; 2],
        stride: [i32; 2],
        padding: Padding,
        act: Activation,
    },
    /// Mean over the axes in the int32 constant input 1.
    Mean {
        keep_dims: bool,
    },
    Reshape,
    /// Constant padding with the input's zero point; input 1 is an int32 `[4, 2]` constant of
    /// (before, after) per NHWC dimension. Vela folds it into the convolution that follows.
    Pad,
}

impl OpKind {
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Conv2d { .. } => "CONV_2D",
            OpKind::DepthwiseConv2d { .. } => "DEPTHWISE_CONV_2D",
            OpKind::Add { .. } => "ADD",
            OpKind::FullyConnected { .. } => "FULLY_CONNECTED",
            OpKind::AveragePool2d { .. } => "AVERAGE_POOL_2D",
            OpKind::Mean { .. } => "MEAN",
            OpKind::Reshape => "RESHAPE",
            OpKind::Pad => "PAD",
        }
    }
    /// (inputs, outputs) the op takes.
    fn arity(&self) -> (usize, usize) {
        match self {
            OpKind::Conv2d { .. } | OpKind::DepthwiseConv2d { .. } | OpKind::FullyConnected { .. } => (3, 1),
            OpKind::Add { .. } | OpKind::Mean { .. } | OpKind::Pad => (2, 1),
            OpKind::AveragePool2d { .. } | OpKind::Reshape => (1, 1),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

/// An int8 subgraph: tensors, ops in execution order, graph inputs and outputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Int8Graph {
    pub tensors: Vec<Tensor>,
    pub ops: Vec<Op>,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

/// A graph the lowering cannot accept, naming the op or tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphError(pub String);

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ethos-U subgraph: {}", self.0)
    }
}
impl std::error::Error for GraphError {}

impl Int8Graph {
    /// An int8 activation tensor.
    pub fn activation(&mut self, name: &str, shape: &[i32], scale: f32, zero_point: i64) -> TensorId {
        self.push(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::I8,
            quant: Quant::per_tensor(scale, zero_point),
            data: None,
        })
    }

    /// A constant int8 weight, quantized per channel along `axis`.
    pub fn weight(&mut self, name: &str, shape: &[i32], data: &[i8], scales: Vec<f32>, axis: i32) -> TensorId {
        let bytes = data.iter().map(|&v| v as u8).collect();
        self.push(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::I8,
            quant: Quant::per_channel(scales, axis),
            data: Some(bytes),
        })
    }

    /// A constant int32 bias with per-channel scales `input_scale × weight_scale[c]`.
    pub fn bias(&mut self, name: &str, data: &[i32], scales: Vec<f32>) -> TensorId {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.push(Tensor {
            name: name.into(),
            shape: vec![data.len() as i32],
            dtype: DType::I32,
            quant: Quant::per_channel(scales, 0),
            data: Some(bytes),
        })
    }

    /// A constant int32 vector without quantization (MEAN axes, shapes).
    pub fn int32_const(&mut self, name: &str, data: &[i32]) -> TensorId {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.push(Tensor {
            name: name.into(),
            shape: vec![data.len() as i32],
            dtype: DType::I32,
            quant: Quant { scale: vec![], zero_point: vec![], axis: 0 },
            data: Some(bytes),
        })
    }

    pub fn push(&mut self, t: Tensor) -> TensorId {
        self.tensors.push(t);
        self.tensors.len() - 1
    }

    pub fn op(&mut self, kind: OpKind, inputs: &[TensorId], outputs: &[TensorId]) {
        self.ops.push(Op { kind, inputs: inputs.to_vec(), outputs: outputs.to_vec() });
    }

    /// Structural checks: ids in range, arities, dtypes, constant sizes, per-channel scale counts,
    /// every op input produced earlier (or a graph input / constant).
    pub fn validate(&self) -> Result<(), GraphError> {
        let n = self.tensors.len();
        let t = |id: TensorId, what: &str| {
            self.tensors.get(id).ok_or_else(|| GraphError(format!("{what}: tensor id {id} out of range ({n} tensors)")))
        };
        for (id, tt) in self.tensors.iter().enumerate() {
            if tt.shape.iter().any(|&d| d <= 0) {
                return Err(GraphError(format!("tensor {id} `{}`: shape {:?} has a non-positive dimension", tt.name, tt.shape)));
            }
            if let Some(d) = &tt.data {
                if d.len() != tt.numel() * tt.dtype.size() {
                    return Err(GraphError(format!(
                        "tensor {id} `{}`: {} data bytes for shape {:?} ({:?})",
                        tt.name,
                        d.len(),
                        tt.shape,
                        tt.dtype
                    )));
                }
            }
            let q = &tt.quant;
            if q.scale.len() != q.zero_point.len() {
                return Err(GraphError(format!(
                    "tensor {id} `{}`: {} scales but {} zero points",
                    tt.name,
                    q.scale.len(),
                    q.zero_point.len()
                )));
            }
            if q.scale.len() > 1 {
                let ax = q.axis;
                let ok = ax >= 0 && (ax as usize) < tt.shape.len() && tt.shape[ax as usize] as usize == q.scale.len();
                if !ok {
                    return Err(GraphError(format!(
                        "tensor {id} `{}`: {} per-channel scales along axis {ax} of shape {:?}",
                        tt.name,
                        q.scale.len(),
                        tt.shape
                    )));
                }
            }
            if q.scale.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return Err(GraphError(format!("tensor {id} `{}`: scales must be finite and positive", tt.name)));
            }
        }
        let mut ready: Vec<bool> = self.tensors.iter().map(|t| t.data.is_some()).collect();
        for &i in &self.inputs {
            let tt = t(i, "graph input")?;
            if tt.dtype != DType::I8 || tt.data.is_some() {
                return Err(GraphError(format!("graph input `{}` must be a non-constant int8 tensor", tt.name)));
            }
            ready[i] = true;
        }
        for (k, op) in self.ops.iter().enumerate() {
            let name = op.kind.name();
            let (ni, no) = op.kind.arity();
            if op.inputs.len() != ni || op.outputs.len() != no {
                return Err(GraphError(format!(
                    "op {k} {name}: takes {ni} inputs and {no} outputs, has {} and {}",
                    op.inputs.len(),
                    op.outputs.len()
                )));
            }
            for &i in &op.inputs {
                let tt = t(i, &format!("op {k} {name} input"))?;
                if !ready[i] {
                    return Err(GraphError(format!("op {k} {name}: input `{}` is used before an op produces it", tt.name)));
                }
            }
            for &o in &op.outputs {
                let tt = t(o, &format!("op {k} {name} output"))?;
                if tt.dtype != DType::I8 || tt.data.is_some() {
                    return Err(GraphError(format!("op {k} {name}: output `{}` must be a non-constant int8 tensor", tt.name)));
                }
                ready[o] = true;
            }
            let inp = |j: usize| &self.tensors[op.inputs[j]];
            let needs_const = |j: usize, dtype: DType, role: &str| -> Result<(), GraphError> {
                let tt = inp(j);
                if tt.data.is_none() || tt.dtype != dtype {
                    return Err(GraphError(format!("op {k} {name}: {role} `{}` must be a constant {dtype:?} tensor", tt.name)));
                }
                Ok(())
            };
            match &op.kind {
                OpKind::Conv2d { .. } | OpKind::DepthwiseConv2d { .. } | OpKind::FullyConnected { .. } => {
                    needs_const(1, DType::I8, "weight")?;
                    needs_const(2, DType::I32, "bias")?;
                    let w = inp(1);
                    let want = match op.kind {
                        OpKind::Conv2d { .. } => 4,
                        OpKind::DepthwiseConv2d { .. } => 4,
                        _ => 2,
                    };
                    if w.shape.len() != want {
                        return Err(GraphError(format!("op {k} {name}: weight `{}` has rank {}, expected {want}", w.shape.len(), w.name)));
                    }
                    let oc = match op.kind {
                        OpKind::DepthwiseConv2d { .. } => w.shape[3],
                        _ => w.shape[0],
                    };
                    if inp(2).numel() != oc as usize {
                        return Err(GraphError(format!(
                            "op {k} {name}: bias `{}` has {} elements for {oc} output channels",
                            inp(2).name,
                            inp(2).numel()
                        )));
                    }
                }
                OpKind::Mean { .. } => needs_const(1, DType::I32, "axes")?,
                OpKind::Pad => {
                    needs_const(1, DType::I32, "paddings")?;
                    if inp(1).shape != [4, 2] {
                        return Err(GraphError(format!("op {k} {name}: paddings `{}` must have shape [4, 2]", inp(1).name)));
                    }
                }
                _ => {}
            }
            if matches!(op.kind, OpKind::Add { .. }) {
                for j in 0..2 {
                    if inp(j).dtype != DType::I8 {
                        return Err(GraphError(format!("op {k} {name}: input `{}` must be int8", inp(j).name)));
                    }
                }
            }
        }
        for &o in &self.outputs {
            let tt = t(o, "graph output")?;
            if !ready[o] {
                return Err(GraphError(format!("graph output `{}` is never produced", tt.name)));
            }
        }
        if self.ops.is_empty() {
            return Err(GraphError("no operators".into()));
        }
        Ok(())
    }
}
