//! Bundles: ELF → images → Intel HEX, reproducible folder + tarball, and `check` naming
//! truncated, modified, missing and unlisted files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rbuild_bundle::{archive, check_dir, check_tarball, elf, ihex, BundleSpec, FirmwareSpec, MemoryRegion};

/// A minimal little-endian ELF32 (Arm) with one PT_LOAD per (load address, bytes).
fn elf32(segments: &[(u32, &[u8])], entry: u32) -> Vec<u8> {
    let phoff = 52u32;
    let data_start = phoff + 32 * segments.len() as u32;
    let mut out = vec![0u8; data_start as usize];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 1; // ELFCLASS32
    out[5] = 1; // little-endian
    out[6] = 1;
    out[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    out[18..20].copy_from_slice(&40u16.to_le_bytes()); // EM_ARM
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[24..28].copy_from_slice(&entry.to_le_bytes());
    out[28..32].copy_from_slice(&phoff.to_le_bytes());
    out[40..42].copy_from_slice(&52u16.to_le_bytes());
    out[42..44].copy_from_slice(&32u16.to_le_bytes());
    out[44..46].copy_from_slice(&(segments.len() as u16).to_le_bytes());
    out[46..48].copy_from_slice(&40u16.to_le_bytes());
    let mut offset = data_start;
    for (i, (addr, bytes)) in segments.iter().enumerate() {
        let h = (phoff + 32 * i as u32) as usize;
        let fields = [1u32, offset, *addr, *addr, bytes.len() as u32, bytes.len() as u32 + 16, 5, 4];
        for (j, f) in fields.iter().enumerate() {
            out[h + 4 * j..h + 4 * j + 4].copy_from_slice(&f.to_le_bytes());
        }
        offset += bytes.len() as u32;
    }
    for (_, bytes) in segments {
        out.extend_from_slice(bytes);
    }
    out
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// The AN547 map of QEMU 7.2 (as a board file would give it).
fn an547() -> Vec<MemoryRegion> {
    let r = |name: &str, origin: u64, length: u64, usage: &str| MemoryRegion { name: name.into(), origin, length, usage: usage.into() };
    vec![
        r("ITCM", 0x0, 512 << 10, "code"),
        r("DTCM", 0x2000_0000, 512 << 10, "stack, data"),
        r("QSPI", 0x2800_0000, 8 << 20, "program"),
        r("DDR", 0x6000_0000, 2 << 30, "arena"),
    ]
}

fn spec(dir: &Path, elf_bytes: &[u8], firmware: bool) -> BundleSpec {
    let artifact = dir.join("artifact.elf");
    std::fs::write(&artifact, elf_bytes).unwrap();
    let program = dir.join("model.pte");
    std::fs::write(&program, pattern(1000, 7)).unwrap();
    BundleSpec {
        recipe: "demo".into(),
        recipe_sha256: "ab".repeat(32),
        platform: if firmware { "corstone-300".into() } else { "linux-arm64".into() },
        rust_target: if firmware { "thumbv8m.main-none-eabihf".into() } else { "aarch64-unknown-linux-gnu".into() },
        model: serde_json::json!({"name": "mobilenet_v2"}),
        ops: vec!["aten::add.out".into()],
        versions: BTreeMap::from([("rbuild".to_string(), "0.1.0".to_string())]),
        artifact,
        artifact_name: "image_classifier".into(),
        firmware: firmware.then(|| FirmwareSpec {
            regions: an547(),
            probe_rs_chip: None,
            pyocd_target: None,
            fvp: Some("FVP_Corstone_SSE-300_Ethos-U55".into()),
            program_address: None,
            npu_macs: None,
            qemu_firmware: None,
        }),
        program: (!firmware).then_some(program),
        extra: vec![],
        run_prefix: if firmware {
            ["qemu-system-arm", "-M", "mps3-an547", "-nographic", "-semihosting", "-kernel"].map(String::from).to_vec()
        } else {
            ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"].map(String::from).to_vec()
        },
        run_args: vec!["--model".into(), "model.pte".into()],
        run_example: "--image photo.png".into(),
        size_report: None,
        delegation: None,
        int8_quality: None,
    }
}

fn firmware_elf() -> Vec<u8> {
    elf32(&[(0x0, &pattern(300, 1)), (0x200, &pattern(40, 2)), (0x2800_0000, &pattern(70_000, 3)), (0x6000_0000, &pattern(20, 4))], 0x101)
}

#[test]
fn distant_load_segments_split_into_images_and_hex_round_trips() {
    let parsed = elf::Elf::parse(&firmware_elf()).unwrap();
    assert_eq!(parsed.machine_name(), "arm");
    let images = elf::images(&parsed.segments).unwrap();
    // 0x0 and 0x200 merge (small gap, zero-filled); QSPI and DDR stay apart.
    assert_eq!(images.iter().map(|i| i.base).collect::<Vec<_>>(), vec![0, 0x2800_0000, 0x6000_0000]);
    assert_eq!(images[0].bytes.len(), 0x200 + 40);
    assert!(images[0].bytes[300..0x200].iter().all(|&b| b == 0));
    let hex = ihex::intel_hex(&images, Some(parsed.entry)).unwrap();
    // Extended linear address records for each 64 KiB page that holds data.
    assert!(hex.contains(":020000042800D2\n"), "{}", &hex[..200]);
    assert!(hex.contains(":020000042801D1\n"));
    assert!(hex.contains(":020000046000"));
    assert!(hex.contains(":0400000500000101F5\n"));
    assert!(hex.ends_with(":00000001FF\n"));
    assert_eq!(ihex::parse(&hex).unwrap(), images);
    // A corrupted record is caught by its checksum.
    let bad = hex.replacen(":10000000", ":10000001", 1);
    assert!(ihex::parse(&bad).unwrap_err().contains("checksum"));
}

#[test]
fn truncated_elf_is_an_error_not_a_panic() {
    let full = firmware_elf();
    for cut in [3, 20, 60, 200, full.len() - 1] {
        let e = elf::Elf::parse(&full[..cut]);
        assert!(e.is_err(), "cut at {cut} parsed");
    }
    assert!(elf::Elf::parse(b"not an elf at all").unwrap_err().0.contains("magic"));
}

fn read_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())).collect()
}

