//! The JSON-string terminal: a byte-at-a-time decoder whose whole state packs into the
//! parse item's 64-bit `aux` word.
//!
//! Layout (low to high): phase 5 bits · pending high surrogate 10 · hex accumulator 12 ·
//! DFA state 12 · character count 13 · exclusion-trie node 12. A quoted string (whose
//! value must be a span of a source) has neither pattern nor exclusions: its span
//! automaton's state takes the DFA and trie fields together (24 bits).
//!
//! Every transition is checked for *viability*: the new state must still have a way to
//! reach the closing quote (a character the pattern DFA can take within `max_chars`, a
//! hex digit that can still complete an acceptable code point). So the automaton never
//! enters a state with no continuation.

use crate::grammar::{ByteDfa, ByteSet, JsonString, SpanAutomaton};
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A pattern tail's signature (see [`ByteDfa::tail_signature`]), hashed once: one runs
/// to thousands of words, and a cache keyed by it hashed them all again at every
/// lookup, and for every key it held each time its table grew (a mask of 4 ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TailSignature {
    hash: u64,
    words: Box<[u32]>,
}

impl TailSignature {
    pub(crate) fn new(words: Box<[u32]>) -> Self {
        let mut h = rustc_hash::FxHasher::default();
        words.hash(&mut h);
        TailSignature {
            hash: h.finish(),
            words,
        }
    }
}

impl Hash for TailSignature {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Exclusion-trie node meaning "no excluded value has this prefix".
const OFF_TRIE: u32 = 0xFFF;
/// Most bytes of excluded values one string takes: its trie's nodes must stay below
/// [`OFF_TRIE`].
pub(crate) const MAX_EXCLUDED_BYTES: usize = OFF_TRIE as usize - 1;

/// A JSON string spec prepared for matching.
#[derive(Clone, Debug)]
pub(crate) struct StringProg {
    dfa: Option<Arc<ByteDfa>>,
    quote: Option<Arc<SpanAutomaton>>,
    min: u32,
    max: Option<u32>,
    /// Exclusion trie: children per node, and whether a node ends an excluded value
    /// (shared: masks copy the program with other bounds).
    trie: Arc<Vec<(FxHashMap<u8, u32>, bool)>>,
    /// See [`JsonString::object_key`]: read by the matcher, not by the string's steps.
    pub object_key: bool,
}

/// A shared DFA's bytes, counted the first time it is met.
pub(crate) fn dfa_bytes(d: &Arc<ByteDfa>, seen: &mut crate::heap::Seen) -> usize {
    if seen.first(Arc::as_ptr(d)) {
        std::mem::size_of::<ByteDfa>() + d.heap_bytes()
    } else {
        0
    }
}

/// Result of feeding one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StrStep {
    /// Still inside the string, in this state.
    Inside(u64),
    /// The closing quote was consumed.
    Closed,
    /// The byte is not allowed.
    Dead,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct St {
    phase: u32,
    hi: u32,
    acc: u32,
    dfa: u32,
    count: u32,
    excl: u32,
}

// Phases.
const BEFORE_OPEN: u32 = 0;
const NORMAL: u32 = 1;
const BACKSLASH: u32 = 2;
const HEX0: u32 = 3; // 3..=6: first \u, k digits read
const EXPECT_BS_LOW: u32 = 7;
const EXPECT_U_LOW: u32 = 8;
const LOW_HEX0: u32 = 9; // 9..=12: low-surrogate \u, k digits read
const CONT1: u32 = 13; // 13..=15: 1..=3 continuation bytes of any value
const CONT_E0: u32 = 16;
const CONT_ED: u32 = 17;
const CONT_F0: u32 = 18;
const CONT_F4: u32 = 19;

impl St {
    fn pack(self) -> u64 {
        u64::from(self.phase)
            | u64::from(self.hi) << 5
            | u64::from(self.acc) << 15
            | u64::from(self.dfa) << 27
            | u64::from(self.count) << 39
            | u64::from(self.excl) << 52
    }

