//! Rebuilding a [`Tokenizer`] from GGUF metadata the way llama.cpp's vocabulary
//! loader does: token attributes, special ids (including those it detects by their
//! text), the end-of-generation set, and each token's bytes.

use crate::gguf::GgufFile;

use super::attr::{TokenAttr, TokenType};
use super::bpe::BpeModel;
use super::pretok::PreTokenizer;
use super::special::SpecialMatcher;
use super::spm;
use super::table::StrTable;
use super::unicode;
use super::wpm::{Normalizer, WpmModel};
use super::{SpecialIds, Tokenizer, TokenizerError, TokenizerKind};

/// Upper bound on the vocabulary size (llama.cpp's ids are `int32`).
const MAX_TOKENS: usize = 1 << 24;

const KEY: &str = "tokenizer.ggml.";

/// Texts that make llama.cpp treat a token as end-of-generation.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts llama.cpp recognises as EOT when the file names none.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

fn invalid(msg: impl Into<String>) -> TokenizerError {
    TokenizerError::Invalid(msg.into())
}

/// The full name of metadata key `tokenizer.ggml.<k>`.
fn key(k: &str) -> String {
    format!("{KEY}{k}")
}

impl Tokenizer {
    /// Rebuilds the tokenizer described by a GGUF file's `tokenizer.ggml.*` metadata.
    /// The phases follow llama.cpp's loader, in its order: each may change the token
    /// attributes the later ones read.
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let (kind, pre_name) = read_kind(f)?;
        let texts = read_texts(f)?;
        let n = texts.len();
        let scores = read_scores(f, n)?;
        let types = read_types(f, n)?;
        let mut attrs: Vec<TokenAttr> = types.iter().map(|&t| TokenAttr::from_type(t)).collect();
        let add_space_prefix = f
            .opt_bool(&key("add_space_prefix"))?
            .unwrap_or(kind == TokenizerKind::Spm);
        let clean_spaces = match kind {
            TokenizerKind::Spm => false,
            TokenizerKind::Wpm => true,
            TokenizerKind::Bpe { .. } => PreTokenizer::clean_spaces(pre_name),
        };
        let mut sp = read_special_ids(f, kind, n)?;
        let (add_bos, add_eos) = read_add_special(f, kind, &sp)?;
        let add_sep = f
            .opt_bool(&key("add_sep_token"))?
            .unwrap_or(kind == TokenizerKind::Wpm);
        let wpm = match kind {
            TokenizerKind::Wpm => Some(wpm_model(f, &texts, &sp)?),
            _ => None,
        };
        find_specials_by_text(&texts, &mut sp, &mut attrs);
        let eog = end_of_generation(&texts, &sp, &mut attrs);
        // Each token's bytes (llama.cpp's piece cache, built before the strip flags).
        let pieces = build_pieces(kind, &texts, &attrs)?;
        let (by_bytes, bpe, byte_ids) = match kind {
            TokenizerKind::Bpe { pre } => {
                let (by_bytes, bpe) = bpe_tables(f, pre, &texts)?;
                (by_bytes, Some(bpe), [None; 256])
            }
            TokenizerKind::Spm => (StrTable::default(), None, spm_byte_ids(&texts)),
            TokenizerKind::Wpm => (StrTable::default(), None, [None; 256]),
        };
        let barriers = match kind {
            TokenizerKind::Spm => spm::Barriers::new(&texts),
            TokenizerKind::Bpe { .. } | TokenizerKind::Wpm => spm::Barriers::default(),
        };
        let matcher = special_matcher(f, pre_name, &texts, &mut attrs)?;

