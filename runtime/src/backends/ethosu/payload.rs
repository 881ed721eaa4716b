//! Vela's command-stream payload (`cmd_data`): the "Custom Operator Payload 1" the Ethos-U
//! driver consumes, not a bare register command stream.
//!
//! Layout, from Arm's `ethos-u-core-driver` (`ethosu_driver.c`: `ETHOSU_FOURCC`,
//! `struct custom_data_s`, `struct opt_cfg_s`, `enum DRIVER_ACTION_e`, `ethosu_invoke`) and checked
//! against Vela 5.2.0 output: a fourcc word `COP1`, then 32-bit driver-action words — byte 0 the
//! action, byte 1 `reserved`, bytes 2..4 a u16 `length`/data:
//!
//! - `OPTIMIZER_CONFIG` (1): followed by 2 words, the NPU CONFIG and ID register values Vela
//!   compiled for (macs_per_cc bits 3:0, cmd_stream_version 7:4, shram_size 15:8; arch revision
//!   in ID bits 31:16); the driver refuses to run on an NPU that differs;
//! - `COMMAND_STREAM` (2): `(reserved << 16) | length` 32-bit words of register commands follow
//!   inline; QBASE points at them (16-byte aligned) and QSIZE is their byte length;
//! - `READ_APB_REG` (3), `DUMP_SHRAM` (4): debug actions, one word;
//! - `NOP` (5): padding, one word (Vela uses it to 16-align the command stream).

use alloc::string::String;
use alloc::vec::Vec;

pub const FOURCC: [u8; 4] = *b"COP1";
pub const OPTIMIZER_CONFIG: u8 = 1;
pub const COMMAND_STREAM: u8 = 2;
pub const READ_APB_REG: u8 = 3;
pub const DUMP_SHRAM: u8 = 4;
pub const NOP: u8 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// CONFIG / ID register values the stream was compiled for.
    OptimizerConfig { config: u32, id: u32 },
    /// A register command stream at `offset` bytes into the payload, `len` bytes long.
    CommandStream { offset: usize, len: usize },
    /// Debug actions the runtime skips (READ_APB_REG, DUMP_SHRAM).
    Debug(u8),
}

fn word(b: &[u8], at: usize) -> Option<[u8; 4]> {
    b.get(at..at + 4).and_then(|s| s.try_into().ok())
}

/// Decodes a payload into its actions (NOPs dropped). Errors name the byte offset.
pub fn parse(p: &[u8]) -> Result<Vec<Action>, String> {
    if p.len() % 4 != 0 {
        return Err(alloc::format!("command payload of {} bytes is not a whole number of 32-bit words", p.len()));
    }
    if word(p, 0) != Some(FOURCC) {
        return Err(alloc::format!("command payload does not start with `COP1` (found {:02x?})", p.get(..4.min(p.len())).unwrap_or(&[])));
    }
    let mut out = Vec::new();
    let mut at = 4;
    while at < p.len() {
        let w = word(p, at).ok_or_else(|| alloc::format!("truncated driver action at byte {at}"))?;
        match w[0] {
            OPTIMIZER_CONFIG => {
                let c = word(p, at + 4).ok_or_else(|| alloc::format!("OPTIMIZER_CONFIG at byte {at} is truncated"))?;
                let i = word(p, at + 8).ok_or_else(|| alloc::format!("OPTIMIZER_CONFIG at byte {at} is truncated"))?;
                out.push(Action::OptimizerConfig { config: u32::from_le_bytes(c), id: u32::from_le_bytes(i) });
                at += 12;
            }
            COMMAND_STREAM => {
                let words = ((w[1] as usize) << 16) | u16::from_le_bytes([w[2], w[3]]) as usize;
                let len = words * 4;
                let offset = at + 4;
                if words == 0 || p.len() - offset < len {
                    return Err(alloc::format!("COMMAND_STREAM at byte {at}: {words} words, {} bytes remain", p.len() - offset));
                }
                out.push(Action::CommandStream { offset, len });
                at = offset + len;
            }
            READ_APB_REG | DUMP_SHRAM => {
                out.push(Action::Debug(w[0]));
                at += 4;
            }
            NOP => at += 4,
            x => return Err(alloc::format!("unknown driver action {x} at byte {at}")),
        }
    }
    if !out.iter().any(|a| matches!(a, Action::CommandStream { .. })) {
        return Err("command payload holds no COMMAND_STREAM".into());
    }
    Ok(out)
}

/// Builds a payload (for tests and tools): optimizer config, NOPs to 16-align, the stream.
pub fn build(config: u32, id: u32, stream: &[u32]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&FOURCC);
    p.extend_from_slice(&[OPTIMIZER_CONFIG, 0, 0, 0]);
    p.extend_from_slice(&config.to_le_bytes());
    p.extend_from_slice(&id.to_le_bytes());
    while (p.len() + 4) % 16 != 0 {
        p.extend_from_slice(&[NOP, 0, 0, 0]);
    }
    let n = stream.len();
    p.extend_from_slice(&[COMMAND_STREAM, (n >> 16) as u8, n as u8, (n >> 8) as u8]);
    for w in stream {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_parse() {
        let p = build(0x1807, 0x1006_6001, &[1, 2, 3]);
        let a = parse(&p).unwrap();
        assert_eq!(a[0], Action::OptimizerConfig { config: 0x1807, id: 0x1006_6001 });
        assert_eq!(a[1], Action::CommandStream { offset: 32, len: 12 });
        assert!(parse(&p[..p.len() - 4]).unwrap_err().contains("COMMAND_STREAM"));
        assert!(parse(b"COP2\0\0\0\0").unwrap_err().contains("COP1"));
        let mut bad = p.clone();
        bad[4] = 9;
        assert!(parse(&bad).unwrap_err().contains("unknown driver action 9"));
        for n in 0..p.len() {
            let _ = parse(&p[..n]);
        }
    }
}
