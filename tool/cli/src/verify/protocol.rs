//! Reading what a runner or firmware prints in verify mode:
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,…> hex=<bytes>` and
//! `RBUILD_STATS key=value …`. Other lines (logs, QEMU banners) are ignored.

use std::collections::BTreeMap;

use rbuild_runner_support::protocol::dtype_from_name;
use rbuild_runtime::ScalarType;

/// One output tensor as printed.
#[derive(Clone, Debug, PartialEq)]
pub struct Printed {
    pub index: usize,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    pub outputs: Vec<Printed>,
    pub stats: BTreeMap<String, String>,
}

fn fields(rest: &str) -> BTreeMap<&str, &str> {
    rest.split_whitespace().filter_map(|w| w.split_once('=')).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Parses the protocol lines of `stdout`; a malformed `RBUILD_OUTPUT` line is an error naming
/// its line number, outputs come back sorted by index.
pub fn parse(stdout: &str) -> Result<Run, String> {
    let mut run = Run::default();
    for (n, line) in stdout.lines().enumerate() {
        // Semihosting consoles may add '\r'.
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("RBUILD_OUTPUT ") {
            let f = fields(rest);
            let bad = |what: &str| format!("line {}: RBUILD_OUTPUT with {what}", n + 1);
            let index = f.get("index").and_then(|i| i.parse().ok()).ok_or_else(|| bad("no index"))?;
            let dtype = f.get("dtype").and_then(|d| dtype_from_name(d)).ok_or_else(|| bad("an unknown dtype"))?;
            let shape_text = f.get("shape").ok_or_else(|| bad("no shape"))?;
            let shape: Vec<usize> = if shape_text.is_empty() {
                vec![]
            } else {
                shape_text.split(',').map(|d| d.parse()).collect::<Result<_, _>>().map_err(|_| bad("a bad shape"))?
            };
            let data = f.get("hex").and_then(|h| unhex(h)).ok_or_else(|| bad("bad hex data"))?;
            let want = shape.iter().product::<usize>() * dtype.size();
            if data.len() != want {
                return Err(bad(&format!("{} data bytes for shape {shape:?} of {} ({want} expected): cut short?", data.len(), dtype)));
            }
            run.outputs.push(Printed { index, dtype, shape, data });
        } else if let Some(rest) = line.strip_prefix("RBUILD_STATS") {
            for (k, v) in fields(rest) {
                run.stats.insert(k.to_string(), v.to_string());
            }
        }
    }
    run.outputs.sort_by_key(|o| o.index);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_outputs_and_stats_among_other_lines() {
        let text = "QEMU banner\r\nRBUILD_OUTPUT index=1 dtype=int8 shape=2 hex=ff01\r\nlog\nRBUILD_OUTPUT index=0 dtype=float32 shape=1,1 hex=0000803f\nRBUILD_STATS cycles=123 arena_used=4096\n";
        let run = parse(text).unwrap();
        assert_eq!(run.outputs.len(), 2);
        assert_eq!(run.outputs[0], Printed { index: 0, dtype: ScalarType::Float, shape: vec![1, 1], data: 1f32.to_le_bytes().to_vec() });
        assert_eq!(run.outputs[1].data, vec![0xff, 0x01]);
        assert_eq!(run.stats["cycles"], "123");
    }

    #[test]
    fn short_or_malformed_lines_are_errors() {
        assert!(parse("RBUILD_OUTPUT index=0 dtype=float32 shape=2 hex=0000803f").unwrap_err().contains("cut short"));
        assert!(parse("RBUILD_OUTPUT index=0 dtype=float99 shape=1 hex=00").unwrap_err().contains("dtype"));
        assert!(parse("RBUILD_OUTPUT index=0 dtype=int8 shape=1 hex=0g").unwrap_err().contains("hex"));
    }
}
