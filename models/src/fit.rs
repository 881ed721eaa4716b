//! Fitting an export's sizes (cache length, audio length) to the model. A size is asked for
//! exactly (a flag or override the user typed, a value their recipe writes) or as a default
//! (a family's built-in value, a shipped recipe's `up-to=`): a default the checkpoint cannot
//! hold is lowered to what it can, and the change is reported ([`Lowered`]) so the user sees
//! both values; an exact value it cannot hold is an error naming the value and the limit.

use rbuild_export::error::Result;
use rbuild_export::ExportError;

/// A size and how binding it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeRequest<T> {
    /// The user's value: a model that cannot hold it is an error.
    Exactly(T),
    /// A default: lowered to what the model holds, with a [`Lowered`] note.
    UpTo(T),
}

impl<T: Copy> SizeRequest<T> {
    /// The value asked for (the most, for [`SizeRequest::UpTo`]).
    pub fn value(self) -> T {
        match self {
            SizeRequest::Exactly(v) | SizeRequest::UpTo(v) => v,
        }
    }
}

/// The most a model holds of a size, and the config field that says so.
#[derive(Clone, Debug, PartialEq)]
pub struct Limit {
    pub value: usize,
    /// How messages name it: "the model's max_position_embeddings".
    pub name: String,
}

impl Limit {
    pub fn new(value: usize, name: impl Into<String>) -> Limit {
        Limit { value, name: name.into() }
    }
}

/// A default the model could not hold, and what the export uses instead.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    /// The setting as flags and recipes spell it: `max-seq-len`, `max-audio-seconds`.
    pub setting: &'static str,
    pub from: f64,
    pub to: f64,
    /// Why `to`: "the model's max_position_embeddings".
    pub because: String,
}

impl Lowered {
    /// The note for the user; `whose` says where the default came from ("default", "recipe
    /// default"): `max-seq-len 1024 (recipe default) lowered to 256, the model's
    /// max_position_embeddings`.
    pub fn describe(&self, whose: &str) -> String {
        format!("{} {} ({whose}) lowered to {}, {}", self.setting, self.from, self.to, self.because)
    }
}

/// The sizes an export gets, after fitting: every default within the model's limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    /// The KV cache length (speech decoders: tokens per window).
    pub max_seq_len: usize,
    /// Speech models: the longest audio the preprocessor takes, in seconds; None where the
    /// family has no such setting, or (Voxtral) as many chunks as the cache holds.
    pub max_audio_seconds: Option<f64>,
    /// The defaults that were lowered to get here.
    pub lowered: Vec<Lowered>,
}

/// Cache length `requested` against the model's `limit` (None: unbounded). Errors say
/// `max_seq_len N exceeds <limit name> <limit>`.
pub fn seq_len_within(requested: SizeRequest<usize>, limit: Option<&Limit>) -> Result<(usize, Option<Lowered>)> {
    let n = requested.value();
    match (requested, limit) {
        (_, None) => Ok((n, None)),
        (_, Some(limit)) if n <= limit.value => Ok((n, None)),
        (SizeRequest::Exactly(_), Some(limit)) => Err(ExportError::Invalid(format!("max_seq_len {n} exceeds {} {}", limit.name, limit.value))),
        (SizeRequest::UpTo(_), Some(limit)) => {
            let lowered = Lowered { setting: "max-seq-len", from: n as f64, to: limit.value as f64, because: limit.name.clone() };
            Ok((limit.value, Some(lowered)))
        }
    }
}

/// The smaller of two optional limits (a model may bound a size twice: trained positions and
/// a sliding window).
pub fn tighter(a: Option<Limit>, b: Option<Limit>) -> Option<Limit> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.value < a.value { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions() -> Limit {
        Limit::new(256, "the model's max_position_embeddings")
    }

    #[test]
    fn a_default_the_model_cannot_hold_is_lowered_with_a_note() {
        let (n, lowered) = seq_len_within(SizeRequest::UpTo(1024), Some(&positions())).unwrap();
        assert_eq!(n, 256);
        let note = lowered.unwrap().describe("recipe default");
        assert_eq!(note, "max-seq-len 1024 (recipe default) lowered to 256, the model's max_position_embeddings");
    }

    #[test]
    fn an_exact_value_the_model_cannot_hold_is_an_error() {
        let e = seq_len_within(SizeRequest::Exactly(1024), Some(&positions())).unwrap_err().to_string();
        assert!(e.contains("max_seq_len 1024 exceeds the model's max_position_embeddings 256"), "{e}");
    }

    #[test]
    fn values_within_the_limit_stay_as_asked() {
        for requested in [SizeRequest::Exactly(256), SizeRequest::UpTo(256), SizeRequest::UpTo(64)] {
            assert_eq!(seq_len_within(requested, Some(&positions())).unwrap(), (requested.value(), None));
        }
        assert_eq!(seq_len_within(SizeRequest::Exactly(1 << 20), None).unwrap(), (1 << 20, None));
    }

    #[test]
    fn the_tighter_limit_wins() {
        let window = Limit::new(128, "the sliding window");
        assert_eq!(tighter(Some(positions()), Some(window.clone())), Some(window.clone()));
        assert_eq!(tighter(None, Some(window.clone())), Some(window));
        assert_eq!(tighter(None, None), None);
    }
}
