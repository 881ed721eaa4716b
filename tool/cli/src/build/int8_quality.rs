//! `int8-quality.json` beside a static-int8 image program: the export measures the int8
//! program against its float original on the calibration samples (output SQNR, top-1
//! agreement with fp32's lead, the input-rounding floor); every build prints it, cached ones
//! too, and the bundle manifest records it as `int8_quality`.

use std::path::{Path, PathBuf};

use rbuild_export::int8_quality::Int8Quality;
use rbuild_planner::cache::write_atomic;

pub fn path(program: &Path) -> PathBuf {
    program.with_file_name("int8-quality.json")
}

/// JSON numbers cannot be infinite: an exact match (infinite SQNR) is written as null.
fn db(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!((x * 100.0).round() / 100.0)
    } else {
        serde_json::Value::Null
    }
}

pub fn to_json(q: &Int8Quality) -> serde_json::Value {
    let samples: Vec<serde_json::Value> = q
        .samples
        .iter()
        .map(|s| {
            let mut v = serde_json::json!({ "sqnr_db": db(s.sqnr_db) });
            if let Some(t) = &s.top1 {
                v["fp32_top1"] = t.fp32.into();
                v["int8_top1"] = t.int8.into();
                v["fp32_margin"] = db(t.fp32_margin as f64);
            }
            if let Some(f) = s.input_floor_db {
                v["input_rounding_only_sqnr_db"] = db(f);
            }
            v
        })
        .collect();
    serde_json::json!({ "summary": q.summary(), "samples": samples })
}

pub fn write(program: &Path, q: &Int8Quality) -> Result<(), String> {
    let p = path(program);
    let text = serde_json::to_string_pretty(&to_json(q)).map_err(|e| e.to_string())?;
    write_atomic(&p, text.as_bytes()).map_err(|e| format!("{}: {e}", p.display()))
}

/// Prints the summary (and a hint when top-1 differs) from the file, if the build has one.
pub fn print(program: &Path) {
    let Ok(text) = std::fs::read(path(program)) else { return };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return };
    let Some(summary) = v["summary"].as_str() else { return };
    println!("{summary}");
    let samples = v["samples"].as_array().cloned().unwrap_or_default();
    if samples.iter().any(|s| s["fp32_top1"].is_u64() && s["fp32_top1"] != s["int8_top1"]) {
        println!(
            "  help: where fp32's lead is below the int8 error the best class can change; the input-rounding figure is how far the \
             fp32 model itself moves when only its input is rounded to int8 (`rbuild export … --quant int8 --sensitivity 10` ranks the layers)"
        );
    }
}