        let mut tok = Tokenizer {
            kind,
            texts,
            by_bytes,
            pieces,
            scores,
            types,
            attrs,
            special: sp,
            eog,
            add_bos,
            add_eos,
            add_sep,
            add_space_prefix,
            clean_spaces,
            bpe,
            wpm,
            byte_ids,
            barriers,
            matcher,
        };
        tok.special.nl = tok.newline_id();
        Ok(tok)
    }

    /// llama.cpp's `linefeed_id`: the `\n` byte token (SPM), or the first token of
    /// `"\n"` tokenized before any special token is known (BPE).
    fn newline_id(&self) -> Option<u32> {
        match self.kind {
            TokenizerKind::Spm => self.byte_ids[b'\n' as usize].or(self.special.pad),
            TokenizerKind::Wpm => self.special.pad,
            TokenizerKind::Bpe { pre } => {
                let mut out = Vec::new();
                let mut s = super::Scratch::default();
                self.encode_bpe(pre, b"\n", &mut out, &mut s);
                out.first().copied().or(self.special.pad)
            }
        }
    }
}

/// The tokenizer family (`tokenizer.ggml.model`) and the pre-tokenizer's name
/// (`tokenizer.ggml.pre`, empty if absent).
fn read_kind(f: &GgufFile) -> Result<(TokenizerKind, &str), TokenizerError> {
    let model = f.get_str(&key("model"))?;
    let arch = f.opt_str("general.architecture")?.unwrap_or("");
    // gpt-oss needs the o200k split, and Ollama's files say `pre = default`: llama.cpp
    // (through Ollama's compat layer) sets `gpt-4o` for gpt-oss whatever the file says.
    let pre_name = if matches!(arch, "gpt-oss" | "gptoss") {
        "gpt-4o"
    } else {
        f.opt_str(&key("pre"))?.unwrap_or("")
    };
    let kind = match model {
        "llama" => TokenizerKind::Spm,
        "bert" => TokenizerKind::Wpm,
        "gpt2" => TokenizerKind::Bpe {
            pre: PreTokenizer::from_name(pre_name)
                .filter(|p| p.byte_encoded())
                .ok_or_else(|| TokenizerError::UnsupportedPre(pre_name.into()))?,
        },
        // llama.cpp sets Gemma 4's pre-tokenizer whatever the file says.
        "gemma4" => TokenizerKind::Bpe {
            pre: PreTokenizer::Gemma4,
        },
        other => return Err(TokenizerError::UnsupportedModel(other.into())),
    };
    Ok((kind, pre_name))
}

/// The token texts, indexed by text; refuses an empty or oversized vocabulary and
/// duplicate texts.
fn read_texts(f: &GgufFile) -> Result<StrTable, TokenizerError> {
    let tokens = f.array_strings(&key("tokens"))?;
    let n = tokens.size_hint().0;
    if n == 0 || n > MAX_TOKENS {
        return Err(invalid(format!("vocabulary of {n} tokens")));
    }
    let mut texts = StrTable::with_capacity(n, 8 * n);
    for (i, t) in tokens.enumerate() {
        if t.is_empty() {
            // llama.cpp names empty tokens so that they stay distinct.
            texts.push(format!("[EMPTY_{i}]").as_bytes());
        } else {
            texts.push(t);
        }
    }
    if texts.len() != n {
        return Err(invalid("token list shorter than its count"));
    }
    if let Some((a, b)) = texts.build_index(|_| true) {
        return Err(invalid(format!("duplicate token text at ids {a} and {b}")));
    }
    Ok(texts)
}

/// The `n` tokens' scores (all 0 if the file has none).
fn read_scores(f: &GgufFile, n: usize) -> Result<Vec<f32>, TokenizerError> {
    if f.get(&key("scores")).is_none() {
        return Ok(vec![0.0; n]);
    }
    let mut s = f.array_f32(&key("scores"))?;
    if s.len() < n {
        return Err(invalid("fewer scores than tokens"));
    }
    s.truncate(n);
    Ok(s)
}

/// The `n` tokens' types (all normal if the file has none).
fn read_types(f: &GgufFile, n: usize) -> Result<Vec<TokenType>, TokenizerError> {
    if f.get(&key("token_type")).is_none() {
        return Ok(vec![TokenType::Normal; n]);
    }
    let t = f.array_i64(&key("token_type"))?;
    if t.len() < n {
        return Err(invalid("fewer token types than tokens"));
    }
    Ok(t[..n].iter().map(|&v| TokenType::from_i64(v)).collect())
}

