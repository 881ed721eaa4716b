//! "Did you mean …" suggestions for misspelled names.

/// Edit distance between two strings, by characters: Levenshtein's insertions, deletions and
/// substitutions plus swaps of two adjacent characters (optimal string alignment), because a
/// transposed pair (`cdua` for `cuda`) is the most common typo and should cost one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j - 1] + cost).min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo: at most a
/// third of the word's length away (at least 1, so short names still get a suggestion).
/// Case and `_`/`-` differences are free, since `input_shape` for `input-shape` is common.
pub fn closest<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let fold = |s: &str| s.to_lowercase().replace('_', "-");
    let word_folded = fold(word);
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&word_folded, &fold(c)), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// A help line for an unknown `word`: the closest candidate, then every candidate.
pub fn help(word: &str, candidates: &[&str], what: &str) -> String {
    let listed = candidates.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
    let all = if candidates.is_empty() { format!("there are no {what}") } else { format!("{what}: {listed}") };
    match closest(word, candidates.iter().copied()) {
        Some(best) => format!("did you mean `{best}`? ({all})"),
        None => all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("cdua", "cuda"), 1);
        assert_eq!(edit_distance("héllo", "hello"), 1);
    }

    #[test]
    fn suggestions() {
        let names = ["cpu", "cuda", "metal", "ethos-u"];
        assert_eq!(closest("cuda", names), Some("cuda"));
        assert_eq!(closest("cdua", names), Some("cuda"));
        assert_eq!(closest("ethos_u", names), Some("ethos-u"));
        assert_eq!(closest("vulkan", names), None);
        assert_eq!(help("mettal", &names, "backends"), "did you mean `metal`? (backends: `cpu`, `cuda`, `metal`, `ethos-u`)");
    }
}
