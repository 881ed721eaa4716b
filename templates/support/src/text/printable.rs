//! Generated text made safe for a terminal. A model (the random demo above all) may emit
//! control characters — escape sequences, bells, backspaces — that a terminal would act on
//! rather than show; on a terminal they are shown as Unicode's control pictures instead.
//! Redirected output keeps the model's text unchanged.

use std::borrow::Cow;

/// `text` with every control character but newline and tab replaced by a visible stand-in:
/// C0 controls and DEL by their control pictures (U+2400…U+2421), C1 controls by U+FFFD.
pub fn printable(text: &str) -> Cow<'_, str> {
    let shown = |c: char| c == '\n' || c == '\t' || !c.is_control();
    if text.chars().all(shown) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match c {
                c if shown(c) => c,
                '\u{7f}' => '\u{2421}',
                c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
                _ => '\u{FFFD}',
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn controls_become_visible_and_text_stays() {
        assert!(matches!(printable("Hello, world\n\tok"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(printable("a\u{1b}[2Jb\u{7}c\u{7f}d\u{85}e\r"), "a\u{241b}[2Jb\u{2407}c\u{2421}d\u{FFFD}e\u{240d}");
        assert_eq!(printable("é漢字🙂"), "é漢字🙂");
    }
}
