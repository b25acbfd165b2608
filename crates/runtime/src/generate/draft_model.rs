//! A draft model (`llamay run -draft MODEL`): a second model over the same vocabulary
//! writes the drafts, greedily, one token a pass on its own sequence. Its sequence
//! follows the target's: before each draft it keeps the longest prefix it shares
//! with what the target holds and feeds the rest, so a refused draft costs the draft
//! model nothing but the positions it drops.
//!
//! Drafted with the target model itself (the self-draft check), every draft of a
//! greedy, unconstrained generation is taken: the two compute the same rows.

use std::sync::Arc;

use llamay_engine::EXACT_PASS_TOKENS;

use super::decoder::Decoder;
use llamay_engine::{BatchItem, LogitsWanted, Model, Sampler, SamplerConfig, SeqState, Tokenizer};

/// The draft model given to a generation (see [`super::GenerationParams::draft_model`]).
#[derive(Clone)]
pub struct DraftModel(pub Arc<Model>);

impl DraftModel {
    /// `model` (whose tokenizer is `tokens`) drafting for a model whose tokenizer is
    /// `main`: refused, naming the first token that differs, unless the two have the
    /// same tokens, since its drafts are token ids of `main`'s vocabulary.
    pub fn sharing_tokens(
        model: Arc<Model>,
        tokens: &Tokenizer,
        main: &Tokenizer,
    ) -> Result<DraftModel, String> {
        let n = main.n_vocab().max(tokens.n_vocab()) as u32;
        let differs = (0..n).find(|&t| {
            t as usize >= main.n_vocab()
                || t as usize >= tokens.n_vocab()
                || main.token_bytes(t) != tokens.token_bytes(t)
        });
        match differs {
            Some(t) => Err(format!(
                "it has another vocabulary ({} tokens against {}; token {t} differs): a draft \
                 model must share the model's tokens",
                tokens.n_vocab(),
                main.n_vocab()
            )),
            None => Ok(DraftModel(model)),
        }
    }
}

impl std::fmt::Debug for DraftModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DraftModel")
    }
}

/// One generation's use of the draft model: its sequence and the tokens it holds.
pub(super) struct ModelDrafter {
    model: Arc<Model>,
    seq: SeqState,
    held: Vec<u32>,
    greedy: Sampler,
}

impl ModelDrafter {
    pub(super) fn new(d: &DraftModel) -> ModelDrafter {
        ModelDrafter {
            seq: d.0.new_sequence(),
            model: d.0.clone(),
            held: Vec::new(),
            greedy: Sampler::new(SamplerConfig::greedy()),
        }
    }

    /// Up to `k` tokens the draft model writes after `history`, each its most likely
    /// token within the constraint at that point (`decoder`'s mask once the drafts
    /// before it are written); fewer when its context ends or a pass fails: drafts
    /// are only ever a guess.
    pub(super) fn draft(
        &mut self,
        tokenizer: &Tokenizer,
        history: &[u32],
        k: usize,
        decoder: &mut Decoder,
    ) -> Vec<u32> {
        if k == 0 || history.is_empty() {
            return Vec::new();
        }
        // Keep what it shares with the target, at least one token short of the end:
        // the next logits come from feeding it.
        let shared = self
            .held
            .iter()
            .zip(history)
            .take_while(|(a, b)| a == b)
            .count()
            .min(history.len() - 1);
        if !self.seq.truncate(shared) {
            self.seq = self.model.new_sequence();
            self.held.clear();
        }
        self.held.truncate(self.seq.len());
        let mut out = Vec::with_capacity(k);
        let mut feed = history[self.held.len()..].to_vec();
        // Whether `out` ends with a forced run (after which the decoder samples).
        let mut forced = false;
        while out.len() < k {
            // The bytes the constraint forces after a chosen draft are the decoder's
            // own next tokens: drafts with no pass of the draft model.
            if !forced && !out.is_empty() {
                let mut run = decoder.forced_after(tokenizer, &out);
                if !run.is_empty() {
                    run.truncate(k - out.len());
                    out.extend_from_slice(&run);
                    feed.extend_from_slice(&run);
                    forced = true;
                    continue;
                }
            }
            if self.held.len() + feed.len() >= self.model.n_ctx() {
                break;
            }
            // A short feed's rows are asked for one by one, as the target's are, so
            // its last row has the one-token step's bits (a prompt pass's need not).
            let want_logits = match feed.len() {
                2..=EXACT_PASS_TOKENS => LogitsWanted::All,
                _ => LogitsWanted::Last,
            };
            let mut batch = [BatchItem {
                seq: &mut self.seq,
                tokens: &feed,
                want_logits,
            }];
            let Ok(logits) = self.model.forward(&mut batch) else {
                break;
            };
            self.held.extend_from_slice(&feed);
            let Some(t) = logits
                .first()
                .and_then(|l| l.last())
                .and_then(|row| self.greedy.sample(row, &[], decoder.mask_after(&out)))
            else {
                break;
            };
            self.model.recycle_logits(logits);
            out.push(t);
            feed = vec![t];
            forced = false;
        }
        out
    }
}
