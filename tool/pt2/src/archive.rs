//! The `torch.export.save` zip (torch ≥ 2.8): its members, checked and indexed once at open.
//!
//! Layout (all under one top folder, the file stem when torch wrote it):
//! `archive_format` ("pt2"), `archive_version`, `byteorder`, `models/<model>.json` (the
//! serialized `ExportedProgram`), `data/weights/<model>_weights_config.json` + `weight_N`,
//! `data/constants/<model>_constants_config.json` + `tensor_N`, and pickles
//! (`data/sample_inputs/…`) that are never read. Stored members — torch stores every member —
//! are viewed in the memory-mapped file; deflated ones are inflated into memory at open.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use zip::CompressionMethod;

use crate::error::{ErrorContext, ErrorKind, Result};
use crate::model::ExportedModel;
use crate::schema::{ExportedProgram, PayloadConfig, SchemaVersion, SUPPORTED_SCHEMA_MAJOR};

/// The member that marks the pre-2.8 layout (`torch.export.save` of torch ≤ 2.7).
const OLD_LAYOUT_MEMBER: &str = "serialized_exported_program.json";

/// The model name `torch.export.save` uses.
pub const DEFAULT_MODEL: &str = "model";

/// Which payload folder a config describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// `data/weights/`: parameters and persistent buffers.
    Weights,
    /// `data/constants/`: tensor constants, non-persistent buffers, custom objects.
    Constants,
}

impl PayloadKind {
    pub fn folder(self) -> &'static str {
        match self {
            PayloadKind::Weights => "data/weights/",
            PayloadKind::Constants => "data/constants/",
        }
    }

    /// The config member (relative to the archive's top folder) for `model`.
    pub fn config_member(self, model: &str) -> String {
        match self {
            PayloadKind::Weights => format!("data/weights/{model}_weights_config.json"),
            PayloadKind::Constants => format!("data/constants/{model}_constants_config.json"),
        }
    }
}

enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

enum MemberData {
    /// A stored member: a byte range of the backing file.
    InPlace { start: usize, len: usize },
    /// A deflated member, inflated at open.
    Inflated(Vec<u8>),
    /// A member this reader never reads (pickles, other compressions).
    Skipped,
}

struct Member {
    full_name: String,
    data: MemberData,
}

/// An opened `.pt2` archive. Views into it ([`crate::TensorView`]) borrow it.
pub struct Pt2Archive {
    ctx: ErrorContext,
    backing: Backing,
    /// The top folder with its trailing `/` (empty if members sit at the zip's root).
    root: String,
    /// Members under `root`, by name relative to it.
    members: BTreeMap<String, Member>,
    archive_version: Option<i64>,
}

