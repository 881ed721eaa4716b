//! Board description in a platform file: the CPU, the memory map (typed regions), where a
//! firmware image puts its parts, and accelerators at fixed addresses.
//!
//! ```kdl
//! cpu "cortex-m55"
//! memory {
//!     region "itcm" { origin 0x00000000; length "512K"; kind "ram"; loadable #true }
//!     region "qspi" { origin 0x28000000; length "8M"; kind "rom"; loadable #true }
//! }
//! firmware {
//!     code "itcm"
//!     data "dtcm"
//!     program "qspi" "ddr"
//!     arenas "sram" "ddr"
//!     heap "ddr" "16M"
//!     stack "dtcm" "64K"
//! }
//! npu "ethos-u55" { base 0x48102000 }
//! ```
//!
//! The map is data, not code: real boards, FVPs and QEMU's model of the same board differ.

use kdl::KdlNode;

use crate::choice::Choice;
use crate::decode::{Decoder, Parent, Spanned};
use crate::suggest;

/// What a region is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// Writable at run time.
    Ram,
    /// Read-only at run time (flash, QSPI).
    Rom,
}

impl Choice for RegionKind {
    const WHAT: &'static str = "memory kind";
    const ALL: &'static [(&'static str, Self)] = &[("ram", RegionKind::Ram), ("rom", RegionKind::Rom)];
}

/// One range of the address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: String,
    pub origin: u64,
    pub length: u64,
    pub kind: RegionKind,
    /// Whether a loader (QEMU `-kernel`, a debug probe, a flash tool) can fill it from the
    /// image: initialised sections may only be placed in loadable regions.
    pub loadable: bool,
}

impl Region {
    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.origin + self.length
    }

    pub fn contains(&self, address: u64) -> bool {
        (self.origin..self.end()).contains(&address)
    }
}

/// Where a firmware image puts each of its parts (region names of the memory map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareLayout {
    /// Vector table, `.text`, `.rodata`.
    pub code: String,
    /// `.data` and `.bss`.
    pub data: String,
    /// The embedded program: the first of these regions it fits in.
    pub program: Vec<String>,
    /// Planned-memory arenas: each in the first of these regions with room left.
    pub arenas: Vec<String>,
    /// The global allocator's heap: region and size.
    pub heap: (String, u64),
    /// The main stack: region and size (placed at the region's top).
    pub stack: (String, u64),
}

/// An accelerator at a fixed address (used by an NPU backend).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Npu {
    pub name: String,
    pub base: u64,
}

/// Everything a platform file says about the board; absent for hosted platforms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Board {
    pub cpu: Option<String>,
    pub memory: Vec<Region>,
    pub firmware: Option<FirmwareLayout>,
    pub npu: Option<Npu>,
}

impl Board {
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.memory.iter().find(|r| r.name == name)
    }
}

/// Top-level nodes of a platform file read by this module.
pub(crate) const BOARD_NODES: &[&str] = &["cpu", "memory", "firmware", "npu"];
const REGION: &[&str] = &["origin", "length", "kind", "loadable"];
const FIRMWARE: &[&str] = &["code", "data", "program", "arenas", "heap", "stack"];
const NPU: &[&str] = &["base"];

/// The smallest main stack accepted: the firmware's fault report needs ~1.5 KiB on its own.
const MIN_STACK: u64 = 4 << 10;

/// Memory maps describe 32-bit microcontrollers.
const ADDRESS_SPACE: u64 = 1 << 32;

