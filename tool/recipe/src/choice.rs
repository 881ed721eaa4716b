//! Closed sets of names (backends, dtypes, …) shared by the KDL decoder and the overrides, so
//! both accept the same spellings and suggest the same corrections.

/// A value chosen by name from a fixed list.
pub trait Choice: Sized + Copy + PartialEq + 'static {
    /// What one of these is called in messages ("backend", "quantization").
    const WHAT: &'static str;
    /// Every accepted name, in the order help lines list them.
    const ALL: &'static [(&'static str, Self)];

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, v)| *v == self).map_or("?", |(n, _)| n)
    }

    /// "a backend", "an embedding quantization": for labels.
    fn a_what() -> String {
        let article = if Self::WHAT.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        format!("{article} {}", Self::WHAT)
    }

    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|(n, _)| *n).collect()
    }

    /// "`a`, `b` or `c`", for messages that say what is expected.
    fn expected() -> String {
        let names: Vec<String> = Self::names().iter().map(|n| format!("`{n}`")).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}
