//! [`Kept`]: a computed mask as the matcher keeps it for the states it comes back to.
//!
//! Most masks are a bulk mask already held elsewhere (a string's stack-free part on the
//! vocabulary, a detached walk) plus a few tokens walked on top of it, or a few walked
//! tokens alone. Keeping them as that, rather than as a bitset of their own, saves a
//! pass over the vocabulary's bits per computed mask (copying the bulk into the cache
//! before copying it out again: over a 262k-token vocabulary two 32 KiB copies, a tenth
//! of the mask time) and keeps the matcher's cache small, so less of it is cold.

use crate::mask::TokenMask;
use crate::pool::MaskPool;
use std::sync::Arc;

/// A mask kept by a matcher.
pub(crate) enum Kept {
    /// The bulk mask (if any) plus the tokens walked on top of it.
    Sparse {
        base: Option<Arc<TokenMask>>,
        extra: Box<[u32]>,
    },
    Dense(TokenMask),
}

impl Kept {
    /// Nothing allowed.
    pub(super) fn none() -> Kept {
        Kept::Sparse {
            base: None,
            extra: Box::default(),
        }
    }

    /// The union of `bases` and the tokens `extra`, kept sparse while the extra tokens
    /// are few enough that setting their bits costs less than a copy of the bitset.
    pub(super) fn build(
        bases: &[Arc<TokenMask>],
        extra: &[u32],
        n: usize,
        pool: &MaskPool,
    ) -> Kept {
        if bases.len() <= 1 && extra.len() <= n / 128 {
            return Kept::Sparse {
                base: bases.first().cloned(),
                extra: extra.into(),
            };
        }
        let mut m = pool.take();
        match bases.split_first() {
            Some((first, rest)) => {
                m.copy_from(first);
                for b in rest {
                    m.union_with(b);
                }
            }
            None => m.clear(),
        }
        for &t in extra {
            m.allow(t);
        }
        Kept::Dense(m)
    }

    /// Writes the mask into `out` (of the vocabulary's length).
    pub(super) fn write_to(&self, out: &mut TokenMask) {
        match self {
            Kept::Dense(m) => out.copy_from(m),
            Kept::Sparse { base, extra } => {
                match base {
                    Some(b) => out.copy_from(b),
                    None => out.clear(),
                }
                for &t in extra.iter() {
                    out.allow(t);
                }
            }
        }
    }

    /// Writes the mask as 32-bit words (see [`TokenMask::write_u32_words`]).
    pub(super) fn write_u32_words(&self, out: &mut [u32]) {
        match self {
            Kept::Dense(m) => m.write_u32_words(out),
            Kept::Sparse { base, extra } => {
                match base {
                    Some(b) => b.write_u32_words(out),
                    None => out.fill(0),
                }
                for &t in extra.iter() {
                    if let Some(w) = out.get_mut(t as usize / 32) {
                        *w |= 1 << (t % 32);
                    }
                }
            }
        }
    }

    /// The bitset of a dense mask, for the pool once the mask is dropped.
    pub(super) fn into_dense(self) -> Option<TokenMask> {
        match self {
            Kept::Dense(m) => Some(m),
            Kept::Sparse { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(n: usize, ts: &[u32]) -> TokenMask {
        let mut m = TokenMask::new(n);
        for &t in ts {
            m.allow(t);
        }
        m
    }

    #[test]
    fn sparse_and_dense_forms_write_the_same_bits() {
        let n = 1000;
        let pool = MaskPool::new(n);
        let a = Arc::new(mask(n, &[1, 64, 999]));
        let b = Arc::new(mask(n, &[2, 65]));
        let few = vec![3, 64, 700];
        let many: Vec<u32> = (0..n as u32).step_by(7).collect();
        let cases = [
            (vec![], few.clone(), false),
            (vec![a.clone()], few.clone(), false),
            (vec![a.clone(), b.clone()], few.clone(), true),
            (vec![a.clone()], many.clone(), true),
        ];
        for (bases, extra, dense) in cases {
            let mut want = TokenMask::new(n);
            for b in &bases {
                want.union_with(b);
            }
            for &t in &extra {
                want.allow(t);
            }
            let k = Kept::build(&bases, &extra, n, &pool);
            assert_eq!(matches!(k, Kept::Dense(_)), dense);
            let mut got = mask(n, &[5, 6]);
            k.write_to(&mut got);
            assert_eq!(got, want);
            let mut words = vec![u32::MAX; n.div_ceil(32) + 1];
            let mut want_words = vec![0; words.len()];
            want.write_u32_words(&mut want_words);
            k.write_u32_words(&mut words);
            assert_eq!(words, want_words);
        }
    }
}
