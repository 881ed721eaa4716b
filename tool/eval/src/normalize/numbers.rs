//! Spelled-out English numbers to digits, following openai-whisper's `EnglishNumberNormalizer`
//! (MIT, see `data/WHISPER_LICENSE`) rule for rule: "twenty nineteen" → 2019, "two point five
//! million dollars" → $2500000, "nineteen fifties" → 1950s, "double oh seven" → 007,
//! "seventy six per cent" → 76%, "$2 and 70 cents" → $2.70.
//!
//! Where Python would raise (an assertion on an odd mix of tens and digits) this keeps going
//! with the digits appended; numbers are unbounded as Python's ints are ([`Decimal`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::{Captures, Regex};

use super::decimal::{scaled_integer, Decimal};

const ONES: [&str; 19] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    "seventeen", "eighteen", "nineteen",
];
const TENS: [(&str, u64); 8] = [("twenty", 20), ("thirty", 30), ("forty", 40), ("fifty", 50), ("sixty", 60), ("seventy", 70), ("eighty", 80), ("ninety", 90)];
/// Multipliers as powers of ten.
const MULTIPLIERS: [(&str, usize); 12] = [
    ("hundred", 2),
    ("thousand", 3),
    ("million", 6),
    ("billion", 9),
    ("trillion", 12),
    ("quadrillion", 15),
    ("quintillion", 18),
    ("sextillion", 21),
    ("septillion", 24),
    ("octillion", 27),
    ("nonillion", 30),
    ("decillion", 33),
];
const ZEROS: [&str; 3] = ["o", "oh", "zero"];
const PRECEDING_PREFIXERS: [(&str, &str); 4] = [("minus", "-"), ("negative", "-"), ("plus", "+"), ("positive", "+")];
const FOLLOWING_PREFIXERS: [(&str, &str); 8] =
    [("pound", "£"), ("pounds", "£"), ("euro", "€"), ("euros", "€"), ("dollar", "$"), ("dollars", "$"), ("cent", "¢"), ("cents", "¢")];
const PREFIXES: [char; 6] = ['-', '+', '£', '€', '$', '¢'];
const SPECIALS: [&str; 4] = ["and", "double", "triple", "point"];