    fn unpack(a: u64) -> St {
        St {
            phase: (a & 0x1F) as u32,
            hi: (a >> 5 & 0x3FF) as u32,
            acc: (a >> 15 & 0xFFF) as u32,
            dfa: (a >> 27 & 0xFFF) as u32,
            count: (a >> 39 & 0x1FFF) as u32,
            excl: (a >> 52 & 0xFFF) as u32,
        }
    }
}

fn hex_val(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

impl StringProg {
    /// Heap bytes of the exclusion trie and, the first time it is met, the pattern.
    pub(crate) fn heap_bytes(&self, seen: &mut crate::heap::Seen) -> usize {
        use crate::heap::{map, vec};
        let trie = vec(&self.trie) + self.trie.iter().map(|(m, _)| map(m)).sum::<usize>();
        let quote = self.quote.as_ref().map_or(0, |q| {
            if seen.first(Arc::as_ptr(q)) {
                q.heap_bytes()
            } else {
                0
            }
        });
        trie + quote + self.dfa.as_ref().map_or(0, |d| dfa_bytes(d, seen))
    }

    pub(crate) fn new(spec: &JsonString) -> Self {
        let mut trie: Vec<(FxHashMap<u8, u32>, bool)> = vec![(FxHashMap::default(), false)];
        for v in &spec.exclude {
            let mut n = 0usize;
            for &b in v {
                n = match trie[n].0.get(&b) {
                    Some(&c) => c as usize,
                    None => {
                        trie.push((FxHashMap::default(), false));
                        let c = trie.len() - 1;
                        trie[n].0.insert(b, c as u32);
                        c
                    }
                };
            }
            trie[n].1 = true;
        }
        StringProg {
            dfa: spec.pattern.clone(),
            quote: spec.quote.clone(),
            min: spec.min_chars,
            max: spec.max_chars,
            trie: Arc::new(trie),
            object_key: spec.object_key,
        }
    }

    /// Whether some value is excluded (the empty one too: a root that ends a value).
    fn has_exclusions(&self) -> bool {
        self.trie.len() > 1 || self.trie[0].1
    }

    /// Whether the value read so far (state `aux`) begins one the string excludes.
    pub(crate) fn on_excluded(aux: u64) -> bool {
        St::unpack(aux).excl != OFF_TRIE
    }

    /// In a plain phase, the bytes after which state `aux` may still be on a value the
    /// string excludes, or closes (the exclusion trie's next bytes, the backslash, the
    /// quote); `None` inside an escape or a UTF-8 sequence, where any byte may.
    pub(crate) fn excluded_next(&self, aux: u64) -> Option<impl Iterator<Item = u8> + '_> {
        let s = St::unpack(aux);
        (s.phase == NORMAL && s.excl != OFF_TRIE).then(|| {
            let next = self.trie[s.excl as usize].0.keys().copied();
            next.chain([b'"', b'\\'])
        })
    }

    /// Whether `decoded` is one of the values the string excludes.
    pub(crate) fn excludes(&self, decoded: &[u8]) -> bool {
        self.ends_excluded(self.excl_after(0, decoded))
    }

    /// The exclusion-trie node after `decoded` bytes from node `at` ([`OFF_TRIE`] once
    /// no excluded value begins so).
    #[inline]
    fn excl_after(&self, at: u32, decoded: &[u8]) -> u32 {
        let mut n = at;
        for b in decoded {
            if n == OFF_TRIE {
                break;
            }
            n = self.trie[n as usize].0.get(b).copied().unwrap_or(OFF_TRIE);
        }
        n
    }

    /// Whether exclusion-trie node `n` ends an excluded value.
    fn ends_excluded(&self, n: u32) -> bool {
        n != OFF_TRIE && self.trie[n as usize].1
    }

    /// Whether the string has neither a pattern nor exclusions (length bounds allowed):
    /// such strings behave the same in every grammar.
    pub(crate) fn is_unpatterned(&self) -> bool {
        self.dfa.is_none() && self.quote.is_none() && !self.has_exclusions()
    }

    /// The pattern's DFA, for a string with a pattern and nothing else shaping its
    /// masks besides length bounds (no exclusions, no quote).
    pub(crate) fn pattern_only(&self) -> Option<&Arc<ByteDfa>> {
        self.dfa
            .as_ref()
            .filter(|_| self.quote.is_none() && !self.has_exclusions())
    }

    /// Whether the value must be a span of a source (its masks are walked directly: a
    /// span automaton has as many states as its source has bytes, too many to memoise).
    pub(crate) fn is_quote(&self) -> bool {
        self.quote.is_some()
    }

    /// A quoted string's state just past its opening quote, where its first mask
    /// inside walks the vocabulary through every span of the source (see
    /// [`super::quoted`]); `None` for other strings.
    pub(crate) fn quote_opened(&self) -> Option<u64> {
        self.quote.as_ref()?;
        match self.step(0, b'"') {
            StrStep::Inside(a) => Some(a),
            _ => None,
        }
    }

    /// For a quoted string in state `aux`: every byte a token may begin with (bit `b`
    /// of word `b / 64`), a superset of those [`Self::step`] takes. At a character
    /// boundary that is the span's raw-writable successors, the escape and the closing
    /// quote; inside a raw UTF-8 character, the span's successors. `None` inside an
    /// escape (every byte must be tried) and for other strings.
    pub(crate) fn quote_first_bytes(&self, aux: u64) -> Option<[u64; 4]> {
        let q = self.quote.as_ref()?;
        let s = St::unpack(aux);
        let mut set = [0u64; 4];
        let mut add = |b: u8| set[usize::from(b >> 6)] |= 1 << (b & 63);
        match s.phase {
            NORMAL => {
                // Control characters, quotes and backslashes are written as escapes.
                q.successors(Self::span(&s), |b| {
                    if b >= 0x20 && b != b'"' && b != b'\\' {
                        add(b)
                    }
                });
                add(b'"');
                add(b'\\');
            }
            CONT1..=CONT_F4 => q.successors(Self::span(&s), &mut add),
            _ => return None,
        }
        Some(set)
    }

    /// A superset of the bytes [`step`](Self::step) takes from `aux`, found without
    /// stepping the decoder: the state table skips every other byte unstepped, and
    /// most of a token trie's bytes are dead below a string's prefixes.
    pub(crate) fn first_bytes(&self, aux: u64) -> ByteSet {
        let s = St::unpack(aux);
        // Raw bytes go to the pattern as they are; a quote, a backslash or an escape's
        // bytes do not.
        let raw = |lo: u8, hi: u8| {
            let set = ByteSet::range(lo, hi);
            match &self.dfa {
                Some(d) => set.intersect(&d.live_bytes(s.dfa)),
                None => set,
            }
        };
        if self.quote.is_some() && s.phase != BEFORE_OPEN {
            return self
                .quote_first_bytes(aux)
                .map_or(ByteSet([u64::MAX; 4]), ByteSet);
        }
        match s.phase {
            BEFORE_OPEN => ByteSet::of(b"\""),
            NORMAL => raw(0x20, 0x7F)
                .union(&raw(0xC2, 0xF4))
                .union(&ByteSet::of(b"\"\\")),
            BACKSLASH => ByteSet::of(b"\"\\/bfnrtu"),
            HEX0..=6 | LOW_HEX0..=12 => ByteSet::of(b"0123456789abcdefABCDEF"),
            EXPECT_BS_LOW => ByteSet::of(b"\\"),
            EXPECT_U_LOW => ByteSet::of(b"u"),
            CONT_E0 => raw(0xA0, 0xBF),
            CONT_ED => raw(0x80, 0x9F),
            CONT_F0 => raw(0x90, 0xBF),
            CONT_F4 => raw(0x80, 0x8F),
            CONT1..=15 => raw(0x80, 0xBF),
            _ => ByteSet([u64::MAX; 4]),
        }
    }

    /// How many characters written raw (see [`ByteDfa::is_raw_universal`]) may follow
    /// state `aux`, in any order, and stay inside the string: none unless at a
    /// character boundary, without a quote, and with a pattern (if any) that cannot
    /// refuse them; then as many as the upper bound leaves once the pattern's longest
    /// way to acceptance is set aside (`u32::MAX` without one). Exclusions and a lower
    /// bound only decide where the string may close.
    pub(crate) fn raw_room(&self, aux: u64) -> u32 {
        let s = St::unpack(aux);
        let raw = s.phase == NORMAL
            && self.quote.is_none()
            && self.dfa.as_ref().is_none_or(|d| d.is_raw_universal(s.dfa));
        if !raw {
            return 0;
        }
        let need = self.dfa.as_ref().map_or(0, |d| d.max_min_chars_to_accept());
        self.max
            .map_or(u32::MAX, |m| m.saturating_sub(s.count.saturating_add(need)))
    }

    /// The span automaton's state in `s` (quoted strings only).
    fn span(s: &St) -> u32 {
        s.dfa | s.excl << 12
    }

    fn with_span(s: St, q: u32) -> St {
        St {
            dfa: q & 0xFFF,
            excl: q >> 12 & 0xFFF,
            ..s
        }
    }

    /// Re-expresses state `aux` relative to its character count: the bounds still to
    /// meet (`min`, `max`, clamped where no single token of at most `horizon` bytes can
    /// tell the difference) and the state with its count reset. Two states with equal
    /// canonical forms allow exactly the same tokens, so, e.g., the first 40 characters
    /// of a `maxLength: 60` string share one mask.
    pub(crate) fn canonical(&self, aux: u64, horizon: u32) -> (u32, Option<u32>, u64) {
        let s = St::unpack(aux);
        let min = self.min.saturating_sub(s.count).min(horizon + 1);
        let need = self.dfa.as_ref().map_or(0, |d| d.max_min_chars_to_accept());
        let max = self
            .max
            .map(|m| m - s.count)
            .filter(|&m| m <= horizon.saturating_add(need));
        (min, max, St { count: 0, ..s }.pack())
    }

    /// Whether byte `b` in state `aux` begins a character of the decoded value (a raw
    /// character or an escape); the closing quote does not.
    pub(crate) fn starts_char(aux: u64, b: u8) -> bool {
        St::unpack(aux).phase == NORMAL && b != b'"'
    }

    /// Whether `aux` is inside an escape, whose character the decoder counts only once
    /// the escape is complete.
    pub(crate) fn in_escape(aux: u64) -> bool {
        matches!(St::unpack(aux).phase, BACKSLASH..=12)
    }

    /// The plain string (no pattern, no exclusions, same bounds) and state `aux` mapped
    /// into it, if from `aux` this string takes exactly the bytes the plain one takes
    /// until it closes: exclusions only decide which values may close, and so does a
    /// pattern whose DFA sits in a universal state (see [`ByteDfa::is_universal`]), as an
    /// unanchored pattern's does before and after its match. Only at a character
    /// boundary (not inside a raw UTF-8 sequence), where universality is defined; the
    /// caller must rule out an upper length bound, which a pattern's shortest
    /// completion would tighten.
    pub(crate) fn as_plain(&self, aux: u64) -> Option<(StringProg, u64)> {
        let s = St::unpack(aux);
        if self.quote.is_some() {
            return None;
        }
        if let Some(d) = &self.dfa {
            if (CONT1..=CONT_F4).contains(&s.phase) || !d.is_universal(s.dfa) {
                return None;
            }
        }
        // Built field by field: `..self.clone()` would copy the exclusion trie only to
        // drop it, on every mask of an open object's extra key.
        let prog = StringProg {
            dfa: None,
            quote: None,
            min: self.min,
            max: self.max,
            trie: Arc::new(vec![(FxHashMap::default(), false)]),
            object_key: false,
        };
        let excl = if s.phase == BEFORE_OPEN { 0 } else { OFF_TRIE };
        Some((prog, St { excl, dfa: 0, ..s }.pack()))
    }

    /// Whether this string, without bounds, pattern or quote, in state `aux`, closes on
    /// `bytes` (ending in the closing quote), when the plain string does and no escape
    /// is among them: then only the exclusions can refuse, read off their trie by the raw
    /// bytes. `None` where that shortcut does not apply.
    pub(crate) fn closes_unescaped(&self, aux: u64, bytes: &[u8]) -> Option<bool> {
        let s = St::unpack(aux);
        let (body, last) = bytes.split_at(bytes.len().checked_sub(1)?);
        let plain_phase = s.phase == NORMAL || (CONT1..=CONT_F4).contains(&s.phase);
        if self.dfa.is_some()
            || self.quote.is_some()
            || self.min > 0
            || self.max.is_some()
            || !plain_phase
            || last != b"\""
            || body.contains(&b'\\')
        {
            return None;
        }
        Some(!self.ends_excluded(self.excl_after(s.excl, body)))
    }

    /// [`as_plain`](Self::as_plain) where the length bounds may stay: the string has no
    /// exclusions and its pattern is met for good from `aux` (see
    /// [`ByteDfa::is_settled`]), so it takes and closes exactly as the plain one does.
    pub(crate) fn as_settled(&self, aux: u64) -> Option<(StringProg, u64)> {
        let (d, s) = (self.dfa.as_ref()?, St::unpack(aux).dfa);
        // Acceptance first: it is a lookup, settledness is derived on first use.
        if self.has_exclusions() || !d.is_accepting(s) || !d.is_settled(s) {
            return None;
        }
        self.as_plain(aux)
    }

    /// What decides this string's masks from state `aux` besides the length bounds:
    /// the signature of its pattern's tail from there (see [`ByteDfa::tail_signature`],
    /// at most `limit` DFA states) and the decoder state without the pattern's. `None`
    /// with exclusions (which the key does not capture), without a pattern, or for a
    /// larger tail.
    pub(crate) fn tail_key(&self, aux: u64, limit: usize) -> Option<(TailSignature, u64)> {
        let d = self.dfa.as_ref()?;
        if self.has_exclusions() {
            return None;
        }
        let s = St::unpack(aux);
        let sig = d.tail_signature(s.dfa, limit)?;
        Some((TailSignature::new(sig), St { dfa: 0, ..s }.pack()))
    }

    /// The same string with other length bounds (for computing canonical masks).
    pub(crate) fn with_bounds(&self, min: u32, max: Option<u32>) -> StringProg {
        StringProg {
            min,
            max,
            ..self.clone()
        }
    }

    /// Whether `aux` is past the opening quote (inside the string).
    pub(crate) fn is_inside(aux: u64) -> bool {
        St::unpack(aux).phase != BEFORE_OPEN
    }

    /// Feeds one byte to the string in state `aux` (0 = before the opening quote).
    pub(crate) fn step(&self, aux: u64, b: u8) -> StrStep {
        let s = St::unpack(aux);
        let next = match s.phase {
            // With nothing excluded the trie is off from the start (one state fewer).
            BEFORE_OPEN if self.quote.is_some() => (b == b'"')
                .then(|| Self::with_span(St { phase: NORMAL, ..s }, 0))
                .filter(|n| self.fits(n)),
            BEFORE_OPEN => (b == b'"').then_some(St {
                phase: NORMAL,
                excl: if self.has_exclusions() { 0 } else { OFF_TRIE },
                ..s
            }),
            NORMAL => match b {
                b'"' => {
                    return if self.can_close(&s) {
                        StrStep::Closed
                    } else {
                        StrStep::Dead
                    }
                }
                b'\\' => Some(St {
                    phase: BACKSLASH,
                    ..s
                })
                .filter(|n| self.range_viable(n, 0, 0x10FFFF)),
                0..=0x1F => None,
                0x20..=0x7F => self.feed_char(s, u32::from(b)),
                _ => self.lead_byte(s, b),
            },
            BACKSLASH => match b {
                b'"' | b'\\' | b'/' => self.feed_char(s, u32::from(b)),
                b'b' => self.feed_char(s, 8),
                b'f' => self.feed_char(s, 12),
                b'n' => self.feed_char(s, 10),
                b'r' => self.feed_char(s, 13),
                b't' => self.feed_char(s, 9),
                b'u' => self.hex_state(St {
                    phase: HEX0,
                    acc: 0,
                    ..s
                }),
                _ => None,
            },
            HEX0..=6 | LOW_HEX0..=12 => {
                let Some(d) = hex_val(b) else {
                    return StrStep::Dead;
                };
                let (base, k) = if s.phase >= LOW_HEX0 {
                    (LOW_HEX0, s.phase - LOW_HEX0)
                } else {
                    (HEX0, s.phase - HEX0)
                };
                let acc = s.acc << 4 | d;
                if k < 3 {
                    self.hex_state(St {
                        phase: s.phase + 1,
                        acc,
                        ..s
                    })
                } else if base == LOW_HEX0 {
                    if (0xDC00..=0xDFFF).contains(&acc) {
                        self.feed_char(
                            St { hi: 0, acc: 0, ..s },
                            0x10000 + (s.hi << 10) + (acc - 0xDC00),
                        )
                    } else {
                        None
                    }
                } else if (0xD800..=0xDBFF).contains(&acc) {
                    let n = St {
                        phase: EXPECT_BS_LOW,
                        hi: acc - 0xD800,
                        acc: 0,
                        ..s
                    };
                    self.hex_state(n)
                } else if (0xDC00..=0xDFFF).contains(&acc) {
                    None
                } else {
                    self.feed_char(St { acc: 0, ..s }, acc)
                }
            }
            EXPECT_BS_LOW => (b == b'\\').then_some(St {
                phase: EXPECT_U_LOW,
                ..s
            }),
            EXPECT_U_LOW => (b == b'u').then_some(St {
                phase: LOW_HEX0,
                acc: 0,
                ..s
            }),
            CONT1..=CONT_F4 => {
                let (lo, hi, then) = match s.phase {
                    CONT1 => (0x80, 0xBF, NORMAL),
                    14 => (0x80, 0xBF, CONT1),
                    15 => (0x80, 0xBF, 14),
                    CONT_E0 => (0xA0, 0xBF, CONT1),
                    CONT_ED => (0x80, 0x9F, CONT1),
                    CONT_F0 => (0x90, 0xBF, 14),
                    _ => (0x80, 0x8F, 14),
                };
                if !(lo..=hi).contains(&b) {
                    return StrStep::Dead;
                }
                // The character was counted at its lead byte, but which character it
                // is decides how many the pattern still needs within `max`.
                self.feed_byte(St { phase: then, ..s }, b)
                    .filter(|n| self.fits(n))
            }
            _ => None,
        };
        next.map_or(StrStep::Dead, |n| StrStep::Inside(n.pack()))
    }

    /// The fewest bytes from state `aux` up to and including the closing quote (the
    /// opening quote too, before it). `None` if the string cannot close, or if the search
    /// meets more than `limit` states before it knows.
    ///
    /// A `\uXXXX` escape the search begins is only tried for U+0000..U+001F: any other
    /// character has a shorter spelling (raw UTF-8, `\"`, `\\`) that the decoder reads
    /// identically, so no shortest completion uses one. An escape under way in `aux` is
    /// finished with every code point it can still spell, except that one not yet
    /// committed to a surrogate pair does not start one (a supplementary character as the
    /// only way on is then missed: `None`); a half-written pair may exceed the limit.
    pub(crate) fn min_bytes_to_close(&self, aux: u64, limit: usize) -> Option<u32> {
        let s = St::unpack(aux);
        if self.is_unpatterned() {
            match s.phase {
                BEFORE_OPEN => return Some(self.min + 2),
                NORMAL => return Some(self.min.saturating_sub(s.count) + 1),
                _ => {}
            }
        }
        // Keyed by state and whether a `\u` escape would be restricted: not while the
        // one under way at the start is being finished.
        let in_u = Self::in_escape;
        let mut seen: rustc_hash::FxHashSet<(u64, bool)> = rustc_hash::FxHashSet::default();
        let start = (aux, !in_u(aux));
        seen.insert(start);
        let mut frontier = vec![start];
        let mut level = 0u32;
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for &(a, restricted) in &frontier {
                for b in search_bytes(St::unpack(a), restricted) {
                    match self.step(a, b) {
                        StrStep::Closed => return Some(level + 1),
                        StrStep::Inside(n) => {
                            let key = (n, restricted || !in_u(n));
                            if seen.insert(key) {
                                next.push(key);
                            }
                        }
                        StrStep::Dead => {}
                    }
                }
            }
            if seen.len() > limit {
                return None;
            }
            frontier = next;
            level += 1;
        }
        None
    }

