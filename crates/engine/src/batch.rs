//! What one forward step is fed and what it returns.

use crate::kv_cache::SeqState;

/// Which positions of an item need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsWanted {
    /// None (prompt chunks whose output is not needed).
    None,
    /// Only the last token's (decode, end of a prompt).
    Last,
    /// Every token's (scoring, tests).
    All,
}

/// One sequence's share of a forward step: `tokens` are appended at positions
/// `seq.len()..`, and the cache grows by `tokens.len()`.
#[derive(Debug)]
pub struct BatchItem<'a> {
    pub seq: &'a mut SeqState,
    pub tokens: &'a [u32],
    pub want_logits: LogitsWanted,
}

/// The logits returned for one batch item: `n_rows` rows of `n_vocab` values, for the
/// positions its [`LogitsWanted`] asked for, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemLogits {
    pub n_vocab: usize,
    pub data: Vec<f32>,
}

impl ItemLogits {
    pub fn n_rows(&self) -> usize {
        self.data.len().checked_div(self.n_vocab).unwrap_or(0)
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.n_vocab..(i + 1) * self.n_vocab]
    }

    /// The last row (the next-token distribution), if any.
    pub fn last(&self) -> Option<&[f32]> {
        self.n_rows().checked_sub(1).map(|i| self.row(i))
    }
}