fn write_twice(firmware: bool, elf_bytes: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let s = spec(t.path(), elf_bytes, firmware);
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    rbuild_bundle::write(&s, &a.join("bundle"), &a.join("bundle.tar.gz")).unwrap();
    rbuild_bundle::write(&s, &b.join("bundle"), &b.join("bundle.tar.gz")).unwrap();
    (t, a, b)
}

#[test]
fn firmware_bundle_is_reproducible_complete_and_checked() {
    let (_t, a, b) = write_twice(true, &firmware_elf());
    let files = read_dir(&a.join("bundle"));
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "README.md",
            "SHA256SUMS",
            "firmware.ddr.bin",
            "firmware.elf",
            "firmware.hex",
            "firmware.itcm.bin",
            "firmware.qspi.bin",
            "flash.sh",
            "manifest.json",
            "run-fvp.sh",
            "run-qemu.sh",
            "size-report.txt"
        ]
    );
    assert_eq!(files, read_dir(&b.join("bundle")), "two writes differ");
    assert_eq!(std::fs::read(a.join("bundle.tar.gz")).unwrap(), std::fs::read(b.join("bundle.tar.gz")).unwrap());

    let m: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    let qspi = m["files"].as_array().unwrap().iter().find(|f| f["path"] == "firmware.qspi.bin").unwrap();
    assert_eq!(qspi["load_address"], "0x28000000");
    assert_eq!(qspi["bytes"], 70_000);
    assert_eq!(m["memory_regions"][2]["name"], "QSPI");
    assert!(m["flash"]["probe-rs"].as_str().unwrap().starts_with("probe-rs download --chip"));
    assert!(m["flash"]["pyocd"].as_str().unwrap().contains("firmware.hex"));
    assert!(m["flash"]["fvp"].as_str().unwrap().contains("-a firmware.elf"));
    let flash = String::from_utf8_lossy(&files["flash.sh"]);
    assert!(flash.contains("PROBE_RS_CHIP:?"), "{flash}");

    assert_eq!(check_dir(&a.join("bundle")).unwrap().files, 12);
    assert!(check_tarball(&a.join("bundle.tar.gz")).is_ok());

    // sha256sum -c accepts SHA256SUMS as written.
    if Command::new("sha256sum").arg("--version").output().is_ok() {
        let o = Command::new("sha256sum").args(["-c", "--quiet", "SHA256SUMS"]).current_dir(a.join("bundle")).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }
    // GNU tar reads the archive: sorted entries, fixed owner and date.
    if Command::new("tar").arg("--version").output().is_ok() {
        let o = Command::new("tar").args(["-tvzf"]).arg(a.join("bundle.tar.gz")).output().unwrap();
        let listing = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success());
        assert!(listing.lines().nth(1).unwrap().contains("0/0") && listing.contains("2000-01-01"), "{listing}");
        assert!(listing.lines().nth(1).unwrap().ends_with("demo-corstone-300/README.md"), "{listing}");
    }
}

