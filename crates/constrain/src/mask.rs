//! [`TokenMask`]: which tokens of a vocabulary are allowed, as a bitset.

/// A bitset over the vocabulary: bit `i` set = token `i` allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u64>,
    n: usize,
}

impl TokenMask {
    /// An all-disallowed mask for `n` tokens.
    pub fn new(n: usize) -> Self {
        TokenMask {
            words: vec![0; n.div_ceil(64)],
            n,
        }
    }

    /// Number of tokens covered.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Heap bytes of the bitset.
    pub(crate) fn heap_bytes(&self) -> usize {
        crate::heap::vec(&self.words)
    }

    /// Whether the mask covers no tokens.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Disallows everything.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Allows token `t`.
    #[inline]
    pub fn allow(&mut self, t: u32) {
        self.words[(t >> 6) as usize] |= 1 << (t & 63);
    }

    /// Disallows token `t` (no effect beyond the mask's length).
    #[inline]
    pub fn disallow(&mut self, t: u32) {
        if let Some(w) = self.words.get_mut((t >> 6) as usize) {
            *w &= !(1 << (t & 63));
        }
    }

    /// Whether token `t` is allowed.
    #[inline]
    pub fn is_allowed(&self, t: u32) -> bool {
        (t as usize) < self.n && self.words[(t >> 6) as usize] >> (t & 63) & 1 != 0
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The allowed token ids in increasing order.
    pub fn allowed(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    (i as u32) * 64 + b
                })
            })
        })
    }

    /// The 64-bit words (bit `i % 64` of word `i / 64` is token `i`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Writes the mask as 32-bit words (bit `i % 32` of word `i / 32`), as llama.cpp-style
    /// samplers and the benchmark protocol expect. `out` needs `ceil(n / 32)` words.
    pub fn write_u32_words(&self, out: &mut [u32]) {
        // Pairs in lockstep, so the loop compiles to straight vector moves: a mask is
        // written every step, and over a 262k vocabulary an indexed loop costs
        // microseconds.
        let mut pairs = out.chunks_exact_mut(2);
        let mut words = self.words.iter();
        for (pair, &w) in (&mut pairs).zip(&mut words) {
            pair[0] = w as u32;
            pair[1] = (w >> 32) as u32;
        }
        let rest = pairs.into_remainder();
        if let Some(o) = rest.first_mut() {
            *o = words.next().map_or(0, |&w| w as u32);
        }
        // Beyond the mask (a longer `out`): nothing allowed.
        let covered = (self.words.len() * 2).min(out.len());
        out[covered..].fill(0);
    }

    pub(crate) fn copy_from(&mut self, other: &TokenMask) {
        self.words.copy_from_slice(&other.words);
    }

    pub(crate) fn union_with(&mut self, other: &TokenMask) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }
}

/// Where a trie walk puts the tokens it allows: a bitset, or a list of ids (a mask
/// kept as a bulk mask plus a few tokens).
pub(crate) trait Allow {
    fn allow_token(&mut self, t: u32);

    fn allow_tokens(&mut self, ts: &[u32]) {
        for &t in ts {
            self.allow_token(t);
        }
    }
}

impl Allow for TokenMask {
    #[inline]
    fn allow_token(&mut self, t: u32) {
        self.allow(t);
    }
}

impl Allow for Vec<u32> {
    #[inline]
    fn allow_token(&mut self, t: u32) {
        self.push(t);
    }

    fn allow_tokens(&mut self, ts: &[u32]) {
        self.extend_from_slice(ts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_words() {
        let mut m = TokenMask::new(70);
        m.allow(0);
        m.allow(33);
        m.allow(69);
        assert_eq!(m.allowed().collect::<Vec<_>>(), vec![0, 33, 69]);
        let mut w = [0u32; 3];
        m.write_u32_words(&mut w);
        assert_eq!(w, [1, 2, 1 << 5]);
        let mut w = [7u32; 5];
        m.write_u32_words(&mut w);
        assert_eq!(w, [1, 2, 1 << 5, 0, 0]);
        assert!(!m.is_allowed(1000));
    }
}