/// Decodes the board nodes; `None` when any of them has a problem (reported in `d`).
pub(crate) fn decode_board(
    d: &mut Decoder,
    cpu: Option<&KdlNode>,
    memory: Option<&KdlNode>,
    firmware: Option<&KdlNode>,
    npu: Option<&KdlNode>,
) -> Option<Option<Board>> {
    if cpu.is_none() && memory.is_none() && firmware.is_none() && npu.is_none() {
        return Some(None);
    }
    let cpu = match cpu {
        Some(node) => d.string(node).map(|c| Some(c.value)),
        None => Some(None),
    };
    let regions = match memory {
        Some(node) => decode_memory(d, node),
        None => Some(Vec::new()),
    };
    let npu = match npu {
        Some(node) => decode_npu(d, node).map(Some),
        None => Some(None),
    };
    let firmware = match (firmware, &regions) {
        (Some(node), Some(regions)) => {
            if regions.is_empty() {
                d.error(
                    node.name().span(),
                    "`firmware` needs a memory map",
                    "no `memory` block to place these in",
                    "add `memory { region \"sram\" { origin 0x20000000; length \"256K\"; kind \"ram\" } }`",
                );
                None
            } else {
                decode_firmware(d, node, regions).map(Some)
            }
        }
        (Some(node), None) => {
            // Still check the block's own syntax.
            let _ = decode_firmware(d, node, &[]);
            None
        }
        (None, _) => Some(None),
    };
    Some(Some(Board { cpu: cpu?, memory: regions?, firmware: firmware?, npu: npu? }))
}

fn no_values(d: &mut Decoder, node: &KdlNode, children: &[&str], example: &str) {
    let name = node.name().value();
    for extra in d.args(node, children) {
        d.error(extra.span(), format!("`{name}` takes no values"), "unexpected value", format!("put its settings in its block: {example}"));
    }
}

fn decode_memory(d: &mut Decoder, node: &KdlNode) -> Option<Vec<Region>> {
    no_values(d, node, &["region"], "`memory { region \"sram\" { … } }`");
    let fields = d.fields(Parent::Node(node), node.children(), &["region"], &["region"]);
    let nodes: Vec<&KdlNode> = fields.all("region").collect();
    if nodes.is_empty() {
        d.error(node.name().span(), "the memory map has no regions", "empty `memory` block", "add `region \"sram\" { origin 0x20000000; length \"256K\"; kind \"ram\" }`");
        return None;
    }
    let decoded: Vec<Option<(Region, &KdlNode)>> = nodes.iter().map(|node| decode_region(d, node).map(|r| (r, *node))).collect();
    // Names and overlaps are checked among the regions that decoded, so one report has both.
    let mut ok = decoded.iter().all(Option::is_some);
    let regions: Vec<(Region, &KdlNode)> = decoded.into_iter().flatten().collect();
    for (i, (r, node)) in regions.iter().enumerate() {
        for (first, first_node) in &regions[..i] {
            if first.name == r.name {
                let problem = d
                    .source
                    .problem(node.name().span(), format!("region `{}` is declared twice", r.name), "declared again here")
                    .also(first_node.name().span(), "first declared here")
                    .help("give each region its own name");
                d.report(problem);
                ok = false;
            } else if r.origin < first.end() && first.origin < r.end() {
                let problem = d
                    .source
                    .problem(
                        node.name().span(),
                        format!(
                            "region `{}` ({}) overlaps region `{}` ({})",
                            r.name,
                            describe_range(r),
                            first.name,
                            describe_range(first)
                        ),
                        "overlaps",
                    )
                    .also(first_node.name().span(), "this region")
                    .help("regions of a memory map may not share addresses; check origin and length");
                d.report(problem);
                ok = false;
            }
        }
    }
    ok.then(|| regions.into_iter().map(|(r, _)| r).collect())
}

fn describe_range(r: &Region) -> String {
    format!("{:#010x}..{:#010x}", r.origin, r.end())
}

