//! Int8 subgraph → Vela → `EthosUBackend` delegate blob.

use std::fmt;

use rbuild_runtime::backends::ethosu::blob::{self, VelaBlobBuf, VelaIo, IO_DIMS};
use rbuild_runtime::backends::ethosu::driver::{BASE_FAST_SCRATCH, BASE_SCRATCH, BASE_WEIGHTS};
use sha2::{Digest, Sha256};

use crate::graph::{GraphError, Int8Graph};
use crate::tflite;
use crate::vela::{CpuOp, RawIo, RawOutput, Summary, Vela, VelaError, VelaOptions};

#[derive(Debug)]
pub enum LowerError {
    Graph(GraphError),
    Vela(VelaError),
    /// Vela left operators on the CPU or split the network; the delegate must be one NPU subgraph.
    NotFullyDelegated {
        npu_subgraphs: usize,
        cpu_operators: Option<u64>,
        cpu_ops: Vec<CpuOp>,
        log: String,
    },
    Blob(String),
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Graph(e) => e.fmt(f),
            LowerError::Vela(e) => e.fmt(f),
            LowerError::NotFullyDelegated { npu_subgraphs, cpu_operators, cpu_ops, log } => {
                write!(
                    f,
                    "Vela did not place the whole subgraph on the NPU ({npu_subgraphs} NPU subgraphs, CPU operators: {})",
                    cpu_operators.map_or("unknown".into(), |c| c.to_string())
                )?;
                for c in cpu_ops {
                    write!(f, "\n  {} (output `{}`): {}", c.op, c.ofm, c.reasons.join(" "))?;
                }
                if cpu_ops.is_empty() {
                    write!(f, "; Vela said:\n{log}")?;
                }
                Ok(())
            }
            LowerError::Blob(m) => write!(f, "EthosU delegate blob: {m}"),
        }
    }
}
impl std::error::Error for LowerError {}

impl From<VelaError> for LowerError {
    fn from(e: VelaError) -> Self {
        LowerError::Vela(e)
    }
}
impl From<GraphError> for LowerError {
    fn from(e: GraphError) -> Self {
        LowerError::Graph(e)
    }
}

/// A lowered subgraph: the delegate blob and what Vela reported.
#[derive(Clone)]
pub struct Lowered {
    pub blob: Vec<u8>,
    /// With [`Lowered::externalize_weights`]: (named-data key, weights) the program must carry.
    pub external_weights: Option<(String, Vec<u8>)>,
    pub raw: RawOutput,
    pub summary: Summary,
    pub vela_version: String,
    pub options: VelaOptions,
}

impl std::fmt::Debug for Lowered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lowered")
            .field("blob_len", &self.blob.len())
            .field("external_weights", &self.external_weights.as_ref().map(|(k, w)| (k, w.len())))
            .field("cmd_len", &self.raw.cmd_data.len())
            .field("weights_len", &self.raw.weight_data.len())
            .field("scratch_size", &self.raw.scratch_size)
            .field("summary", &self.summary)
            .field("vela_version", &self.vela_version)
            .field("options", &self.options)
            .finish()
    }
}

impl Lowered {
    /// Moves the weights out of the blob into named data keyed by their SHA-256 (lowercase hex),
    /// setting the `weight_data` block's external flag; returns the key.
    pub fn externalize_weights(&mut self) -> Result<String, LowerError> {
        let mut buf = blob_from_raw(&self.raw).map_err(LowerError::Blob)?;
        let key = sha256_hex(&buf.weight_data);
        let weights = std::mem::take(&mut buf.weight_data);
        buf.weight_key = Some(key.clone());
        self.blob = blob::write(&buf);
        self.external_weights = Some((key.clone(), weights));
        Ok(key)
    }
}

