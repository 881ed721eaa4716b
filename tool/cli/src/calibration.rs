//! Calibration inputs for static int8 export: the images of a folder, decoded and preprocessed
//! exactly as the image-classifier runner does (torchvision's ImageNet eval pipeline), sample
//! inputs from a safetensors file (any model), or seeded random inputs when nothing is given.

use std::path::{Path, PathBuf};

use rbuild_export::passes::calibrate;
use rbuild_image_classifier::{decode, preprocess};

use crate::error::{bail, CliError, CliResult, InFile};

/// Random samples used when no calibration folder is given.
pub const RANDOM_SAMPLES: usize = 8;
pub const RANDOM_SEED: u64 = 0x5EED;

/// The image files of `dir` (PNG/JPEG by extension, any case), sorted, not recursive.
pub fn image_files(dir: &Path) -> CliResult<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).in_file(dir)?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The calibration samples for `graph`: each a list of input bytes. `dir` is a folder of
/// images (one [1, 3, H, W] input) or a `.safetensors` file (see [`tensor_samples`]).
pub fn samples(graph: &rbuild_export::Graph, dir: Option<&Path>) -> CliResult<Vec<Vec<Vec<u8>>>> {
    if let Some(file) = dir.filter(|p| p.is_file()) {
        return tensor_samples(graph, file);
    }
    let Some(dir) = dir else {
        println!(
            "note: no --calibration folder: calibrating int8 ranges on {RANDOM_SAMPLES} seeded random inputs (seed {RANDOM_SEED:#x}); \
             give a folder of representative images for a useful int8 model"
        );
        return calibrate::random_samples(graph, RANDOM_SAMPLES, RANDOM_SEED).map_err(|e| CliError(e.to_string()));
    };
    let (h, w) = match graph.inputs.as_slice() {
        [v] => match graph.meta(*v).sizes().as_deref() {
            Some(&[1, 3, h, w]) => (h, w),
            other => bail!("calibration images need a [1, 3, H, W] model input, the model takes {other:?}"),
        },
        ins => bail!("calibration images need a model with one input, it has {}", ins.len()),
    };
    let files = image_files(dir)?;
    if files.is_empty() {
        bail!("{}: no PNG or JPEG images to calibrate on", dir.display());
    }
    files
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).in_file(p)?;
            let img = decode::decode_image(&bytes).in_file(p)?;
            let x = preprocess::imagenet_eval(&img, h, w);
            Ok(vec![x.iter().flat_map(|v| v.to_le_bytes()).collect()])
        })
        .collect()
}

/// Samples from a safetensors file: `input.K` holds N samples of input K stacked on a new
/// leading dim (`[N, ...input K's shape]`), every input with the same N, in the input's dtype.
pub fn tensor_samples(graph: &rbuild_export::Graph, file: &Path) -> CliResult<Vec<Vec<Vec<u8>>>> {
    let tensors = crate::io::tensors::read_safetensors(file)?;
    let mut count = None;
    let mut per_input = Vec::new();
    for (k, &v) in graph.inputs.iter().enumerate() {
        let name = format!("input.{k}");
        let meta = graph.meta(v);
        let Some(t) = tensors.get(&name) else {
            bail!("{}: no `{name}` (calibration samples: `input.K` = [N, ...input K's shape] for every input)", file.display());
        };
        let Some(shape) = meta.sizes() else {
            bail!("{}: `{name}`: input {k} has dynamic dims; calibration needs static inputs", file.display());
        };
        if t.dtype != meta.dtype || t.shape.len() != shape.len() + 1 || t.shape[1..] != shape[..] {
            bail!("{}: `{name}` is {} {:?}; input {k} takes {} {:?}, so the samples must be [N, {}]", file.display(), t.dtype, t.shape, meta.dtype, shape,
                shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
        }
        let n = t.shape[0];
        if n == 0 || count.is_some_and(|c| c != n) {
            bail!("{}: `{name}` holds {n} samples, the other inputs {}", file.display(), count.unwrap_or(0));
        }
        count = Some(n);
        per_input.push(t.data.chunks_exact(t.data.len() / n).map(<[u8]>::to_vec).collect::<Vec<_>>());
    }
    let n = count.unwrap_or(0);
    Ok((0..n).map(|i| per_input.iter().map(|s| s[i].clone()).collect()).collect())
}