/// Special ids: the family's defaults, then the file's keys (of `n` tokens).
fn read_special_ids(
    f: &GgufFile,
    kind: TokenizerKind,
    n: usize,
) -> Result<SpecialIds, TokenizerError> {
    let in_vocab = |id: u32| ((id as usize) < n).then_some(id);
    let mut sp = SpecialIds::default();
    match kind {
        TokenizerKind::Spm => {
            sp.bos = in_vocab(1);
            sp.eos = in_vocab(2);
            sp.unk = in_vocab(0);
        }
        TokenizerKind::Bpe { .. } => {
            sp.bos = in_vocab(11);
            sp.eos = in_vocab(11);
        }
        TokenizerKind::Wpm => {
            sp.bos = in_vocab(101);
            sp.unk = in_vocab(100);
            sp.sep = in_vocab(102);
            sp.pad = in_vocab(0);
            sp.mask = in_vocab(103);
        }
    }
    type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;
    let slots: [(&str, Slot); 17] = [
        ("bos_token_id", |s| &mut s.bos),
        ("eos_token_id", |s| &mut s.eos),
        ("eot_token_id", |s| &mut s.eot),
        ("eom_token_id", |s| &mut s.eom),
        ("unknown_token_id", |s| &mut s.unk),
        ("seperator_token_id", |s| &mut s.sep),
        ("padding_token_id", |s| &mut s.pad),
        ("mask_token_id", |s| &mut s.mask),
        ("fim_pre_token_id", |s| &mut s.fim_pre),
        ("fim_suf_token_id", |s| &mut s.fim_suf),
        ("fim_mid_token_id", |s| &mut s.fim_mid),
        ("fim_pad_token_id", |s| &mut s.fim_pad),
        ("fim_rep_token_id", |s| &mut s.fim_rep),
        ("fim_sep_token_id", |s| &mut s.fim_sep),
        ("prefix_token_id", |s| &mut s.fim_pre),
        ("suffix_token_id", |s| &mut s.fim_suf),
        ("middle_token_id", |s| &mut s.fim_mid),
    ];
    for (k, slot) in slots {
        // An out-of-range id in the file keeps the default, as in llama.cpp.
        if let Some(id) = f.opt_u32(&key(k))?.and_then(in_vocab) {
            *slot(&mut sp) = Some(id);
        }
    }
    Ok(sp)
}

/// Whether encoding adds BOS and EOS: llama.cpp's per-family defaults, then the
/// file's keys; refused where the token to add does not exist.
fn read_add_special(
    f: &GgufFile,
    kind: TokenizerKind,
    sp: &SpecialIds,
) -> Result<(bool, bool), TokenizerError> {
    let (mut add_bos, mut add_eos) = match kind {
        TokenizerKind::Spm | TokenizerKind::Wpm => (true, false),
        TokenizerKind::Bpe { pre } => (
            matches!(pre, PreTokenizer::Llama3 | PreTokenizer::Tekken),
            false,
        ),
    };
    if let Some(b) = f.opt_bool(&key("add_bos_token"))? {
        add_bos = b;
    }
    // llama.cpp forces BOS on for Gemma 4, over the file's key.
    if kind
        == (TokenizerKind::Bpe {
            pre: PreTokenizer::Gemma4,
        })
    {
        add_bos = true;
    }
    if let Some(b) = f.opt_bool(&key("add_eos_token"))? {
        add_eos = b;
    }
    if add_bos && sp.bos.is_none() {
        return Err(invalid("add_bos_token is true, but there is no BOS token"));
    }
    if add_eos && sp.eos.is_none() {
        return Err(invalid("add_eos_token is true, but there is no EOS token"));
    }
    Ok((add_bos, add_eos))
}

