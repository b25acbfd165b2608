//! Tokenizers rebuilt from GGUF metadata, giving the same token ids as llama.cpp.
//!
//! Two algorithms: byte-level BPE (`tokenizer.ggml.model = gpt2`, with the word
//! splitting chosen by `tokenizer.ggml.pre`) and SentencePiece-style merging by score
//! (`llama`, with `<0xNN>` byte fallback). Around both, llama.cpp's handling of special
//! tokens: CONTROL tokens are recognised in text only when asked to, USER_DEFINED ones
//! always, longest first.
//!
//! Input text is bytes. Invalid UTF-8 follows llama.cpp where it does not crash: BPE
//! turns each byte that starts no valid sequence into U+FFFD; SPM spells it with byte
//! tokens. The one input llama.cpp aborts on (a 4-byte sequence above U+10FFFF, e.g.
//! `f4 90 80 80`) is treated by BPE here as four invalid bytes (four U+FFFD).

mod attr;
mod bpe;
mod decode;
mod load;
mod pretok;
mod special;
mod spm;
mod table;
mod unicode;
mod wpm;

use std::cell::RefCell;

pub use attr::{TokenAttr, TokenType};
pub use decode::StreamDecoder;
pub use pretok::PreTokenizer;

use bpe::{BpeModel, BpeScratch};
use special::{Fragment, SpecialMatcher};
use spm::SpmScratch;
use table::StrTable;
use wpm::{WpmModel, WpmScratch};

use crate::gguf::GgufError;

/// Why a vocabulary could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported tokenizer model {0:?}")]
    UnsupportedModel(String),
    #[error("unsupported pre-tokenizer {0:?}")]
    UnsupportedPre(String),
    #[error("invalid tokenizer metadata: {0}")]
    Invalid(String),
}

/// The tokenizer family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Byte-level BPE with its pre-tokenizer.
    Bpe { pre: PreTokenizer },
    /// SentencePiece-style merging by score.
    Spm,
    /// WordPiece (BERT): normalised words cut into the longest vocabulary entries.
    Wpm,
}

