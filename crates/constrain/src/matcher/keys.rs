//! Undeclared keys appear once per object. An open object's extra-key string (or an
//! unconstrained object's key) cannot know the keys before it: putting them in the
//! automaton's states would split every string's closing walk per key. So the matcher
//! follows the committed JSON itself ([`KeyTracker`]), remembers each object's
//! undeclared keys, refuses a commit that closes a key on one of them, and takes the
//! tokens that would from the masks ([`KeyTracker::repeats`]).

use std::sync::Arc;

use crate::trie::Trie;
use crate::vocab::Vocabulary;

/// Where the committed JSON is, as far as keys go. Cheap to clone (a rollback entry per
/// commit): the containers below the innermost are shared.
#[derive(Clone, Debug, Default)]
pub(super) struct KeyTracker {
    top: Container,
    below: Option<Arc<Frame>>,
    /// Inside a string, and whether it is a key.
    in_string: Option<bool>,
    /// The key being written, decoded so far.
    key: Vec<u8>,
    esc: Escape,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    /// Outside every container (the document's top level).
    #[default]
    Top,
    Object,
    Array,
}

/// The innermost container.
#[derive(Clone, Debug, Default)]
struct Container {
    kind: Kind,
    /// Whether the next string is a key (after `{` or `,` in an object).
    expect_key: bool,
    seen: Option<Arc<Seen>>,
}

/// A suspended container (its value is being written: no key is expected).
#[derive(Debug)]
struct Frame {
    kind: Kind,
    seen: Option<Arc<Seen>>,
    parent: Option<Arc<Frame>>,
}

/// An object's undeclared keys, newest first.
#[derive(Debug)]
struct Seen {
    key: Box<[u8]>,
    next: Option<Arc<Seen>>,
}

fn keys(mut s: &Option<Arc<Seen>>) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let n = s.as_ref()?;
        s = &n.next;
        Some(&*n.key)
    })
}

/// What a byte did to the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    Other,
    /// A key closed: its text is [`KeyTracker::key`] until the next byte.
    KeyClosed,
}

impl KeyTracker {
    /// Feeds one committed byte.
    pub fn step(&mut self, b: u8) -> Event {
        let Some(is_key) = self.in_string else {
            match b {
                b'{' => self.open(Kind::Object),
                b'[' => self.open(Kind::Array),
                b'}' | b']' => self.close(),
                b'"' => {
                    self.in_string = Some(self.top.kind == Kind::Object && self.top.expect_key);
                    self.key.clear();
                    self.esc = Escape::default();
                }
                b':' => self.top.expect_key = false,
                b',' => self.top.expect_key = self.top.kind == Kind::Object,
                _ => {}
            }
            return Event::Other;
        };
        if self.esc.len > 0 {
            if let Decoded::Char(c, n) = self.esc.push(b) {
                if is_key {
                    self.key.extend_from_slice(&c[..n]);
                }
            }
            return Event::Other;
        }
        match b {
            b'\\' => self.esc.push(b).ignore(),
            b'"' => {
                self.in_string = None;
                if is_key {
                    self.top.expect_key = false;
                    return Event::KeyClosed;
                }
            }
            _ if is_key => self.key.push(b),
            _ => {}
        }
        Event::Other
    }

    fn open(&mut self, kind: Kind) {
        let top = std::mem::take(&mut self.top);
        self.below = Some(Arc::new(Frame {
            kind: top.kind,
            seen: top.seen,
            parent: self.below.take(),
        }));
        self.top = Container {
            kind,
            expect_key: kind == Kind::Object,
            seen: None,
        };
    }

    fn close(&mut self) {
        match self.below.take() {
            Some(f) => {
                self.top = Container {
                    kind: f.kind,
                    expect_key: false,
                    seen: f.seen.clone(),
                };
                self.below = f.parent.clone();
            }
            // Not JSON's nesting (text around a document): start over.
            None => *self = KeyTracker::default(),
        }
    }

