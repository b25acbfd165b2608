//! Forced-bytes fast-forward: where the constraint allows exactly one continuation,
//! its tokens are taken without sampling and fed to the model in one forward pass.
//!
//! Any token sequence spelling the forced bytes keeps the output valid, but the model
//! was trained on its tokenizer's own spelling: a different split reads as unusual
//! text and can lower the quality of what follows. So the forced bytes are tokenized
//! together with the last tokens generated, and used only when that tokenization
//! keeps those tokens as they are (the forced text does not reach back into them);
//! the final token is left to the sampler, since it could merge with bytes the
//! constraint does not force yet.

use llamay_constrain::Matcher;
use llamay_engine::tokenizer::Tokenizer;

/// Generated tokens re-tokenized with the forced bytes (enough to cover a
/// pre-tokenizer word the forced text might continue).
const CONTEXT_TOKENS: usize = 4;

/// Tokens spelling the start of the forced continuation, already committed to
/// `matcher`; empty when there is none or the tokenizer does not make it safe.
/// `generated` is the output so far (the last token included); at most `max` tokens.
pub fn fast_forward(
    tokenizer: &Tokenizer,
    matcher: &mut Matcher,
    generated: &[u32],
    max: usize,
) -> Vec<u32> {
    if max == 0 || generated.is_empty() {
        return Vec::new();
    }
    let forced = matcher.forced_bytes();
    if forced.is_empty() {
        return Vec::new();
    }
    let context = &generated[generated.len().saturating_sub(CONTEXT_TOKENS)..];
    let mut text: Vec<u8> = context
        .iter()
        .flat_map(|&t| tokenizer.token_bytes(t).iter().copied())
        .collect();
    text.extend_from_slice(&forced);
    let ids = tokenizer.encode(&text, false, false);
    // At least two new tokens: the last one is always left to the sampler.
    if ids.len() < context.len() + 2 || ids[..context.len()] != *context {
        return Vec::new();
    }
    let mut run: Vec<u32> = ids[context.len()..ids.len() - 1].to_vec();
    run.truncate(max);
    let spelled: Vec<u8> = run
        .iter()
        .flat_map(|&t| tokenizer.token_bytes(t).iter().copied())
        .collect();
    if !forced.starts_with(&spelled) {
        return Vec::new();
    }
    for (i, &t) in run.iter().enumerate() {
        if matcher.commit(t).is_err() {
            // Cannot fail (the bytes are forced) unless the token is special: undo.
            let _ = matcher.rollback(i);
            return Vec::new();
        }
    }
    run
}