fn decode_region(d: &mut Decoder, node: &KdlNode) -> Option<Region> {
    let name = d.block_name(node, REGION);
    let parent = Parent::Node(node);
    let fields = d.fields(parent, node.children(), REGION, &[]);
    let origin = d
        .require(&fields, parent, "origin", "`origin 0x20000000`")
        .and_then(|n| d.int(n, 0, i128::from(ADDRESS_SPACE - 1)));
    let length_node = d.require(&fields, parent, "length", "`length \"256K\"` (or bytes: `length 262144`)");
    let length = length_node.and_then(|n| size(d, n));
    let kind = d
        .require(&fields, parent, "kind", "`kind \"ram\"` or `kind \"rom\"`")
        .and_then(|n| d.string(n))
        .and_then(|k| d.choice::<RegionKind>(&k));
    let loadable = match fields.get("loadable") {
        Some(n) => d.boolean(n),
        None => Some(false),
    };
    let (name, origin, length, length_node) = (name?, origin?, length?, length_node?);
    let origin = origin.value as u64;
    if origin + length.value > ADDRESS_SPACE {
        d.error(
            length.span,
            format!("region `{}` ends at {:#x}, past the 32-bit address space", name.value, origin + length.value),
            "too long for its origin",
            format!("the longest region at {origin:#010x} is {} bytes", ADDRESS_SPACE - origin),
        );
        let _ = length_node;
        return None;
    }
    Some(Region { name: name.value, origin, length: length.value, kind: kind?, loadable: loadable? })
}

/// A byte count: an integer, or a string with a binary suffix (`"512K"`, `"2M"`, `"2G"`).
fn size(d: &mut Decoder, node: &KdlNode) -> Option<Spanned<u64>> {
    let name = node.name().value().to_string();
    d.no_children(node);
    let args = d.args(node, &[]);
    let Some(entry) = args.first() else {
        d.error(node.name().span(), format!("`{name}` needs a size"), "no value", format!("write a byte count or a size: `{name} \"512K\"`"));
        return None;
    };
    for extra in args.iter().skip(1) {
        d.error(extra.span(), format!("`{name}` takes one value, found {}", args.len()), "extra value", "remove the extra values");
    }
    let span = entry.span();
    let parsed = match entry.value() {
        kdl::KdlValue::Integer(i) => u64::try_from(*i).ok(),
        kdl::KdlValue::String(s) => parse_size(s),
        _ => None,
    };
    match parsed {
        Some(0) => {
            d.error(span, format!("`{name}` is zero"), "empty", "a size is at least one byte");
            None
        }
        Some(v) if v <= ADDRESS_SPACE => Some(Spanned { value: v, span }),
        _ => {
            d.error(span, format!("`{name}` is not a size from 1 byte to 4G"), "not a size", "write bytes (`262144`, `0x40000`) or a number with K, M or G (`\"256K\"`, `\"2M\"`)");
            None
        }
    }
}

/// `"512K"` → 524288; plain digits are bytes. K, M, G are powers of 1024.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, scale) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&text[..i], 1 << 20),
        (i, 'G' | 'g') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    let value: u64 = if let Some(hex) = digits.strip_prefix("0x") { u64::from_str_radix(hex, 16).ok()? } else { digits.parse().ok()? };
    value.checked_mul(scale)
}

/// A region name used by `firmware`, checked against the map (with a suggestion) and for the
/// properties its use needs.
fn region_ref(d: &mut Decoder, name: &Spanned<String>, regions: &[Region], needs: Need) -> Option<String> {
    let Some(region) = regions.iter().find(|r| r.name == name.value) else {
        let names: Vec<&str> = regions.iter().map(|r| r.name.as_str()).collect();
        let help = suggest::help(&name.value, &names, "the memory map has");
        d.error(name.span, format!("unknown region `{}`", name.value), "not in the memory map", help);
        return None;
    };
    let problem = match needs {
        Need::Loadable if !region.loadable => Some("is not loadable, so the image cannot fill it (`loadable #true`)"),
        Need::Ram if region.kind != RegionKind::Ram => Some("is read-only at run time; this needs `kind \"ram\"`"),
        _ => None,
    };
    if let Some(why) = problem {
        d.error(name.span, format!("region `{}` {why}", name.value), "cannot be used here", "pick another region of the memory map");
        return None;
    }
    Some(name.value.clone())
}

#[derive(Clone, Copy)]
enum Need {
    Loadable,
    Ram,
    /// RAM the image also initialises (`.data`).
    LoadableRam,
}

fn region_list(d: &mut Decoder, node: &KdlNode, regions: &[Region], needs: Need) -> Option<Vec<String>> {
    let names = d.strings(node)?;
    let checked: Vec<Option<String>> = names
        .iter()
        .map(|n| match needs {
            Need::LoadableRam => region_ref(d, n, regions, Need::Ram).and_then(|_| region_ref(d, n, regions, Need::Loadable)),
            _ => region_ref(d, n, regions, needs),
        })
        .collect();
    checked.into_iter().collect()
}

