//! What the firmware prints: the top classes, one `RBUILD_OUTPUT` line per output tensor, and
//! the arena placement for `RBUILD_STATS`.

use core::fmt::Write;

use rbuild_runtime::decimal::{div_rem_small, Dec};
use rbuild_runtime::{Method, ScalarType, Value};

use crate::semihosting::Console;

/// The protocol's dtype names.
fn dtype_name(dtype: ScalarType) -> &'static str {
    match dtype {
        ScalarType::Float => "float32",
        ScalarType::Char => "int8",
        ScalarType::Byte => "uint8",
        ScalarType::Int => "int32",
        ScalarType::Long => "int64",
        other => other.name(),
    }
}

/// `RBUILD_OUTPUT index=i dtype=… shape=… hex=…` for every tensor output.
pub fn outputs(out: &mut Console, method: &Method<'_>) -> Result<(), &'static str> {
    for i in 0..method.outputs().len() {
        let Some(Value::Tensor(t)) = method.output_value(i) else {
            continue;
        };
        let bytes = method.output_bytes(i).ok_or("an output tensor has no data")?;
        let _ = write!(out, "RBUILD_OUTPUT index={i} dtype={} shape=", dtype_name(t.dtype));
        for (d, size) in t.shape.as_slice().iter().enumerate() {
            let _ = write!(out, "{}{size}", if d > 0 { "," } else { "" });
        }
        let _ = out.write_str(" hex=");
        for b in bytes {
            let _ = write!(out, "{b:02x}");
        }
        let _ = out.write_str("\n");
    }
    Ok(())
}

/// The `k` best classes of output 0 when it is a float32 or int8 score vector ([C] or [1, C]).
pub fn top_k(out: &mut Console, method: &Method<'_>, k: usize) {
    let Some(Value::Tensor(t)) = method.output_value(0) else { return };
    let Some(bytes) = method.output_bytes(0) else { return };
    if k == 0 || !matches!(t.shape.as_slice(), [_] | [1, _]) {
        return;
    }
    let score = |i: usize| -> f32 {
        match t.dtype {
            ScalarType::Float => f32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]),
            ScalarType::Char => f32::from(bytes[i] as i8),
            _ => f32::NAN,
        }
    };
    let classes = t.shape.numel();
    if classes == 0 || score(0).is_nan() {
        return;
    }
    // Repeated selection: k is small and there is no room to spare for a sort buffer.
    let _ = write!(out, "top-{}:", k.min(classes));
    let mut last: Option<(f32, usize)> = None;
    for rank in 1..=k.min(classes) {
        let mut best: Option<(f32, usize)> = None;
        for i in 0..classes {
            let s = score(i);
            let after_last = match last {
                None => true,
                Some((ls, li)) => s < ls || (s == ls && i > li),
            };
            if after_last && best.is_none_or(|(bs, _)| s > bs) {
                best = Some((s, i));
            }
        }
        let Some((s, i)) = best else { break };
        let _ = write!(out, " {rank}:{i} (");
        fixed4(out, s);
        let _ = out.write_str(")");
        last = Some((s, i));
    }
    let _ = out.write_str("\n");
}

/// `s` with four decimals, by integer arithmetic: core's float formatting costs ~10 KB of code.
fn fixed4(out: &mut Console, s: f32) {
    if !s.is_finite() {
        let _ = out.write_str(if s.is_nan() { "nan" } else if s > 0.0 { "inf" } else { "-inf" });
        return;
    }
    // Round half away from zero at the fourth decimal (scores are far below 2^53 / 10^4).
    let scaled = (f64::from(s.abs()) * 10_000.0 + 0.5) as u64;
    let sign = if s < 0.0 && scaled != 0 { "-" } else { "" };
    let (units, fraction) = div_rem_small(scaled, 10_000);
    let _ = write!(out, "{sign}{}.{fraction:04}", Dec::unsigned(units));
}

/// ` arena_bytes=N arena.<region>=N …`: planned memory per region, in placement order.
pub fn arenas(out: &mut Console, placement: &[(&'static str, usize)]) {
    let total: usize = placement.iter().map(|(_, n)| n).sum();
    let _ = write!(out, " arena_bytes={total} arenas={}", placement.len());
    let mut seen: [&str; 16] = [""; 16];
    let mut n = 0;
    for &(region, _) in placement {
        if seen[..n].contains(&region) || n == seen.len() {
            continue;
        }
        seen[n] = region;
        n += 1;
        let bytes: usize = placement.iter().filter(|(r, _)| *r == region).map(|(_, b)| b).sum();
        let _ = write!(out, " arena.{region}={bytes}");
    }
}
