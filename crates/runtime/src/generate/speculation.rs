//! One sequence's drafts across passes, shared by `llamay run` ([`super::generate`])
//! and the batching scheduler: what the sequence holds (prompt and output, for the
//! lookup), the drafts of the last pass not yet matched by a choice, how many to
//! draft next, and the replay that checks them (see [`super::draft`] for why a replay
//! leaves the output unchanged).

use llamay_engine::{ItemLogits, Tokenizer};

use super::decoder::{Decoder, Step};
use super::draft::{self, DraftSize};
use super::draft_model::{DraftModel, ModelDrafter};
use super::{Finish, GenerateError};

/// Where the replay of a pass's rows stopped.
pub(crate) enum Replayed {
    /// Generation is over; `drop` positions at the end of the sequence hold drafts
    /// that no choice took.
    Done { finish: Finish, drop: usize },
    /// Feed `rest` (the choices not yet in the KV) after dropping the last `drop`
    /// positions (the drafts past the first one refused).
    Feed { rest: Vec<u32>, drop: usize },
}

/// A sequence's speculation state.
pub(crate) struct Speculation {
    history: Vec<u32>,
    pending: Vec<u32>,
    size: Option<DraftSize>,
    /// The draft model, when one writes the drafts (else prompt lookup).
    model: Option<ModelDrafter>,
    /// The last pass's drafts, and how many of them were taken.
    last: (usize, usize),
    /// Tokens drafted and taken so far.
    pub(crate) drafted: usize,
    pub(crate) accepted: usize,
}

impl Speculation {
    /// For a sequence whose prompt is `prompt`, drafting at most `max` tokens a pass
    /// (0: never), by prompt lookup or with `model`.
    pub(crate) fn new(prompt: &[u32], max: usize, model: Option<&DraftModel>) -> Speculation {
        Speculation {
            history: prompt.to_vec(),
            pending: Vec::new(),
            size: (max > 0).then(|| DraftSize::new(max.min(draft::MAX_DRAFT))),
            model: model.filter(|_| max > 0).map(ModelDrafter::new),
            last: (0, 0),
            drafted: 0,
            accepted: 0,
        }
    }

    /// Matches the decoder's choices against the pending drafts: how many of them are
    /// drafts already in the KV (from the front).
    fn take(&mut self, feed: &[u32]) -> usize {
        let taken = feed
            .iter()
            .zip(&self.pending)
            .take_while(|(a, b)| a == b)
            .count();
        self.pending.drain(..taken);
        self.history.extend_from_slice(&feed[..taken]);
        self.accepted += taken;
        self.last.1 += taken;
        taken
    }

    /// Forgets the drafts not taken; returns how many positions they held.
    fn drop_pending(&mut self) -> usize {
        let n = self.pending.len();
        self.pending.clear();
        if let Some(s) = self.size.as_mut() {
            s.update(self.last.0, self.last.1);
        }
        self.last = (0, 0);
        n
    }

    /// Drafts to feed after `rest` (the chosen tokens not yet in the KV), at most
    /// `room` of them, none past an end-of-generation token (nothing after it is
    /// ever taken). Called once for every `rest` fed, drafts or not: the lookup's
    /// history grows with it.
    pub(crate) fn draft(
        &mut self,
        decoder: &mut Decoder,
        tokenizer: &Tokenizer,
        rest: &[u32],
        room: usize,
    ) -> Vec<u32> {
        self.history.extend_from_slice(rest);
        let Some(size) = &self.size else {
            return Vec::new();
        };
        let k = size.get().min(room);
        let mut drafts = match self.model.as_mut() {
            Some(m) => m.draft(tokenizer, &self.history, k, decoder),
            None => draft::lookup(&self.history, k),
        };
        if let Some(end) = drafts.iter().position(|&t| tokenizer.is_eog(t)) {
            drafts.truncate(end + 1);
        }
        drafts.truncate(decoder.drafts_allowed(&drafts));
        self.pending = drafts.clone();
        self.drafted += drafts.len();
        self.last = (drafts.len(), 0);
        drafts
    }

    /// Steps `decoder` on the rows of `logits` from `row` on, while each choice is
    /// the pending draft whose row follows: a choice that is not ends the replay
    /// there, and the drafts past it are to be dropped.
    pub(crate) fn replay(
        &mut self,
        decoder: &mut Decoder,
        tokenizer: &Tokenizer,
        logits: &ItemLogits,
        mut row: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Replayed, GenerateError> {
        loop {
            let n = logits.n_vocab;
            let at = logits.data.get(row * n..(row + 1) * n).unwrap_or(&[]);
            match decoder.step(tokenizer, at, on_text)? {
                Step::Done(finish) => {
                    // The token that ended it may be a draft too (for the counts).
                    self.take(decoder.written());
                    let drop = self.drop_pending();
                    return Ok(Replayed::Done { finish, drop });
                }
                Step::Continue(feed) => {
                    let taken = self.take(&feed);
                    if taken == feed.len() && !feed.is_empty() {
                        // Every token chosen was a draft: the pass computed what follows.
                        row += taken;
                        continue;
                    }
                    let drop = self.drop_pending();
                    return Ok(Replayed::Feed {
                        rest: feed[taken..].to_vec(),
                        drop,
                    });
                }
            }
        }
    }
}