    /// The key just closed (after [`Event::KeyClosed`]).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Whether the key just closed is one of its object's undeclared keys already.
    pub fn is_repeat(&self) -> bool {
        keys(&self.top.seen).any(|k| k == self.key)
    }

    /// Remembers the key just closed as one of its object's undeclared keys.
    pub fn remember(&mut self) {
        let next = self.top.seen.take();
        self.top.seen = Some(Arc::new(Seen {
            key: self.key.clone().into(),
            next,
        }));
    }

    fn any_seen(&self) -> bool {
        let mut f = &self.below;
        while let Some(fr) = f {
            if fr.seen.is_some() {
                return true;
            }
            f = &fr.parent;
        }
        self.top.seen.is_some()
    }

    /// Into `out`, the tokens that would close a key on one its object has already,
    /// of those `allowed`.
    pub fn repeats(&self, vocab: &Vocabulary, allowed: impl Fn(u32) -> bool, out: &mut Vec<u32>) {
        if !self.any_seen() {
            return;
        }
        // The key being written, closed by a token's first quote: a walk down the
        // trie along every spelling of each seen key's rest.
        if self.in_string == Some(true) {
            for k in keys(&self.top.seen) {
                if let Some(rest) = k.strip_prefix(self.key.as_slice()) {
                    spell(&vocab.trie, 0, rest, self.esc, out);
                }
            }
        }
        // A whole key inside one token takes two quotes: few tokens have them.
        for &t in &vocab.quoted {
            if allowed(t) && vocab.token_bytes(t).is_some_and(|b| self.token_repeats(b)) {
                out.push(t);
            }
        }
    }

    /// Whether `token` closes a key on one its object has already (keys it writes
    /// itself count as seen, so a token repeating one within it is refused too).
    pub fn token_repeats(&self, token: &[u8]) -> bool {
        let mut t = self.clone();
        for &b in token {
            if t.step(b) == Event::KeyClosed {
                if t.is_repeat() {
                    return true;
                }
                t.remember();
            }
        }
        false
    }
}

/// Into `out`, the tokens below trie node `i` whose bytes spell `rest` (decoded, from
/// escape state `esc`) and then the closing quote.
fn spell(trie: &Trie, i: usize, rest: &[u8], esc: Escape, out: &mut Vec<u32>) {
    let end = trie.nodes[i].end as usize;
    let mut j = i + 1;
    while j < end {
        let b = trie.nodes[j].byte;
        let next = trie.nodes[j].end as usize;
        let mut e = esc;
        if e.len > 0 {
            match e.push(b) {
                Decoded::Pending => spell(trie, j, rest, e, out),
                Decoded::Char(c, n) => {
                    if let Some(r) = rest.strip_prefix(&c[..n]) {
                        spell(trie, j, r, Escape::default(), out);
                    }
                }
                Decoded::Bad => {}
            }
        } else {
            match b {
                b'"' if rest.is_empty() => {
                    (j..next).for_each(|n| out.extend_from_slice(trie.tokens_at(n)))
                }
                b'\\' => {
                    e.push(b).ignore();
                    spell(trie, j, rest, e, out);
                }
                _ if rest.first() == Some(&b) => spell(trie, j, &rest[1..], esc, out),
                _ => {}
            }
        }
        j = next;
    }
}

/// A JSON escape being read: its bytes so far (a surrogate pair is 12).
#[derive(Clone, Copy, Debug, Default)]
struct Escape {
    buf: [u8; 12],
    len: u8,
}

enum Decoded {
    Pending,
    /// The character's UTF-8 and its length.
    Char([u8; 4], usize),
    Bad,
}

impl Decoded {
    fn ignore(self) {}
}

impl Escape {
    /// Adds a byte (the first is the backslash); the escape is over unless `Pending`.
    fn push(&mut self, b: u8) -> Decoded {
        self.buf[self.len as usize] = b;
        self.len += 1;
        let d = self.decode();
        if !matches!(d, Decoded::Pending) {
            *self = Escape::default();
        }
        d
    }

