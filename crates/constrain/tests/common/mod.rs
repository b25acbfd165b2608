//! Shared test helpers: a seeded RNG, synthetic vocabularies, random constrained walks.
#![allow(dead_code)]

use llamay_constrain::{Constraint, Matcher, TokenMask, Vocabulary};
use std::sync::Arc;

pub use llamay_testdata::XorShift as Rng;

/// Every single byte, plus multi-byte tokens that span JSON structure, whitespace runs,
/// escapes, UTF-8 characters and words; then `extra`; then a special and an EOG token.
/// Returns (vocab, eog id, special id).
pub fn synthetic_vocab(extra: &[&str]) -> (Arc<Vocabulary>, u32, u32) {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let multi = [
        "\":\"", "\"},", "\\u00", "\": ", "{\"", "\"}", "],", "]}", "}}", "}]", "[{", "[[", "true",
        "false", "null", ", \"", ",\"", "\":", "\":{", "\":[", "\\n", "\\\"", "\\u", "\\ud83d",
        "\\ude00", "12", "345", "0.5", "1e", "-1", "\n", "\n  ", "\n    ", "  ", "    ", "\t",
        " \"", " {", " [", "é", "ぁ", "😀", " the", " name", "name", "id", "abc", " value",
        "\"name\"", "\"id\"", "\"a\"", "\"b\"", "\"c\"", ":1", ",", "\"\"", "{}", "[]", "\r\n",
    ];
    toks.extend(multi.iter().chain(extra).map(|s| s.as_bytes().to_vec()));
    let special = toks.len() as u32;
    toks.push(b"<|special|>".to_vec());
    let eog = toks.len() as u32;
    toks.push(b"</s>".to_vec());
    (
        Arc::new(Vocabulary::new(toks, &[eog], &[special])),
        eog,
        special,
    )
}

/// Outcome of one random walk.
pub struct Walk {
    pub bytes: Vec<u8>,
    pub finished: bool,
    pub steps: usize,
}

/// Walks a matcher: each step takes a uniformly random allowed token; after `soft` steps
/// it takes EOG whenever allowed and, with probability 0.8, prefers allowed tokens that
/// `closer` likes. Panics on a dead end (a state that allows nothing and is not
/// finished), on a special token in the mask, or on a commit refused after being allowed.
pub fn random_walk(
    c: &Constraint,
    eog: u32,
    special: u32,
    rng: &mut Rng,
    soft: usize,
    hard: usize,
    closer: &dyn Fn(&[u8]) -> bool,
) -> Walk {
    let vocab = c.vocab().clone();
    let mut m: Matcher = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut bytes = Vec::new();
    for step in 0..hard {
        m.mask(&mut mask);
        assert!(
            !mask.is_allowed(special),
            "special token allowed after {:?}",
            String::from_utf8_lossy(&bytes)
        );
        let allowed: Vec<u32> = mask.allowed().collect();
        assert!(
            !allowed.is_empty(),
            "dead end after {:?}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(
            mask.is_allowed(eog),
            m.is_accepting(),
            "EOG allowed iff accepting"
        );
        let pick = if step >= soft && mask.is_allowed(eog) {
            eog
        } else {
            let pool: Vec<u32> = if step >= soft && rng.chance(0.8) {
                let p: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&t| t != eog && closer(vocab.token_bytes(t).unwrap()))
                    .collect();
                if p.is_empty() {
                    allowed.clone()
                } else {
                    p
                }
            } else {
                allowed
                    .iter()
                    .copied()
                    .filter(|&t| t != eog || step >= soft / 4)
                    .collect()
            };
            let pool = if pool.is_empty() {
                allowed.clone()
            } else {
                pool
            };
            pool[rng.below(pool.len())]
        };
        m.commit(pick)
            .unwrap_or_else(|e| panic!("allowed token refused: {e}"));
        if pick == eog {
            assert!(m.is_finished());
            return Walk {
                bytes,
                finished: true,
                steps: step + 1,
            };
        }
        bytes.extend_from_slice(vocab.token_bytes(pick).unwrap());
    }
    Walk {
        bytes,
        finished: false,
        steps: hard,
    }
}

/// Feeds `text` in random chunks of 1..=max_chunk bytes; returns whether every chunk was
/// accepted and the matcher ended accepting.
pub fn accepts_chunked(c: &Constraint, text: &[u8], rng: &mut Rng, max_chunk: usize) -> bool {
    let mut m = c.matcher();
    let mut i = 0;
    while i < text.len() {
        let n = (1 + rng.below(max_chunk)).min(text.len() - i);
        if m.commit_bytes(&text[i..i + n]).is_err() {
            return false;
        }
        i += n;
    }
    m.is_accepting()
}

/// Greedy longest-match tokenisation of `text` with the vocabulary's non-special tokens,
/// checking each token is allowed by the mask before committing it, and EOG at the end.
/// Returns the index of the first refused token, or Ok(token count).
pub fn accepts_tokens(c: &Constraint, eog: u32, text: &[u8]) -> Result<usize, String> {
    let vocab = c.vocab();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut i = 0;
    let mut n = 0;
    while i < text.len() {
        let best = (0..vocab.len() as u32)
            .filter(|&t| !vocab.is_special(t))
            .filter(|&t| text[i..].starts_with(vocab.token_bytes(t).unwrap()))
            .max_by_key(|&t| vocab.token_bytes(t).unwrap().len())
            .unwrap();
        m.mask(&mut mask);
        if !mask.is_allowed(best) {
            return Err(format!(
                "token {n} ({:?}) refused at byte {i}",
                String::from_utf8_lossy(vocab.token_bytes(best).unwrap())
            ));
        }
        m.commit(best).map_err(|e| e.to_string())?;
        i += vocab.token_bytes(best).unwrap().len();
        n += 1;
    }
    m.mask(&mut mask);
    if !mask.is_allowed(eog) {
        return Err("EOG not allowed at the end".into());
    }
    Ok(n)
}
