//! `rbuild mobilenet-cortex-m` end to end: build the Cortex-M55 firmware, boot it in QEMU's
//! Corstone-300 model (mps3-an547) with semihosting, and compare the `RBUILD_OUTPUT` bytes it
//! prints with the host run of the same program on the same embedded input.
//!
//! The recipe's program is int8: with the portable kernels on both sides, and with the
//! firmware's Cortex-M DSP kernels against the host's portable ones, the output must be
//! identical bit for bit. Skipped (printed) without qemu-system-arm.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, KernelRegistry, Program, ScalarType};

const QEMU: &str = "qemu-system-arm";
/// MobileNetV2 at 64×64 runs in a few seconds under emulation; a hang is a failure.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

fn have_qemu() -> bool {
    Command::new(QEMU).arg("--version").output().is_ok_and(|o| o.status.success())
}

struct Boot {
    status: Option<i32>,
    stdout: String,
    seconds: f64,
}

/// Runs the firmware with the board file's `run` command, killing it after BOOT_TIMEOUT.
fn boot(elf: &Path) -> Boot {
    let board = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../toolchains/corstone-300.kdl");
    let platform = rbuild_recipe::load_platform(&board).unwrap_or_else(|r| panic!("{}", rbuild_recipe::render(&r)));
    let t = Instant::now();
    let mut child = platform
        .run
        .command(elf)
        .expect("corstone-300 runs under QEMU here")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t.elapsed() > BOOT_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{} did not finish within {BOOT_TIMEOUT:?}", elf.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Boot { status: status.code(), stdout: reader.join().unwrap(), seconds: t.elapsed().as_secs_f64() }
}

/// `RBUILD_OUTPUT` lines: (index, dtype, shape, bytes).
fn outputs(stdout: &str) -> Vec<(usize, String, Vec<usize>, Vec<u8>)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RBUILD_OUTPUT "))
        .map(|l| {
            let kv: HashMap<&str, &str> = l.split(' ').filter_map(|w| w.split_once('=')).collect();
            let hex = kv["hex"];
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            let shape = kv["shape"].split(',').map(|d| d.parse().unwrap()).collect();
            (kv["index"].parse().unwrap(), kv["dtype"].to_string(), shape, bytes)
        })
        .collect()
}

fn stats(stdout: &str) -> HashMap<String, String> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("RBUILD_STATS ")).expect("an RBUILD_STATS line");
    line.split(' ').filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The host run of `pte` on `input.0` of `inputs` with `kernels`: output 0's bytes.
fn host_run(pte: &Path, inputs: &Path, kernels: &KernelRegistry) -> Vec<u8> {
    let program_bytes = AlignedBuf::from_bytes(&std::fs::read(pte).unwrap());
    let program = Program::load(program_bytes.as_slice()).unwrap();
    let mut method = program.load_method("forward", kernels, &BackendRegistry::new()).unwrap();
    let file = std::fs::read(inputs).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&file).unwrap();
    let input = tensors.tensor("input.0").unwrap();
    assert_eq!(input.dtype(), safetensors::Dtype::F32);
    method.set_input_tensor(0, ScalarType::Float, input.shape(), input.data()).unwrap();
    method.execute(&mut KernelContext { threads: 1 }).unwrap();
    method.output_bytes(0).unwrap().to_vec()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn build(out: &Path, kernels: &str) -> PathBuf {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_OUT", out)
        .env("RBUILD_FIRMWARE_KERNELS", kernels)
        .args(["mobilenet-cortex-m", "input-shape=1,3,64,64", "--strict"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "rbuild mobilenet-cortex-m failed:\n{text}");
    out.join("mobilenet-cortex-m/corstone-300")
}

#[test]
fn firmware_boots_in_qemu_and_matches_the_host_run() {
    if !have_qemu() {
        println!("SKIPPED: {QEMU} is not installed (apt-get install -y qemu-system-arm)");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let pte = out.path().join("mobilenet-cortex-m/program/model.pte");

    // Portable kernels on both sides: the same code, the same bits.
    let dir = build(out.path(), "portable");
    for file in ["firmware.elf", "input.safetensors", "link.x", "size-report.txt"] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    let run = boot(&dir.join("firmware.elf"));
    assert_eq!(run.status, Some(0), "firmware failed:\n{}", run.stdout);
    let outs = outputs(&run.stdout);
    assert_eq!(outs.len(), 1, "{}", run.stdout);
    let (index, dtype, shape, bytes) = &outs[0];
    assert_eq!((*index, dtype.as_str(), shape.as_slice()), (0, "float32", &[1, 1000][..]));
    let host = host_run(&pte, &dir.join("input.safetensors"), &rbuild_kernels::portable_registry());
    assert!(*bytes == host, "firmware output differs from the host's portable run");
    println!("portable kernels: firmware output == host output (4000 bytes), QEMU ran {:.1}s", run.seconds);

    let s = stats(&run.stdout);
    assert_eq!(s["cycles_source"], "systick", "QEMU does not implement the DWT cycle counter");
    assert!(s["cycles"].parse::<u64>().unwrap() > 0);
    assert_eq!(s["program_region"], "qspi", "the int8 program fits the 8 MiB QSPI");
    let arena: u64 = s["arena_bytes"].parse().unwrap();
    assert!(arena > 0 && s.keys().any(|k| k.starts_with("arena.")), "{s:?}");
    assert!(s["heap_peak"].parse::<u64>().unwrap() > 0);
    // The top-1 printed is the host's arg-max.
    let logits = f32s(&host);
    let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a))).unwrap();
    assert!(run.stdout.contains(&format!("top-5: 1:{best} (")), "{}", run.stdout);
    let report = std::fs::read_to_string(dir.join("size-report.txt")).unwrap();
    assert!(report.contains(".rbuild_program") && report.contains("itcm") && report.contains(".text"), "{report}");

    // A damaged program in the image: a clear error and a non-zero exit, not a hang.
    let mut elf = std::fs::read(dir.join("firmware.elf")).unwrap();
    let pte_bytes = std::fs::read(&pte).unwrap();
    let at = elf.windows(64).position(|w| w == &pte_bytes[..64]).expect("the program is embedded verbatim");
    elf[at + 4..at + 8].copy_from_slice(b"XX99");
    let broken = out.path().join("broken.elf");
    std::fs::write(&broken, &elf).unwrap();
    let run = boot(&broken);
    assert_eq!(run.status, Some(1), "{}", run.stdout);
    assert!(run.stdout.contains("error: cannot load the embedded program"), "{}", run.stdout);
    assert!(!run.stdout.contains("RBUILD_OUTPUT"), "{}", run.stdout);

    // The selective build's kernels: on the M55 the int8 1x1 convolutions and linear layers
    // run on the DSP instructions (SXTB16/SMLAD), still the same integers as the host's.
    let dir = build(out.path(), "selected");
    let kernels = std::fs::read_to_string(dir.join("firmware-src/src/kernels.rs")).unwrap();
    assert!(kernels.contains("optimized::cortex_m::dot::qconv2d_out"), "{kernels}");
    let run = boot(&dir.join("firmware.elf"));
    assert_eq!(run.status, Some(0), "firmware failed:\n{}", run.stdout);
    let firmware = &outputs(&run.stdout)[0].3;
    let host = host_run(&pte, &dir.join("input.safetensors"), &rbuild_kernels::registry());
    assert!(*firmware == host, "DSP-kernel firmware output differs from the host's");
    println!("selected (DSP) kernels: firmware output == host output, QEMU ran {:.1}s", run.seconds);
}
