//! Masks checked against commits: each token committed alone and rolled back, which
//! steps the automaton byte by byte and takes none of a mask walk's shortcuts.
#![allow(dead_code)]

use llamay_constrain::{Constraint, Matcher, TokenMask, Vocabulary};
use llamay_testdata::XorShift;

/// The mask as commits tell it: every token tried alone, then rolled back.
pub fn mask_by_commits(m: &mut Matcher, n: usize) -> TokenMask {
    let mut mask = TokenMask::new(n);
    for t in 0..n as u32 {
        if m.commit(t).is_ok() {
            mask.allow(t);
            m.rollback(1).unwrap();
        }
    }
    mask
}

/// Walks `c` for `steps` tokens picked at random from its masks, comparing each mask
/// with [`mask_by_commits`]; returns the tokens the masks allowed in all.
pub fn compare_walk(
    name: &str,
    c: &Constraint,
    v: &Vocabulary,
    rng: &mut XorShift,
    steps: usize,
) -> usize {
    let n = v.len();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(n);
    let mut text = Vec::new();
    let mut allowed_in_all = 0;
    for step in 0..steps {
        m.mask(&mut mask);
        let want = mask_by_commits(&mut m, n);
        let differ: Vec<String> = (0..n as u32)
            .filter(|&t| mask.is_allowed(t) != want.is_allowed(t))
            .take(8)
            .map(|t| {
                format!(
                    "{t} {:?} mask {}",
                    v.token_bytes(t).map(String::from_utf8_lossy),
                    mask.is_allowed(t)
                )
            })
            .collect();
        assert!(
            differ.is_empty(),
            "{name}, step {step} after {:?}: {differ:?}",
            String::from_utf8_lossy(&text)
        );
        let choices: Vec<u32> = mask.allowed().filter(|&t| !v.is_eog(t)).collect();
        allowed_in_all += choices.len();
        if choices.is_empty() {
            break;
        }
        let t = choices[rng.below(choices.len())];
        text.extend_from_slice(v.token_bytes(t).unwrap());
        m.commit(t).unwrap();
    }
    allowed_in_all
}
