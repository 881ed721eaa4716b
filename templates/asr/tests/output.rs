//! SRT, WebVTT, text and JSON transcripts, parsed back with an independent subtitle parser
//! (aspasia).

mod common;

use std::str::FromStr;

use aspasia::{SubRipSubtitle, Subtitle, WebVttSubtitle};
use rbuild_asr_runner::output::{self, Format};
use rbuild_asr_runner::transcribe::Segment;

fn seg(id: usize, start: f64, end: f64, text: &str) -> Segment {
    Segment {
        id,
        seek: 0,
        start,
        end,
        text: text.into(),
        tokens: vec![1, 2, 3],
        temperature: 0.0,
        avg_logprob: -0.25,
        compression_ratio: 1.1,
        no_speech_prob: 0.01,
    }
}

fn segments() -> Vec<Segment> {
    vec![
        seg(0, 0.0, 2.91, " The quick brown fox"),
        seg(1, 2.91, 65.5, " jumps over\n\nthe lazy dog."),
        seg(2, 3725.004, 3726.0, " Une heure plus tard, éé."),
    ]
}

const WANT_MS: [(i64, i64); 3] = [(0, 2910), (2910, 65500), (3725004, 3726000)];

#[test]
fn srt_is_what_a_subtitle_parser_reads_back() {
    let s = output::srt(&segments());
    assert!(s.starts_with("1\n00:00:00,000 --> 00:00:02,910\nThe quick brown fox\n\n"), "{s}");
    assert!(s.contains("\n01:02:05,004 --> 01:02:06,000\n"), "{s}");
    let parsed = SubRipSubtitle::from_str(&s).unwrap();
    let ev = parsed.events();
    assert_eq!(ev.len(), 3, "{s}");
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e.line_number, i + 1);
        assert_eq!((i64::from(e.start), i64::from(e.end)), WANT_MS[i]);
    }
    assert_eq!(ev[0].text, "The quick brown fox");
    // A blank line inside a segment's text would end the cue early; it is dropped.
    assert_eq!(ev[1].text, "jumps over\nthe lazy dog.");
    assert_eq!(ev[2].text, "Une heure plus tard, éé.");
}

#[test]
fn vtt_is_what_a_subtitle_parser_reads_back() {
    let s = output::vtt(&segments());
    assert!(s.starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:02.910\nThe quick brown fox\n\n"), "{s}");
    let parsed = WebVttSubtitle::from_str(&s).unwrap();
    let ev = parsed.events();
    assert_eq!(ev.len(), 3, "{s}");
    for (i, e) in ev.iter().enumerate() {
        assert_eq!((i64::from(e.start), i64::from(e.end)), WANT_MS[i]);
    }
    assert_eq!(ev[2].text, "Une heure plus tard, éé.");
}

#[test]
fn timestamps_round_to_milliseconds() {
    assert_eq!(output::timestamp(0.0, ','), "00:00:00,000");
    assert_eq!(output::timestamp(2.9104, '.'), "00:00:02.910");
    assert_eq!(output::timestamp(2.9996, '.'), "00:00:03.000");
    assert_eq!(output::timestamp(36000.0, ','), "10:00:00,000");
}

#[test]
fn txt_and_json() {
    assert_eq!(output::txt(&segments()[..1]), "The quick brown fox\n");
    let j = output::json(&segments(), Some("en"), serde_json::json!({"load_ms": 1.0}));
    assert_eq!(j["language"], "en");
    assert_eq!(j["segments"].as_array().unwrap().len(), 3);
    let s1 = &j["segments"][1];
    assert_eq!(s1["id"], 1);
    assert_eq!(s1["start"], 2.91);
    assert_eq!(s1["end"], 65.5);
    assert_eq!(s1["tokens"], serde_json::json!([1, 2, 3]));
    for k in ["avg_logprob", "no_speech_prob", "temperature", "compression_ratio", "text"] {
        assert!(!s1[k].is_null(), "{k}");
    }
    assert!(j["text"].as_str().unwrap().starts_with(" The quick brown fox jumps"));
    assert_eq!(j["stats"]["load_ms"], 1.0);
    let rendered = output::render(Format::Json, &segments(), None, serde_json::json!({}));
    let back: serde_json::Value = serde_json::from_str(&rendered).unwrap();
    assert!(back["language"].is_null());
    assert!(Format::parse("docx").is_err());
}
