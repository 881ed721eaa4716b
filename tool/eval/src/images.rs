//! Top-1 / top-5 accuracy of an image classifier over a folder with one subfolder per class
//! (`DIR/<class>/*.png|jpg`), each image decoded and preprocessed exactly as the
//! `image-classifier` runner does (torchvision's ImageNet eval pipeline, bit for bit).
//!
//! A subfolder names its class by a label (exactly, else case-insensitively, when labels are
//! given: line N of the labels file names class N) or by the class index itself.

use std::path::{Path, PathBuf};

use rbuild_image_classifier::program::{image_input_size, logits};
use rbuild_image_classifier::{decode, preprocess};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, KernelRegistry, Program, ScalarType};

use crate::topk::{rank_of, TopKCounts};

/// One image and the class its folder names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabeledImage {
    pub path: PathBuf,
    pub class: usize,
}

/// The class a subfolder called `name` stands for.
pub fn class_of(name: &str, labels: Option<&[String]>) -> Result<usize, String> {
    if let Some(labels) = labels {
        if let Some(i) = labels.iter().position(|l| l == name) {
            return Ok(i);
        }
        let folded: Vec<usize> = labels.iter().enumerate().filter(|(_, l)| l.eq_ignore_ascii_case(name) || l.to_lowercase() == name.to_lowercase()).map(|(i, _)| i).collect();
        match folded.as_slice() {
            [i] => return Ok(*i),
            [a, b, ..] => return Err(format!("`{name}` matches labels {a} and {b} when case is ignored: rename the folder to one of them exactly")),
            [] => {}
        }
    }
    match name.parse::<usize>() {
        Ok(i) => Ok(i),
        Err(_) if labels.is_some() => Err(format!("`{name}` is neither a label of the labels file nor a class index")),
        Err(_) => Err(format!("`{name}` is not a class index, and there is no labels file to look it up in (give --labels FILE)")),
    }
}

/// Every image below `dir`'s class subfolders, sorted by path. Hidden entries and files at the
/// top level (a labels file, a README) are skipped; inside a class folder every other file must
/// be an image (checked when it is decoded).
pub fn scan(dir: &Path, labels: Option<&[String]>) -> Result<Vec<LabeledImage>, String> {
    let mut images = Vec::new();
    let mut classes = 0;
    for sub in sorted_entries(dir)? {
        if !sub.is_dir() {
            continue;
        }
        let name = sub.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let class = class_of(&name, labels).map_err(|e| format!("{}: {e}", sub.display()))?;
        classes += 1;
        for file in sorted_entries(&sub)? {
            if file.is_file() {
                images.push(LabeledImage { path: file, class });
            }
        }
    }
    if classes == 0 {
        return Err(format!("{}: no class subfolders (expected DIR/<class>/*.png, the class a label or an index)", dir.display()));
    }
    if images.is_empty() {
        return Err(format!("{}: the class subfolders hold no images", dir.display()));
    }
    Ok(images)
}

/// Non-hidden entries of `dir`, sorted.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let read = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        if !entry.file_name().to_string_lossy().starts_with('.') {
            paths.push(entry.path());
        }
    }
    paths.sort();
    Ok(paths)
}

/// Ranks every image's class with `program`'s `forward`.
pub fn evaluate(program: &Program<'_>, kernels: &KernelRegistry, backends: &BackendRegistry, images: &[LabeledImage], threads: usize) -> Result<TopKCounts, String> {
    let mut method = program.load_method("forward", kernels, backends).map_err(|e| e.to_string())?;
    let (crop_h, crop_w) = image_input_size(&method).map_err(|e| format!("not an image classifier: {e}"))?;
    let mut ctx = KernelContext { threads: threads.max(1) };
    let mut counts = TopKCounts::default();
    for image in images {
        let at = |e: String| format!("{}: {e}", image.path.display());
        let bytes = std::fs::read(&image.path).map_err(|e| at(e.to_string()))?;
        let rgb = decode::decode_image(&bytes).map_err(|e| at(e.0))?;
        let input: Vec<u8> = preprocess::imagenet_eval(&rgb, crop_h, crop_w).iter().flat_map(|v| v.to_le_bytes()).collect();
        method.set_input_tensor(0, ScalarType::Float, &[1, 3, crop_h, crop_w], &input).map_err(|e| e.to_string())?;
        method.execute(&mut ctx).map_err(|e| e.to_string())?;
        let scores = logits(&method)?;
        counts.add(rank_of(&scores, image.class).map_err(at)?);
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<String> {
        ["tench", "Goldfish", "great white shark", "3"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn folders_name_classes_by_label_or_index() {
        let l = labels();
        assert_eq!(class_of("tench", Some(&l)).unwrap(), 0);
        assert_eq!(class_of("goldfish", Some(&l)).unwrap(), 1);
        assert_eq!(class_of("GREAT WHITE SHARK", Some(&l)).unwrap(), 2);
        // A label that is a number wins over the index it spells.
        assert_eq!(class_of("3", Some(&l)).unwrap(), 3);
        assert_eq!(class_of("2", Some(&l)).unwrap(), 2);
        assert_eq!(class_of("17", None).unwrap(), 17);
        assert!(class_of("cat", Some(&l)).unwrap_err().contains("neither a label"));
        assert!(class_of("cat", None).unwrap_err().contains("give --labels FILE"));
        let twice: Vec<String> = vec!["Cat".into(), "CAT".into()];
        assert!(class_of("cat", Some(&twice)).unwrap_err().contains("matches labels 0 and 1"));
    }

    #[test]
    fn scanning_walks_class_folders_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for (class, file) in [("goldfish", "b.png"), ("goldfish", "a.jpg"), ("0", "c.png"), (".hidden", "d.png")] {
            std::fs::create_dir_all(dir.path().join(class)).unwrap();
            std::fs::write(dir.path().join(class).join(file), b"x").unwrap();
        }
        std::fs::write(dir.path().join("labels.txt"), b"x").unwrap();
        let found = scan(dir.path(), Some(&labels())).unwrap();
        let got: Vec<(String, usize)> = found.iter().map(|i| (i.path.strip_prefix(dir.path()).unwrap().display().to_string(), i.class)).collect();
        assert_eq!(got, [("0/c.png".to_string(), 0), ("goldfish/a.jpg".to_string(), 1), ("goldfish/b.png".to_string(), 1)]);
        let empty = tempfile::tempdir().unwrap();
        assert!(scan(empty.path(), None).unwrap_err().contains("no class subfolders"));
    }
}
