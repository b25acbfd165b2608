//! Stack-free masks of quoted strings (`x-llamay-quote`: the value must be a span of a
//! source). Their decoder states are as many as the source has bytes and rarely meet
//! again, so a walk steps the decoder at every trie node rather than through a memo.
//!
//! Two things keep them cheap. A state deep in a span has one or two successors, so the
//! walk enters only the root subtrees of the bytes the span can take next
//! ([`StringProg::quote_first_bytes`]) instead of trying every first byte. The one
//! state every span passes through, just past the opening quote, allows nearly every
//! token that is a substring of the source: its mask is walked when the constraint is
//! compiled ([`StringProg::quote_opened`]), not on the request's first steps.

use super::jsonstr::{StrStep, StringProg};
use super::local::{Inside, LocalMask};
use crate::mask::TokenMask;
use crate::trie::Trie;

/// The stack-free mask of quoted string `prog` in state `aux`.
pub(crate) fn mask(prog: &StringProg, aux: u64, trie: &Trie) -> LocalMask {
    let mut w = Walk {
        prog,
        trie,
        inside: TokenMask::new(trie.n_tokens),
        closing: Vec::new(),
        stack: vec![aux; trie.max_depth + 1],
    };
    match prog.quote_first_bytes(aux) {
        Some(set) => {
            for (k, &word) in set.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let b = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let i = trie.first[b] as usize;
                    if i != 0 {
                        w.subtrees(i, trie.nodes[i].end as usize);
                    }
                }
            }
        }
        None => w.subtrees(1, trie.len()),
    }
    LocalMask {
        inside: Inside::of_mask(w.inside),
        closing: w.closing,
    }
}

struct Walk<'a> {
    prog: &'a StringProg,
    trie: &'a Trie,
    inside: TokenMask,
    closing: Vec<u32>,
    /// Decoder state at each depth of the current path (depth 0: the walk's start).
    stack: Vec<u64>,
}

impl Walk<'_> {
    /// Walks the trie nodes `from..to`, a run of whole sibling subtrees below the root.
    fn subtrees(&mut self, from: usize, to: usize) {
        let trie = self.trie;
        let mut i = from;
        while i < to {
            let d = trie.nodes[i].depth as usize;
            match self.prog.step(self.stack[d - 1], trie.nodes[i].byte) {
                StrStep::Inside(a) => {
                    self.stack[d] = a;
                    for &t in trie.tokens_at(i) {
                        self.inside.allow(t);
                    }
                    i += 1;
                }
                StrStep::Closed => {
                    self.closing.push(i as u32);
                    i = trie.nodes[i].end as usize;
                }
                StrStep::Dead => i = trie.nodes[i].end as usize,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::jsonstr::reachable;
    use crate::grammar::{JsonString, Normalize, SpanAutomaton};
    use crate::vocab::Vocabulary;
    use std::sync::Arc;

    fn vocab() -> Vocabulary {
        let mut tokens: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        for t in [
            "\"",
            "\",",
            "\"}",
            "Tot",
            "Total",
            "al",
            " 1",
            " 234",
            ",50",
            "50\"",
            "EUR\"",
            "\\n",
            "\\t",
            "\\\"",
            "\\u00fc",
            "\\u00",
            "ü",
            "Mü",
            "ller",
            "GmbH",
            "gmbh",
            "  ",
            " \\n",
            "\\\\",
            "C:\\\\",
            "ab",
            "AB",
            "😀",
            "\u{1F600}\"",
            "\\ud83d\\ude00",
        ] {
            tokens.push(t.as_bytes().to_vec());
        }
        // Lone lead and continuation byte pairs, to start and end tokens mid-character.
        tokens.push(vec![0xC3]);
        tokens.push(vec![0xBC, b'l']);
        tokens.push(vec![0x9F, 0x98]);
        Vocabulary::new(tokens, &[], &[])
    }

    /// Every state a walk of `prog` reaches from the opening quote within `depth` bytes
    /// (escapes and all), breadth first.
    #[test]
    fn entering_only_the_first_bytes_finds_what_trying_every_byte_finds() {
        let v = vocab();
        let src = "Total:\n\t 1 234,50 EUR; Müller \"GmbH\" ab C:\\x 😀 aB";
        for norm in [Normalize::None, Normalize::Whitespace, Normalize::Case] {
            let q = Arc::new(SpanAutomaton::new(src, norm).unwrap());
            for (min, max) in [(1, None), (3, Some(8))] {
                let spec = JsonString {
                    min_chars: min,
                    max_chars: max,
                    quote: Some(q.clone()),
                    ..JsonString::default()
                };
                let prog = StringProg::new(&spec);
                let all = reachable(&prog, prog.quote_opened().unwrap(), 7);
                assert!(all.len() > 50, "{norm:?}: only {} states", all.len());
                for aux in all {
                    let fast = mask(&prog, aux, &v.trie);
                    let mut slow = Walk {
                        prog: &prog,
                        trie: &v.trie,
                        inside: TokenMask::new(v.len()),
                        closing: Vec::new(),
                        stack: vec![aux; v.trie.max_depth + 1],
                    };
                    slow.subtrees(1, v.trie.len());
                    assert_eq!(
                        fast.inside.to_mask(v.len()),
                        slow.inside,
                        "{norm:?} {aux:#x}"
                    );
                    let mut c = fast.closing.clone();
                    c.sort_unstable();
                    assert_eq!(c, slow.closing, "{norm:?} {aux:#x}");
                }
            }
        }
    }
}
