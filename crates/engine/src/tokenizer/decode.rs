//! Token ids back to bytes: plain concatenation, llama.cpp's `llama_detokenize`, and a
//! streaming decoder that never splits a UTF-8 character.

use super::{TokenAttr, Tokenizer};

impl Tokenizer {
    /// The concatenated bytes of `ids` (every token rendered, control tokens as their
    /// text). For valid UTF-8 `text`, `decode(encode(text, false, false)) == text`
    /// (SPM vocabularies with `add_space_prefix` add one leading space).
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id));
        }
        out
    }

    /// `llama_detokenize`: `remove_special` drops a leading BOS and trailing EOS where
    /// the vocabulary adds them; `unparse_special` renders CONTROL/UNKNOWN tokens as
    /// their text (else as nothing). Then llama.cpp's space cleanup for vocabularies
    /// that ask for it (" ," -> ",", " 's" -> "'s", ...). Unknown ids render as nothing.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos && ids.first().is_some_and(|&i| Some(i) == self.bos()) {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && self.add_eos && ids.last().is_some_and(|&i| Some(i) == self.eos()) {
            ids = &ids[..ids.len() - 1];
        }
        let mut text = Vec::new();
        for &id in ids {
            let mut piece = self.piece(id, unparse_special);
            if remove_space && piece.first() == Some(&b' ') {
                piece = &piece[1..];
            }
            remove_space = false;
            text.extend_from_slice(piece);
        }
        if self.clean_spaces {
            clean_spaces(&mut text);
        }
        text
    }

    /// `llama_token_to_piece(id, lstrip = 0, special)`.
    fn piece(&self, id: u32, special: bool) -> &[u8] {
        match self.token_attr(id) {
            Some(a) if special || !a.any(TokenAttr::CONTROL | TokenAttr::UNKNOWN) => {
                self.pieces.get(id)
            }
            _ => &[],
        }
    }

    /// A streaming decoder (control tokens rendered when `render_control`).
    pub fn stream_decoder(&self, render_control: bool) -> StreamDecoder<'_> {
        StreamDecoder {
            tok: self,
            render_control,
            pending: Vec::new(),
        }
    }
}

/// llama.cpp's three passes: drop the space before `?!.,`, around a lone `'`, and
/// before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(t: &mut Vec<u8>) {
    // Pass 1: " ?", " !", " .", " ," lose their space.
    let mut w = usize::from(!t.is_empty());
    for i in 1..t.len() {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            w -= 1;
        }
        t[w] = x;
        w += 1;
    }
    t.truncate(w);
    // Pass 2: " ' " becomes "'".
    let n = t.len();
    let mut w = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            w -= 1;
            t[i + 1] = 0;
            t[w] = x;
            w += 1;
            // llama.cpp blanks the next byte and moves past it.
            i += 2;
            continue;
        }
        t[w] = x;
        w += 1;
        i += 1;
    }
    t.truncate(w);
    // Pass 3: " 's", " 'm", " 're", " 've" lose their space.
    let n = t.len();
    let mut w = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let x2 = t.get(i + 2).copied().filter(|_| i + 2 < n);
            let drop = matches!(x1, b's' | b'm')
                || (!matches!(x1, b't' | b'd')
                    && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                w -= 1;
            }
        }
        t[w] = x;
        w += 1;
    }
    t.truncate(w);
}

/// Turns a stream of token ids into bytes, holding back an incomplete UTF-8 character
/// until its last byte arrives. Bytes that cannot start or continue a character are
/// passed through as they are.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    render_control: bool,
    pending: Vec<u8>,
}

impl StreamDecoder<'_> {
    /// Adds one token; returns the bytes now complete.
    pub fn push(&mut self, id: u32) -> Vec<u8> {
        self.pending
            .extend_from_slice(self.tok.piece(id, self.render_control));
        let keep = incomplete_tail(&self.pending);
        let cut = self.pending.len() - keep;
        let tail = self.pending.split_off(cut);
        std::mem::replace(&mut self.pending, tail)
    }

    /// Whatever is still held back (an unfinished character), clearing it.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

/// The length of a trailing, so far valid, but unfinished UTF-8 sequence.
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=3.min(b.len()) {
        let tail = &b[b.len() - back..];
        if tail[0] & 0xC0 == 0x80 {
            continue;
        }
        // An error "at the end of input" right at the lead byte means a valid prefix.
        return match std::str::from_utf8(tail) {
            Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => back,
            _ => 0,
        };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_cleanup_matches_llama_cpp() {
        let mut t = b"Hello , world . I 'm here ' ok".to_vec();
        clean_spaces(&mut t);
        assert_eq!(t, b"Hello, world. I'm here'ok");
    }

    #[test]
    fn incomplete_tails() {
        assert_eq!(incomplete_tail(b"ab\xe2\x82"), 2);
        assert_eq!(incomplete_tail(b"ab\xe2\x82\xac"), 0);
        assert_eq!(incomplete_tail(b"\xf0\x9f"), 2);
        assert_eq!(incomplete_tail(b"\xff"), 0);
        assert_eq!(incomplete_tail(b"\xe2\x28"), 0);
        assert_eq!(incomplete_tail(b"\xed\xa0"), 0);
        assert_eq!(incomplete_tail(b"\xf0"), 1);
        assert_eq!(incomplete_tail(b"\xe0\x80"), 0);
        assert_eq!(incomplete_tail(b"\xf0\x9f\x98"), 3);
    }
}
