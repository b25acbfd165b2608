//! UTF-8 as the automaton reads it: where a byte leaves a character under way, which
//! lead bytes begin which characters, and whether a state loops on whole characters.

/// Non-ASCII characters by their lead bytes, split where Unicode's spaces lie (U+0085
/// and U+00A0 after `C2`, U+1680 after `E1`, U+2000–U+205F after `E2`, U+3000 after
/// `E3`), so a pattern of non-space characters (`\S`) still loops on the rest.
pub(crate) const LEAD_CLASSES: [(u8, u8); 10] = [
    (0xC2, 0xC2),
    (0xC3, 0xDF),
    (0xE0, 0xE0),
    (0xE1, 0xE1),
    (0xE2, 0xE2),
    (0xE3, 0xE3),
    (0xE4, 0xEC),
    (0xED, 0xED),
    (0xEE, 0xEF),
    (0xF0, 0xF4),
];

/// A place in UTF-8 as the JSON-string decoder reads it: continuation bytes still due
/// (0 at a character boundary), the range the next one must lie in, and whether the
/// bytes so far broke UTF-8.
#[derive(Clone, Copy)]
pub(crate) struct Utf8At {
    pub due: u8,
    lo: u8,
    hi: u8,
    pub broken: bool,
}

impl Utf8At {
    pub(crate) const BOUNDARY: Utf8At = Utf8At {
        due: 0,
        lo: 0,
        hi: 0,
        broken: false,
    };

    /// The place after byte `b`, as the JSON-string decoder reads UTF-8.
    pub(crate) fn after(self, b: u8) -> Utf8At {
        let broken = Utf8At {
            broken: true,
            ..self
        };
        if self.broken {
            return broken;
        }
        let cont = |due: u8, lo: u8, hi: u8| Utf8At {
            due,
            lo,
            hi,
            broken: false,
        };
        if self.due > 0 {
            return if (self.lo..=self.hi).contains(&b) {
                cont(self.due - 1, 0x80, 0xBF)
            } else {
                broken
            };
        }
        match b {
            0..=0x7F => Utf8At::BOUNDARY,
            0xC2..=0xDF => cont(1, 0x80, 0xBF),
            0xE0 => cont(2, 0xA0, 0xBF),
            0xED => cont(2, 0x80, 0x9F),
            0xE1..=0xEF => cont(2, 0x80, 0xBF),
            0xF0 => cont(3, 0x90, 0xBF),
            0xF1..=0xF3 => cont(3, 0x80, 0xBF),
            0xF4 => cont(3, 0x80, 0x8F),
            _ => broken,
        }
    }
}

/// Lead bytes, the continuation bytes after each, and the range the first must lie in
/// (the rest lie in `0x80..=0xBF`): UTF-8 without overlong forms or surrogates.
const SEQUENCES: [(u8, u8, u8, u8, u8); 8] = [
    (0xC2, 0xDF, 1, 0x80, 0xBF),
    (0xE0, 0xE0, 2, 0xA0, 0xBF),
    (0xE1, 0xEC, 2, 0x80, 0xBF),
    (0xED, 0xED, 2, 0x80, 0x9F),
    (0xEE, 0xEF, 2, 0x80, 0xBF),
    (0xF0, 0xF0, 3, 0x90, 0xBF),
    (0xF1, 0xF3, 3, 0x80, 0xBF),
    (0xF4, 0xF4, 3, 0x80, 0x8F),
];

/// Whether every non-ASCII character whose lead byte is in `leads`, stepped byte by
/// byte through `next` (a state and a byte to the state after, if alive), leads from
/// state `s` back to `s`. States met midway through several characters are checked
/// once.
pub(crate) fn loops_on_leads(
    s: u32,
    leads: (u8, u8),
    mut next: impl FnMut(u32, u8) -> Option<u32>,
) -> bool {
    let mut returning = rustc_hash::FxHashSet::default();
    let wanted = SEQUENCES
        .iter()
        .filter(|q| q.0 <= leads.1 && leads.0 <= q.1);
    wanted.into_iter().all(|&(lead_lo, lead_hi, due, lo, hi)| {
        (lead_lo.max(leads.0)..=lead_hi.min(leads.1)).all(|lead| {
            next(s, lead).is_some_and(|t| returns(t, due, (lo, hi), s, &mut next, &mut returning))
        })
    })
}

/// Whether from `t`, every `due` continuation bytes (the first in `range`) lead to
/// `to`; `returning` holds the (state, due) pairs known to, for the full range.
fn returns(
    t: u32,
    due: u8,
    range: (u8, u8),
    to: u32,
    next: &mut impl FnMut(u32, u8) -> Option<u32>,
    returning: &mut rustc_hash::FxHashSet<(u32, u8)>,
) -> bool {
    let full = range == (0x80, 0xBF);
    if full && returning.contains(&(t, due)) {
        return true;
    }
    let ok = (range.0..=range.1).all(|c| match next(t, c) {
        None => false,
        Some(u) if due == 1 => u == to,
        Some(u) => returns(u, due - 1, (0x80, 0xBF), to, next, returning),
    });
    if ok && full {
        returning.insert((t, due));
    }
    ok
}