/// Special tokens llama.cpp finds by their text where the file names none (made
/// CONTROL), and control tokens named "unused" marked UNUSED.
fn find_specials_by_text(texts: &StrTable, sp: &mut SpecialIds, attrs: &mut [TokenAttr]) {
    // Where several candidates exist llama.cpp takes whichever its hash map yields
    // first; the lowest id is taken here (this matches llama.cpp on SmolLM2, Gemma 3
    // and the tiny models).
    let find_first = |cands: &[&str]| cands.iter().filter_map(|t| texts.find(t.as_bytes())).min();
    let control = TokenAttr::CONTROL;
    for (slot, cands) in [
        (&mut sp.eot, EOT_TEXTS),
        (&mut sp.eom, EOM_TEXTS),
        (&mut sp.fim_pre, FIM_PRE_TEXTS),
        (&mut sp.fim_suf, FIM_SUF_TEXTS),
        (&mut sp.fim_mid, FIM_MID_TEXTS),
        (&mut sp.fim_pad, FIM_PAD_TEXTS),
        (&mut sp.fim_rep, FIM_REP_TEXTS),
        (&mut sp.fim_sep, FIM_SEP_TEXTS),
    ] {
        if slot.is_none() {
            if let Some(id) = find_first(cands) {
                *slot = Some(id);
                attrs[id as usize] = attrs[id as usize] | control;
            }
        }
    }
    for (id, a) in attrs.iter_mut().enumerate() {
        if a.any(control) && memchr_find(texts.get(id as u32), b"unused") {
            *a = *a | TokenAttr::UNUSED;
        }
    }
}

