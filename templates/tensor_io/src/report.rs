//! What a run prints: each tensor's dtype, shape and value summary, the timing line, and the
//! whole run as one JSON object.

use rbuild_runner_support::stats::{self, RunTimes};
use rbuild_runner_support::tensors::HostTensor;
use serde_json::{json, Value};

/// Minimum, maximum and mean of a tensor's finite elements, and how many are not finite.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    pub non_finite: usize,
}

/// None for dtypes without a numeric reading (complex, packed).
pub fn summarize(t: &HostTensor) -> Option<Summary> {
    let values = t.values_f64()?;
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let fold = |f: fn(f64, f64) -> f64| finite.iter().copied().reduce(f);
    Some(Summary {
        min: fold(f64::min),
        max: fold(f64::max),
        mean: (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64),
        non_finite: values.len() - finite.len(),
    })
}

/// `output.0: float32 [1, 1000] min -3.1 max 4.2 mean 0.0123`.
pub fn tensor_line(name: &str, t: &HostTensor) -> String {
    let mut line = format!("{name}: {} {:?}", t.dtype, t.shape);
    if let Some(s) = summarize(t) {
        let num = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.6}"));
        line.push_str(&format!(" min {} max {} mean {}", num(s.min), num(s.max), num(s.mean)));
        if s.non_finite > 0 {
            line.push_str(&format!(" ({} not finite)", s.non_finite));
        }
    }
    line
}

/// A tensor in the JSON report (values summarized, not listed).
pub fn tensor_json(name: &str, t: &HostTensor) -> Value {
    let mut v = json!({ "name": name, "dtype": t.dtype.name(), "shape": t.shape });
    if let Some(s) = summarize(t) {
        v["min"] = json!(s.min);
        v["max"] = json!(s.max);
        v["mean"] = json!(s.mean);
        v["non_finite"] = json!(s.non_finite);
    }
    v
}

/// Load time, run times and peak memory of one invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub load_ms: f64,
    pub times: RunTimes,
    pub threads: usize,
    pub peak_rss_bytes: Option<u64>,
}

impl Stats {
    pub fn line(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3} ms"));
        format!(
            "load {:.1} ms, {} run(s): median {}, min {}, {} thread(s), peak memory {}",
            self.load_ms,
            self.times.runs(),
            ms(self.times.median_ms()),
            ms(self.times.min_ms()),
            self.threads,
            stats::mib(self.peak_rss_bytes)
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "load_ms": self.load_ms,
            "runs": self.times.runs(),
            "run_ms_median": self.times.median_ms(),
            "run_ms_min": self.times.min_ms(),
            "threads": self.threads,
            "peak_rss_bytes": self.peak_rss_bytes,
        })
    }
}
