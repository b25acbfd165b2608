/// Collects output bytes and releases them as whole UTF-8 characters, so a stream
/// never splits a character across two writes. Bytes that can never become valid
/// UTF-8 are released as U+FFFD rather than held forever; a character still
/// unfinished when the generation ends (a token limit cut it) is dropped, so the
/// output stops before it instead of ending in U+FFFD.
#[derive(Default, Debug)]
pub(crate) struct Utf8Assembler {
    pending: Vec<u8>,
    all: Vec<u8>,
}

impl Utf8Assembler {
    /// Adds bytes; returns the text that is now complete, if any.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.all.extend_from_slice(bytes);
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..good);
                            break;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Ends the text: the bytes of an unfinished last character are dropped, here
    /// and from [`Self::into_bytes`]. Returns how many were dropped.
    pub(crate) fn finish(&mut self) -> usize {
        let cut = self.pending.len();
        self.all.truncate(self.all.len() - cut);
        self.pending.clear();
        cut
    }

    /// Every byte released, as pushed (invalid ones included).
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_are_never_split() {
        let mut a = Utf8Assembler::default();
        let e = "é".as_bytes();
        assert_eq!(a.push(b"a"), Some("a".into()));
        assert_eq!(a.push(&e[..1]), None);
        assert_eq!(a.push(&e[1..]), Some("é".into()));
        let emoji = "🦙".as_bytes();
        assert_eq!(a.push(&emoji[..3]), None);
        assert_eq!(a.push(&emoji[3..]), Some("🦙".into()));
        assert_eq!(a.finish(), 0);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut a = Utf8Assembler::default();
        assert_eq!(a.push(b"x\xffy"), Some("x\u{FFFD}y".into()));
        assert_eq!(a.push(b"\xe2\x82"), None);
        // A character cut by the end is dropped, not replaced.
        assert_eq!(a.finish(), 2);
        assert_eq!(a.into_bytes(), b"x\xffy");
    }
}