fn io(which: &str, i: usize, r: &RawIo) -> Result<VelaIo, String> {
    if r.shape.len() > IO_DIMS {
        return Err(format!("{which} {i}: rank {} > {IO_DIMS}", r.shape.len()));
    }
    let mut shape = [1i32; IO_DIMS];
    let pad = IO_DIMS - r.shape.len();
    for (k, &d) in r.shape.iter().enumerate() {
        shape[pad + k] = i32::try_from(d).map_err(|_| format!("{which} {i}: dimension {d} out of range"))?;
    }
    let cvt = |v: i64, what: &str| i32::try_from(v).map_err(|_| format!("{which} {i}: {what} {v} out of range"));
    Ok(VelaIo { shape, elem_size: cvt(r.elem_size, "elem_size")?, offset: cvt(r.offset, "offset")?, region: cvt(r.region, "region")? })
}

/// Turns Vela's raw output into the blob contents, checking the region layout the runtime assumes
/// (weights in BASEP0, scratch in BASEP1, fast scratch in BASEP2; IO tensors in the scratch).
pub fn blob_from_raw(raw: &RawOutput) -> Result<VelaBlobBuf, String> {
    for (what, got, want, used) in [
        ("weight_region", raw.weight_region, BASE_WEIGHTS, !raw.weight_data.is_empty()),
        ("scratch_region", raw.scratch_region, BASE_SCRATCH, true),
        ("scratch_fast_region", raw.scratch_fast_region, BASE_FAST_SCRATCH, raw.scratch_fast_size > 0),
    ] {
        if used && got != want as i64 {
            return Err(format!("Vela put {what} in region {got}; the EthosUBackend layout needs {want}"));
        }
    }
    let scratch_size = u32::try_from(raw.scratch_size).map_err(|_| format!("scratch size {} does not fit in u32", raw.scratch_size))?;
    let inputs = raw.inputs.iter().enumerate().map(|(i, r)| io("input", i, r)).collect::<Result<Vec<_>, _>>()?;
    let outputs = raw.outputs.iter().enumerate().map(|(i, r)| io("output", i, r)).collect::<Result<Vec<_>, _>>()?;
    for (which, list) in [("input", &inputs), ("output", &outputs)] {
        for (i, t) in list.iter().enumerate() {
            if t.region != BASE_SCRATCH as i32 {
                return Err(format!("{which} {i} is in region {}, not the scratch region {BASE_SCRATCH}", t.region));
            }
        }
    }
    Ok(VelaBlobBuf {
        cmd_data: raw.cmd_data.clone(),
        weight_data: raw.weight_data.clone(),
        weight_key: None,
        scratch_size,
        inputs,
        outputs,
    })
}

/// Lowers one int8 subgraph for the accelerator in `opts`. Fails unless Vela places every
/// operator on the NPU as a single command stream.
pub fn lower(graph: &Int8Graph, vela: &Vela, opts: &VelaOptions) -> Result<Lowered, LowerError> {
    let net = tflite::write(graph)?;
    let out = vela.compile(&net, opts)?;
    let cpu = out.summary.cpu_operators;
    if out.raws.len() != 1 || cpu.is_some_and(|c| c > 0) {
        return Err(LowerError::NotFullyDelegated {
            npu_subgraphs: out.raws.len(),
            cpu_operators: cpu,
            cpu_ops: out.summary.cpu_ops,
            log: out.log,
        });
    }
    let raw = out.raws.into_iter().next().ok_or_else(|| LowerError::Blob("no raw output".into()))?;
    let buf = blob_from_raw(&raw).map_err(LowerError::Blob)?;
    if buf.inputs.len() != graph.inputs.len() || buf.outputs.len() != graph.outputs.len() {
        return Err(LowerError::Blob(format!(
            "Vela's network has {} inputs / {} outputs, the subgraph {} / {}",
            buf.inputs.len(),
            buf.outputs.len(),
            graph.inputs.len(),
            graph.outputs.len()
        )));
    }
    let bytes = blob::write(&buf);
    // The runtime's parser must accept what we ship.
    blob::parse(&bytes).map_err(|e| LowerError::Blob(e.to_string()))?;
    Ok(Lowered {
        blob: bytes,
        external_weights: None,
        raw,
        summary: out.summary,
        vela_version: vela.version.clone(),
        options: opts.clone(),
    })
}

/// Lowercase hex SHA-256: ExecuTorch's named-data key for an external block.
fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}
