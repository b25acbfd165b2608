//! Span automata: the suffix automaton of a source text, the smallest DFA whose every
//! path from the start spells a contiguous span (substring) of the source. It backs
//! [`JsonString::quote`](super::JsonString::quote): a string whose decoded value must be
//! a verbatim span of a document.
//!
//! Built online in one pass (Blumer et al.'s construction): at most `2n - 1` states and
//! `3n - 4` edges for `n` bytes, so memory and time are linear in the source. Edges are
//! per-state lists in one arena (most states have one or two), and the start state,
//! which sees every byte of the source, gets a dense table.

use std::fmt;

/// Largest source a quote is checked against, in bytes after normalisation (a state
/// must fit 23 bits of the string decoder's state word; see the JSON-string layer).
pub const MAX_QUOTE_SOURCE_BYTES: usize = 4 << 20;

/// Bit set in a state when the last value byte fed was whitespace (for
/// [`Normalize::Whitespace`], where a run of whitespace counts as one space).
const AFTER_WS: u32 = 1 << 23;
const STATE_MASK: u32 = AFTER_WS - 1;
const NONE: u32 = u32::MAX;
/// The end of an edge list (24 bits).
const END: u32 = (1 << 24) - 1;

/// How a value is compared with its source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Normalize {
    /// Byte for byte.
    #[default]
    None,
    /// A run of ASCII whitespace (space, tab, CR, LF) on either side counts as one space.
    Whitespace,
    /// ASCII letters compare without case (other characters byte for byte).
    Case,
}