/// The end-of-generation ids, sorted, with llama.cpp's adjustments to the attributes
/// of the tokens it finds by text.
fn end_of_generation(texts: &StrTable, sp: &SpecialIds, attrs: &mut [TokenAttr]) -> Vec<u32> {
    let control = TokenAttr::CONTROL;
    let mut eog: Vec<u32> = [sp.fim_pad, sp.fim_rep, sp.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for t in EOG_TEXTS {
        if let Some(id) = texts.find(t.as_bytes()) {
            eog.push(id);
            attrs[id as usize] = attrs[id as usize] | control;
        }
    }
    // gpt-oss renders these.
    for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = texts.find(t.as_bytes()) {
            attrs[id as usize] = TokenAttr::USER_DEFINED;
        }
    }
    eog.extend([sp.eos, sp.eot, sp.eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    let eog_text = |id: &u32| texts.get(*id);
    let has = |eog: &[u32], t: &str| eog.iter().any(|id| eog_text(id) == t.as_bytes());
    // o200k_harmony and solar-open: "<|end|>" is not the end of generation.
    let has_call = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
    if has_call && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
        if let Some(pos) = eog.iter().position(|id| eog_text(id) == b"<|end|>") {
            attrs[eog[pos] as usize] = TokenAttr::USER_DEFINED;
            eog.remove(pos);
        }
    }
    // gemma4 and paddleocr: "</s>" is not the end of generation.
    if has(&eog, "<|tool_response>") {
        if let Some(pos) = eog.iter().position(|id| eog_text(id) == b"</s>") {
            attrs[eog[pos] as usize] = TokenAttr::NORMAL;
            eog.remove(pos);
        }
    }
    eog
}

/// BPE: the tokens by their raw bytes (GPT-2 spelling decoded) and the merges.
fn bpe_tables(
    f: &GgufFile,
    pre: PreTokenizer,
    texts: &StrTable,
) -> Result<(StrTable, BpeModel), TokenizerError> {
    let merges = read_merges(f, texts)?;
    if !pre.byte_encoded() {
        // Gemma 4: words are matched against the token texts themselves (spaces as
        // `▁`), and a character no token spells falls back to its `<0xNN>` bytes.
        let mut by_text = StrTable::with_capacity(texts.len(), texts.total_bytes());
        for id in 0..texts.len() as u32 {
            by_text.push(texts.get(id));
        }
        by_text.build_index(|_| true);
        let bpe = BpeModel::over_chars(&merges, spm_byte_ids(texts));
        return Ok((by_text, bpe));
    }
    let n = texts.len();
    let mut ok = vec![true; n];
    let mut by_bytes = StrTable::with_capacity(n, texts.total_bytes());
    for id in 0..n as u32 {
        by_bytes.push_with(|buf| {
            let mark = buf.len();
            if !gpt2_decode(texts.get(id), buf) {
                buf.truncate(mark);
                ok[id as usize] = false;
            }
        });
    }
    by_bytes.build_index(|id| ok[id as usize]);
    let mut byte_tok = [None; 256];
    for (b, slot) in byte_tok.iter_mut().enumerate() {
        *slot = by_bytes.find(&[b as u8]);
    }
    let bpe = BpeModel::new(&merges, byte_tok, pre.ignore_merges());
    Ok((by_bytes, bpe))
}

/// SPM byte fallback: the token of each byte (`<0xNN>`, else the byte itself).
fn spm_byte_ids(texts: &StrTable) -> [Option<u32>; 256] {
    let mut byte_ids = [None; 256];
    for (b, slot) in byte_ids.iter_mut().enumerate() {
        let hex = format!("<0x{b:02X}>");
        *slot = texts
            .find(hex.as_bytes())
            .or_else(|| texts.find(&[b as u8]));
    }
    byte_ids
}

/// The matcher of the special tokens in text, longest first, after llama.cpp's strip
/// flags are set on their attributes.
fn special_matcher(
    f: &GgufFile,
    pre_name: &str,
    texts: &StrTable,
    attrs: &mut [TokenAttr],
) -> Result<SpecialMatcher, TokenizerError> {
    let mut specials: Vec<u32> = (0..texts.len() as u32)
        .filter(|&id| {
            attrs[id as usize]
                .any(TokenAttr::CONTROL | TokenAttr::USER_DEFINED | TokenAttr::UNKNOWN)
        })
        .collect();
    specials.sort_by_key(|&id| std::cmp::Reverse(texts.get(id).len()));
    apply_strip_flags(f, pre_name, texts, &specials, attrs)?;
    Ok(SpecialMatcher::new(
        specials
            .iter()
            .map(|&id| (id, attrs[id as usize], texts.get(id).to_vec()))
            .collect(),
    ))
}

/// Whether `hay` contains `needle`.
fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// GPT-2 spelling -> raw bytes; false if some character stands for no byte.
fn gpt2_decode(text: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(s) = std::str::from_utf8(text) else {
        return false;
    };
    for c in s.chars() {
        match unicode::gpt2_char_to_byte(c as u32) {
            Some(b) => out.push(b),
            None => return false,
        }
    }
    true
}

/// Every token's bytes, as `llama_token_to_piece(id, 0, special = true)`.
fn build_pieces(
    kind: TokenizerKind,
    texts: &StrTable,
    attrs: &[TokenAttr],
) -> Result<StrTable, TokenizerError> {
    let mut pieces = StrTable::with_capacity(texts.len(), texts.total_bytes());
    let mut cpts = Vec::new();
    for id in 0..texts.len() as u32 {
        let (text, a) = (texts.get(id), attrs[id as usize]);
        pieces.push_with(|buf| {
            if a.any(TokenAttr::UNKNOWN | TokenAttr::CONTROL | TokenAttr::USER_DEFINED) {
                buf.extend_from_slice(text);
            } else if a.any(TokenAttr::NORMAL) {
                match kind {
                    TokenizerKind::Spm | TokenizerKind::Wpm => unescape_spaces(text, buf),
                    TokenizerKind::Bpe { pre } if !pre.byte_encoded() => unescape_spaces(text, buf),
                    TokenizerKind::Bpe { .. } => llama_decode_text(text, buf, &mut cpts),
                }
            } else if a.any(TokenAttr::BYTE) {
                // "<0xNN>": llama.cpp parses the two characters after "<0x".
                let hex = text.get(3..5).and_then(|h| std::str::from_utf8(h).ok());
                buf.push(
                    hex.and_then(|h| u8::from_str_radix(h, 16).ok())
                        .unwrap_or(0),
                );
            }
        });
    }
    Ok(pieces)
}

/// `▁` back to a space.
fn unescape_spaces(text: &[u8], out: &mut Vec<u8>) {
    const ESC: &[u8] = "\u{2581}".as_bytes();
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(ESC) {
            out.push(b' ');
            i += ESC.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
}

/// llama.cpp's `llama_decode_text`: GPT-2 characters to bytes; a character that
/// stands for no byte becomes `[UNK_BYTE_0x<its hex><the whole text>]`.
fn llama_decode_text(text: &[u8], out: &mut Vec<u8>, cpts: &mut Vec<u32>) {
    unicode::decode_lax(text, cpts);
    for &c in cpts.iter() {
        match unicode::gpt2_char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut enc = Vec::new();
                unicode::encode_lax(c, &mut enc);
                for b in enc {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text);
                out.push(b']');
            }
        }
    }
}