    fn can_close(&self, s: &St) -> bool {
        if self.quote.is_some() {
            return s.count >= self.min;
        }
        s.count >= self.min
            && self.dfa.as_ref().is_none_or(|d| d.is_accepting(s.dfa))
            && !self.ends_excluded(s.excl)
    }

    /// Advances the pattern DFA and the exclusion trie by one byte of the decoded value.
    fn feed_byte(&self, mut s: St, b: u8) -> Option<St> {
        if let Some(q) = &self.quote {
            return Some(Self::with_span(s, q.next(Self::span(&s), b)?));
        }
        if let Some(d) = &self.dfa {
            s.dfa = d.next(s.dfa, b)?;
        }
        s.excl = self.excl_after(s.excl, &[b]);
        Some(s)
    }

    /// Counts one more character, refusing if `max` would be exceeded or the pattern
    /// could no longer finish within it.
    fn count_char(&self, mut s: St) -> Option<St> {
        match self.max {
            Some(_) => {
                s.count += 1;
                self.fits(&s).then_some(s)
            }
            None => {
                s.count = (s.count + 1).min(self.min);
                self.fits(&s).then_some(s)
            }
        }
    }

    /// Whether `s` can still finish: within `max`, and for a quote, with room in the
    /// source for the characters `min` still asks.
    fn fits(&self, s: &St) -> bool {
        self.fits_max(s)
            && self
                .quote
                .as_ref()
                .is_none_or(|q| s.count >= self.min || s.count + q.room(Self::span(s)) >= self.min)
    }