/// Copies bundle `a` to a fresh folder, lets `damage` change it, and returns the problems.
fn damaged(a: &Path, damage: impl FnOnce(&Path)) -> Vec<String> {
    let t = tempfile::tempdir().unwrap();
    for (name, bytes) in read_dir(&a.join("bundle")) {
        std::fs::write(t.path().join(name), bytes).unwrap();
    }
    damage(t.path());
    check_dir(t.path()).unwrap_err()
}

#[test]
fn check_names_truncated_modified_missing_and_unlisted_files() {
    let (_t, a, _) = write_twice(true, &firmware_elf());
    let truncate = |name: &'static str| {
        move |d: &Path| {
            let p = d.join(name);
            let bytes = std::fs::read(&p).unwrap();
            std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        }
    };
    let p = damaged(&a, truncate("firmware.qspi.bin"));
    assert!(p.iter().all(|l| l.starts_with("firmware.qspi.bin:")) && p.iter().any(|l| l.contains("69999 bytes")), "{p:?}");
    let p = damaged(&a, truncate("manifest.json"));
    assert!(p.iter().any(|l| l.starts_with("manifest.json:")), "{p:?}");
    let p = damaged(&a, |d| {
        let mut bytes = std::fs::read(d.join("firmware.hex")).unwrap();
        bytes[20] ^= 1;
        std::fs::write(d.join("firmware.hex"), bytes).unwrap();
    });
    assert!(p.iter().any(|l| l.starts_with("firmware.hex: sha256 differs")), "{p:?}");
    let p = damaged(&a, |d| std::fs::remove_file(d.join("firmware.elf")).unwrap());
    assert!(p.iter().any(|l| l == "firmware.elf: listed in SHA256SUMS but missing"), "{p:?}");
    let p = damaged(&a, |d| std::fs::write(d.join("extra.bin"), b"x").unwrap());
    assert_eq!(p, vec!["extra.bin: present but not listed in SHA256SUMS"]);
    let p = damaged(&a, |d| std::fs::remove_file(d.join("SHA256SUMS")).unwrap());
    assert!(p[0].contains("SHA256SUMS is missing"), "{p:?}");

    // A truncated tarball is refused, naming it.
    let gz = std::fs::read(a.join("bundle.tar.gz")).unwrap();
    let cut = a.join("cut.tar.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let p = check_tarball(&cut).unwrap_err();
    assert!(p[0].contains("cut.tar.gz"), "{p:?}");
}

