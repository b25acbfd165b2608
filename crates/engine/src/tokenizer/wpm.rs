//! WordPiece (`tokenizer.ggml.model = bert`), as llama.cpp runs it: BERT's
//! normalisation (accents stripped through the first code point of each character's
//! canonical decomposition, lowercasing, control characters dropped), words split at
//! white space and around punctuation, ASCII symbols and CJK ideographs, then each word
//! (behind the phantom space `▁`) cut into the longest vocabulary entries from the left;
//! a word that cannot be cut whole becomes the unknown token.

use unicode_normalization::char::decompose_canonical;

use super::table::StrTable;
use super::unicode::{self, Flags, ACCENT, CONTROL, PUNCT, SPACE, SYMBOL};

/// BERT normaliser switches (`tokenizer.ggml.normalizer.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Normalizer {
    pub lowercase: bool,
    pub strip_accents: bool,
}

/// The vocabulary facts the cutter needs.
#[derive(Debug)]
pub(super) struct WpmModel {
    pub norm: Normalizer,
    /// Bytes of the longest token text (bounds the longest-match search).
    pub max_token_len: usize,
    pub unk: Option<u32>,
}

/// Per-thread buffers.
#[derive(Default)]
pub(super) struct WpmScratch {
    cpts: Vec<u32>,
    /// The current word, `▁` first.
    word: Vec<u8>,
}

const PHANTOM: &[u8] = "\u{2581}".as_bytes();

/// llama.cpp's `is_chinese_char` (BERT's CJK ranges, with HF's 0x2B920 start).
fn is_cjk(c: u32) -> bool {
    matches!(c,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// The first code point of `c`'s full canonical decomposition (a Hangul syllable's
/// leading consonant, too).
fn nfd_first(c: u32) -> u32 {
    let Some(ch) = char::from_u32(c) else {
        return c;
    };
    let mut first = None;
    decompose_canonical(ch, |d| {
        first.get_or_insert(d);
    });
    first.map_or(c, |d| d as u32)
}

/// The single-character lowercase of `c` (unchanged where it has none, or several).
fn lower(c: u32) -> u32 {
    let Some(ch) = char::from_u32(c) else {
        return c;
    };
    let mut it = ch.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l as u32,
        _ => c,
    }
}

impl WpmModel {
    /// Tokenizes text containing no special tokens into `out`.
    pub(super) fn encode(
        &self,
        text: &[u8],
        texts: &StrTable,
        out: &mut Vec<u32>,
        s: &mut WpmScratch,
    ) {
        let flags = Flags::get();
        unicode::decode_lax(text, &mut s.cpts);
        s.word.clear();
        s.word.extend_from_slice(PHANTOM);
        for i in 0..s.cpts.len() {
            let mut c = s.cpts[i];
            if self.norm.strip_accents {
                c = nfd_first(c);
            }
            let f = flags.of(c);
            if f & SPACE != 0 {
                self.flush(texts, out, s);
                continue;
            }
            if c == 0 || c == unicode::REPLACEMENT || f & CONTROL != 0 {
                continue;
            }
            if self.norm.strip_accents && f & ACCENT != 0 {
                continue;
            }
            if self.norm.lowercase {
                c = lower(c);
            }
            let alone = f & PUNCT != 0 || (c < 0x7F && f & SYMBOL != 0) || is_cjk(c);
            if alone {
                self.flush(texts, out, s);
            }
            unicode::encode_lax(c, &mut s.word);
            if alone {
                self.flush(texts, out, s);
            }
        }
        self.flush(texts, out, s);
    }

    /// Cuts the word gathered so far (if any) into tokens and starts a new one.
    fn flush(&self, texts: &StrTable, out: &mut Vec<u32>, s: &mut WpmScratch) {
        let w = &s.word;
        if w.len() > PHANTOM.len() {
            let start = out.len();
            let mut i = 0;
            // Byte-wise longest match from the left, as llama.cpp searches.
            'cut: while i < w.len() {
                let mut j = w.len().min(i + self.max_token_len + 1);
                while j > i {
                    if let Some(id) = texts.find(&w[i..j]) {
                        out.push(id);
                        i = j;
                        continue 'cut;
                    }
                    j -= 1;
                }
                out.truncate(start);
                break;
            }
            if out.len() == start {
                out.extend(self.unk);
            }
        }
        s.word.truncate(PHANTOM.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_and_case() {
        assert_eq!(nfd_first('é' as u32), 'e' as u32);
        assert_eq!(nfd_first(0x1E08), 'C' as u32);
        assert_eq!(nfd_first(0xAC00), 0x1100);
        assert_eq!(lower('Ä' as u32), 'ä' as u32);
        assert_eq!(lower(0x130), 0x130);
    }
}