    /// Whether the pattern can still finish within `max` from `s` (its count included).
    fn fits_max(&self, s: &St) -> bool {
        let need = self
            .dfa
            .as_ref()
            .map_or(0, |d| d.min_chars_to_accept(s.dfa));
        self.max.is_none_or(|max| s.count + need <= max)
    }

    /// Feeds a whole decoded character (from an escape or a raw ASCII byte).
    fn feed_char(&self, s: St, c: u32) -> Option<St> {
        let mut buf = [0u8; 4];
        let mut s = St { phase: NORMAL, ..s };
        for &b in char::from_u32(c)?.encode_utf8(&mut buf).as_bytes() {
            s = self.feed_byte(s, b)?;
        }
        self.count_char(s)
    }

    fn lead_byte(&self, s: St, b: u8) -> Option<St> {
        let phase = match b {
            0xC2..=0xDF => CONT1,
            0xE0 => CONT_E0,
            0xED => CONT_ED,
            0xE1..=0xEF => 14,
            0xF0 => CONT_F0,
            0xF1..=0xF3 => 15,
            0xF4 => CONT_F4,
            _ => return None,
        };
        let s = self.feed_byte(St { phase, ..s }, b)?;
        self.count_char(s)
    }

    /// Keeps a mid-escape state only if some code point it could still spell is viable.
    fn hex_state(&self, s: St) -> Option<St> {
        let ok = match s.phase {
            HEX0..=6 => {
                let rem = 4 * (4 - (s.phase - HEX0));
                let (lo, hi) = (s.acc << rem, ((s.acc + 1) << rem) - 1);
                let clip = |a: u32, b: u32| (lo.max(a), hi.min(b));
                let bmp = [clip(0, 0xD7FF), clip(0xE000, 0xFFFF)];
                let (h0, h1) = clip(0xD800, 0xDBFF);
                bmp.iter()
                    .any(|&(a, b)| a <= b && self.range_viable(&s, a, b))
                    || (h0 <= h1
                        && self.range_viable(
                            &s,
                            0x10000 + ((h0 - 0xD800) << 10),
                            0x10000 + ((h1 - 0xD800) << 10) + 0x3FF,
                        ))
            }
            EXPECT_BS_LOW | EXPECT_U_LOW | LOW_HEX0..=12 => {
                let (k, acc) = if s.phase >= LOW_HEX0 {
                    (s.phase - LOW_HEX0, s.acc)
                } else {
                    (0, 0)
                };
                let rem = 4 * (4 - k);
                let (lo, hi) = (
                    (acc << rem).max(0xDC00),
                    (((acc + 1) << rem) - 1).min(0xDFFF),
                );
                let base = 0x10000 + (s.hi << 10);
                lo <= hi && self.range_viable(&s, base + lo - 0xDC00, base + hi - 0xDC00)
            }
            _ => true,
        };
        ok.then_some(s)
    }

