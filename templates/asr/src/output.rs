//! Transcript files: plain text, SubRip, WebVTT and JSON.

use crate::transcribe::Segment;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Txt,
    Srt,
    Vtt,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format, String> {
        Ok(match s {
            "txt" => Format::Txt,
            "srt" => Format::Srt,
            "vtt" => Format::Vtt,
            "json" => Format::Json,
            other => return Err(format!("unknown output format {other:?} (txt, srt, vtt or json)")),
        })
    }
}

/// `HH:MM:SS<sep>mmm`, rounded to the millisecond.
pub fn timestamp(seconds: f64, sep: char) -> String {
    let ms = (seconds.max(0.0) * 1000.0).round() as u64;
    format!("{:02}:{:02}:{:02}{sep}{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// One segment's text on a line: trimmed, and with no blank line inside (which would end a
/// subtitle cue early).
fn cue_text(s: &Segment) -> String {
    s.text.trim().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
}

pub fn txt(segments: &[Segment]) -> String {
    segments.iter().map(|s| cue_text(s) + "\n").collect()
}

pub fn srt(segments: &[Segment]) -> String {
    let mut out = String::new();
    for (i, s) in segments.iter().enumerate() {
        out += &format!("{}\n{} --> {}\n{}\n\n", i + 1, timestamp(s.start, ','), timestamp(s.end, ','), cue_text(s));
    }
    out
}

pub fn vtt(segments: &[Segment]) -> String {
    let mut out = String::from("WEBVTT\n\n");
    for s in segments {
        out += &format!("{} --> {}\n{}\n\n", timestamp(s.start, '.'), timestamp(s.end, '.'), cue_text(s));
    }
    out
}

pub fn segment_json(s: &Segment) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "seek": s.seek,
        "start": s.start,
        "end": s.end,
        "text": s.text,
        "tokens": s.tokens,
        "temperature": s.temperature,
        "avg_logprob": s.avg_logprob,
        "compression_ratio": s.compression_ratio,
        "no_speech_prob": s.no_speech_prob,
    })
}

/// The JSON document: text, segments, language and the caller's stats.
pub fn json(segments: &[Segment], language: Option<&str>, stats: serde_json::Value) -> serde_json::Value {
    let text: String = segments.iter().map(|s| s.text.as_str()).collect();
    let tokens: Vec<u32> = segments.iter().flat_map(|s| s.tokens.iter().copied()).collect();
    serde_json::json!({
        "text": text,
        "language": language,
        "segments": segments.iter().map(segment_json).collect::<Vec<_>>(),
        "tokens": tokens,
        "stats": stats,
    })
}

pub fn render(format: Format, segments: &[Segment], language: Option<&str>, stats: serde_json::Value) -> String {
    match format {
        Format::Txt => txt(segments),
        Format::Srt => srt(segments),
        Format::Vtt => vtt(segments),
        Format::Json => format!("{}\n", json(segments, language, stats)),
    }
}
