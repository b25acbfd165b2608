//! Undeclared keys appear once per object. An open object's extra-key string (or an
//! unconstrained object's key) cannot know the keys before it: putting them in the
//! automaton's states would split every string's closing walk per key. So the matcher
//! follows the committed JSON itself ([`KeyTracker`]), remembers each object's
//! undeclared keys, refuses a commit that closes a key on one of them, and takes the
//! tokens that would from the masks ([`KeyTracker::repeats`]).

use std::sync::Arc;

use crate::automaton::jsonstr::{StrStep, StringProg, MAX_EXCLUDED_BYTES};
use crate::grammar::JsonString;
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
    /// After a backslash inside a string (the next byte cannot close it).
    escaped: bool,
    /// The key being written, as written (escapes undecoded).
    raw: Vec<u8>,
    /// The key just closed, decoded.
    key: Vec<u8>,
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
    /// The strings that exclude this key and the older ones, for the masks: built as
    /// keys are remembered, not per mask.
    chunk: Option<Arc<Chunk>>,
}

/// A string excluding some of an object's keys (`members`); `older` holds the others.
#[derive(Debug)]
struct Chunk {
    prog: StringProg,
    members: Vec<Box<[u8]>>,
    bytes: usize,
    older: Option<Arc<Chunk>>,
}

/// Bytes of keys per [`Chunk`]: a new key rebuilds its chunk's trie, so a chunk stays
/// small; a longer key has one to itself.
const CHUNK_BYTES: usize = 256;

fn chunks(mut c: &Option<Arc<Chunk>>) -> impl Iterator<Item = &StringProg> {
    std::iter::from_fn(move || {
        let n = c.as_ref()?;
        c = &n.older;
        Some(&n.prog)
    })
}

