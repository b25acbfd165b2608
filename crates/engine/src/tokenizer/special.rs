//! Splitting text around special tokens, with llama.cpp's `tokenizer_st_partition`
//! semantics computed in one pass.
//!
//! llama.cpp takes the special tokens longest first; each one claims its leftmost
//! non-overlapping occurrences inside the text not yet claimed by a longer one. Here
//! an Aho-Corasick automaton finds every occurrence of every special token at once,
//! and the claims are replayed in the same priority order over those occurrences.

use aho_corasick::AhoCorasick;

use super::attr::TokenAttr;

/// A piece of partitioned text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment {
    /// Bytes `[start, end)` of the input, to be tokenized normally.
    Text(usize, usize),
    /// A special token matched in the text.
    Token(u32),
}

/// The special tokens of a vocabulary, in llama.cpp's matching order.
#[derive(Debug)]
pub struct SpecialMatcher {
    ac: Option<AhoCorasick>,
    /// Per pattern (= priority): token id and attributes.
    tokens: Vec<(u32, TokenAttr)>,
}

const SKIP_UNLESS_PARSING: TokenAttr = TokenAttr(TokenAttr::CONTROL.0 | TokenAttr::UNKNOWN.0);

impl SpecialMatcher {
    /// `tokens` in priority order (longest text first), with their texts.
    pub fn new<'a>(
        tokens: Vec<(u32, TokenAttr)>,
        texts: impl Iterator<Item = &'a [u8]>,
    ) -> SpecialMatcher {
        let texts: Vec<&[u8]> = texts.collect();
        let ac = if texts.is_empty() {
            None
        } else {
            Some(AhoCorasick::new(&texts).expect("special token patterns are few and short"))
        };
        SpecialMatcher { ac, tokens }
    }

    /// Partitions `text`. CONTROL and UNKNOWN tokens are matched only when
    /// `parse_special`; USER_DEFINED ones always.
    pub fn partition(&self, text: &[u8], parse_special: bool, out: &mut Vec<Fragment>) {
        out.clear();
        if text.is_empty() {
            return;
        }
        let mut found: Vec<(u32, usize, usize)> = Vec::new();
        if let Some(ac) = &self.ac {
            for m in ac.find_overlapping_iter(text) {
                let p = m.pattern().as_u32();
                if parse_special || !self.tokens[p as usize].1.any(SKIP_UNLESS_PARSING) {
                    found.push((p, m.start(), m.end()));
                }
            }
        }
        if found.is_empty() {
            out.push(Fragment::Text(0, text.len()));
            return;
        }
        found.sort_unstable();
        // claimed[i]: byte i belongs to a matched token or was stripped away.
        let mut claimed = vec![false; text.len()];
        let mut accepted: Vec<(usize, usize, u32)> = Vec::new();
        let mut i = 0;
        while i < found.len() {
            let p = found[i].0;
            let (id, attr) = self.tokens[p as usize];
            let mut resume = 0;
            while i < found.len() && found[i].0 == p {
                let (_, s, e) = found[i];
                i += 1;
                if s < resume || claimed[s..e].iter().any(|&c| c) {
                    continue;
                }
                claimed[s..e].iter_mut().for_each(|c| *c = true);
                accepted.push((s, e, id));
                resume = e;
                if attr.any(TokenAttr::LSTRIP) {
                    let mut k = s;
                    while k > 0 && !claimed[k - 1] && is_c_space(text[k - 1]) {
                        k -= 1;
                        claimed[k] = true;
                    }
                }
                if attr.any(TokenAttr::RSTRIP) {
                    while resume < text.len() && !claimed[resume] && is_c_space(text[resume]) {
                        claimed[resume] = true;
                        resume += 1;
                    }
                }
            }
        }
        accepted.sort_unstable();
        let mut pos = 0;
        let push_free = |from: usize, to: usize, out: &mut Vec<Fragment>| {
            let mut a = from;
            while a < to {
                while a < to && claimed[a] {
                    a += 1;
                }
                let b = (a..to).find(|&k| claimed[k]).unwrap_or(to);
                if b > a {
                    out.push(Fragment::Text(a, b));
                }
                a = b;
            }
        };
        for &(s, e, id) in &accepted {
            push_free(pos, s, out);
            out.push(Fragment::Token(id));
            pos = e;
        }
        push_free(pos, text.len(), out);
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
        let tokens = toks
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u32, t.1))
            .collect();
        SpecialMatcher::new(tokens, toks.iter().map(|t| t.0.as_bytes()))
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
}
