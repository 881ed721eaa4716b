//! Reproducible `.tar.gz`: ustar entries in sorted order under one top folder, with a fixed
//! mtime, uid/gid 0, no user names, modes 0644/0755, and a gzip header without a timestamp.
//! The same files always give the same bytes.

use std::io::Write;

/// Fixed modification time of every entry (2000-01-01T00:00:00Z), so extracted files get a
/// plausible date rather than 1970.
pub const MTIME: u64 = 946_684_800;

/// One file of the archive.
pub struct Entry<'a> {
    /// Path inside the top folder, `/`-separated.
    pub name: &'a str,
    pub bytes: &'a [u8],
    pub executable: bool,
}

fn octal(field: &mut [u8], value: u64) {
    // NUL-terminated, zero-padded octal, as ustar expects.
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}

fn header(path: &str, size: u64, mode: u32, kind: u8) -> Result<[u8; 512], String> {
    let mut h = [0u8; 512];
    let (prefix, name) = if path.len() <= 100 {
        ("", path)
    } else {
        // Split at a '/' so the name fits 100 bytes and the prefix 155.
        let cut = path[..path.len().min(156)].rfind('/').filter(|&i| path.len() - i - 1 <= 100);
        match cut {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => return Err(format!("path `{path}` is too long for a ustar archive")),
        }
    };
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], MTIME);
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    octal(&mut h[329..337], 0);
    octal(&mut h[337..345], 0);
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // Checksum: the header's byte sum with the checksum field read as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    Ok(h)
}

/// The uncompressed tar of `entries` under `top/` (entries are sorted here).
pub fn tar(top: &str, entries: &mut [Entry<'_>]) -> Result<Vec<u8>, String> {
    entries.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = Vec::new();
    out.extend_from_slice(&header(&format!("{top}/"), 0, 0o755, b'5')?);
    for e in entries.iter() {
        let mode = if e.executable { 0o755 } else { 0o644 };
        out.extend_from_slice(&header(&format!("{top}/{}", e.name), e.bytes.len() as u64, mode, b'0')?);
        out.extend_from_slice(e.bytes);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    // End of archive: two zero blocks, then padding to a whole 10240-byte record as tar does.
    out.resize(out.len() + 1024, 0);
    out.resize(out.len().div_ceil(10240) * 10240, 0);
    Ok(out)
}

/// A file on disk to put in a streamed archive.
pub struct FileEntry {
    pub name: String,
    pub path: std::path::PathBuf,
    pub size: u64,
    pub executable: bool,
}

/// The same archive as `gzip(tar(top, entries))`, streamed from the files into `out` (a
/// multi-gigabyte program never sits in memory).
pub fn write_tar_gz(top: &str, mut entries: Vec<FileEntry>, out: impl Write) -> Result<(), String> {
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut gz = flate2::GzBuilder::new().mtime(0).operating_system(255).write(out, flate2::Compression::new(LEVEL));
    let io = |e: std::io::Error| e.to_string();
    gz.write_all(&header(&format!("{top}/"), 0, 0o755, b'5')?).map_err(io)?;
    let mut written = 512u64;
    for e in &entries {
        let mode = if e.executable { 0o755 } else { 0o644 };
        gz.write_all(&header(&format!("{top}/{}", e.name), e.size, mode, b'0')?).map_err(io)?;
        let file = std::fs::File::open(&e.path).map_err(|err| format!("{}: {err}", e.path.display()))?;
        let copied = std::io::copy(&mut std::io::Read::take(file, e.size), &mut gz).map_err(io)?;
        if copied != e.size {
            return Err(format!("{}: {copied} bytes, {} expected (changed while bundling?)", e.path.display(), e.size));
        }
        let padded = e.size.div_ceil(512) * 512;
        gz.write_all(&vec![0u8; (padded - e.size) as usize]).map_err(io)?;
        written += 512 + padded;
    }
    let end = (written + 1024).div_ceil(10240) * 10240;
    gz.write_all(&vec![0u8; (end - written) as usize]).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)
}

/// gzip level: 6 (zlib's default) compresses programs nearly as well as 9, several times
/// faster; fixed so the bytes are the same on every run.
const LEVEL: u32 = 6;

/// gzip with no file name, mtime 0 and a fixed OS byte, at a fixed compression level.
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut enc = flate2::GzBuilder::new().mtime(0).operating_system(255).write(Vec::new(), flate2::Compression::new(LEVEL));
    enc.write_all(bytes).map_err(|e| e.to_string())?;
    enc.finish().map_err(|e| e.to_string())
}

/// Reads a tar produced by [`tar`] (or any plain ustar file list): (path, mode, bytes) of
/// its regular files. Used to check a bundle tarball.
pub fn untar(bytes: &[u8]) -> Result<Vec<(String, u32, Vec<u8>)>, String> {
    let mut files = Vec::new();
    let mut at = 0usize;
    let field = |h: &[u8], r: std::ops::Range<usize>| -> Result<u64, String> {
        let text: String = h[r].iter().take_while(|&&b| b != 0 && b != b' ').map(|&b| b as char).collect();
        if text.is_empty() {
            return Ok(0);
        }
        u64::from_str_radix(&text, 8).map_err(|_| format!("bad octal field `{text}` in a tar header"))
    };
    while at + 512 <= bytes.len() {
        let h = &bytes[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            return Ok(files);
        }
        let cstr = |r: std::ops::Range<usize>| String::from_utf8_lossy(h[r].split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
        let (name, prefix) = (cstr(0..100), cstr(345..500));
        let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let size = field(h, 124..136)? as usize;
        let mode = field(h, 100..108)? as u32;
        at += 512;
        if at + size > bytes.len() {
            return Err(format!("`{path}` is cut short: the archive ends inside it"));
        }
        if h[156] == b'0' || h[156] == 0 {
            files.push((path, mode, bytes[at..at + size].to_vec()));
        }
        at += size.div_ceil(512) * 512;
    }
    Err("the archive ends without its end-of-archive blocks (truncated)".into())
}

pub fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).map_err(|e| format!("not a valid gzip stream: {e}"))?;
    Ok(out)
}