fn one_region(d: &mut Decoder, node: &KdlNode, regions: &[Region], needs: Need) -> Option<String> {
    let list = region_list(d, node, regions, needs)?;
    if list.len() > 1 {
        let name = node.name().value();
        d.error(node.span(), format!("`{name}` takes one region, found {}", list.len()), "several regions", format!("keep one: `{name} \"{}\"`", list[0]));
        return None;
    }
    list.into_iter().next()
}

/// `heap "ddr" "16M"`: a region and a size that fits in it.
fn region_and_size(d: &mut Decoder, node: &KdlNode, regions: &[Region]) -> Option<(String, u64)> {
    let name = node.name().value().to_string();
    let words = d.strings(node)?;
    if words.len() != 2 {
        d.error(node.span(), format!("`{name}` takes a region and a size"), "expected two values", format!("for example `{name} \"sram\" \"64K\"`"));
        return None;
    }
    let region = region_ref(d, &words[0], regions, Need::Ram)?;
    let Some(bytes) = parse_size(&words[1].value).filter(|&b| b > 0) else {
        d.error(words[1].span, format!("`{}` is not a size", words[1].value), "not a size", "write a number with K, M or G: `\"64K\"`");
        return None;
    };
    let room = regions.iter().find(|r| r.name == region).map_or(0, |r| r.length);
    if bytes > room {
        d.error(words[1].span, format!("{bytes} bytes do not fit in region `{region}` ({room} bytes)"), "too big", "use a smaller size or a bigger region");
        return None;
    }
    Some((region, bytes))
}

fn decode_firmware(d: &mut Decoder, node: &KdlNode, regions: &[Region]) -> Option<FirmwareLayout> {
    no_values(d, node, FIRMWARE, "`firmware { code \"itcm\" … }`");
    let parent = Parent::Node(node);
    let fields = d.fields(parent, node.children(), FIRMWARE, &[]);
    if regions.is_empty() {
        return None;
    }
    let code = d.require(&fields, parent, "code", "`code \"flash\"`").and_then(|n| one_region(d, n, regions, Need::Loadable));
    let data = d.require(&fields, parent, "data", "`data \"sram\"`").and_then(|n| one_region(d, n, regions, Need::LoadableRam));
    let program = d.require(&fields, parent, "program", "`program \"flash\" \"ddr\"`").and_then(|n| region_list(d, n, regions, Need::Loadable));
    let arenas = d.require(&fields, parent, "arenas", "`arenas \"sram\" \"ddr\"`").and_then(|n| region_list(d, n, regions, Need::Ram));
    let heap = d.require(&fields, parent, "heap", "`heap \"ddr\" \"16M\"`").and_then(|n| region_and_size(d, n, regions));
    let stack = d.require(&fields, parent, "stack", "`stack \"sram\" \"64K\"`").and_then(|n| {
        let (region, bytes) = region_and_size(d, n, regions)?;
        if bytes < MIN_STACK {
            d.error(n.span(), format!("a {bytes}-byte stack is too small for the firmware runner"), "too small", "give it at least 4K (a fault report alone needs about 1.5K)");
            return None;
        }
        Some((region, bytes))
    });
    Some(FirmwareLayout { code: code?, data: data?, program: program?, arenas: arenas?, heap: heap?, stack: stack? })
}

fn decode_npu(d: &mut Decoder, node: &KdlNode) -> Option<Npu> {
    let name = d.block_name(node, NPU);
    let parent = Parent::Node(node);
    let fields = d.fields(parent, node.children(), NPU, &[]);
    let base = d.require(&fields, parent, "base", "`base 0x48102000`").and_then(|n| d.int(n, 0, i128::from(ADDRESS_SPACE - 1)));
    Some(Npu { name: name?.value, base: base?.value as u64 })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512K"), Some(512 * 1024));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0x100"), Some(256));
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("K"), None);
    }
}
