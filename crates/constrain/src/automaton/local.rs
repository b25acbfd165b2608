//! Context-independent masks for JSON strings (XGrammar's insight, applied where it pays
//! most): while a token stays inside a string, whether it is allowed depends only on the
//! string's own state, not on the parse stack. So for a state that is one item inside a
//! string, the trie walk splits into a stack-free part, computed once per (string, aux)
//! and shared by every matcher of the constraint, and a small remainder: the subtrees of
//! tokens that close the string, walked with the real stack.

use super::jsonstr::{StrStep, StringProg};
use crate::vocab::{TokenMask, Vocabulary};

/// The stack-free part of a mask for one string state.
pub(crate) struct LocalMask {
    /// Tokens consumed entirely inside the string.
    pub inside: TokenMask,
    /// Trie nodes whose byte closes the string: the token ending there is allowed, and
    /// the subtree below must be walked from the state after the string.
    pub closing: Vec<u32>,
}

impl LocalMask {
    pub fn compute(prog: &StringProg, aux: u64, vocab: &Vocabulary) -> LocalMask {
        let trie = &vocab.trie;
        let mut inside = TokenMask::new(vocab.len());
        let mut closing = Vec::new();
        let mut stack = vec![0u64; trie.max_depth + 1];
        stack[0] = aux;
        let mut i = 1;
        while i < trie.len() {
            let d = trie.depth[i] as usize;
            match prog.step(stack[d - 1], trie.byte[i]) {
                StrStep::Inside(a) => {
                    stack[d] = a;
                    for &t in trie.tokens_at(i) {
                        inside.allow(t);
                    }
                    i += 1;
                }
                StrStep::Closed => {
                    closing.push(i as u32);
                    i = trie.end[i] as usize;
                }
                StrStep::Dead => i = trie.end[i] as usize,
            }
        }
        LocalMask { inside, closing }
    }
}
