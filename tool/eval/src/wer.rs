//! Word error rate: the word-level Levenshtein alignment of a hypothesis against its reference,
//! counted as substitutions, deletions and insertions; WER = (S + D + I) / N over all words of
//! all references (jiwer's corpus WER).

use std::ops::AddAssign;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WordErrors {
    pub substitutions: usize,
    pub deletions: usize,
    pub insertions: usize,
    /// Words of the reference (N).
    pub reference_words: usize,
}

impl WordErrors {
    pub fn errors(&self) -> usize {
        self.substitutions + self.deletions + self.insertions
    }

    /// (S + D + I) / N; None for references without words.
    pub fn wer(&self) -> Option<f64> {
        (self.reference_words > 0).then(|| self.errors() as f64 / self.reference_words as f64)
    }
}

impl AddAssign for WordErrors {
    fn add_assign(&mut self, o: WordErrors) {
        self.substitutions += o.substitutions;
        self.deletions += o.deletions;
        self.insertions += o.insertions;
        self.reference_words += o.reference_words;
    }
}

/// The minimum-edit alignment of `hypothesis` to `reference`. Of equally short alignments the
/// one with the most substitutions is counted (an edit distance is unique; how it splits into
/// S, D and I is a convention).
pub fn word_errors(reference: &[&str], hypothesis: &[&str]) -> WordErrors {
    let (n, m) = (reference.len(), hypothesis.len());
    // cost[i][j]: edits turning reference[..i] into hypothesis[..j].
    let mut cost = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in cost.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, c) in cost[0].iter_mut().enumerate() {
        *c = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let same = reference[i - 1] == hypothesis[j - 1];
            cost[i][j] = (cost[i - 1][j - 1] + usize::from(!same)).min(cost[i - 1][j] + 1).min(cost[i][j - 1] + 1);
        }
    }
    let mut e = WordErrors { reference_words: n, ..WordErrors::default() };
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        if i > 0 && j > 0 && cost[i][j] == cost[i - 1][j - 1] + usize::from(reference[i - 1] != hypothesis[j - 1]) {
            e.substitutions += usize::from(reference[i - 1] != hypothesis[j - 1]);
            i -= 1;
            j -= 1;
        } else if i > 0 && cost[i][j] == cost[i - 1][j] + 1 {
            e.deletions += 1;
            i -= 1;
        } else {
            e.insertions += 1;
            j -= 1;
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(r: &str, h: &str) -> WordErrors {
        let (r, h): (Vec<&str>, Vec<&str>) = (r.split_whitespace().collect(), h.split_whitespace().collect());
        word_errors(&r, &h)
    }

    #[test]
    fn known_pairs() {
        assert_eq!(errs("the cat sat", "the cat sat"), WordErrors { reference_words: 3, ..Default::default() });
        assert_eq!(errs("the cat sat", "the bat sat"), WordErrors { substitutions: 1, reference_words: 3, ..Default::default() });
        assert_eq!(errs("the cat sat on the mat", "the cat on the mat"), WordErrors { deletions: 1, reference_words: 6, ..Default::default() });
        assert_eq!(errs("a b", "a x b"), WordErrors { insertions: 1, reference_words: 2, ..Default::default() });
        assert_eq!(errs("a b c", ""), WordErrors { deletions: 3, reference_words: 3, ..Default::default() });
        assert_eq!(errs("", "a b").insertions, 2);
        // jiwer: wer("hello world", "hello duck world today") = 2 / 2.
        let e = errs("hello world", "hello duck world today");
        assert_eq!((e.insertions, e.errors(), e.wer()), (2, 2, Some(1.0)));
        // Two substitutions beat a deletion plus an insertion only in count, not in distance.
        let e = errs("a b c d", "b c d e");
        assert_eq!(e.errors(), 2);
        assert_eq!(errs("", "").wer(), None);
    }

    #[test]
    fn corpus_wer_sums_errors_and_words() {
        let mut total = errs("the cat sat", "the bat sat");
        total += errs("one two three four five", "one two three four five six");
        assert_eq!(total.errors(), 2);
        assert_eq!(total.reference_words, 8);
        assert_eq!(total.wer(), Some(0.25));
    }
}