/// `tokenizer.ggml.merges` as `(left, right, merged)` ids in rank order. A merge whose
/// parts or result are not tokens can never fire on token ids and is left out.
fn read_merges(f: &GgufFile, texts: &StrTable) -> Result<Vec<(u32, u32, u32)>, TokenizerError> {
    let merges = f
        .array_strings(&key("merges"))
        .map_err(|_| invalid("a BPE vocabulary needs tokenizer.ggml.merges"))?;
    let mut out = Vec::with_capacity(merges.size_hint().0.min(1 << 22));
    let mut joined = Vec::new();
    for m in merges {
        // llama.cpp splits at the first space after the first byte.
        let Some(sp) = m.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
            continue;
        };
        let (l, r) = (&m[..sp], &m[sp + 1..]);
        joined.clear();
        joined.extend_from_slice(l);
        joined.extend_from_slice(r);
        if let (Some(li), Some(ri), Some(mi)) = (texts.find(l), texts.find(r), texts.find(&joined))
        {
            out.push((li, ri, mi));
        }
    }
    Ok(out)
}

/// The strip flags llama.cpp sets by model name after loading.
fn apply_strip_flags(
    f: &GgufFile,
    pre_name: &str,
    texts: &StrTable,
    specials: &[u32],
    attrs: &mut [TokenAttr],
) -> Result<(), TokenizerError> {
    let name = f.opt_str("general.name")?.unwrap_or("").to_lowercase();
    let arch = f.opt_str("general.architecture")?.unwrap_or("");
    let set = |attrs: &mut [TokenAttr], t: &str, flag: TokenAttr, on: bool| {
        if let Some(id) = texts.find(t.as_bytes()) {
            let a = &mut attrs[id as usize];
            *a = if on { a.with(flag) } else { a.without(flag) };
        }
    };
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
        .iter()
        .any(|p| pre_name.contains(p))
        || ["nomic-bert-moe", "jina-bert-v3"]
            .iter()
            .any(|p| arch.contains(p))
    {
        set(attrs, "<mask>", TokenAttr::LSTRIP, true);
    } else if name.contains("phi-3") || name.contains("phi3") {
        for &id in specials {
            attrs[id as usize] = attrs[id as usize].with(TokenAttr::RSTRIP);
        }
        set(attrs, "</s>", TokenAttr::RSTRIP, true);
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            set(attrs, t, TokenAttr::RSTRIP, false);
        }
    } else if name.contains("modern-bert") {
        set(attrs, "[MASK]", TokenAttr::LSTRIP, true);
    }
    Ok(())
}

/// WordPiece: the normaliser switches (lowercasing on by default, accent stripping
/// following it) and the longest token.
fn wpm_model(f: &GgufFile, texts: &StrTable, sp: &SpecialIds) -> Result<WpmModel, TokenizerError> {
    let lowercase = f.opt_bool(&key("normalizer.lowercase"))?.unwrap_or(true);
    let strip_accents = f
        .opt_bool(&key("normalizer.strip_accents"))?
        .unwrap_or(lowercase);
    if sp.bos.is_none() || sp.sep.is_none() {
        return Err(invalid(
            "a WordPiece vocabulary needs its CLS and SEP tokens",
        ));
    }
    Ok(WpmModel {
        norm: Normalizer {
            lowercase,
            strip_accents,
        },
        max_token_len: (0..texts.len() as u32)
            .map(|id| texts.get(id).len())
            .max()
            .unwrap_or(0),
        unk: sp.unk,
    })
}