impl Normalize {
    /// The option's name in the schema keyword.
    pub fn name(self) -> &'static str {
        match self {
            Normalize::None => "none",
            Normalize::Whitespace => "whitespace",
            Normalize::Case => "case",
        }
    }

    /// The source as the automaton compares it.
    pub fn apply(self, text: &str) -> Vec<u8> {
        match self {
            Normalize::None => text.as_bytes().to_vec(),
            Normalize::Case => text.as_bytes().to_ascii_lowercase(),
            Normalize::Whitespace => {
                let mut out = Vec::with_capacity(text.len());
                let mut ws = false;
                for &b in text.as_bytes() {
                    if is_ws(b) {
                        if !ws {
                            out.push(b' ');
                        }
                        ws = true;
                    } else {
                        out.push(b);
                        ws = false;
                    }
                }
                out
            }
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The suffix automaton of one source text, under one normalisation.
pub struct SpanAutomaton {
    normalize: Normalize,
    /// The normalised source (for equality, and for callers that check spans).
    text: Vec<u8>,
    /// Per state: its first edge (an index into `edges`, or [`END`]) and how many
    /// characters can still follow the span it stands for. Side by side, since a step
    /// reads both.
    nodes: Vec<(u32, u32)>,
    /// Edge arena: (target, next edge of the same state | byte << 24); 8 bytes an
    /// edge, since at most `3n` of them fit 24 bits for [`MAX_QUOTE_SOURCE_BYTES`].
    edges: Vec<(u32, u32)>,
    /// The start state's edges, dense: it sees every byte of the source.
    root: Box<[u32; 256]>,
}

impl PartialEq for SpanAutomaton {
    fn eq(&self, o: &Self) -> bool {
        self.normalize == o.normalize && self.text == o.text
    }
}

impl fmt::Debug for SpanAutomaton {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanAutomaton")
            .field("normalize", &self.normalize)
            .field("source_bytes", &self.text.len())
            .field("states", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

/// One state under construction. Its fields side by side: the online construction
/// walks suffix links reading all of them, and the automaton of a 1 MB source is far
/// larger than any cache, so each state visited is one memory access rather than four.
#[derive(Clone, Copy)]
struct State {
    len: u32,
    link: u32,
    /// First edge in the arena ([`END`]: none).
    head: u32,
    /// End (byte index) of the state's first occurrence.
    end: u32,
}

/// The automaton under construction: edges as per-state linked lists in one arena.
struct Builder {
    states: Vec<State>,
    edges: Vec<(u32, u32)>,
    root: Box<[u32; 256]>,
}

impl Builder {
    /// The edge of `s` on `b` (an index into `edges`), for a state other than the root.
    fn find(&self, s: u32, b: u8) -> u32 {
        let mut e = self.states[s as usize].head;
        while e != END {
            let link = self.edges[e as usize].1;
            if (link >> 24) as u8 == b {
                return e;
            }
            e = link & END;
        }
        NONE
    }

    fn get(&self, s: u32, b: u8) -> u32 {
        if s == 0 {
            return self.root[b as usize];
        }
        match self.find(s, b) {
            NONE => NONE,
            e => self.edges[e as usize].0,
        }
    }

    /// Adds an edge `s` is known not to have.
    fn push(&mut self, s: u32, b: u8, to: u32) {
        if s == 0 {
            self.root[b as usize] = to;
            return;
        }
        let st = &mut self.states[s as usize];
        self.edges.push((to, st.head | u32::from(b) << 24));
        st.head = (self.edges.len() - 1) as u32;
    }

    fn add_state(&mut self, len: u32, end: u32) -> u32 {
        self.states.push(State {
            len,
            link: NONE,
            head: END,
            end,
        });
        (self.states.len() - 1) as u32
    }
}

impl SpanAutomaton {
    /// The automaton of `source` under `normalize`; refused above [`MAX_QUOTE_SOURCE_BYTES`].
    pub fn new(source: &str, normalize: Normalize) -> Result<Self, String> {
        let text = normalize.apply(source);
        if text.len() > MAX_QUOTE_SOURCE_BYTES {
            return Err(format!(
                "the source is {} bytes; the most a quote can be checked against is {MAX_QUOTE_SOURCE_BYTES}",
                text.len()
            ));
        }
        let n = text.len();
        let mut b = Builder {
            states: Vec::with_capacity(2 * n + 1),
            edges: Vec::with_capacity(3 * n),
            root: Box::new([NONE; 256]),
        };
        b.add_state(0, 0);
        let mut last = 0u32;
        for (i, &c) in text.iter().enumerate() {
            let cur = b.add_state(b.states[last as usize].len + 1, i as u32);
            let mut p = last;
            while p != NONE && b.get(p, c) == NONE {
                b.push(p, c, cur);
                p = b.states[p as usize].link;
            }
            if p == NONE {
                b.states[cur as usize].link = 0;
            } else {
                let q = b.get(p, c);
                let (p_len, q_st) = (b.states[p as usize].len, b.states[q as usize]);
                if p_len + 1 == q_st.len {
                    b.states[cur as usize].link = q;
                } else {
                    let clone = b.add_state(p_len + 1, q_st.end);
                    let mut e = q_st.head;
                    while e != END {
                        let (to, link) = b.edges[e as usize];
                        b.push(clone, (link >> 24) as u8, to);
                        e = link & END;
                    }
                    b.states[clone as usize].link = q_st.link;
                    // Redirect `p`'s edge on `c` (and its suffix links') from `q` to the clone.
                    while p != NONE {
                        if p == 0 {
                            if b.root[c as usize] != q {
                                break;
                            }
                            b.root[c as usize] = clone;
                        } else {
                            let e = b.find(p, c);
                            if e == NONE || b.edges[e as usize].0 != q {
                                break;
                            }
                            b.edges[e as usize].0 = clone;
                        }
                        p = b.states[p as usize].link;
                    }
                    b.states[q as usize].link = clone;
                    b.states[cur as usize].link = clone;
                }
            }
            last = cur;
        }
        Ok(Self::finish(b, text, normalize))
    }

    /// Counts what can follow each state's span, and drops what only the construction
    /// needed.
    fn finish(b: Builder, text: Vec<u8>, normalize: Normalize) -> Self {
        // Characters (UTF-8 lead bytes) after each byte of the source.
        let mut after = vec![0u32; text.len()];
        let mut count = 0u32;
        for i in (0..text.len()).rev() {
            after[i] = count;
            if text[i] & 0xC0 != 0x80 {
                count += 1;
            }
        }
        let nodes = b
            .states
            .iter()
            .enumerate()
            .map(|(s, st)| {
                (
                    st.head,
                    if s == 0 {
                        count
                    } else {
                        after[st.end as usize]
                    },
                )
            })
            .collect();
        SpanAutomaton {
            normalize,
            text,
            nodes,
            edges: b.edges,
            root: b.root,
        }
    }

    /// The normalisation values and source are compared under.
    pub fn normalize(&self) -> Normalize {
        self.normalize
    }

    /// The normalised source.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Number of states.
    pub fn states(&self) -> usize {
        self.nodes.len()
    }

    /// Heap bytes of the tables.
    pub(crate) fn heap_bytes(&self) -> usize {
        use crate::heap::vec;
        vec(&self.text) + vec(&self.nodes) + vec(&self.edges) + 256 * 4
    }

    /// The start state (the empty span).
    pub fn start(&self) -> u32 {
        0
    }

    fn raw_next(&self, s: u32, b: u8) -> Option<u32> {
        if s == 0 {
            let t = self.root[b as usize];
            return (t != NONE).then_some(t);
        }
        let mut e = self.nodes[s as usize].0;
        while e != END {
            let (to, link) = self.edges[e as usize];
            if (link >> 24) as u8 == b {
                return Some(to);
            }
            e = link & END;
        }
        None
    }

    /// The state after one more byte of the (decoded) value, `None` when the value so
    /// far is no longer a span.
    #[inline]
    pub fn next(&self, state: u32, b: u8) -> Option<u32> {
        let s = state & STATE_MASK;
        match self.normalize {
            Normalize::Whitespace if is_ws(b) => {
                if state & AFTER_WS != 0 {
                    Some(state)
                } else {
                    self.raw_next(s, b' ').map(|t| t | AFTER_WS)
                }
            }
            Normalize::Case => self.raw_next(s, b.to_ascii_lowercase()),
            _ => self.raw_next(s, b),
        }
    }

    /// Calls `f` with every byte `b` for which [`Self::next`]`(state, b)` is a state, in
    /// no particular order and each once: the state's own edges, widened by the
    /// normalisation (an upper-case letter for a lower-case edge; every whitespace byte
    /// for a space edge, or after whitespace).
    pub fn successors(&self, state: u32, mut f: impl FnMut(u8)) {
        let s = state & STATE_MASK;
        let ws_run = self.normalize == Normalize::Whitespace && state & AFTER_WS != 0;
        let mut each = |b: u8| match self.normalize {
            Normalize::Case if b.is_ascii_lowercase() => {
                f(b);
                f(b.to_ascii_uppercase());
            }
            // After whitespace every whitespace byte stays put: given below, once.
            Normalize::Whitespace if b == b' ' && ws_run => {}
            Normalize::Whitespace if b == b' ' => {
                for w in [b' ', b'\t', b'\n', b'\r'] {
                    f(w);
                }
            }
            _ => f(b),
        };
        if s == 0 {
            for (b, &t) in self.root.iter().enumerate() {
                if t != NONE {
                    each(b as u8);
                }
            }
        } else {
            let mut e = self.nodes[s as usize].0;
            while e != END {
                let link = self.edges[e as usize].1;
                each((link >> 24) as u8);
                e = link & END;
            }
        }
        if ws_run {
            for w in [b' ', b'\t', b'\n', b'\r'] {
                f(w);
            }
        }
    }

    /// The most characters that can still follow the span `state` stands for.
    pub fn room(&self, state: u32) -> u32 {
        self.nodes[(state & STATE_MASK) as usize].1
    }

    /// Whether `value` is a span of the source under this normalisation (the
    /// automaton's own answer; tests check it against a plain substring search).
    pub fn accepts(&self, value: &str) -> bool {
        value
            .bytes()
            .try_fold(self.start(), |s, b| self.next(s, b))
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn every_substring_and_nothing_else() {
        for src in [
            "abcbc",
            "aaaa",
            "mississippi",
            "",
            "café crème",
            "abab\"\\n",
        ] {
            let a = SpanAutomaton::new(src, Normalize::None).unwrap();
            assert!(a.states() <= 2 * src.len().max(1));
            let b = src.as_bytes();
            for i in 0..=b.len() {
                for j in i..=b.len() {
                    let ok = b[i..j].iter().try_fold(0, |s, &c| a.next(s, c)).is_some();
                    assert!(ok, "{src:?}[{i}..{j}] refused");
                }
            }
            for probe in ["ac", "cb", "ssis", "pp", "ississ", "x", "éc", "bb"] {
                let ok = probe.bytes().try_fold(0, |s, c| a.next(s, c)).is_some();
                assert_eq!(ok, contains(b, probe.as_bytes()), "{src:?} / {probe:?}");
            }
        }
    }

    #[test]
    fn room_is_what_is_left_after_the_first_occurrence() {
        let a = SpanAutomaton::new("abcab", Normalize::None).unwrap();
        let s = a.next(0, b'a').unwrap();
        assert_eq!(a.room(s), 4);
        let s = a.next(a.next(0, b'c').unwrap(), b'a').unwrap();
        assert_eq!(a.room(s), 1);
        assert_eq!(a.room(0), 5);
        let a = SpanAutomaton::new("aé", Normalize::None).unwrap();
        assert_eq!(a.room(a.next(0, b'a').unwrap()), 1);
    }

    #[test]
    fn normalisations() {
        let a = SpanAutomaton::new("Total:\n\t  1 234,50 EUR", Normalize::Whitespace).unwrap();
        assert!(a.accepts("Total: 1 234,50"));
        assert!(a.accepts("Total:\n1  234,50"));
        assert!(!a.accepts("Total:1"));
        let a = SpanAutomaton::new("ACME GmbH", Normalize::Case).unwrap();
        assert!(a.accepts("acme gmbh") && a.accepts("Acme GMBH"));
        assert!(!a.accepts("acme  gmbh"));
    }

    #[test]
    fn successors_are_exactly_the_bytes_next_takes() {
        let src = "Total:\n\t  1 234,50 EUR; Müller \"GmbH\" aA";
        for norm in [Normalize::None, Normalize::Whitespace, Normalize::Case] {
            let a = SpanAutomaton::new(src, norm).unwrap();
            // Every state a prefix of some span reaches, plus the start.
            let mut states = vec![0u32];
            for i in 0..src.len() {
                let mut s = 0;
                for &b in &src.as_bytes()[i..] {
                    let Some(t) = a.next(s, b) else { break };
                    states.push(t);
                    s = t;
                }
            }
            for s in states {
                let mut got = [0u8; 256];
                a.successors(s, |b| got[b as usize] += 1);
                for b in 0..=255u8 {
                    let want = u8::from(a.next(s, b).is_some());
                    assert_eq!(got[b as usize], want, "{norm:?} state {s:#x} byte {b:#x}");
                }
            }
        }
    }

    #[test]
    fn oversized_sources_are_refused() {
        let big = "a".repeat(MAX_QUOTE_SOURCE_BYTES + 1);
        assert!(SpanAutomaton::new(&big, Normalize::None).is_err());
    }
}