/// The special token ids llama.cpp resolves (`None` where there is none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub nl: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// A vocabulary and its tokenizer. Cheap to share: encoding takes `&self`.
#[derive(Debug)]
pub struct Tokenizer {
    kind: TokenizerKind,
    /// Token texts as stored in the GGUF file.
    texts: StrTable,
    /// BPE only: tokens by their raw bytes (GPT-2 spelling decoded).
    by_bytes: StrTable,
    /// Every token's bytes, as `llama_token_to_piece(id, 0, special=true)` gives them.
    pieces: StrTable,
    scores: Vec<f32>,
    types: Vec<TokenType>,
    attrs: Vec<TokenAttr>,
    special: SpecialIds,
    eog: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    /// WordPiece: whether a second segment is set off by SEP (`add_sep_token`).
    add_sep: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    bpe: Option<BpeModel>,
    wpm: Option<WpmModel>,
    /// SPM byte fallback: the token for each byte.
    byte_ids: [Option<u32>; 256],
    /// SPM: where long texts may be cut for merging.
    barriers: spm::Barriers,
    matcher: SpecialMatcher,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Per-thread buffers reused across calls.
#[derive(Default)]
struct Scratch {
    fragments: Vec<Fragment>,
    cpts: Vec<u32>,
    words: Vec<(usize, usize)>,
    words2: Vec<(usize, usize)>,
    cpt_off: Vec<usize>,
    norm: Vec<u8>,
    /// Gemma 4's text with its spaces escaped.
    escaped: Vec<u8>,
    bpe: BpeScratch,
    spm: SpmScratch,
    spm_text: Vec<u8>,
    wpm: WpmScratch,
}

impl Scratch {
    /// Drops buffers grown by a very long text, so that idle threads hold little.
    fn trim(&mut self) {
        const KEEP: usize = 1 << 16;
        if self.cpts.capacity() > KEEP || self.norm.capacity() > 4 * KEEP {
            *self = Scratch::default();
        }
    }
}

impl Tokenizer {
    /// Tokenizes `text`. `add_special` adds BOS/EOS as the vocabulary asks;
    /// `parse_special` lets CONTROL tokens written in the text become those tokens.
    pub fn encode(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            let mut frags = std::mem::take(&mut s.fragments);
            self.matcher.partition(text, parse_special, &mut frags);
            // WordPiece frames every text in CLS .. SEP (llama.cpp asks no flag there).
            let wpm = self.kind == TokenizerKind::Wpm;
            if add_special && (self.add_bos || wpm) {
                out.extend(self.special.bos);
            }
            let mut prev_special = true;
            for f in &frags {
                match *f {
                    Fragment::Token(id) => {
                        out.push(id);
                        prev_special = true;
                    }
                    Fragment::Text(a, b) => {
                        let prefix = self.add_space_prefix && prev_special;
                        self.encode_text(&text[a..b], prefix, &mut out, s);
                        prev_special = false;
                    }
                }
            }
            if add_special && self.add_eos && !wpm {
                out.extend(self.special.eos);
            }
            if add_special && wpm {
                out.extend(self.special.sep);
            }
            s.fragments = frags;
            s.trim();
        });
        out
    }

    /// Tokenizes text containing no special tokens.
    fn encode_text(&self, text: &[u8], space_prefix: bool, out: &mut Vec<u32>, s: &mut Scratch) {
        match self.kind {
            TokenizerKind::Spm => {
                s.spm_text.clear();
                if space_prefix {
                    s.spm_text.extend_from_slice("\u{2581}".as_bytes());
                }
                for &b in text {
                    if b == b' ' {
                        s.spm_text.extend_from_slice("\u{2581}".as_bytes());
                    } else {
                        s.spm_text.push(b);
                    }
                }
                spm::encode(
                    &s.spm_text,
                    &self.texts,
                    &self.scores,
                    &self.byte_ids,
                    &self.barriers,
                    out,
                    &mut s.spm,
                );
            }
            TokenizerKind::Bpe { pre } => self.encode_bpe(pre, text, out, s),
            TokenizerKind::Wpm => {
                let wpm = self
                    .wpm
                    .as_ref()
                    .expect("a WordPiece vocabulary has its model");
                wpm.encode(text, &self.texts, out, &mut s.wpm);
            }
        }
    }

    fn encode_bpe(&self, pre: PreTokenizer, text: &[u8], out: &mut Vec<u32>, s: &mut Scratch) {
        let bpe = self.bpe.as_ref().expect("a BPE vocabulary has merges");
        // Gemma 4 merges over the text with its spaces written as `▁`.
        let mut escaped = std::mem::take(&mut s.escaped);
        let text = if pre.byte_encoded() {
            text
        } else {
            escaped.clear();
            for &b in text {
                if b == b' ' {
                    escaped.extend_from_slice("\u{2581}".as_bytes());
                } else {
                    escaped.push(b);
                }
            }
            &escaped[..]
        };
        unicode::decode_lax(text, &mut s.cpts);
        pre.split(&s.cpts, &mut s.words, &mut s.words2);
        // Words are code point ranges; llama.cpp re-encodes them, which only changes
        // bytes that were not valid UTF-8.
        let norm: &[u8] = if std::str::from_utf8(text).is_ok() {
            s.cpt_off.clear();
            let mut off = 0;
            for &c in &s.cpts {
                s.cpt_off.push(off);
                off += char::from_u32(c).map_or(0, char::len_utf8);
            }
            s.cpt_off.push(off);
            text
        } else {
            s.norm.clear();
            s.cpt_off.clear();
            for &c in &s.cpts {
                s.cpt_off.push(s.norm.len());
                unicode::encode_lax(c, &mut s.norm);
            }
            s.cpt_off.push(s.norm.len());
            &s.norm
        };
        for &(a, b) in &s.words {
            let word = &norm[s.cpt_off[a]..s.cpt_off[b]];
            // A run of newlines the vocabulary has is one token (Gemma 4's `\n\n`).
            if !pre.byte_encoded() && word[0] == b'\n' {
                if let Some(id) = self.by_bytes.find(word) {
                    out.push(id);
                    continue;
                }
            }
            bpe.encode_word(word, &self.by_bytes, out, &mut s.bpe);
        }
        s.escaped = escaped;
    }

    /// The exact bytes of a token (empty for an id outside the vocabulary).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        if (id as usize) < self.n_vocab() {
            self.pieces.get(id)
        } else {
            &[]
        }
    }

    /// The token's text as stored in the GGUF file (GPT-2 spelling for BPE, `▁` for
    /// spaces in SPM).
    pub fn token_text(&self, id: u32) -> &[u8] {
        if (id as usize) < self.n_vocab() {
            self.texts.get(id)
        } else {
            &[]
        }
    }

    /// The id of the token stored exactly as `text` (chat template tokens, for example).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.texts.find(text.as_bytes())
    }

    pub fn n_vocab(&self) -> usize {
        self.texts.len()
    }

    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    pub fn special_ids(&self) -> &SpecialIds {
        &self.special
    }

    pub fn bos(&self) -> Option<u32> {
        self.special.bos
    }

    pub fn eos(&self) -> Option<u32> {
        self.special.eos
    }

    pub fn eot(&self) -> Option<u32> {
        self.special.eot
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether a pair of texts (a rerank query and document) is joined by SEP.
    pub fn add_sep(&self) -> bool {
        self.add_sep
    }

    /// Every end-of-generation id, ascending (llama.cpp's `special_eog_ids`).
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The type stored in `tokenizer.ggml.token_type` (`Normal` when absent).
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// llama.cpp's attributes for the token.
    pub fn token_attr(&self, id: u32) -> Option<TokenAttr> {
        self.attrs.get(id as usize).copied()
    }

    pub fn score(&self, id: u32) -> Option<f32> {
        self.scores.get(id as usize).copied()
    }

    /// A control token: CONTROL or UNKNOWN. Such a token stands for no text; a
    /// constraint engine should not take its bytes as output.
    pub fn is_control(&self, id: u32) -> bool {
        self.token_attr(id)
            .is_some_and(|a| a.any(TokenAttr::CONTROL | TokenAttr::UNKNOWN))
    }

    /// Every token's bytes, by id (see [`Tokenizer::token_bytes`]).
    pub fn vocab_bytes(&self) -> Vec<Vec<u8>> {
        (0..self.n_vocab() as u32)
            .map(|id| self.pieces.get(id).to_vec())
            .collect()
    }

    /// The ids of control tokens (see [`Tokenizer::is_control`]), ascending.
    pub fn control_ids(&self) -> Vec<u32> {
        (0..self.n_vocab() as u32)
            .filter(|&id| self.is_control(id))
            .collect()
    }
}
