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
use llamay_engine::Tokenizer;

/// Generated tokens re-tokenized with the forced bytes (enough to cover a
/// pre-tokenizer word the forced text might continue).
const CONTEXT_TOKENS: usize = 4;

/// Tokens spelling the start of the forced continuation, already committed to
/// `matcher`; empty when there is none or the tokenizer does not make it safe.
/// `generated` is the output so far (the last token included); at most `max` tokens.
pub(super) fn fast_forward(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaded::LoadedModel;
    use llamay_testdata::{real_model, RealModel};

    const GRAMMAR: &str =
        r#"root ::= "{ \"a\": \"" [a-z] "\", \"delivery_postcode\": \"" [0-9]+ "\"}""#;
    const WRITTEN: &[u8] = b"{ \"a\": \"x";
    const FORCED: &[u8] = b"\", \"delivery_postcode\": \"";

    /// SmolLM2, and a matcher that has taken the tokenizer's spelling of `WRITTEN`.
    fn setup() -> (LoadedModel, Matcher, Vec<u32>) {
        let lm = LoadedModel::load(&real_model(RealModel::SmolLM2), &Default::default()).unwrap();
        let mut m = lm.constraints.gbnf(GRAMMAR).unwrap().matcher();
        let written = lm.tokenizer.encode(WRITTEN, false, false);
        for &t in &written {
            m.commit(t).unwrap();
        }
        assert_eq!(m.forced_bytes(), FORCED);
        (lm, m, written)
    }

    #[test]
    fn forced_text_is_fed_in_the_tokenizers_own_spelling_minus_the_last_token() {
        let (lm, mut m, written) = setup();
        let tok = &lm.tokenizer;
        let run = fast_forward(tok, &mut m, &written, 100);
        // The tokenizer's spelling of the written text and the forced text together,
        // which here keeps the written tokens as they were.
        let canonical = tok.encode(&[WRITTEN, FORCED].concat(), false, false);
        assert_eq!(canonical[..written.len()], written[..]);
        assert_eq!(run, canonical[written.len()..canonical.len() - 1]);
        assert!(run.len() >= 2, "{run:?}");
        // Committed: what is still forced is exactly what the run did not spell.
        let spelled: Vec<u8> = run
            .iter()
            .flat_map(|&t| tok.token_bytes(t).to_vec())
            .collect();
        assert_eq!(m.forced_bytes(), FORCED[spelled.len()..]);
    }

    #[test]
    fn nothing_is_fed_without_room_or_without_forced_bytes() {
        let (lm, mut m, written) = setup();
        let tok = &lm.tokenizer;
        assert!(fast_forward(tok, &mut m, &written, 0).is_empty());
        assert_eq!(m.forced_bytes(), FORCED, "nothing was committed");
        assert_eq!(fast_forward(tok, &mut m, &written, 1).len(), 1);

        // A choice (more digits or the end) is never forced.
        let mut m = lm.constraints.gbnf("root ::= [0-9]+").unwrap().matcher();
        let seven = tok.encode(b"7", false, false);
        m.commit(seven[0]).unwrap();
        assert!(fast_forward(tok, &mut m, &seven, 100).is_empty());
    }

    #[test]
    fn a_forced_text_that_would_respell_the_last_token_is_left_to_the_sampler() {
        let lm = LoadedModel::load(&real_model(RealModel::SmolLM2), &Default::default()).unwrap();
        let tok = &lm.tokenizer;
        // `{"` is one token in this vocabulary: a `{` written alone followed by the
        // forced `"delivery…` would be spelled differently by the tokenizer.
        let mut m = lm
            .constraints
            .gbnf(r#"root ::= "{" "\"delivery_postcode\": \"" [0-9]+ "\"}""#)
            .unwrap()
            .matcher();
        let open = tok.encode(b"{", false, false);
        assert_eq!(tok.encode(b"{\"", false, false).len(), 1, "the premise");
        m.commit(open[0]).unwrap();
        assert!(fast_forward(tok, &mut m, &open, 100).is_empty());
        assert_eq!(m.forced_bytes(), b"\"delivery_postcode\": \"");
    }
}
