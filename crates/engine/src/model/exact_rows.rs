//! Whether the rows of a pass whose every logit is wanted are, bit for bit, what
//! feeding its tokens one at a time gives: what speculative decoding needs to check
//! drafts without changing the output. The attention keeps it (`AttnArgs::token_tiles`)
//! and so do the interleaved group kernels, but a weight kept in the file's layout
//! (`LLAMAY_INTERLEAVE=0`, experts whose interleaved copy would be larger, rows not a
//! whole group) runs multi-token tiles that sum in another order. Rather than track
//! every kernel, the model is asked once, on a probe.

use super::Model;
use crate::batch::{BatchItem, LogitsWanted};

/// Positions before the probe's pass, and its tokens: [`EXACT_PASS_TOKENS`].
const PREFIX: usize = 8;

/// The longest pass the probe vouches for (kernels may change with a pass's length:
/// a caller relying on [`Model::rows_match_steps`] feeds no more at once).
pub const EXACT_PASS_TOKENS: usize = 9;
const PASS: usize = EXACT_PASS_TOKENS;

impl Model {
    /// Whether every row of a pass with [`LogitsWanted::All`] equals the one-token
    /// step's bits, found once by a probe (a prompt, then one pass against one token
    /// at a time) and remembered.
    pub fn rows_match_steps(&self) -> bool {
        *self
            .rows_exact
            .get_or_init(|| self.probe_rows().unwrap_or(false))
    }

    fn probe_rows(&self) -> Option<bool> {
        let n_vocab = self.n_vocab() as u64;
        // A recurrent state cannot drop refused drafts (`SeqState::truncate` refuses a
        // cut into it), whatever the bits: no drafts for a hybrid model.
        if self.hp.has_recurrent_state() || self.n_ctx() < PREFIX + PASS + 1 || n_vocab < 2 {
            return Some(false);
        }
        let token = |i: usize| ((i as u64 * 7919 + 13) % n_vocab) as u32;
        let prefix: Vec<u32> = (0..PREFIX).map(token).collect();
        let pass: Vec<u32> = (PREFIX..PREFIX + PASS).map(token).collect();
        let (mut all, mut one) = (self.new_sequence(), self.new_sequence());
        for seq in [&mut all, &mut one] {
            let mut b = [BatchItem {
                seq,
                tokens: &prefix,
                want_logits: LogitsWanted::None,
            }];
            self.forward(&mut b).ok()?;
        }
        let mut b = [BatchItem {
            seq: &mut all,
            tokens: &pass,
            want_logits: LogitsWanted::All,
        }];
        let rows = self.forward(&mut b).ok()?.pop()?;
        let n = rows.n_vocab;
        for (i, &t) in pass.iter().enumerate() {
            let mut b = [BatchItem {
                seq: &mut one,
                tokens: &[t],
                want_logits: LogitsWanted::Last,
            }];
            let step = self.forward(&mut b).ok()?.pop()?;
            let row = rows.data.get(i * n..(i + 1) * n)?;
            if !row
                .iter()
                .zip(&step.data)
                .all(|(a, b)| a.to_bits() == b.to_bits())
            {
                return Some(false);
            }
        }
        Some(true)
    }
}
