//! Splitting text around special tokens, with llama.cpp's `tokenizer_st_partition`
//! semantics.
//!
//! llama.cpp takes the special tokens longest first; each one claims its leftmost
//! non-overlapping occurrences inside the text not yet claimed by a longer one. Doing
//! that for every special token costs a scan per token (6,414 for Gemma 3), so an
//! Aho-Corasick pass first finds which tokens occur at all; only those are then
//! searched for, in the same order and over what is still unclaimed.

use aho_corasick::AhoCorasick;
use memchr::memmem;

use super::attr::TokenAttr;

/// A piece of partitioned text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fragment {
    /// Bytes `[start, end)` of the input, to be tokenized normally.
    Text(usize, usize),
    /// A special token matched in the text.
    Token(u32),
}

/// The special tokens of a vocabulary, in llama.cpp's matching order.
#[derive(Debug)]
pub(super) struct SpecialMatcher {
    ac: Option<AhoCorasick>,
    /// Per pattern (= priority): token id, attributes and text.
    tokens: Vec<(u32, TokenAttr, Vec<u8>)>,
}

const SKIP_UNLESS_PARSING: TokenAttr = TokenAttr(TokenAttr::CONTROL.0 | TokenAttr::UNKNOWN.0);

impl SpecialMatcher {
    /// `tokens` in priority order (longest text first): id, attributes, text.
    pub(super) fn new(tokens: Vec<(u32, TokenAttr, Vec<u8>)>) -> SpecialMatcher {
        let ac = if tokens.is_empty() {
            None
        } else {
            let texts = tokens.iter().map(|t| t.2.as_slice());
            Some(AhoCorasick::new(texts).expect("special token patterns are few and short"))
        };
        SpecialMatcher { ac, tokens }
    }

    /// Partitions `text`. CONTROL and UNKNOWN tokens are matched only when
    /// `parse_special`; USER_DEFINED ones always.
    pub(super) fn partition(&self, text: &[u8], parse_special: bool, out: &mut Vec<Fragment>) {
        out.clear();
        if text.is_empty() {
            return;
        }
        let wanted = |p: usize| parse_special || !self.tokens[p].1.any(SKIP_UNLESS_PARSING);
        let mut occurs = Vec::new();
        if let Some(ac) = &self.ac {
            for m in ac.find_overlapping_iter(text) {
                occurs.push(m.pattern().as_usize());
            }
        }
        occurs.sort_unstable();
        occurs.dedup();
        occurs.retain(|&p| wanted(p));
        if occurs.is_empty() {
            out.push(Fragment::Text(0, text.len()));
            return;
        }
        // Unclaimed intervals, in order; accepted tokens as (start, id).
        let mut free = vec![(0, text.len())];
        let mut next_free = Vec::new();
        let mut accepted: Vec<(usize, u32)> = Vec::new();
        for p in occurs {
            let (id, attr, pat) = &self.tokens[p];
            let finder = memmem::Finder::new(pat);
            next_free.clear();
            for &(a, b) in &free {
                let mut left = a;
                while let Some(pos) = finder.find(&text[left..b]) {
                    let (s, e) = (left + pos, left + pos + pat.len());
                    let mut keep = s;
                    if attr.any(TokenAttr::LSTRIP) {
                        while keep > left && is_c_space(text[keep - 1]) {
                            keep -= 1;
                        }
                    }
                    if keep > left {
                        next_free.push((left, keep));
                    }
                    accepted.push((s, *id));
                    left = e;
                    if attr.any(TokenAttr::RSTRIP) {
                        while left < b && is_c_space(text[left]) {
                            left += 1;
                        }
                    }
                }
                if left < b {
                    next_free.push((left, b));
                }
            }
            std::mem::swap(&mut free, &mut next_free);
        }
        accepted.sort_unstable();
        let (mut i, mut j) = (0, 0);
        while i < free.len() || j < accepted.len() {
            if j == accepted.len() || (i < free.len() && free[i].0 < accepted[j].0) {
                out.push(Fragment::Text(free[i].0, free[i].1));
                i += 1;
            } else {
                out.push(Fragment::Token(accepted[j].1));
                j += 1;
            }
        }
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(toks: &[(&str, TokenAttr)]) -> SpecialMatcher {
        let tokens = toks.iter().enumerate();
        SpecialMatcher::new(
            tokens
                .map(|(i, t)| (i as u32, t.1, t.0.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn longer_tokens_claim_first() {
        let m = matcher(&[
            ("<|im_start|>", TokenAttr::CONTROL),
            ("\n\n", TokenAttr::USER_DEFINED),
            ("\n", TokenAttr::USER_DEFINED),
        ]);
        let mut out = Vec::new();
        m.partition(b"a\n\n\n<|im_start|>b", true, &mut out);
        use Fragment::*;
        assert_eq!(
            out,
            [Text(0, 1), Token(1), Token(2), Token(0), Text(16, 17)]
        );
        m.partition(b"a\n<|im_start|>", false, &mut out);
        assert_eq!(out, [Text(0, 1), Token(2), Text(2, 14)]);
    }

    #[test]
    fn rstrip_drops_following_spaces() {
        let m = matcher(&[("<x>", TokenAttr::CONTROL | TokenAttr::RSTRIP)]);
        let mut out = Vec::new();
        m.partition(b"a <x>  b<x>", true, &mut out);
        use Fragment::*;
        assert_eq!(out, [Text(0, 2), Token(0), Text(7, 8), Token(0)]);
    }

    #[test]
    fn longer_token_wins_over_earlier_shorter_one() {
        // llama.cpp's order is by length, not position: "bcd" claims before "ab".
        let m = matcher(&[
            ("bcd", TokenAttr::USER_DEFINED),
            ("ab", TokenAttr::USER_DEFINED),
        ]);
        let mut out = Vec::new();
        m.partition(b"abcd ab", false, &mut out);
        use Fragment::*;
        assert_eq!(out, [Text(0, 1), Token(0), Text(4, 5), Token(1)]);
    }

    #[test]
    fn long_runs_stay_linear() {
        let toks: Vec<String> = (1..=31).rev().map(|n| "\n".repeat(n)).collect();
        let toks: Vec<(&str, TokenAttr)> = toks
            .iter()
            .map(|t| (t.as_str(), TokenAttr::USER_DEFINED))
            .collect();
        let m = matcher(&toks);
        let mut out = Vec::new();
        m.partition(&vec![b'\n'; 100_000], false, &mut out);
        assert_eq!(out.len(), 100_000 / 31 + 1);
        assert_eq!(out[0], Fragment::Token(0));
        assert_eq!(out.last(), Some(&Fragment::Token(31 - 100_000 % 31)));
    }
}
