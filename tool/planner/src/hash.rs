//! Fingerprints: sha256 of step inputs, and of files (memoized by size and mtime).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

/// Accumulates named parts of a step key.
#[derive(Clone, Default)]
pub struct KeyHasher {
    h: Sha256,
    /// (name, value) pairs, for `rbuild plan` to show what a key is made of.
    pub parts: Vec<(String, String)>,
}

impl KeyHasher {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, name: &str, value: &str) -> &mut Self {
        // Length-prefixed so that ("ab","c") and ("a","bc") differ.
        for s in [name, value] {
            self.h.update((s.len() as u64).to_le_bytes());
            self.h.update(s.as_bytes());
        }
        self.parts.push((name.into(), value.into()));
        self
    }

    pub fn finish(&self) -> String {
        hex(&self.h.clone().finalize())
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of a file's content.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// (size, mtime in ns): what must not change for a memoized hash to stay valid.
pub fn stat(path: &Path) -> std::io::Result<(u64, u128)> {
    let m = std::fs::metadata(path)?;
    let mtime = m.modified()?.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    Ok((m.len(), mtime))
}

/// Content hashes memoized by (path, size, mtime), persisted as JSON between runs.
#[derive(Default)]
pub struct FileHashes {
    memo: BTreeMap<PathBuf, (u64, u128, String)>,
    path: Option<PathBuf>,
    dirty: bool,
}

impl FileHashes {
    /// Loads the memo from `path` (a missing or unreadable file starts empty).
    pub fn load(path: &Path) -> Self {
        let mut memo = BTreeMap::new();
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(&text) {
                for (k, v) in m {
                    if let (Some(size), Some(mtime), Some(h)) =
                        (v[0].as_u64(), v[1].as_str().and_then(|s| s.parse().ok()), v[2].as_str())
                    {
                        memo.insert(PathBuf::from(k), (size, mtime, h.to_string()));
                    }
                }
            }
        }
        FileHashes { memo, path: Some(path.to_path_buf()), dirty: false }
    }

    /// The content hash of `path`, re-read only when its size or mtime changed.
    pub fn hash(&mut self, path: &Path) -> std::io::Result<String> {
        let (size, mtime) = stat(path)?;
        if let Some((s, m, h)) = self.memo.get(path) {
            if *s == size && *m == mtime {
                return Ok(h.clone());
            }
        }
        let h = sha256_file(path)?;
        self.memo.insert(path.to_path_buf(), (size, mtime, h.clone()));
        self.dirty = true;
        Ok(h)
    }

    /// Writes the memo back (atomically) if it changed.
    pub fn save(&mut self) -> std::io::Result<()> {
        let (Some(path), true) = (&self.path, self.dirty) else { return Ok(()) };
        let obj: serde_json::Map<String, serde_json::Value> = self
            .memo
            .iter()
            .map(|(k, (s, m, h))| (k.display().to_string(), serde_json::json!([s, m.to_string(), h])))
            .collect();
        crate::cache::write_atomic(path, serde_json::to_string(&obj)?.as_bytes())?;
        self.dirty = false;
        Ok(())
    }
}