fn keys_of(mut s: &Option<Arc<Seen>>) -> impl Iterator<Item = &[u8]> {
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
    pub(super) fn step(&mut self, b: u8) -> Event {
        let Some(is_key) = self.in_string else {
            match b {
                b'{' => self.open(Kind::Object),
                b'[' => self.open(Kind::Array),
                b'}' | b']' => self.close(),
                b'"' => {
                    self.in_string = Some(self.top.kind == Kind::Object && self.top.expect_key);
                    self.raw.clear();
                    self.escaped = false;
                }
                b':' => self.top.expect_key = false,
                b',' => self.top.expect_key = self.top.kind == Kind::Object,
                _ => {}
            }
            return Event::Other;
        };
        if b == b'"' && !self.escaped {
            self.in_string = None;
            if is_key {
                self.top.expect_key = false;
                self.key = decode(&self.raw);
                return Event::KeyClosed;
            }
            return Event::Other;
        }
        self.escaped = b == b'\\' && !self.escaped;
        if is_key {
            self.raw.push(b);
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
    pub(super) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Whether the key just closed is one of its object's undeclared keys already.
    pub(super) fn is_repeat(&self) -> bool {
        keys_of(&self.top.seen).any(|k| k == self.key)
    }

    /// Remembers the key just closed as one of its object's undeclared keys.
    pub(super) fn remember(&mut self) {
        let newest = self.top.seen.as_ref().and_then(|n| n.chunk.clone());
        let key: Box<[u8]> = self.key.as_slice().into();
        let chunk = if key.len() > MAX_EXCLUDED_BYTES {
            // Past what one string's trie holds: such a key's repeat is refused by the
            // commit check alone.
            newest
        } else {
            let (mut members, older) = match newest {
                Some(c) if c.bytes + key.len() <= CHUNK_BYTES => {
                    (c.members.clone(), c.older.clone())
                }
                c => (Vec::new(), c),
            };
            members.push(key);
            Some(Arc::new(Chunk {
                prog: StringProg::new(&JsonString::excluding(&members)),
                bytes: members.iter().map(|m| m.len()).sum(),
                members,
                older,
            }))
        };
        self.push_seen(chunk);
    }

    fn push_seen(&mut self, chunk: Option<Arc<Chunk>>) {
        let next = self.top.seen.take();
        self.top.seen = Some(Arc::new(Seen {
            key: self.key.clone().into(),
            next,
            chunk,
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
    pub(super) fn repeats(
        &self,
        vocab: &Vocabulary,
        allowed: impl Fn(u32) -> bool,
        out: &mut Vec<u32>,
    ) {
        if !self.any_seen() {
            return;
        }
        // The key being written, closed by a token's first quote: the tokens that
        // close it on a seen key, found by the string that excludes them, walked down
        // the trie only while the value read still begins one.
        if self.in_string == Some(true) {
            let newest = self.top.seen.as_ref().and_then(|n| n.chunk.clone());
            for prog in chunks(&newest) {
                let mut aux = Some(0);
                for &b in b"\"".iter().chain(&self.raw) {
                    aux = match aux.map(|a| prog.step(a, b)) {
                        Some(StrStep::Inside(a)) if StringProg::on_excluded(a) => Some(a),
                        _ => None,
                    };
                }
                if let Some(aux) = aux {
                    closing_on_excluded(&vocab.trie, 0, prog, aux, out);
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
    pub(super) fn token_repeats(&self, token: &[u8]) -> bool {
        let mut t = self.clone();
        for &b in token {
            if t.step(b) == Event::KeyClosed {
                if t.is_repeat() {
                    return true;
                }
                // Only for this check: no chunk (its string is for masks).
                t.push_seen(None);
            }
        }
        false
    }
}

/// The decoded text of a key written as `raw` (without its quotes); the grammar has
/// accepted it as a JSON string, so it decodes.
fn decode(raw: &[u8]) -> Vec<u8> {
    if !raw.contains(&b'\\') {
        return raw.to_vec();
    }
    let quoted = [&b"\""[..], raw, b"\""].concat();
    serde_json::from_slice::<String>(&quoted).map_or_else(|_| raw.to_vec(), String::into_bytes)
}

/// Into `out`, the tokens below trie node `i` that close string `prog` (in state `aux`)
/// on a value it excludes.
fn closing_on_excluded(trie: &Trie, i: usize, prog: &StringProg, aux: u64, out: &mut Vec<u32>) {
    let mut visit = |j: usize| {
        let next = trie.nodes[j].end as usize;
        match prog.step(aux, trie.nodes[j].byte) {
            StrStep::Inside(a) if StringProg::on_excluded(a) => {
                closing_on_excluded(trie, j, prog, a, out)
            }
            // Only an excluded value makes the closing quote dead.
            StrStep::Dead if trie.nodes[j].byte == b'"' => {
                (j..next).for_each(|n| out.extend_from_slice(trie.tokens_at(n)))
            }
            _ => {}
        }
    };
    // Where few bytes can matter, only their children are stepped: the root and the
    // other wide nodes have hundreds.
    if let Some(bytes) = prog.excluded_next(aux).filter(|_| trie.nodes[i].wide) {
        let (kid_bytes, kids) = trie.kids(i);
        for b in bytes {
            if let Ok(k) = kid_bytes.binary_search(&b) {
                visit(kids[k] as usize);
            }
        }
        return;
    }
    let end = trie.nodes[i].end as usize;
    let mut j = i + 1;
    while j < end {
        visit(j);
        j = trie.nodes[j].end as usize;
    }
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
        let top: Vec<&[u8]> = keys_of(&t.top.seen).collect();
        assert_eq!(top, [&b"\xf0\x9f\x98\x80"[..], "bé".as_bytes(), b"a"]);
        assert!(t.token_repeats(br#""a""#) && !t.token_repeats(br#""c""#));
        // A token that writes a key twice is refused though neither was seen before.
        assert!(t.token_repeats(br#""d":1,"d""#));
    }
}