#[test]
fn hosted_bundle_has_runner_program_and_qemu_script() {
    let (_t, a, b) = write_twice(false, &elf32(&[(0x1000, &pattern(64, 9))], 0x1000));
    let files = read_dir(&a.join("bundle"));
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(names, ["README.md", "SHA256SUMS", "image_classifier", "manifest.json", "model.pte", "run-qemu.sh", "size-report.txt"]);
    assert_eq!(files, read_dir(&b.join("bundle")));
    let script = String::from_utf8_lossy(&files["run-qemu.sh"]);
    assert!(script.contains("exec qemu-aarch64 -L /usr/aarch64-linux-gnu \"$here/image_classifier\" --model \"$here/model.pte\" \"$@\""), "{script}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(a.join("bundle/image_classifier")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    let m: serde_json::Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    assert_eq!(m["platform"]["kind"], "hosted");
    assert_eq!(m["run"]["command"], "qemu-aarch64 -L /usr/aarch64-linux-gnu ./image_classifier --model model.pte");
    // The streamed tarball is exactly gzip(tar(…)) of the folder's files.
    let mut entries: Vec<archive::Entry<'_>> = files.iter().map(|(n, b)| archive::Entry { name: n, bytes: b, executable: n.ends_with(".sh") || n == "image_classifier" }).collect();
    let in_memory = archive::gzip(&archive::tar("demo-linux-arm64", &mut entries).unwrap()).unwrap();
    assert!(in_memory == std::fs::read(a.join("bundle.tar.gz")).unwrap());
    // Tarball entries come back with the folder's bytes and modes.
    let tar = archive::gunzip(&std::fs::read(a.join("bundle.tar.gz")).unwrap()).unwrap();
    for (path, mode, bytes) in archive::untar(&tar).unwrap() {
        let name = path.strip_prefix("demo-linux-arm64/").unwrap();
        assert_eq!(&bytes, &files[name], "{name}");
        assert_eq!(mode, if name.ends_with(".sh") || name == "image_classifier" { 0o755 } else { 0o644 }, "{name}");
    }
}

/// A real Cortex-M ELF from arm-none-eabi-gcc with code in ITCM and data in QSPI and DDR;
/// skipped (with a message) where the compiler is not installed.
#[test]
fn gcc_built_cortex_m_elf_bundles_per_region() {
    if Command::new("arm-none-eabi-gcc").arg("--version").output().is_err() {
        eprintln!("skipped: arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi)");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("fw.c"), "__attribute__((section(\".qspi\"))) const unsigned char table[100000] = {1, 2, 3};\n__attribute__((section(\".ddr\"))) unsigned int ddr_words[4] = {5, 6, 7, 8};\nint counter;\nvoid _start(void) { counter = table[7] + ddr_words[1]; for (;;) {} }\n").unwrap();
    std::fs::write(
        t.path().join("fw.ld"),
        "MEMORY { ITCM (rx) : ORIGIN = 0x0, LENGTH = 512K\n DTCM (rw) : ORIGIN = 0x20000000, LENGTH = 512K\n QSPI (r) : ORIGIN = 0x28000000, LENGTH = 8M\n DDR (rw) : ORIGIN = 0x60000000, LENGTH = 2048M }\n\
         ENTRY(_start)\nSECTIONS { .text : { *(.text*) } > ITCM\n .qspi : { *(.qspi) } > QSPI\n .ddr : { *(.ddr) } > DDR\n .bss (NOLOAD) : { *(.bss*) *(COMMON) } > DTCM }\n",
    )
    .unwrap();
    let o = Command::new("arm-none-eabi-gcc")
        .args(["-mcpu=cortex-m55", "-mthumb", "-nostdlib", "-O1", "-T", "fw.ld", "fw.c", "-o", "fw.elf"])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(t.path().join("fw.elf")).unwrap();
    let parsed = elf::Elf::parse(&bytes).unwrap();
    let text = parsed.sections.iter().find(|s| s.name == ".text").unwrap();
    assert_eq!((text.addr, text.kind()), (0, "text"));
    assert_eq!(parsed.sections.iter().find(|s| s.name == ".bss").unwrap().kind(), "bss");

    let s = spec(t.path(), &bytes, true);
    let w = rbuild_bundle::write(&s, &t.path().join("bundle"), &t.path().join("b.tar.gz")).unwrap();
    let names: Vec<&str> = w.files.iter().map(|f| f.0.as_str()).collect();
    assert!(names.contains(&"firmware.itcm.bin") && names.contains(&"firmware.qspi.bin") && names.contains(&"firmware.ddr.bin"), "{names:?}");
    let qspi = std::fs::read(t.path().join("bundle/firmware.qspi.bin")).unwrap();
    assert_eq!((qspi.len(), &qspi[..4]), (100_000, &[1u8, 2, 3, 0][..]));
    let report = std::fs::read_to_string(t.path().join("bundle/size-report.txt")).unwrap();
    assert!(report.contains(".qspi") && report.contains("QSPI") && report.contains("rodata"), "{report}");
    // The HEX holds exactly the ELF's loadable bytes at their addresses.
    let hex = std::fs::read_to_string(t.path().join("bundle/firmware.hex")).unwrap();
    assert_eq!(ihex::parse(&hex).unwrap(), elf::images(&parsed.segments).unwrap());
    assert!(check_dir(&t.path().join("bundle")).is_ok());
}
