//! Speculative decoding for one sequence: tokens it is likely to write next are fed
//! after its chosen token in the same forward pass, and each row of logits they give
//! is used only while the decoder's own choices agree with them.
//!
//! The check is a replay, not a second sampler: the decoder steps on exactly the
//! logits it would have had without drafts (a pass of several tokens gives each
//! position the bits one token at a time gives; `forward_tiny` and the engine's
//! batch tests hold it to that), and a draft counts only if the token the decoder
//! chose, greedy or sampled, masked or not, is that draft. So the output is the
//! output without speculation, token for token and seed for seed; a refused draft
//! costs its share of one pass, and the positions past it are dropped from the KV.
//!
//! The drafter is prompt lookup: the most recent earlier occurrence of the sequence's
//! last 4 or 3 tokens (prompt and output alike; a match of two was wrong too often to
//! pay for its pass), and what followed it there. Extraction, quoting, code edits and
//! repeated JSON keys copy spans, which it finds for free.

/// The longest and shortest tail looked up.
const MAX_NGRAM: usize = 4;
const MIN_NGRAM: usize = 3;
/// How far back the lookup searches (tokens).
const SEARCH: usize = 8192;
/// Most drafts one pass carries.
pub(super) const MAX_DRAFT: usize = 8;

/// Up to `k` tokens that followed the latest earlier occurrence of `history`'s last
/// `n` tokens (the longest `n` that has one).
pub(super) fn lookup(history: &[u32], k: usize) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let from = history.len().saturating_sub(SEARCH);
    let hay = &history[from..];
    for n in (MIN_NGRAM..=MAX_NGRAM).rev() {
        if hay.len() <= n {
            continue;
        }
        let tail = &hay[hay.len() - n..];
        // Latest first: the nearest copy is the likeliest to continue alike.
        let found = (0..hay.len() - n).rev().find(|&i| &hay[i..i + n] == tail);
        if let Some(i) = found {
            let start = i + n;
            let end = (start + k).min(hay.len());
            return hay[start..end].to_vec();
        }
    }
    Vec::new()
}

/// How many drafts the next pass carries, from how the last ones fared: doubled
/// after a pass whose drafts were all taken, halved after one whose first was not.
#[derive(Debug)]
pub(super) struct DraftSize {
    k: usize,
    max: usize,
}

impl DraftSize {
    pub(super) fn new(max: usize) -> DraftSize {
        DraftSize {
            k: max.min(4),
            max: max.min(MAX_DRAFT),
        }
    }

    pub(super) fn get(&self) -> usize {
        self.k
    }

    pub(super) fn update(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        if accepted == drafted {
            self.k = (self.k * 2).min(self.max);
        } else if accepted == 0 {
            self.k = (self.k / 2).max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_occurrence_of_the_longest_tail_is_continued() {
        // ... 1 2 3 [4 5] ... 1 2 3 [7 8] ... 1 2 3 -> the later copy continues: 7 8.
        let h = [1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 7, 8, 0, 1, 2, 3];
        assert_eq!(lookup(&h, 2), [7, 8]);
        // A longer tail wins over a later shorter one: "9 1 2 3" occurs once, at 0.
        let h = [9, 1, 2, 3, 4, 5, 6, 1, 2, 3, 7, 9, 1, 2, 3];
        assert_eq!(lookup(&h, 3), [4, 5, 6]);
        // Cut at the history's end; nothing for a tail seen once, or one of two tokens.
        assert_eq!(lookup(&[5, 6, 7, 8, 5, 6, 7], 10), [8, 5, 6, 7]);
        assert!(lookup(&[1, 2, 3, 4], 4).is_empty());
        assert!(lookup(&[1, 2, 9, 1, 2], 4).is_empty());
        assert!(lookup(&[1, 2, 3, 1, 2, 3], 0).is_empty());
    }

    #[test]
    fn the_draft_grows_while_taken_and_shrinks_when_refused() {
        let mut s = DraftSize::new(8);
        assert_eq!(s.get(), 4);
        s.update(4, 4);
        assert_eq!(s.get(), 8);
        s.update(8, 8);
        assert_eq!(s.get(), 8);
        s.update(8, 0);
        assert_eq!(s.get(), 4);
        s.update(4, 2);
        assert_eq!(s.get(), 4);
        s.update(0, 0);
        assert_eq!(s.get(), 4);
    }
}