    /// Whether some character in `lo..=hi` could be added to `s` and still finish.
    fn range_viable(&self, s: &St, lo: u32, hi: u32) -> bool {
        if self.max.is_some_and(|m| s.count >= m) {
            return false;
        }
        if let Some(q) = &self.quote {
            return self.span_range_viable(q, s, lo, hi);
        }
        let Some(d) = &self.dfa else { return true };
        // Utf8Sequences skips the surrogate block inside a range, but not at its ends.
        let lo = if (0xD800..=0xDFFF).contains(&lo) {
            0xE000
        } else {
            lo
        };
        let hi = if (0xD800..=0xDFFF).contains(&hi) {
            0xD7FF
        } else {
            hi
        };
        let (Some(a), Some(b)) = (char::from_u32(lo), char::from_u32(hi)) else {
            return false;
        };
        if a > b {
            return false;
        }
        for seq in Utf8Sequences::new(a, b) {
            let mut states = vec![s.dfa];
            for r in seq.as_slice() {
                let mut nxt: Vec<u32> = Vec::new();
                for &st in &states {
                    for byte in r.start..=r.end {
                        if let Some(t) = d.next(st, byte) {
                            if !nxt.contains(&t) {
                                nxt.push(t);
                            }
                        }
                    }
                }
                states = nxt;
            }
            let room = self.max.map_or(u32::MAX, |m| m - s.count - 1);
            if states.iter().any(|&t| d.min_chars_to_accept(t) <= room) {
                return true;
            }
        }
        false
    }
}