impl std::fmt::Debug for Pt2Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pt2Archive")
            .field("archive", &self.ctx.archive)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Pt2Archive {
    /// Memory-maps and indexes the archive at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ctx = ErrorContext { archive: path.display().to_string() };
        let io = |e: std::io::Error| ctx.error(ErrorKind::Io, e.to_string());
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let backing = if len == 0 {
            // An empty file cannot be mapped; it fails below as "not a zip" like any other.
            Backing::Owned(Vec::new())
        } else {
            // SAFETY: the map is only read. A file truncated by another process while mapped
            // would fault on access (as with any mmap-based loader); archives are inputs that
            // rbuild never writes in place.
            Backing::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Self::index(ctx, backing)
    }

    /// Reads an archive held in memory; `label` stands for the path in messages.
    pub fn from_bytes(bytes: Vec<u8>, label: &str) -> Result<Self> {
        Self::index(ErrorContext { archive: label.to_string() }, Backing::Owned(bytes))
    }

    fn index(ctx: ErrorContext, backing: Backing) -> Result<Self> {
        let bytes = backing.bytes();
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
            ctx.error(
                ErrorKind::Zip,
                format!("not a zip archive, or truncated (its central directory is unreadable: {e})"),
            )
        })?;
        // torch writes nothing before the zip. A directory found further in belongs to a zip
        // nested in a member (the sample-input pickle is one): the file's own was cut off.
        if zip.offset() != 0 {
            return Err(ctx.error(
                ErrorKind::Zip,
                format!(
                    "truncated: the file's central directory is missing (the only one found is of a zip \
                     nested at byte {})",
                    zip.offset()
                ),
            ));
        }
        let names: Vec<String> = zip.file_names().map(str::to_string).collect();
        if let Some(old) = names.iter().find(|n| member_basename(n) == OLD_LAYOUT_MEMBER) {
            return Err(ctx.member_error(
                old,
                ErrorKind::Layout,
                "this is the pre-2.8 torch.export layout (serialized_exported_program.json + a pickled \
                 state dict), which rbuild does not read; save the program again with torch >= 2.8",
            ));
        }
        let root = find_root(&names).ok_or_else(|| {
            let shown: Vec<&str> = names.iter().take(6).map(String::as_str).collect();
            ctx.error(
                ErrorKind::Layout,
                format!(
                    "not a torch.export archive: no archive_format member (found {} members: {}{})",
                    names.len(),
                    shown.join(", "),
                    if names.len() > shown.len() { ", …" } else { "" }
                ),
            )
        })?;

        let mut members = BTreeMap::new();
        for index in 0..zip.len() {
            let full_name = zip.name_for_index(index).unwrap_or_default().to_string();
            let Some(relative) = full_name.strip_prefix(&root) else { continue };
            if relative.is_empty() || relative.ends_with('/') {
                continue;
            }
            let relative = relative.to_string();
            let fail = |kind, message: String| ctx.member_error(&full_name, kind, message);
            let data = if !is_read_member(&relative) {
                MemberData::Skipped
            } else {
                read_member(&mut zip, index, bytes).map_err(|(kind, m)| fail(kind, m))?
            };
            if members.insert(relative, Member { full_name: full_name.clone(), data }).is_some() {
                return Err(fail(ErrorKind::Zip, "the archive holds two members of this name".into()));
            }
        }
        drop(zip);

        let mut archive = Pt2Archive { ctx, backing, root, members, archive_version: None };
        archive.check_header()?;
        Ok(archive)
    }

    /// `archive_format`, `archive_version` and `byteorder`.
    fn check_header(&mut self) -> Result<()> {
        let format = self.member_text("archive_format")?;
        if format.trim() != "pt2" {
            return Err(self.member_error(
                "archive_format",
                ErrorKind::Layout,
                format!("archive_format is {:?}, expected \"pt2\"", format.trim()),
            ));
        }
        if self.members.contains_key("archive_version") {
            let text = self.member_text("archive_version")?;
            let version = text.trim().parse::<i64>().map_err(|_| {
                self.member_error("archive_version", ErrorKind::Layout, format!("{:?} is not an integer", text.trim()))
            })?;
            self.archive_version = Some(version);
        }
        // torch always writes `byteorder`; an archive without one is taken as little-endian.
        if self.members.contains_key("byteorder") {
            match self.member_text("byteorder")?.trim() {
                "little" => {}
                "big" => {
                    return Err(self.member_error(
                        "byteorder",
                        ErrorKind::Unsupported,
                        "the archive's storages are big-endian; rbuild reads little-endian archives only",
                    ))
                }
                other => {
                    return Err(self.member_error(
                        "byteorder",
                        ErrorKind::Layout,
                        format!("byteorder is {other:?}, expected \"little\" or \"big\""),
                    ))
                }
            }
        }
        if self.model_names().is_empty() {
            return Err(self.ctx.error(
                ErrorKind::Layout,
                format!("no {}models/<name>.json member: the archive holds no exported program", self.root),
            ));
        }
        Ok(())
    }

    /// The archive's path (or in-memory label), as errors name it.
    pub fn source(&self) -> &str {
        &self.ctx.archive
    }

    /// The top folder members sit in, with its trailing `/` (`mobilenet_v2/`).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `archive_version`'s value, if the member is present.
    pub fn archive_version(&self) -> Option<i64> {
        self.archive_version
    }

    /// The names of the programs in `models/` (usually just `model`).
    pub fn model_names(&self) -> Vec<&str> {
        self.members
            .keys()
            .filter_map(|n| n.strip_prefix("models/")?.strip_suffix(".json"))
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .collect()
    }

    /// Member names relative to the top folder.
    pub fn member_names(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// A member's bytes (`relative` to the top folder, e.g. `data/weights/weight_0`).
    pub fn member(&self, relative: &str) -> Result<&[u8]> {
        let Some(member) = self.members.get(relative) else {
            return Err(self.ctx.member_error(
                &format!("{}{relative}", self.root),
                ErrorKind::Layout,
                "missing member",
            ));
        };
        match &member.data {
            MemberData::InPlace { start, len } => Ok(&self.backing.bytes()[*start..*start + *len]),
            MemberData::Inflated(bytes) => Ok(bytes),
            MemberData::Skipped => {
                Err(self.member_error(relative, ErrorKind::Unsupported, "this member is not one rbuild reads"))
            }
        }
    }

    fn member_text(&self, relative: &str) -> Result<&str> {
        std::str::from_utf8(self.member(relative)?)
            .map_err(|_| self.member_error(relative, ErrorKind::Layout, "not UTF-8 text"))
    }

    /// An error naming the member `relative` (to the top folder).
    pub(crate) fn member_error(&self, relative: &str, kind: ErrorKind, message: impl Into<String>) -> crate::Pt2Error {
        let full =
            self.members.get(relative).map_or_else(|| format!("{}{relative}", self.root), |m| m.full_name.clone());
        self.ctx.member_error(&full, kind, message)
    }

    pub(crate) fn error_context(&self) -> &ErrorContext {
        &self.ctx
    }

    /// The full zip name of a member (`relative` to the top folder).
    pub fn full_name(&self, relative: &str) -> String {
        format!("{}{relative}", self.root)
    }

    fn parse_json<T: DeserializeOwned>(&self, relative: &str) -> Result<T> {
        let bytes = self.member(relative)?;
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let at = if path == "." { String::new() } else { format!(" at {path}") };
            self.member_error(relative, ErrorKind::Json, format!("malformed JSON{at}: {}", e.inner()))
        })?;
        de.end().map_err(|e| self.member_error(relative, ErrorKind::Json, format!("malformed JSON: {e}")))?;
        Ok(value)
    }

    /// Parses `models/<model>.json` after checking its schema major version.
    pub fn program(&self, model: &str) -> Result<ExportedProgram> {
        #[derive(Deserialize)]
        struct VersionProbe {
            schema_version: SchemaVersion,
        }
        let relative = format!("models/{model}.json");
        let probe: VersionProbe = self.parse_json(&relative)?;
        let version = probe.schema_version;
        if version.major != SUPPORTED_SCHEMA_MAJOR {
            return Err(self.member_error(
                &relative,
                ErrorKind::Unsupported,
                format!(
                    "export schema version {}.{}; rbuild reads schema {SUPPORTED_SCHEMA_MAJOR}.x (torch 2.8 and later)",
                    version.major, version.minor
                ),
            ));
        }
        self.parse_json(&relative)
    }

    /// Parses the weights or constants config of `model`.
    pub fn payload_config(&self, kind: PayloadKind, model: &str) -> Result<PayloadConfig> {
        let relative = kind.config_member(model);
        if !self.members.contains_key(&relative) {
            let legacy = format!("{}{model}.pt", kind.folder());
            if self.members.contains_key(&legacy) {
                return Err(self.member_error(
                    &legacy,
                    ErrorKind::Unsupported,
                    "payloads in the legacy pickled form; rbuild never unpickles: save again with torch >= 2.8",
                ));
            }
        }
        self.parse_json(&relative)
    }

    /// The bytes of a payload file named by a config's `path_name`.
    pub fn payload(&self, kind: PayloadKind, path_name: &str) -> Result<&[u8]> {
        self.member(&format!("{}{path_name}", kind.folder()))
    }

    /// The program `model` with its signature resolved and its weights viewed in place.
    pub fn model(&self, model: &str) -> Result<ExportedModel<'_>> {
        ExportedModel::resolve(self, model)
    }

    /// The program named `model`, or the only one if the archive holds one under another name.
    pub fn default_model(&self) -> Result<ExportedModel<'_>> {
        let names = self.model_names();
        match names.as_slice() {
            [only] => self.model(only),
            _ if names.contains(&DEFAULT_MODEL) => self.model(DEFAULT_MODEL),
            _ => Err(self.ctx.error(
                ErrorKind::Layout,
                format!("the archive holds several programs ({}) and none is named \"model\"", names.join(", ")),
            )),
        }
    }
}

