//! `rbuild bundle --check`: a bundle against its own SHA256SUMS and manifest.json. Every file
//! listed must be present with the listed size and sha256, and nothing unlisted may be there.

use std::collections::BTreeMap;
use std::path::Path;

use crate::sha256_hex;

/// A bundle that passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub files: usize,
}

/// Checks a bundle's files, given by name. Returns every problem, each naming its file.
pub fn check_files(files: &BTreeMap<String, Vec<u8>>) -> Result<Checked, Vec<String>> {
    let digests = files.iter().map(|(n, b)| (n.clone(), (b.len() as u64, sha256_hex(b)))).collect();
    check_digests(&digests, files.get("SHA256SUMS").map(Vec::as_slice), files.get("manifest.json").map(Vec::as_slice))
}

/// The check itself, over each file's (size, sha256) and the two lists' text.
fn check_digests(files: &BTreeMap<String, (u64, String)>, sums: Option<&[u8]>, manifest: Option<&[u8]>) -> Result<Checked, Vec<String>> {
    let mut problems = Vec::new();
    let Some(sums) = sums else {
        return Err(vec!["SHA256SUMS is missing: not a bundle, or it lost its checksum list".into()]);
    };
    let sums = String::from_utf8_lossy(sums);
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    for (n, line) in sums.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        // sha256sum's format: 64 hex digits, two spaces (or space + '*'), the name.
        let parsed = line.get(..64).zip(line.get(64..66)).zip(line.get(66..));
        match parsed {
            Some(((hash, "  " | " *"), name)) if hash.chars().all(|c| c.is_ascii_hexdigit()) && !name.is_empty() => {
                listed.insert(name.to_string(), hash.to_ascii_lowercase());
            }
            _ => problems.push(format!("SHA256SUMS line {}: not `<sha256>  <file>`", n + 1)),
        }
    }
    for (name, want) in &listed {
        match files.get(name) {
            None => problems.push(format!("{name}: listed in SHA256SUMS but missing")),
            Some((size, sha)) if sha != want => problems.push(format!("{name}: sha256 differs from SHA256SUMS (modified or truncated, {size} bytes now)")),
            Some(_) => {}
        }
    }
    for name in files.keys().filter(|n| *n != "SHA256SUMS" && !listed.contains_key(*n)) {
        problems.push(format!("{name}: present but not listed in SHA256SUMS"));
    }
    match manifest.map(serde_json::from_slice::<serde_json::Value>) {
        None => problems.push("manifest.json: missing".into()),
        Some(Err(e)) => problems.push(format!("manifest.json: not valid JSON ({e})")),
        Some(Ok(m)) => {
            let Some(entries) = m["files"].as_array() else {
                problems.push("manifest.json: no `files` list".into());
                return Err(problems);
            };
            for e in entries {
                let Some(name) = e["path"].as_str() else {
                    problems.push("manifest.json: a `files` entry has no `path`".into());
                    continue;
                };
                let Some((size, sha)) = files.get(name) else {
                    problems.push(format!("{name}: listed in manifest.json but missing"));
                    continue;
                };
                if e["bytes"].as_u64() != Some(*size) {
                    problems.push(format!("{name}: {size} bytes, manifest.json says {}", e["bytes"]));
                } else if e["sha256"].as_str() != Some(sha.as_str()) {
                    problems.push(format!("{name}: sha256 differs from manifest.json"));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    if problems.is_empty() {
        Ok(Checked { files: files.len() })
    } else {
        Err(problems)
    }
}

/// Checks a bundle folder (its regular files; a sub-folder is a problem).
pub fn check_dir(dir: &Path) -> Result<Checked, Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| vec![format!("{}: {e}", dir.display())])?;
    let mut files = BTreeMap::new();
    let mut problems = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| vec![format!("{}: {e}", dir.display())])?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            problems.push(format!("{name}: unexpected folder in a bundle"));
            continue;
        }
        // Hashed by streaming: a bundle may hold a multi-gigabyte program.
        match crate::hash_file(&path) {
            Ok(digest) => {
                files.insert(name, digest);
            }
            Err(e) => problems.push(format!("{name}: cannot read: {e}")),
        }
    }
    let text = |n: &str| files.contains_key(n).then(|| std::fs::read(dir.join(n)).ok()).flatten();
    let (sums, manifest) = (text("SHA256SUMS"), text("manifest.json"));
    match check_digests(&files, sums.as_deref(), manifest.as_deref()) {
        Ok(c) if problems.is_empty() => Ok(c),
        Ok(_) => Err(problems),
        Err(mut p) => {
            problems.append(&mut p);
            Err(problems)
        }
    }
}

/// Checks a bundle tarball: one top folder holding the bundle's files.
pub fn check_tarball(path: &Path) -> Result<Checked, Vec<String>> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| vec![format!("{name}: {e}")])?;
    let tar = crate::archive::gunzip(&bytes).map_err(|e| vec![format!("{name}: {e}")])?;
    let entries = crate::archive::untar(&tar).map_err(|e| vec![format!("{name}: {e}")])?;
    let mut files = BTreeMap::new();
    for (p, _, data) in entries {
        let inner = p.split_once('/').map_or(p.as_str(), |(_, rest)| rest).to_string();
        files.insert(inner, data);
    }
    check_files(&files)
}