/// The word tables, built once.
struct Tables {
    ones: HashMap<String, u64>,
    /// "sixes" → (6, "s"), "fifth" → (5, "th"), …
    ones_suffixed: HashMap<String, (u64, &'static str)>,
    tens: HashMap<String, u64>,
    tens_suffixed: HashMap<String, (u64, &'static str)>,
    multipliers: HashMap<String, usize>,
    multipliers_suffixed: HashMap<String, (usize, &'static str)>,
    /// Every word the normalizer treats as part of a number.
    words: Vec<String>,
}

impl Tables {
    fn get() -> &'static Tables {
        static TABLES: OnceLock<Tables> = OnceLock::new();
        TABLES.get_or_init(Tables::build)
    }

    fn build() -> Tables {
        let ones: HashMap<String, u64> = ONES.iter().enumerate().map(|(i, n)| (n.to_string(), i as u64 + 1)).collect();
        let mut ones_suffixed: HashMap<String, (u64, &'static str)> =
            ones.iter().map(|(n, &v)| (if n == "six" { "sixes".to_string() } else { format!("{n}s") }, (v, "s"))).collect();
        for (name, v, s) in [("zeroth", 0, "th"), ("first", 1, "st"), ("second", 2, "nd"), ("third", 3, "rd"), ("fifth", 5, "th"), ("twelfth", 12, "th")] {
            ones_suffixed.insert(name.into(), (v, s));
        }
        for (n, &v) in &ones {
            if v > 3 && v != 5 && v != 12 {
                // As openai-whisper spells them: "eighth", but also "nineth".
                let ordinal = if n.ends_with('t') { format!("{n}h") } else { format!("{n}th") };
                ones_suffixed.insert(ordinal, (v, "th"));
            }
        }
        let tens: HashMap<String, u64> = TENS.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        let mut tens_suffixed: HashMap<String, (u64, &'static str)> = HashMap::new();
        for (n, &v) in &tens {
            tens_suffixed.insert(n.replace('y', "ies"), (v, "s"));
            tens_suffixed.insert(n.replace('y', "ieth"), (v, "th"));
        }
        let multipliers: HashMap<String, usize> = MULTIPLIERS.iter().map(|&(n, k)| (n.to_string(), k)).collect();
        let mut multipliers_suffixed = HashMap::new();
        for &(n, k) in &MULTIPLIERS {
            multipliers_suffixed.insert(format!("{n}s"), (k, "s"));
            multipliers_suffixed.insert(format!("{n}th"), (k, "th"));
        }
        let mut words: Vec<String> = ZEROS.iter().map(|s| s.to_string()).collect();
        words.extend(ones.keys().cloned());
        words.extend(ones_suffixed.keys().cloned());
        words.extend(tens.keys().cloned());
        words.extend(tens_suffixed.keys().cloned());
        words.extend(multipliers.keys().cloned());
        words.extend(multipliers_suffixed.keys().cloned());
        words.extend(PRECEDING_PREFIXERS.iter().chain(&FOLLOWING_PREFIXERS).map(|(n, _)| n.to_string()));
        words.extend(["per", "percent"].map(String::from));
        words.extend(SPECIALS.map(String::from));
        Tables { ones, ones_suffixed, tens, tens_suffixed, multipliers, multipliers_suffixed, words }
    }

    fn is_word(&self, w: Option<&str>) -> bool {
        w.is_some_and(|w| self.words.iter().any(|x| x == w))
    }

    /// ones, tens or zeros: the words after "point" that continue a decimal.
    fn is_decimal(&self, w: &str) -> bool {
        self.ones.contains_key(w) || self.tens.contains_key(w) || ZEROS.contains(&w)
    }
}

/// A number being built: an integer, or digits kept as written ("007", "3.14", "1.2.3").
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Int(Decimal),
    Str(String),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Int(d) => d.to_string(),
            Value::Str(s) => s.clone(),
        }
    }

    /// Python's `str(value or "")`: zero and the empty string count as nothing.
    fn text_or_empty(v: &Option<Value>) -> String {
        match v {
            Some(Value::Int(d)) if d.is_zero() => String::new(),
            Some(v) => v.text(),
            None => String::new(),
        }
    }
}

fn is_numeric(w: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[0-9]+(\.[0-9]+)?$").expect("valid regex")).is_match(w)
}

/// Turns `value` (with the pending `prefix`) into a word and resets both.
fn output(prefix: &mut Option<String>, value: &mut Option<Value>, result: String) -> String {
    let out = match prefix.take() {
        Some(p) => p + &result,
        None => result,
    };
    *value = None;
    out
}

/// The number normalizer over whitespace-separated `words`.
fn process_words(words: &[&str]) -> Vec<String> {
    let t = Tables::get();
    let mut out = Vec::new();
    let mut prefix: Option<String> = None;
    let mut value: Option<Value> = None;
    let mut skip = false;
    for (i, &current) in words.iter().enumerate() {
        if skip {
            skip = false;
            continue;
        }
        let prev = i.checked_sub(1).map(|p| words[p]);
        let next = words.get(i + 1).copied();
        let prev_in = |m: &dyn Fn(&str) -> bool| prev.is_some_and(m);
        let next_is_numeric = next.is_some_and(is_numeric);
        let has_prefix = current.chars().next().is_some_and(|c| PREFIXES.contains(&c));
        let without_prefix = if has_prefix { &current[current.chars().next().map_or(0, char::len_utf8)..] } else { current };
        macro_rules! emit {
            ($s:expr) => {{
                let s: String = $s;
                out.push(output(&mut prefix, &mut value, s));
            }};
        }
        if is_numeric(without_prefix) {
            // Arabic numerals (with a currency or sign prefix, and decimals).
            if let Some(v) = &value {
                match v {
                    Value::Str(s) if s.ends_with('.') => {
                        // Decimals and IP-address parts: "3 point 14", "1.2.3".
                        value = Some(Value::Str(format!("{s}{current}")));
                        continue;
                    }
                    _ => emit!(v.text()),
                }
            }
            if has_prefix {
                prefix = current.chars().next().map(String::from);
            }
            value = Some(match scaled_integer(without_prefix, 0) {
                Some(int) => Value::Int(int),
                None => Value::Str(without_prefix.to_string()),
            });
        } else if !t.is_word(Some(current)) {
            if let Some(v) = &value {
                emit!(v.text());
            }
            emit!(current.to_string());
        } else if ZEROS.contains(&current) {
            value = Some(Value::Str(Value::text_or_empty(&value) + "0"));
        } else if let Some(&ones) = t.ones.get(current) {
            let after_ones = prev_in(&|p| t.ones.contains_key(p));
            let after_tens = prev_in(&|p| t.tens.contains_key(p));
            value = Some(match value.take() {
                None => Value::Int(Decimal::from_u64(ones)),
                Some(Value::Int(d)) if !after_ones => {
                    // 20 + 4, 1900 + 19; otherwise the digits are read one after another.
                    let k = if ones < 10 { 1 } else { 2 };
                    if d.rem_pow10(k) == 0 {
                        Value::Int(d.add_u64(ones))
                    } else {
                        Value::Str(format!("{d}{ones}"))
                    }
                }
                Some(v) if after_tens && ones < 10 => Value::Str(replace_last_zero(&v.text(), ones)),
                Some(v) => Value::Str(format!("{}{ones}", v.text())),
            });
        } else if let Some(&(ones, suffix)) = t.ones_suffixed.get(current) {
            // Ordinal or plural: the number ends here.
            let after_ones = prev_in(&|p| t.ones.contains_key(p));
            let after_tens = prev_in(&|p| t.tens.contains_key(p));
            let word = match &value {
                None => format!("{ones}{suffix}"),
                Some(Value::Int(d)) if !after_ones => {
                    let k = if ones < 10 { 1 } else { 2 };
                    if d.rem_pow10(k) == 0 {
                        format!("{}{suffix}", d.add_u64(ones))
                    } else {
                        format!("{d}{ones}{suffix}")
                    }
                }
                Some(v) if after_tens && ones < 10 => format!("{}{suffix}", replace_last_zero(&v.text(), ones)),
                Some(v) => format!("{}{ones}{suffix}", v.text()),
            };
            emit!(word);
            value = None;
        } else if let Some(&tens) = t.tens.get(current) {
            value = Some(match value.take() {
                None => Value::Int(Decimal::from_u64(tens)),
                Some(Value::Str(s)) => Value::Str(format!("{s}{tens}")),
                Some(Value::Int(d)) if d.rem_pow10(2) == 0 => Value::Int(d.add_u64(tens)),
                Some(Value::Int(d)) => Value::Str(format!("{d}{tens}")),
            });
        } else if let Some(&(tens, suffix)) = t.tens_suffixed.get(current) {
            let word = match &value {
                None => format!("{tens}{suffix}"),
                Some(Value::Str(s)) => format!("{s}{tens}{suffix}"),
                Some(Value::Int(d)) if d.rem_pow10(2) == 0 => format!("{}{suffix}", d.add_u64(tens)),
                Some(Value::Int(d)) => format!("{d}{tens}{suffix}"),
            };
            emit!(word);
        } else if let Some(&k) = t.multipliers.get(current) {
            match value.take() {
                None => value = Some(Value::Int(Decimal::from_u64(1).mul_pow10(k))),
                Some(v @ Value::Str(_)) => match scaled_integer(&v.text(), k) {
                    Some(p) => value = Some(Value::Int(p)),
                    None => {
                        emit!(v.text());
                        value = Some(Value::Int(Decimal::from_u64(1).mul_pow10(k)));
                    }
                },
                Some(Value::Int(d)) if d.is_zero() => value = Some(Value::Int(d)),
                Some(Value::Int(d)) => value = Some(Value::Int(times_multiplier(&d, k))),
            }
        } else if let Some(&(k, suffix)) = t.multipliers_suffixed.get(current) {
            match value.take() {
                None => emit!(format!("{}{suffix}", Decimal::from_u64(1).mul_pow10(k))),
                Some(Value::Str(s)) => match scaled_integer(&s, k) {
                    Some(p) => emit!(format!("{p}{suffix}")),
                    None => {
                        emit!(s);
                        emit!(format!("{}{suffix}", Decimal::from_u64(1).mul_pow10(k)));
                    }
                },
                Some(Value::Int(d)) => emit!(format!("{}{suffix}", times_multiplier(&d, k))),
            }
            value = None;
        } else if let Some(&(_, sign)) = PRECEDING_PREFIXERS.iter().find(|(n, _)| *n == current) {
            // A sign applies when a number follows.
            if let Some(v) = &value {
                emit!(v.text());
            }
            if t.is_word(next) || next_is_numeric {
                prefix = Some(sign.to_string());
            } else {
                emit!(current.to_string());
            }
        } else if let Some(&(_, currency)) = FOLLOWING_PREFIXERS.iter().find(|(n, _)| *n == current) {
            // A currency applies to the number before it.
            match value.clone() {
                Some(v) => {
                    prefix = Some(currency.to_string());
                    emit!(v.text());
                }
                None => emit!(current.to_string()),
            }
        } else if current == "per" || current == "percent" {
            match value.clone() {
                Some(v) if current == "percent" => emit!(format!("{}%", v.text())),
                Some(v) if next == Some("cent") => {
                    emit!(format!("{}%", v.text()));
                    skip = true;
                }
                Some(v) => {
                    emit!(v.text());
                    emit!(current.to_string());
                }
                None => emit!(current.to_string()),
            }
        } else if !t.is_word(next) && !next_is_numeric {
            // "and", "double", "triple", "point" before a word that cannot be a number.
            if let Some(v) = &value {
                emit!(v.text());
            }
            emit!(current.to_string());
        } else if current == "and" {
            // "and" after hundreds, thousands, … is dropped.
            if !prev_in(&|p| t.multipliers.contains_key(p)) {
                if let Some(v) = &value {
                    emit!(v.text());
                }
                emit!(current.to_string());
            }
        } else if current == "double" || current == "triple" {
            match next.filter(|n| t.ones.contains_key(*n) || ZEROS.contains(n)) {
                Some(n) => {
                    let repeats = if current == "double" { 2 } else { 3 };
                    let digit = t.ones.get(n).copied().unwrap_or(0);
                    value = Some(Value::Str(Value::text_or_empty(&value) + &digit.to_string().repeat(repeats)));
                    skip = true;
                }
                None => {
                    if let Some(v) = &value {
                        emit!(v.text());
                    }
                    emit!(current.to_string());
                }
            }
        } else if current == "point" && (next.is_some_and(|n| t.is_decimal(n)) || next_is_numeric) {
            value = Some(Value::Str(Value::text_or_empty(&value) + "."));
        }
        // Otherwise "point" before a non-decimal number word is dropped, as in openai-whisper.
    }
    if let Some(v) = value.clone() {
        out.push(output(&mut prefix, &mut value, v.text()));
    }
    out
}

/// "120" and 3 → "123" (a digit after a tens word fills its zero); appended when there is no
/// zero to fill, where openai-whisper would stop on an assertion.
fn replace_last_zero(s: &str, digit: u64) -> String {
    match s.strip_suffix('0') {
        Some(head) => format!("{head}{digit}"),
        None => format!("{s}{digit}"),
    }
}

/// `value // 1000 * 1000 + value % 1000 * 10^k`: the last group of three digits multiplied.
fn times_multiplier(d: &Decimal, k: usize) -> Decimal {
    let residual = Decimal::from_u64(d.rem_pow10(3)).mul_pow10(k);
    d.floor_pow10(3).add(&residual)
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

/// "<number> and a half" → "<number> point five"; spaces at digit/letter boundaries, except
/// before an ordinal or plural suffix.
fn preprocess(s: &str) -> String {
    static HALF: OnceLock<Regex> = OnceLock::new();
    static LETTER_DIGIT: OnceLock<Regex> = OnceLock::new();
    static DIGIT_LETTER: OnceLock<Regex> = OnceLock::new();
    static SUFFIX: OnceLock<Regex> = OnceLock::new();
    let t = Tables::get();
    let segments: Vec<&str> = regex(&HALF, r"\band\s+a\s+half\b").split(s).collect();
    let mut results: Vec<&str> = Vec::new();
    for (i, segment) in segments.iter().copied().enumerate() {
        if segment.trim().is_empty() {
            continue;
        }
        results.push(segment);
        if i + 1 < segments.len() {
            let last = segment.split_whitespace().last().unwrap_or("");
            results.push(if t.is_decimal(last) || t.multipliers.contains_key(last) { "point five" } else { "and a half" });
        }
    }
    let s = results.join(" ");
    let s = regex(&LETTER_DIGIT, r"([a-z])([0-9])").replace_all(&s, "$1 $2");
    let s = regex(&DIGIT_LETTER, r"([0-9])([a-z])").replace_all(&s, "$1 $2");
    regex(&SUFFIX, r"([0-9])\s+(st|nd|rd|th|s)\b").replace_all(&s, "$1$2").into_owned()
}

/// Cents joined to their currency ("$2 and ¢7" → "$2.07", "$0.5" → "¢5") and "1(s)" written
/// as "one(s)".
fn postprocess(s: &str) -> String {
    static CENTS: OnceLock<Regex> = OnceLock::new();
    static ONLY_CENTS: OnceLock<Regex> = OnceLock::new();
    static ONE: OnceLock<Regex> = OnceLock::new();
    let s = regex(&CENTS, r"([€£$])([0-9]+) (?:and )?¢([0-9]{1,2})\b").replace_all(s, |c: &Captures| {
        let cents: u32 = c[3].parse().unwrap_or(0);
        format!("{}{}.{cents:02}", &c[1], &c[2])
    });
    let s = regex(&ONLY_CENTS, r"[€£$]0.([0-9]{1,2})\b").replace_all(&s, |c: &Captures| format!("¢{}", c[1].parse::<u32>().unwrap_or(0)));
    regex(&ONE, r"\b1(s?)\b").replace_all(&s, "one$1").into_owned()
}

/// openai-whisper's `EnglishNumberNormalizer()(s)`.
pub fn standardize_numbers(s: &str) -> String {
    let s = preprocess(s);
    let words: Vec<&str> = s.split_whitespace().collect();
    postprocess(&process_words(&words).join(" "))
}

#[cfg(test)]
mod tests {
    use super::standardize_numbers as n;

    /// openai-whisper's own cases (tests/test_normalizer.py, `test_number_normalizer`).
    #[test]
    fn whisper_number_cases() {
        let cases = [
            ("two", "2"),
            ("thirty one", "31"),
            ("five twenty four", "524"),
            ("nineteen ninety nine", "1999"),
            ("twenty nineteen", "2019"),
            ("two point five million", "2500000"),
            ("four point two billions", "4200000000s"),
            ("200 thousand", "200000"),
            ("200 thousand dollars", "$200000"),
            ("$20 million", "$20000000"),
            ("€52.4 million", "€52400000"),
            ("£77 thousands", "£77000s"),
            ("two double o eight", "2008"),
            ("three thousand twenty nine", "3029"),
            ("forty three thousand two hundred sixty", "43260"),
            ("forty three thousand two hundred and sixty", "43260"),
            ("nineteen fifties", "1950s"),
            ("thirty first", "31st"),
            ("thirty three thousand and three hundred and thirty third", "33333rd"),
            ("three billion", "3000000000"),
            ("millions", "1000000s"),
            ("july third twenty twenty", "july 3rd 2020"),
            ("august twenty sixth twenty twenty one", "august 26th 2021"),
            ("3 14", "3 14"),
            ("3.14", "3.14"),
            ("3 point 2", "3.2"),
            ("3 point 14", "3.14"),
            ("fourteen point 4", "14.4"),
            ("two point two five dollars", "$2.25"),
            ("two hundred million dollars", "$200000000"),
            ("$20.1 million", "$20100000"),
            ("ninety percent", "90%"),
            ("seventy six per cent", "76%"),
            ("double oh seven", "007"),
            ("double zero seven", "007"),
            ("nine one one", "911"),
            ("nine double one", "911"),
            ("one triple oh one", "10001"),
            ("two thousandth", "2000th"),
            ("thirty two thousandth", "32000th"),
            ("minus 500", "-500"),
            ("positive twenty thousand", "+20000"),
            ("two dollars and seventy cents", "$2.70"),
            ("3 cents", "¢3"),
            ("$0.36", "¢36"),
            ("three euros and sixty five cents", "€3.65"),
            ("three and a half million", "3500000"),
            ("forty eight and a half dollars", "$48.5"),
            ("b747", "b 747"),
            ("10 th", "10th"),
            ("10th", "10th"),
        ];
        for (input, want) in cases {
            assert_eq!(n(input), want, "{input:?}");
        }
    }

    /// Outputs of openai-whisper 20250625's EnglishNumberNormalizer on inputs its tests skip.
    #[test]
    fn more_cases_from_openai_whisper() {
        for (input, want) in crate::normalize::cases::NUMBER_CASES {
            assert_eq!(n(input), *want, "{input:?}");
        }
    }
}
