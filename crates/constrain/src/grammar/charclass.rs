//! Sets of bytes and of Unicode code points.
//!
//! A [`CharClass`] is a set of code points; the automaton consumes bytes, so the class is
//! lowered to the UTF-8 byte-range sequences that encode exactly its members (surrogates,
//! which UTF-8 cannot encode, are never members).

use regex_syntax::utf8::Utf8Sequences;

/// The largest Unicode scalar value.
pub(super) const MAX_CHAR: u32 = 0x10FFFF;

/// A set of bytes (256 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// The empty set.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);

    /// The set of bytes `lo..=hi`.
    pub fn range(lo: u8, hi: u8) -> Self {
        let mut s = ByteSet::EMPTY;
        s.insert_range(lo, hi);
        s
    }

    /// The set holding exactly the given bytes.
    pub fn of(bytes: &[u8]) -> Self {
        let mut s = ByteSet::EMPTY;
        for &b in bytes {
            s.insert(b);
        }
        s
    }

    /// Adds one byte.
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }

    /// Adds `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    /// Whether `b` is a member.
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] >> (b & 63) & 1 != 0
    }

    /// The bytes in both sets.
    pub fn intersect(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }

    /// The bytes in either set.
    pub fn union(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] | other.0[i]))
    }

    /// The set's one member, if it has exactly one.
    #[inline]
    pub fn single(&self) -> Option<u8> {
        let ones: u32 = self.0.iter().map(|w| w.count_ones()).sum();
        let k = self.0.iter().position(|&w| w != 0)?;
        (ones == 1).then(|| (k as u32 * 64 + self.0[k].trailing_zeros()) as u8)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// Iterates over the members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=255u8).filter(move |&b| self.contains(b))
    }
}

/// A set of Unicode scalar values, as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CharClass {
    ranges: Vec<(u32, u32)>,
}

impl CharClass {
    /// Builds a class from arbitrary inclusive ranges (unsorted, overlapping, reversed
    /// bounds swapped); surrogates and values above U+10FFFF are dropped.
    pub fn new(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut v: Vec<(u32, u32)> = Vec::new();
        for (a, b) in ranges {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            if lo > MAX_CHAR {
                continue;
            }
            let hi = hi.min(MAX_CHAR);
            // Cut out the surrogate block.
            if lo < 0xD800 {
                v.push((lo, hi.min(0xD7FF)));
            }
            if hi > 0xDFFF {
                v.push((lo.max(0xE000), hi));
            }
        }
        v.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        CharClass { ranges: merged }
    }

    /// Every Unicode scalar value (what GBNF's `.` matches).
    pub fn any() -> Self {
        CharClass::new([(0, MAX_CHAR)])
    }

    /// The class of the given characters.
    pub fn of_chars(chars: &str) -> Self {
        CharClass::new(chars.chars().map(|c| (c as u32, c as u32)))
    }

    /// The complement within the Unicode scalar values.
    pub fn negate(&self) -> Self {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                out.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= MAX_CHAR {
            out.push((next, MAX_CHAR));
        }
        CharClass::new(out)
    }

    /// The ranges, sorted and disjoint.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Whether the class has no members.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `c` is a member.
    pub fn contains(&self, c: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < c);
        i < self.ranges.len() && self.ranges[i].0 <= c
    }

    /// The UTF-8 encodings of the members, as sequences of byte ranges: a byte string is
    /// the encoding of a member iff it matches exactly one of these sequences.
    pub fn utf8_sequences(&self) -> Vec<Vec<(u8, u8)>> {
        let mut out = Vec::new();
        for &(lo, hi) in &self.ranges {
            let (Some(a), Some(b)) = (char::from_u32(lo), char::from_u32(hi)) else {
                continue;
            };
            for seq in Utf8Sequences::new(a, b) {
                out.push(seq.as_slice().iter().map(|r| (r.start, r.end)).collect());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_set_names_its_one_member() {
        assert_eq!(ByteSet::of(b"q").single(), Some(b'q'));
        assert_eq!(ByteSet::of(&[0]).single(), Some(0));
        assert_eq!(ByteSet::of(&[255]).single(), Some(255));
        assert_eq!(ByteSet::of(b"ab").single(), None);
        assert_eq!(ByteSet::of(&[1, 200]).single(), None);
        assert_eq!(ByteSet::EMPTY.single(), None);
    }

    #[test]
    fn negation_skips_surrogates_and_round_trips() {
        let c = CharClass::of_chars("\"\\");
        let n = c.negate();
        assert!(!n.contains('"' as u32) && !n.contains('\\' as u32));
        assert!(n.contains('a' as u32) && n.contains(0x10FFFF) && !n.contains(0xD800));
        assert_eq!(n.negate(), c);
    }

    #[test]
    fn utf8_sequences_cover_exactly_the_members() {
        let c = CharClass::new([(0x41, 0x5A), (0xE9, 0xE9), (0x3041, 0x309F)]);
        let seqs = c.utf8_sequences();
        let matches = |s: &str| {
            let b = s.as_bytes();
            seqs.iter().any(|q| {
                q.len() == b.len() && q.iter().zip(b).all(|(&(lo, hi), &x)| lo <= x && x <= hi)
            })
        };
        assert!(matches("A") && matches("é") && matches("ぁ"));
        assert!(!matches("a") && !matches("è") && !matches("ア"));
    }
}