    fn decode(&self) -> Decoded {
        let s = &self.buf[..self.len as usize];
        let short = |c: u8| Decoded::Char([c, 0, 0, 0], 1);
        match s.len() {
            1 => return Decoded::Pending,
            2 => {
                return match s[1] {
                    b'"' | b'\\' | b'/' => short(s[1]),
                    b'b' => short(8),
                    b'f' => short(12),
                    b'n' => short(b'\n'),
                    b'r' => short(b'\r'),
                    b't' => short(b'\t'),
                    b'u' => Decoded::Pending,
                    _ => Decoded::Bad,
                }
            }
            _ => {}
        }
        let Some(hi) = hex4(&s[2..s.len().min(6)], s.len() < 6) else {
            return Decoded::Bad;
        };
        if s.len() < 6 {
            return Decoded::Pending;
        }
        let unit = |c: u32| match char::from_u32(c) {
            Some(ch) => {
                let mut buf = [0u8; 4];
                let n = ch.encode_utf8(&mut buf).len();
                Decoded::Char(buf, n)
            }
            None => Decoded::Bad,
        };
        match hi {
            0xD800..=0xDBFF => match s.len() {
                6 => Decoded::Pending,
                7 if s[6] == b'\\' => Decoded::Pending,
                8 if s[7] == b'u' => Decoded::Pending,
                9..=12 => match hex4(&s[8..], s.len() < 12) {
                    None => Decoded::Bad,
                    Some(_) if s.len() < 12 => Decoded::Pending,
                    Some(lo @ 0xDC00..=0xDFFF) => {
                        unit(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                    }
                    Some(_) => Decoded::Bad,
                },
                _ => Decoded::Bad,
            },
            _ => unit(hi),
        }
    }
}

/// The value of up to four hex digits (`None` if one is not); `partial` allows fewer.
fn hex4(digits: &[u8], partial: bool) -> Option<u32> {
    if digits.len() != 4 && !partial {
        return None;
    }
    digits.iter().try_fold(0u32, |v, &d| {
        let x = (d as char).to_digit(16)?;
        Some(v << 4 | x)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut KeyTracker, s: &str) -> Vec<String> {
        let mut closed = Vec::new();
        for &b in s.as_bytes() {
            if t.step(b) == Event::KeyClosed {
                closed.push(String::from_utf8(t.key().to_vec()).unwrap());
                if !t.is_repeat() {
                    t.remember();
                }
            }
        }
        closed
    }

    #[test]
    fn keys_are_read_decoded_and_per_object() {
        let mut t = KeyTracker::default();
        let closed = feed(
            &mut t,
            r#"{"a":"x\"y","b\u00e9":[{"a":1},"s"],"\ud83d\ude00":{"c":{}},"#,
        );
        assert_eq!(closed, ["a", "bé", "a", "😀", "c"]);
        let top: Vec<&[u8]> = keys(&t.top.seen).collect();
        assert_eq!(top, [&b"\xf0\x9f\x98\x80"[..], "bé".as_bytes(), b"a"]);
        assert!(t.token_repeats(br#""a""#) && !t.token_repeats(br#""c""#));
        // A token that writes a key twice is refused though neither was seen before.
        assert!(t.token_repeats(br#""d":1,"d""#));
    }

    #[test]
    fn escapes_decode_like_json() {
        let mut e = Escape::default();
        let mut last = Decoded::Pending;
        for &b in br"\uD83D\uDE00" {
            last = e.push(b);
        }
        assert!(matches!(last, Decoded::Char(c, 4) if c == *"😀".as_bytes()));
        let mut e = Escape::default();
        for &b in br"\uDE00" {
            last = e.push(b);
        }
        assert!(matches!(last, Decoded::Bad), "a lone low surrogate");
        let mut e = Escape::default();
        e.push(b'\\').ignore();
        assert!(matches!(e.push(b'x'), Decoded::Bad));
    }
}
