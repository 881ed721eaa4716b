//! Step records: `<cache>/<step id>.json` = {key, outputs: {path: [size, mtime, sha256]}}.
//! A record is valid when its key equals the step's current key and every output still has
//! the recorded size and mtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::hash::{sha256_file, stat};

/// Writes via a temporary file and a rename, so readers never see half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub key: String,
    /// Output path → (size, mtime ns, sha256).
    pub outputs: BTreeMap<PathBuf, (u64, u128, String)>,
}

pub struct Cache {
    dir: PathBuf,
}

fn file_name(step: &str) -> String {
    step.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect::<String>() + ".json"
}

impl Cache {
    pub fn new(dir: &Path) -> Self {
        Cache { dir: dir.to_path_buf() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn load(&self, step: &str) -> Option<Record> {
        let text = std::fs::read_to_string(self.dir.join(file_name(step))).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let key = v["key"].as_str()?.to_string();
        let mut outputs = BTreeMap::new();
        for (p, o) in v["outputs"].as_object()? {
            outputs.insert(PathBuf::from(p), (o[0].as_u64()?, o[1].as_str()?.parse().ok()?, o[2].as_str()?.to_string()));
        }
        Some(Record { key, outputs })
    }

    /// The record, if it matches `key`, names exactly `outputs`, and they are untouched.
    pub fn valid(&self, step: &str, key: &str, outputs: &[PathBuf]) -> Option<Record> {
        let r = self.load(step)?;
        if r.key != key {
            return None;
        }
        // Equal keys for other paths (another out folder, a renamed recipe) vouch for nothing here.
        if r.outputs.len() != outputs.len() || !outputs.iter().all(|p| r.outputs.contains_key(p)) {
            return None;
        }
        for (p, (size, mtime, _)) in &r.outputs {
            if stat(p).ok()? != (*size, *mtime) {
                return None;
            }
        }
        Some(r)
    }

    /// Fingerprints `outputs` and records them under `key` (after the outputs are in place).
    pub fn store(&self, step: &str, key: &str, outputs: &[PathBuf]) -> std::io::Result<Record> {
        let mut map = BTreeMap::new();
        for p in outputs {
            let (size, mtime) = stat(p)?;
            map.insert(p.clone(), (size, mtime, sha256_file(p)?));
        }
        let json = serde_json::json!({
            "key": key,
            "outputs": map.iter().map(|(p, (s, m, h))| (p.display().to_string(), serde_json::json!([s, m.to_string(), h]))).collect::<serde_json::Map<_, _>>(),
        });
        write_atomic(&self.dir.join(file_name(step)), serde_json::to_string_pretty(&json)?.as_bytes())?;
        Ok(Record { key: key.into(), outputs: map })
    }

    /// Forgets a step (its outputs are left alone).
    pub fn invalidate(&self, step: &str) {
        let _ = std::fs::remove_file(self.dir.join(file_name(step)));
    }
}
