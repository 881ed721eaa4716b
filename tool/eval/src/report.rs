//! One measured metric with the counts behind it: what `rbuild eval --json` prints and what the
//! recipe's accuracy gate compares.

use serde_json::{json, Map, Value};

use crate::lm::PerplexityReport;
use crate::speech::FileResult;
use crate::topk::TopKCounts;
use crate::wer::WordErrors;

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// "perplexity", "wer" or "top1" (whose report carries "top5" too).
    pub metric: &'static str,
    pub value: f64,
    /// The counts it used and any further values, by name.
    pub fields: Map<String, Value>,
    /// One readable line.
    pub summary: String,
}

impl Report {
    /// `{"metric": …, "value": …, …fields}`.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("metric".into(), json!(self.metric));
        obj.insert("value".into(), json!(self.value));
        obj.extend(self.fields.clone());
        Value::Object(obj)
    }

    /// The value of `metric` ("top5" from a top-1 report too).
    pub fn value_of(&self, metric: &str) -> Option<f64> {
        if metric == self.metric {
            return Some(self.value);
        }
        self.fields.get(metric).and_then(Value::as_f64)
    }
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub fn perplexity(r: &PerplexityReport) -> Report {
    Report {
        metric: "perplexity",
        value: r.perplexity,
        fields: fields(json!({
            "tokens": r.tokens,
            "ctx": r.plan.n_ctx,
            "chunks": r.plan.chunks,
            "scored_tokens": r.scored,
            "bos": r.bos,
            "logits_path": r.path.as_str(),
        })),
        summary: format!(
            "perplexity {:.4} over {} chunk(s) of {} tokens ({} of {} tokens scored; {}: {})",
            r.perplexity,
            r.plan.chunks,
            r.plan.n_ctx,
            r.scored,
            r.tokens,
            r.path.as_str(),
            r.path.describe()
        ),
    }
}

pub fn top_k(c: &TopKCounts) -> Report {
    Report {
        metric: "top1",
        value: c.top1_accuracy(),
        fields: fields(json!({"top5": c.top5_accuracy(), "images": c.images, "top1_correct": c.top1, "top5_correct": c.top5})),
        summary: format!(
            "top-1 {:.4} ({} of {}), top-5 {:.4} ({} of {})",
            c.top1_accuracy(),
            c.top1,
            c.images,
            c.top5_accuracy(),
            c.top5,
            c.images
        ),
    }
}

pub fn wer(files: &[FileResult]) -> Result<Report, String> {
    let mut total = WordErrors::default();
    for f in files {
        total += f.errors;
    }
    let value = total.wer().ok_or("the transcripts hold no words after normalization: WER is undefined")?;
    let per_file: Vec<Value> = files
        .iter()
        .map(|f| json!({"audio": f.audio.display().to_string(), "reference": f.reference, "hypothesis": f.hypothesis, "errors": f.errors.errors(), "words": f.errors.reference_words}))
        .collect();
    Ok(Report {
        metric: "wer",
        value,
        fields: fields(json!({
            "files": files.len(),
            "words": total.reference_words,
            "substitutions": total.substitutions,
            "deletions": total.deletions,
            "insertions": total.insertions,
            "per_file": per_file,
        })),
        summary: format!(
            "WER {:.4} over {} file(s): {} errors in {} words ({} substitutions, {} deletions, {} insertions; Whisper's English normalizer)",
            value,
            files.len(),
            total.errors(),
            total.reference_words,
            total.substitutions,
            total.deletions,
            total.insertions
        ),
    })
}
