//! Helpers shared by the archive tests: where the testdata is, and rewriting an archive with
//! one member changed.

#![allow(dead_code)]

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// `../shared/testdata/pt2` beside the checkout.
pub fn pt2_dir() -> PathBuf {
    testdata().join("pt2")
}

pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata")
}

/// Every file in the pt2 folder with this extension, sorted (new cases need no code change).
pub fn files_with_extension(extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(pt2_dir())
        .expect("testdata/pt2")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
}

/// Every member of a zip as (full name, bytes), in directory order.
pub fn read_members(zip_bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(Cursor::new(zip_bytes)).expect("zip");
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).unwrap();
            (file.name().to_string(), bytes)
        })
        .collect()
}

/// Writes `members` as a zip with one compression method for all.
pub fn write_zip(members: &[(String, Vec<u8>)], method: CompressionMethod) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in members {
        writer.start_file(name.as_str(), options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// The testdata archive `name` with `edit` applied to each member: it gets the name relative
/// to the top folder and the bytes, and returns the new bytes or `None` to drop the member.
pub fn edited_archive(name: &str, edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> Vec<u8> {
    let original = std::fs::read(pt2_dir().join(name)).unwrap();
    let members: Vec<(String, Vec<u8>)> = read_members(&original)
        .into_iter()
        .filter_map(|(full, bytes)| {
            let relative = full.split_once('/').map_or(full.as_str(), |(_, r)| r).to_string();
            edit(&relative, bytes).map(|b| (full, b))
        })
        .collect();
    write_zip(&members, CompressionMethod::Stored)
}

/// Edits a JSON member with `f` on its parsed value.
pub fn edit_json(bytes: Vec<u8>, f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    f(&mut value);
    serde_json::to_vec(&value).unwrap()
}
