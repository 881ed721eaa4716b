//! Board descriptions in platform files: the memory map, the firmware layout, the NPU.

mod common;

use std::path::Path;

use common::{assert_snapshot, problems, TOOLCHAINS};
use rbuild_recipe::{load_platform, load_platforms, render, Platform, Region, RegionKind};

#[test]
fn corstone_300_decodes_to_qemus_an547_map() {
    let board = load_platform(Path::new(TOOLCHAINS).join("corstone-300.kdl")).unwrap().board.expect("a board");
    assert_eq!(board.cpu.as_deref(), Some("cortex-m55"));
    let map: Vec<(&str, u64, u64, RegionKind, bool)> =
        board.memory.iter().map(|r| (r.name.as_str(), r.origin, r.length, r.kind, r.loadable)).collect();
    use RegionKind::*;
    assert_eq!(
        map,
        [
            ("itcm", 0x0, 512 << 10, Ram, true),
            ("sram", 0x0100_0000, 2 << 20, Ram, true),
            ("dtcm", 0x2000_0000, 512 << 10, Ram, true),
            ("sram2", 0x2100_0000, 4 << 20, Ram, true),
            ("qspi", 0x2800_0000, 8 << 20, Rom, true),
            ("ddr", 0x6000_0000, 2 << 30, Ram, true),
        ]
    );
    let fw = board.firmware.expect("a firmware layout");
    assert_eq!((fw.code.as_str(), fw.data.as_str()), ("itcm", "dtcm"));
    assert_eq!(fw.program, ["qspi", "ddr"]);
    assert_eq!(fw.arenas, ["sram", "sram2", "ddr"]);
    assert_eq!(fw.heap, ("ddr".to_string(), 64 << 20));
    assert_eq!(fw.stack, ("dtcm".to_string(), 128 << 10));
    assert_eq!(board.npu.map(|n| (n.name, n.base)), Some(("ethos-u55".to_string(), 0x4810_2000)));
}

#[test]
fn hosted_platforms_have_no_board() {
    for p in load_platforms(TOOLCHAINS).unwrap() {
        assert_eq!(p.board.is_some(), p.name == "corstone-300", "{}", p.name);
    }
}

#[test]
fn region_helpers() {
    let r = Region { name: "sram".into(), origin: 0x100, length: 0x100, kind: RegionKind::Ram, loadable: false };
    assert_eq!(r.end(), 0x200);
    assert!(r.contains(0x1ff) && !r.contains(0x200) && !r.contains(0xff));
}

#[test]
fn memory_map_mistakes_are_all_reported() {
    let report = load_platforms("tests/cases/board-bad").unwrap_err();
    assert_snapshot("board-bad", &render(&report));
    let messages: Vec<&str> = problems(&report).problems.iter().map(|p| p.message.as_str()).collect();
    for expected in [
        "overlaps region `flash`",
        "region `sram` is declared twice",
        "past the 32-bit address space",
        "unknown memory kind `flash`",
        "`length` is not a size",
        "`length` is zero",
        "unknown node `bse`",
    ] {
        assert!(messages.iter().any(|m| m.contains(expected)), "no problem saying {expected:?} in {messages:#?}");
    }
}

#[test]
fn firmware_layout_is_checked_against_the_map() {
    let text = r#"
target "thumbv8m.main-none-eabihf"
run "native"
memory {
    region "flash" { origin 0x0; length "1M"; kind "rom"; loadable #true }
    region "sram"  { origin 0x20000000; length "256K"; kind "ram" }
}
firmware {
    code "flsh"
    data "sram"
    program "flash"
    arenas "flash"
    heap "sram" "1M"
    stack "sram" "8K"
}
"#;
    let report = Platform::from_source("layout.kdl", text).unwrap_err();
    assert_snapshot("board-layout", &render(&report));
    let messages: Vec<&str> = problems(&report).problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "unknown region `flsh`",
            "region `sram` is not loadable, so the image cannot fill it (`loadable #true`)",
            "region `flash` is read-only at run time; this needs `kind \"ram\"`",
            "1048576 bytes do not fit in region `sram` (262144 bytes)",
        ]
    );
}

#[test]
fn firmware_without_a_memory_map_or_with_a_tiny_stack() {
    let text = "target \"thumbv8m.main-none-eabihf\"\nrun \"native\"\nfirmware {\n    code \"flash\"\n}\n";
    let report = Platform::from_source("nomap.kdl", text).unwrap_err();
    assert!(render(&report).contains("`firmware` needs a memory map"));
    let text = r#"
target "thumbv8m.main-none-eabihf"
run "native"
memory {
    region "ram" { origin 0x20000000; length "64K"; kind "ram"; loadable #true }
}
firmware {
    code "ram"
    data "ram"
    program "ram"
    arenas "ram"
    heap "ram" "16K"
    stack "ram" "1K"
}
"#;
    let report = Platform::from_source("tiny-stack.kdl", text).unwrap_err();
    let text = render(&report);
    assert!(text.contains("a 1024-byte stack is too small"), "{text}");
}