impl StringProg {
    /// [`Self::range_viable`] for a quote: some character in `lo..=hi` follows the span
    /// in the source, leaving room for what `min` still asks.
    fn span_range_viable(&self, q: &SpanAutomaton, s: &St, lo: u32, hi: u32) -> bool {
        let lo = if (0xD800..=0xDFFF).contains(&lo) {
            0xE000
        } else {
            lo
        };
        let hi = if (0xD800..=0xDFFF).contains(&hi) {
            0xD7FF
        } else {
            hi
        };
        let (Some(a), Some(b)) = (char::from_u32(lo), char::from_u32(hi)) else {
            return false;
        };
        if a > b {
            return false;
        }
        let start = Self::span(s);
        let need = self.min.saturating_sub(s.count + 1);
        if (lo, hi) == (0, 0x10FFFF) {
            // Any character (a backslash, which may still spell any): the source is
            // UTF-8 and the span ends on a character boundary, so each byte that can
            // follow it begins a whole character. One look at the span's few edges
            // instead of every UTF-8 sequence.
            let mut ok = false;
            q.successors(start, |b| {
                ok = ok || q.next(start, b).is_some_and(|t| q.room(t) >= need);
            });
            return ok;
        }
        for seq in Utf8Sequences::new(a, b) {
            let mut states = vec![start];
            for r in seq.as_slice() {
                let mut nxt: Vec<u32> = Vec::new();
                for &st in &states {
                    for byte in r.start..=r.end {
                        if let Some(t) = q.next(st, byte) {
                            if !nxt.contains(&t) {
                                nxt.push(t);
                            }
                        }
                    }
                }
                states = nxt;
                if states.is_empty() {
                    break;
                }
            }
            if states.iter().any(|&t| q.room(t) >= need) {
                return true;
            }
        }
        false
    }
}

