//! Top-1 / top-5 accuracy: where the true class ranks among a classifier's scores.

/// Images seen and how many had their class first, or among the first five.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopKCounts {
    pub images: usize,
    pub top1: usize,
    pub top5: usize,
}

impl TopKCounts {
    /// Counts one image whose class ranked `rank` (0 = the best score).
    pub fn add(&mut self, rank: usize) {
        self.images += 1;
        self.top1 += usize::from(rank < 1);
        self.top5 += usize::from(rank < 5);
    }

    pub fn top1_accuracy(&self) -> f64 {
        self.top1 as f64 / self.images as f64
    }

    pub fn top5_accuracy(&self) -> f64 {
        self.top5 as f64 / self.images as f64
    }
}

/// The rank of `class` among `scores` (0-based), ordered as the image classifier's `top_k`
/// orders them: higher first, ties to the lower index, NaN last.
pub fn rank_of(scores: &[f32], class: usize) -> Result<usize, String> {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let mine = key(*scores.get(class).ok_or_else(|| format!("class {class} is outside the model's {} classes", scores.len()))?);
    Ok(scores.iter().enumerate().filter(|&(j, &s)| key(s) > mine || (key(s) == mine && j < class)).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_classifier_order() {
        let scores = [0.1, 0.9, 0.5, 0.9, f32::NAN, 0.2, 0.3];
        assert_eq!(rank_of(&scores, 1).unwrap(), 0);
        // A tie ranks the lower index first.
        assert_eq!(rank_of(&scores, 3).unwrap(), 1);
        assert_eq!(rank_of(&scores, 2).unwrap(), 2);
        assert_eq!(rank_of(&scores, 0).unwrap(), 5);
        assert_eq!(rank_of(&scores, 4).unwrap(), 6);
        assert!(rank_of(&scores, 7).unwrap_err().contains("class 7 is outside the model's 7 classes"));
    }

    #[test]
    fn counts_top1_and_top5() {
        let mut c = TopKCounts::default();
        for rank in [0, 1, 4, 5, 0, 900] {
            c.add(rank);
        }
        assert_eq!(c, TopKCounts { images: 6, top1: 2, top5: 4 });
        assert!((c.top1_accuracy() - 2.0 / 6.0).abs() < 1e-12);
        assert!((c.top5_accuracy() - 4.0 / 6.0).abs() < 1e-12);
    }
}