fn member_basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// The top folder: the prefix of the shallowest `archive_format` member.
fn find_root(names: &[String]) -> Option<String> {
    names
        .iter()
        .filter(|n| member_basename(n) == "archive_format")
        .min_by_key(|n| n.matches('/').count())
        .map(|n| n[..n.len() - "archive_format".len()].to_string())
}

/// Members the reader uses; the rest (sample-input pickles, `.data/`, extras) are not read.
fn is_read_member(relative: &str) -> bool {
    matches!(relative, "archive_format" | "archive_version" | "byteorder")
        || relative.starts_with("models/")
        || relative.starts_with(PayloadKind::Weights.folder())
        || relative.starts_with(PayloadKind::Constants.folder())
}

/// Locates (stored) or inflates (deflated) one member and checks its CRC.
fn read_member(
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    index: usize,
    file: &[u8],
) -> std::result::Result<MemberData, (ErrorKind, String)> {
    let file_len = file.len();
    let damaged = |e: zip::result::ZipError| (ErrorKind::Zip, format!("damaged member: {e}"));
    let raw = zip.by_index_raw(index).map_err(damaged)?;
    if raw.encrypted() {
        return Err((ErrorKind::Unsupported, "encrypted member".into()));
    }
    let (method, size, compressed, start, crc) =
        (raw.compression(), raw.size(), raw.compressed_size(), raw.data_start(), raw.crc32());
    drop(raw);
    let past_end = || {
        let message = format!("member data ({compressed} bytes at offset {start}) runs past the end of the archive");
        (ErrorKind::Zip, format!("{message} ({file_len} bytes): truncated?"))
    };
    let end = start.checked_add(compressed).ok_or_else(past_end)?;
    if end > file_len as u64 {
        return Err(past_end());
    }
    match method {
        CompressionMethod::Stored => {
            if size != compressed {
                return Err((ErrorKind::Zip, format!("stored member with size {size} but {compressed} bytes of data")));
            }
            let (start, len) = (start as usize, size as usize);
            let bytes = &file[start..start + len];
            let actual = crc32fast::hash(bytes);
            if actual != crc {
                return Err((
                    ErrorKind::Zip,
                    format!("corrupted: CRC-32 {actual:08x}, the zip directory says {crc:08x}"),
                ));
            }
            Ok(MemberData::InPlace { start, len })
        }
        CompressionMethod::Deflated => {
            let mut inflated = Vec::new();
            let reader = zip.by_index(index).map_err(damaged)?;
            // `take` bounds the output by the declared size; the zip reader checks the CRC.
            reader
                .take(size.saturating_add(1))
                .read_to_end(&mut inflated)
                .map_err(|e| (ErrorKind::Zip, format!("corrupted: {e}")))?;
            if inflated.len() as u64 != size {
                return Err((
                    ErrorKind::Zip,
                    format!("inflates to {} bytes, the zip directory says {size}", inflated.len()),
                ));
            }
            Ok(MemberData::Inflated(inflated))
        }
        other => Err((
            ErrorKind::Unsupported,
            format!("compressed with {other:?}; rbuild reads stored and deflated members"),
        )),
    }
}