/// The bytes worth trying in a shortest-completion search from `s`: in an escape the
/// search began (`restricted`), a `\u` escape only towards U+0000..U+001F; never a new
/// surrogate pair (see [`StringProg::min_bytes_to_close`]).
fn search_bytes(s: St, restricted: bool) -> impl Iterator<Item = u8> {
    let (lo, hi, any) = match s.phase {
        HEX0 | 4 if restricted => (b'0', b'0', true),
        5 if restricted => (b'0', b'1', true),
        // Only a high surrogate leads here, and the search never starts one.
        EXPECT_BS_LOW..=12 if restricted => (0, 0, false),
        _ => (0, 255, true),
    };
    // `\uD8`..`\uDB` would begin a surrogate pair.
    let pair_next = s.phase == 4 && s.acc == 0xD;
    (lo..=hi).filter(move |&b| {
        any && !(pair_next && matches!(b, b'8' | b'9' | b'a' | b'b' | b'A' | b'B'))
    })
}

/// Every state reached from `from` within `depth` bytes, trying every byte (for tests).
#[cfg(test)]
pub(crate) fn reachable(p: &StringProg, from: u64, depth: usize) -> Vec<u64> {
    let mut out = vec![from];
    let mut frontier = out.clone();
    for _ in 0..depth {
        let mut next = Vec::new();
        for &aux in &frontier {
            for b in 0..=255u8 {
                if let StrStep::Inside(a) = p.step(aux, b) {
                    if !out.contains(&a) {
                        out.push(a);
                        next.push(a);
                    }
                }
            }
        }
        frontier = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_signature_is_hashed_once_and_compared_in_full() {
        use std::hash::BuildHasher;
        let hash = |s: &TailSignature| rustc_hash::FxBuildHasher.hash_one(s);
        let a = TailSignature::new(vec![1, 2, 3].into());
        assert_eq!(a, TailSignature::new(vec![1, 2, 3].into()));
        assert_eq!(hash(&a), hash(&TailSignature::new(vec![1, 2, 3].into())));
        assert_ne!(a, TailSignature::new(vec![1, 2, 4].into()));
        // Equal hashes do not make equal signatures.
        let forged = TailSignature {
            hash: a.hash,
            words: vec![9].into(),
        };
        assert_eq!(hash(&forged), hash(&a));
        assert_ne!(forged, a);
    }

    fn run(p: &StringProg, input: &[u8]) -> Result<(), usize> {
        let mut aux = 0;
        for (i, &b) in input.iter().enumerate() {
            match p.step(aux, b) {
                StrStep::Inside(a) => aux = a,
                StrStep::Closed if i + 1 == input.len() => return Ok(()),
                _ => return Err(i),
            }
        }
        Err(input.len())
    }

    #[test]
    fn escapes_are_decoded_before_the_pattern() {
        let p = StringProg::new(&JsonString::matching("café\"x😀").unwrap());
        assert_eq!(run(&p, "\"café\\\"x😀\"".as_bytes()), Ok(()));
        assert_eq!(run(&p, br#""caf\u00e9\"x\ud83d\ude00""#), Ok(()));
        assert_eq!(run(&p, br#""caf\u00e8"#), Err(9));
        // The hex digit that cannot lead to é is refused as soon as it is typed.
        assert_eq!(run(&p, br#""caf\u01"#), Err(7));
    }

    #[test]
    fn lengths_count_code_points() {
        let p = StringProg::new(&JsonString::any().with_length(2, Some(3)));
        assert_eq!(run(&p, br#""a""#), Err(2));
        assert_eq!(run(&p, "\"é\\n\"".as_bytes()), Ok(()));
        assert_eq!(run(&p, br#""abc""#), Ok(()));
        assert_eq!(run(&p, br#""abcd""#), Err(4));
        // A fourth character cannot even start: the escape is refused at once.
        assert_eq!(run(&p, br#""abc\"#), Err(4));
    }

    #[test]
    fn invalid_json_strings_are_refused() {
        let p = StringProg::new(&JsonString::any());
        assert_eq!(run(&p, b"\"a\nb\""), Err(2));
        assert_eq!(run(&p, br#""\x""#), Err(2));
        assert_eq!(run(&p, br#""\udc00""#), Err(4));
        assert_eq!(run(&p, br#""\ud800x""#), Err(7));
        assert_eq!(run(&p, b"\"\xC0\x80\""), Err(1));
        assert_eq!(run(&p, b"\"\xED\xA0\x80\""), Err(2));
        assert_eq!(run(&p, br#""\u0000\/\b""#), Ok(()));
    }

    /// The state after `input` (which must stay inside the string).
    fn after(p: &StringProg, input: &[u8]) -> u64 {
        input.iter().fold(0, |aux, &b| match p.step(aux, b) {
            StrStep::Inside(a) => a,
            other => panic!("{other:?} at {b}"),
        })
    }

    #[test]
    fn shortest_completions_count_bytes_and_finish_escapes_under_way() {
        let p = StringProg::new(&JsonString::matching("abc").unwrap());
        assert_eq!(p.min_bytes_to_close(0, 1000), Some(5));
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"a"), 1000), Some(3));
        // Committed to an escape: `u0061` spells the `a`, then `bc"`.
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"\\"), 1000), Some(8));
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"\\u00"), 1000), Some(5));
        // A control character has only the long escape.
        let p = StringProg::new(&JsonString::matching("\\x01").unwrap());
        assert_eq!(p.min_bytes_to_close(0, 1000), Some(8));
        // Multi-byte characters count their bytes; lengths count characters.
        let p = StringProg::new(&JsonString::matching("é+").unwrap());
        assert_eq!(p.min_bytes_to_close(0, 1000), Some(4));
        let p = StringProg::new(&JsonString::any().with_length(3, Some(5)));
        assert_eq!(
            p.min_bytes_to_close(after(&p, "\"é".as_bytes()), 1000),
            Some(3)
        );
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"\\"), 1000), Some(4));
        // Unknown rather than guessed when the search outgrows its limit.
        let p = StringProg::new(&JsonString::matching("[a-z]{6}").unwrap());
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"\\u"), 10), None);
        assert_eq!(p.min_bytes_to_close(after(&p, b"\"\\u"), 100_000), Some(10));
    }

    #[test]
    fn a_multibyte_character_that_leaves_no_room_is_refused_at_once() {
        // `É` and `é` share their lead byte: only the second byte tells that `É`
        // leaves no room for the `é` the pattern still needs.
        let p = StringProg::new(
            &JsonString::matching("(?s:.*)(?:é)")
                .unwrap()
                .with_length(0, Some(2)),
        );
        assert_eq!(run(&p, "\"Éé\"".as_bytes()), Ok(()));
        assert_eq!(run(&p, "\"aÉ".as_bytes()), Err(3));
    }

    #[test]
    fn excluded_values() {
        let p = StringProg::new(&JsonString::excluding(["a", "ab"]));
        assert_eq!(run(&p, br#""a""#), Err(2));
        assert_eq!(run(&p, br#""ab""#), Err(3));
        assert_eq!(run(&p, br#""abc""#), Ok(()));
        assert_eq!(run(&p, br#""\u0061""#), Err(7));
        assert_eq!(run(&p, br#""b""#), Ok(()));
    }

    #[test]
    fn first_bytes_hold_every_byte_a_step_takes() {
        let source =
            crate::grammar::SpanAutomaton::new("Ab \"é\" 😀\\x", crate::grammar::Normalize::None)
                .unwrap();
        let specs = [
            JsonString::any(),
            JsonString::any().with_length(1, Some(2)),
            JsonString::matching("[0-9a-f]{2}é-x").unwrap(),
            JsonString::matching("(?s:.*)(?:^[a-c]+$)(?s:.*)").unwrap(),
            JsonString::excluding(["ab", "a\"", "é"]),
            JsonString::quoting(Arc::new(source)),
        ];
        for spec in specs {
            let p = StringProg::new(&spec);
            let states = reachable(&p, 0, 6);
            assert!(states.len() > 10, "{spec:?}: {} states", states.len());
            for aux in states {
                let first = p.first_bytes(aux);
                for b in 0..=255u8 {
                    if p.step(aux, b) != StrStep::Dead {
                        assert!(first.contains(b), "{spec:?} {aux:#x} takes {b:#x}");
                    }
                }
            }
        }
        // Not everything: a hex digit's state leaves out the other letters.
        let p = StringProg::new(&JsonString::matching("[0-9a-f]{2}").unwrap());
        let StrStep::Inside(aux) = p.step(0, b'"') else {
            panic!("the quote opens the string")
        };
        let first = p.first_bytes(aux);
        assert!(first.contains(b'a') && !first.contains(b'g') && !first.contains(b' '));
    }
}
