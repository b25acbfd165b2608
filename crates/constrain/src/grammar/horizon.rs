//! DFA states that no input of bounded length can tell apart.
//!
//! A mask looks at most one token ahead, so two pattern states that accept and refuse
//! exactly the same inputs of up to a token's length allow the same tokens, even if
//! longer inputs differ: in `(?:\S+\s+){0,49}\S+` the states "word 3" and "word 4" only
//! part ways some forty words on. Masks are then kept per class rather than per state.

use super::ByteDfa;
use rustc_hash::FxHashMap;

/// Work (states × byte classes × rounds) beyond which the classes are not refined and
/// every state stands for itself.
const WORK_LIMIT: usize = 1 << 22;

impl ByteDfa {
    /// For each state, the smallest state that agrees with it on every input of at
    /// most `depth` bytes (whether the input dies, and whether it may end there).
    /// Moore's partition refinement stopped after `depth` rounds, over the byte
    /// classes the table induces.
    pub(crate) fn horizon_representatives(&self, depth: usize) -> Vec<u32> {
        let n = self.len();
        let identity: Vec<u32> = (0..n as u32).collect();
        let classes = self.byte_class_representatives();
        if n.saturating_mul(classes.len()).saturating_mul(depth.min(n)) > WORK_LIMIT {
            return identity;
        }
        // Block ids; a dead transition is its own block (`u32::MAX`).
        let mut block: Vec<u32> = (0..n as u32)
            .map(|s| u32::from(self.is_accepting(s)))
            .collect();
        let mut blocks = 2usize;
        for _ in 0..depth {
            let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
            let next: Vec<u32> = (0..n as u32)
                .map(|s| {
                    let mut sig = Vec::with_capacity(classes.len() + 1);
                    sig.push(block[s as usize]);
                    sig.extend(
                        classes
                            .iter()
                            .map(|&b| self.next(s, b).map_or(u32::MAX, |t| block[t as usize])),
                    );
                    let fresh = ids.len() as u32;
                    *ids.entry(sig).or_insert(fresh)
                })
                .collect();
            let stable = ids.len() == blocks;
            blocks = ids.len();
            block = next;
            if stable {
                break;
            }
        }
        let mut first: FxHashMap<u32, u32> = FxHashMap::default();
        identity
            .iter()
            .map(|&s| *first.entry(block[s as usize]).or_insert(s))
            .collect()
    }

    /// One byte of each class of bytes that every state treats alike.
    fn byte_class_representatives(&self) -> Vec<u8> {
        let mut seen: FxHashMap<Vec<Option<u32>>, u8> = FxHashMap::default();
        for b in 0..=255u8 {
            let column: Vec<Option<u32>> =
                (0..self.len() as u32).map(|s| self.next(s, b)).collect();
            seen.entry(column).or_insert(b);
        }
        let mut reps: Vec<u8> = seen.into_values().collect();
        reps.sort_unstable();
        reps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(d: &ByteDfa, input: &str) -> u32 {
        input.bytes().fold(0, |s, b| d.next(s, b).unwrap())
    }

    #[test]
    fn states_part_only_within_the_horizon() {
        let d = ByteDfa::new("(?:[a-z]+ ){0,6}[a-z]+").unwrap();
        let (w1, w2, w5) = (after(&d, "a"), after(&d, "a b"), after(&d, "a b c d e"));
        // Two bytes ("x "): one word apart cannot be told apart, five can be.
        let reps = d.horizon_representatives(2);
        assert_eq!(reps[w1 as usize], reps[w2 as usize]);
        // Ten bytes hold at most five more spaces, which both can take; eleven hold
        // " x x x x x ", whose sixth space only word 1 survives.
        let reps = d.horizon_representatives(10);
        assert_eq!(reps[w1 as usize], reps[w2 as usize]);
        let reps = d.horizon_representatives(11);
        assert_ne!(reps[w1 as usize], reps[w2 as usize]);
        assert_ne!(reps[w1 as usize], reps[w5 as usize]);
        // Representatives are class minima and stand for themselves.
        for (s, &r) in reps.iter().enumerate() {
            assert!(r as usize <= s && reps[r as usize] == r);
        }
    }

    #[test]
    fn acceptance_separates_states() {
        let d = ByteDfa::new("ab?").unwrap();
        let reps = d.horizon_representatives(0);
        let (a, ab) = (after(&d, "a"), after(&d, "ab"));
        assert_eq!(reps[a as usize], reps[ab as usize]);
        let reps = d.horizon_representatives(1);
        assert_ne!(reps[a as usize], reps[ab as usize]);
        assert_ne!(reps[0], reps[a as usize]);
    }
}
