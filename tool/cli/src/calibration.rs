//! Calibration inputs for static int8 export: the images of a folder, decoded and preprocessed
//! exactly as the image-classifier runner does (torchvision's ImageNet eval pipeline), or
//! seeded random inputs when no folder is given.

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

/// One float32 input per sample for `graph`'s single [1, 3, H, W] input.
pub fn samples(graph: &rbuild_export::Graph, dir: Option<&Path>) -> CliResult<Vec<Vec<Vec<u8>>>> {
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
