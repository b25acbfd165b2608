//! Pre-tokenizers: the word splitting done before BPE, per `tokenizer.ggml.pre`.
//!
//! llama.cpp applies a list of regexes in sequence; each one runs inside every piece the
//! previous ones produced, and the text between its matches stays as pieces too. The
//! regexes are written out by hand here over code point categories (no regex engine,
//! no lookaround), reproducing llama.cpp's leftmost-first results, including its
//! `\s+(?!\S)` rule (a run of spaces leaves its last one to the next word).

use super::unicode::{Flags, ACCENT, LETTER, LOWER, NUMBER, PUNCT, SPACE, UPPER};

/// A regex bracket class body (`a-zA-Z...`, no escapes) as code point ranges, at
/// compile time.
macro_rules! class {
    ($s:literal) => {{
        const N: usize = class_len($s);
        const R: [(u32, u32); N] = class_ranges::<N>($s);
        R
    }};
}

/// A pre-tokenizer, named after llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreTokenizer {
    /// `default` (and a missing `pre`): punctuation runs, the GPT-2 regex, digit runs,
    /// then groups of three ASCII digits.
    Default,
    /// `gpt-2` and friends: the GPT-2 regex alone.
    Gpt2,
    /// `smollm`, `starcoder` and friends: every digit alone, then the GPT-2 regex.
    Smollm,
    /// `llama3`/`llama-bpe` and friends: digits in groups of up to three.
    Llama3,
    /// `qwen2` and friends: the Llama-3 regex with single digits.
    Qwen2,
    /// `deepseek-llm`.
    DeepseekLlm,
    /// `falcon`.
    Falcon,
    /// `deepseek-coder`.
    DeepseekCoder,
    /// `qwen35`: Qwen 2's regex with combining marks (`\p{M}`) kept in words.
    Qwen35,
    /// `tekken` (Mistral's tiktoken vocabularies): words split where letter case
    /// changes, single digits. This is the pattern of the tekken JSON, as tiktoken
    /// runs it for mistral-common; llama.cpp rewrites it without `\p{M}`, so it splits
    /// words at combining marks (Devanagari, Thai, ...) where mistral-common does not.
    Tekken,
    /// `gpt-4o` and `llama4` (o200k_base: GPT-4o, gpt-oss, Llama 4): tekken's pattern
    /// with an optional contraction after each word (`don't`, `I'LL`) and numbers in
    /// groups of up to three digits, as tiktoken runs it. llama.cpp rewrites it with
    /// ASCII-only letter cases and without `\p{M}` (like tekken's).
    O200k,
    /// Gemma 4's SentencePiece-style BPE (`tokenizer.ggml.model = gemma4`): spaces
    /// escaped to `▁`, words are runs of newlines and runs of everything else, and
    /// merges run over characters rather than GPT-2's byte alphabet.
    Gemma4,
}

/// One regex of a pre-tokenizer.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `[\p{P}\$\+<=>\^~\|]+` (with `` ` `` too for Falcon).
    PunctRun { backtick: bool },
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`.
    Gpt2,
    /// The Llama-3 regex, `\p{N}{1,max_digits}`; with `marks`, `[\p{L}\p{M}]` where
    /// it has `\p{L}` (Qwen 3.5).
    Llama3 { max_digits: usize, marks: bool },
    /// `\p{N}+`.
    DigitRun,
    /// `\p{N}`.
    DigitEach,
    /// `[0-9][0-9][0-9]`.
    Ascii3Digits,
    /// `[\r\n]`.
    NewlineEach,
    /// `\s?[<class>]+` over an explicit class.
    OptSpaceClassRun(&'static [(u32, u32)]),
    /// `\s?\p{X}+` over a general category (flag bits of `unicode`).
    OptSpaceCategoryRun(u16),
    /// `[^\n]+|[\n]+`.
    NewlineRuns,
    /// `\s+$`.
    TrailingSpace,
    /// `[<class>]+`.
    ClassRun(&'static [(u32, u32)]),
    /// The tiktoken patterns that split words where letter case changes: tekken's
    /// `config.pattern` (`\p{N}`, no contractions) and o200k_base's
    /// (`\p{N}{1,3}`, `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` after each word).
    CaseWords {
        max_digits: usize,
        contractions: bool,
    },
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp picks for a `tokenizer.ggml.pre` value (plus `gpt2`
    /// as a spelling of `gpt-2`). Names whose llama.cpp flags differ from their
    /// family's (`dbrx`, `megrez`, `chatglm-bpe`, ...) are left unsupported.
    pub fn from_name(name: &str) -> Option<PreTokenizer> {
        Some(match name {
            "" | "default" => PreTokenizer::Default,
            "gpt-2" | "gpt2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo"
            | "jais" | "trillion" | "granite-docling" => PreTokenizer::Gpt2,
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva-7b" | "mellum2" => PreTokenizer::Smollm,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreTokenizer::Llama3,
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
                PreTokenizer::Qwen2
            }
            "deepseek-llm" => PreTokenizer::DeepseekLlm,
            "deepseek-coder" => PreTokenizer::DeepseekCoder,
            "qwen35" => PreTokenizer::Qwen35,
            "falcon" => PreTokenizer::Falcon,
            "gemma4" => PreTokenizer::Gemma4,
            "tekken" => PreTokenizer::Tekken,
            // llama.cpp's GPT4O type also takes `kanana2`, `talkie` and (as a type of
            // its own with the same regex) `minimax-m2`; their vocabularies are not
            // tiktoken's, whose whole-word lookup `ignore_merges` copies, so they stay
            // unsupported until checked.
            "gpt-4o" | "llama4" => PreTokenizer::O200k,
            _ => return None,
        })
    }

    /// Whether llama.cpp tidies spaces before punctuation when detokenizing, which it
    /// decides by pre-tokenizer name.
    pub fn clean_spaces(name: &str) -> bool {
        !matches!(
            name,
            "deepseek-llm"
                | "command-r"
                | "qwen2"
                | "deepseek-r1-qwen"
                | "kormo"
                | "f2llmv2"
                | "smollm"
                | "hunyuan"
                | "solar-open"
                | "trillion"
                | "granite-docling"
                | "tekken"
                | "gpt-4o"
                | "llama4"
        )
    }

    fn steps(self) -> &'static [Step] {
        const GPT2: Step = Step::Gpt2;
        match self {
            PreTokenizer::Default => &[
                Step::PunctRun { backtick: false },
                GPT2,
                Step::DigitRun,
                Step::Ascii3Digits,
            ],
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::Smollm => &[Step::DigitEach, GPT2],
            PreTokenizer::Llama3 => &[Step::Llama3 {
                max_digits: 3,
                marks: false,
            }],
            PreTokenizer::Qwen2 => &[Step::Llama3 {
                max_digits: 1,
                marks: false,
            }],
            PreTokenizer::Qwen35 => &[Step::Llama3 {
                max_digits: 1,
                marks: true,
            }],
            PreTokenizer::DeepseekCoder => &[
                Step::NewlineEach,
                Step::OptSpaceCategoryRun(LETTER),
                Step::OptSpaceCategoryRun(PUNCT),
                Step::ClassRun(DEEPSEEK_CJK),
                Step::DigitEach,
            ],
            PreTokenizer::Gemma4 => &[Step::NewlineRuns],
            PreTokenizer::Tekken => &[Step::CaseWords {
                max_digits: 1,
                contractions: false,
            }],
            PreTokenizer::O200k => &[Step::CaseWords {
                max_digits: 3,
                contractions: true,
            }],
            PreTokenizer::DeepseekLlm => &[
                Step::NewlineEach,
                Step::OptSpaceClassRun(DEEPSEEK_LETTERS),
                Step::OptSpaceClassRun(DEEPSEEK_PUNCT),
                Step::TrailingSpace,
                Step::ClassRun(DEEPSEEK_CJK),
                Step::DigitRun,
            ],
            PreTokenizer::Falcon => &[Step::PunctRun { backtick: true }, GPT2, Step::Ascii3Digits],
        }
    }

    /// Whether a whole word found in the vocabulary skips the merges (llama.cpp's
    /// `ignore_merges`).
    pub fn ignore_merges(self) -> bool {
        // tiktoken, whose vocabularies tekken and o200k carry, looks a whole word up
        // first. llama.cpp leaves this off for `gpt-4o`; on o200k's ranks the merges
        // rebuild every token from its bytes, so both give the same ids there.
        matches!(
            self,
            PreTokenizer::Llama3 | PreTokenizer::Tekken | PreTokenizer::O200k
        )
    }

    /// Whether words are GPT-2 byte-encoded before merging (all but Gemma 4, whose
    /// merges run over the characters of the `▁`-escaped text).
    pub fn byte_encoded(self) -> bool {
        self != PreTokenizer::Gemma4
    }

    /// Splits `cpts` into words: `out` receives `[start, end)` code point ranges that
    /// tile the input.
    pub fn split(
        self,
        cpts: &[u32],
        out: &mut Vec<(usize, usize)>,
        scratch: &mut Vec<(usize, usize)>,
    ) {
        out.clear();
        if cpts.is_empty() {
            return;
        }
        out.push((0, cpts.len()));
        let fl = Flags::get();
        for step in self.steps() {
            scratch.clear();
            let s = Splitter { c: cpts, fl };
            for &(a, b) in out.iter() {
                s.apply(*step, a, b, scratch);
            }
            std::mem::swap(out, scratch);
        }
    }
}

/// Letters of `deepseek-llm`'s second regex.
const DEEPSEEK_LETTERS: &[(u32, u32)] = &class!(
    "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃"
);
/// Punctuation of `deepseek-llm`'s third regex.
const DEEPSEEK_PUNCT: &[(u32, u32)] = &class!("!-/:-~！-／：-～‘-‟　-。");
/// CJK and Hangul of `deepseek-llm`'s fifth regex.
const DEEPSEEK_CJK: &[(u32, u32)] = &class!("一-龥ࠀ-一가-퟿");

const fn next_char(s: &[u8], i: usize) -> (u32, usize) {
    let b = s[i];
    let (len, init) = if b < 0x80 {
        (1, b as u32)
    } else if b < 0xE0 {
        (2, (b & 0x1F) as u32)
    } else if b < 0xF0 {
        (3, (b & 0x0F) as u32)
    } else {
        (4, (b & 0x07) as u32)
    };
    let mut c = init;
    let mut k = 1;
    while k < len {
        c = (c << 6) | (s[i + k] & 0x3F) as u32;
        k += 1;
    }
    (c, i + len)
}

const fn class_len(s: &str) -> usize {
    let s = s.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < s.len() {
        let (_, j) = next_char(s, i);
        i = j;
        if i < s.len() && s[i] == b'-' {
            i = next_char(s, i + 1).1;
        }
        n += 1;
    }
    n
}

const fn class_ranges<const N: usize>(s: &str) -> [(u32, u32); N] {
    let s = s.as_bytes();
    let mut out = [(0, 0); N];
    let (mut i, mut n) = (0, 0);
    while i < s.len() {
        let (lo, j) = next_char(s, i);
        i = j;
        let mut hi = lo;
        if i < s.len() && s[i] == b'-' {
            let (h, j) = next_char(s, i + 1);
            hi = h;
            i = j;
        }
        out[n] = (lo, hi);
        n += 1;
    }
    out
}

fn in_class(class: &[(u32, u32)], c: u32) -> bool {
    class.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

struct Splitter<'a> {
    c: &'a [u32],
    fl: Flags,
}

/// How a contraction's letters are matched.
#[derive(Clone, Copy)]
enum Fold {
    /// As written (GPT-2's `'s|'t|...`).
    Exact,
    /// ASCII letters in either case.
    Ascii,
    /// Unicode simple case folding, as `(?i:...)` in tiktoken's and Python's regex.
    Simple,
}

/// `[\r\n]`.
fn is_nl(c: u32) -> bool {
    c == 0x0A || c == 0x0D
}

impl Splitter<'_> {
    fn apply(&self, step: Step, a: usize, b: usize, out: &mut Vec<(usize, usize)>) {
        match step {
            Step::Gpt2 => self.gpt2(a, b, out),
            Step::Llama3 { max_digits, marks } => self.llama3(a, b, max_digits, marks, out),
            Step::PunctRun { backtick } => self.by_matches(a, b, out, |p| {
                self.run(p, b, |c| {
                    self.fl.of(c) & PUNCT != 0
                        || matches!(c, 0x24 | 0x2B | 0x3C..=0x3E | 0x5E | 0x7E | 0x7C)
                        || (backtick && c == 0x60)
                })
            }),
            Step::DigitRun => self.by_matches(a, b, out, |p| {
                self.run(p, b, |c| self.fl.of(c) & NUMBER != 0)
            }),
            Step::DigitEach => self.by_matches(a, b, out, |p| {
                (self.fl.of(self.c[p]) & NUMBER != 0).then_some(p + 1)
            }),
            Step::Ascii3Digits => self.by_matches(a, b, out, |p| {
                (p + 3 <= b && self.c[p..p + 3].iter().all(|c| (0x30..=0x39).contains(c)))
                    .then_some(p + 3)
            }),
            Step::NewlineEach => self.by_matches(a, b, out, |p| {
                matches!(self.c[p], 0x0A | 0x0D).then_some(p + 1)
            }),
            Step::OptSpaceClassRun(class) => self.by_matches(a, b, out, |p| {
                let member = |c: u32| in_class(class, self.wide(c));
                if self.wide_space(self.c[p]) && p + 1 < b && member(self.c[p + 1]) {
                    return self.run(p + 1, b, member);
                }
                self.run(p, b, member)
            }),
            Step::OptSpaceCategoryRun(cat) => self.by_matches(a, b, out, |p| {
                let member = |c: u32| self.fl.of(c) & cat != 0;
                if self.wide_space(self.c[p]) && p + 1 < b && member(self.c[p + 1]) {
                    return self.run(p + 1, b, member);
                }
                self.run(p, b, member)
            }),
            Step::NewlineRuns => {
                let mut p = a;
                while p < b {
                    let nl = self.c[p] == 0x0A;
                    let e = self.run(p, b, |c| (c == 0x0A) == nl).unwrap_or(p + 1);
                    out.push((p, e));
                    p = e;
                }
            }
            Step::TrailingSpace => self.by_matches(a, b, out, |p| {
                let end = self.run(p, b, |c| self.wide_space(c))?;
                (end == b).then_some(end)
            }),
            Step::ClassRun(class) => self.by_matches(a, b, out, |p| {
                self.run(p, b, |c| in_class(class, self.wide(c)))
            }),
            Step::CaseWords {
                max_digits,
                contractions,
            } => self.case_words(a, b, max_digits, contractions, out),
        }
    }

    /// llama.cpp hands non-category regexes a text where non-ASCII spaces became `\v`.
    fn wide(&self, c: u32) -> u32 {
        if c > 0x7F && self.fl.of(c) & SPACE != 0 {
            0x0B
        } else {
            c
        }
    }

    fn wide_space(&self, c: u32) -> bool {
        self.fl.of(c) & SPACE != 0
    }

    /// The end of the run of `pred` starting at `p`, if it is not empty.
    fn run(&self, p: usize, b: usize, pred: impl Fn(u32) -> bool) -> Option<usize> {
        let mut e = p;
        while e < b && pred(self.c[e]) {
            e += 1;
        }
        (e > p).then_some(e)
    }

    /// Regex-style splitting: `m(p)` is the end of a match starting at `p`, if any;
    /// matches and the gaps between them become pieces.
    fn by_matches(
        &self,
        a: usize,
        b: usize,
        out: &mut Vec<(usize, usize)>,
        m: impl Fn(usize) -> Option<usize>,
    ) {
        let (mut gap, mut p) = (a, a);
        while p < b {
            match m(p) {
                Some(e) => {
                    if p > gap {
                        out.push((gap, p));
                    }
                    out.push((p, e));
                    gap = e;
                    p = e;
                }
                None => p += 1,
            }
        }
        if gap < b {
            out.push((gap, b));
        }
    }

    /// Flags at `p`, `None` outside the piece.
    fn at(&self, p: usize, b: usize) -> Option<u16> {
        (p < b).then(|| self.fl.of(self.c[p]))
    }

    /// The end of `'s|'t|'re|'ve|'m|'ll|'d` at `p`, its letters matched as `fold` says.
    fn contraction(&self, p: usize, b: usize, fold: Fold) -> Option<usize> {
        if self.c[p] != u32::from(b'\'') || p + 1 >= b {
            return None;
        }
        let low = |c: u32| match (fold, c) {
            (Fold::Ascii | Fold::Simple, 0x41..=0x5A) => c + 32,
            // Simple case folding maps LATIN SMALL LETTER LONG S to `s` (and maps no
            // other non-ASCII letter to one of these).
            (Fold::Simple, 0x17F) => u32::from(b's'),
            _ => c,
        };
        let n1 = low(self.c[p + 1]);
        if [b's', b't', b'm', b'd'].iter().any(|&x| n1 == u32::from(x)) {
            return Some(p + 2);
        }
        if p + 2 < b {
            let n2 = low(self.c[p + 2]);
            let pair = |x: u8, y: u8| n1 == u32::from(x) && n2 == u32::from(y);
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return Some(p + 3);
            }
        }
        None
    }

    /// The end of a `\s+(?!\S)|\s+` match at `p` (the caller knows `p` is a space).
    fn spaces(&self, p: usize, b: usize) -> usize {
        let n = self.run(p, b, |c| self.fl.of(c) & SPACE != 0).unwrap_or(p) - p;
        if n > 1 && p + n < b {
            p + n - 1
        } else {
            p + n.max(1)
        }
    }

    fn gpt2(&self, a: usize, b: usize, out: &mut Vec<(usize, usize)>) {
        const WLN: u16 = SPACE | LETTER | NUMBER;
        let mut p = a;
        while p < b {
            let end = if let Some(e) = self.contraction(p, b, Fold::Exact) {
                e
            } else {
                let q = if self.c[p] == 0x20 { p + 1 } else { p };
                match self.at(q, b) {
                    Some(f) if f & LETTER != 0 => {
                        self.run(q, b, |c| self.fl.of(c) & LETTER != 0).unwrap()
                    }
                    Some(f) if f & NUMBER != 0 => {
                        self.run(q, b, |c| self.fl.of(c) & NUMBER != 0).unwrap()
                    }
                    Some(f) if f & WLN == 0 => {
                        self.run(q, b, |c| self.fl.of(c) & WLN == 0).unwrap()
                    }
                    _ => self.spaces(p, b),
                }
            };
            out.push((p, end));
            p = end;
        }
    }

    fn llama3(
        &self,
        a: usize,
        b: usize,
        max_digits: usize,
        marks: bool,
        out: &mut Vec<(usize, usize)>,
    ) {
        let word: u16 = if marks { LETTER | ACCENT } else { LETTER };
        let wln: u16 = SPACE | word | NUMBER;
        let mut p = a;
        while p < b {
            let c = self.c[p];
            let f = self.fl.of(c);
            // llama.cpp's rewrite of `(?i:...)`: `'[sS]|'[tT]|...`.
            if let Some(e) = self.contraction(p, b, Fold::Ascii) {
                out.push((p, e));
                p = e;
                continue;
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+ (or [\p{L}\p{M}]+)
            if !is_nl(c)
                && f & NUMBER == 0
                && (f & word != 0 || self.at(p + 1, b).is_some_and(|g| g & word != 0))
            {
                let e = self
                    .run(p + 1, b, |c| self.fl.of(c) & word != 0)
                    .unwrap_or(p + 1);
                out.push((p, e));
                p = e;
                continue;
            }
            // \p{N}{1,max_digits}
            if f & NUMBER != 0 {
                let e = self.run(p, b, |c| self.fl.of(c) & NUMBER != 0).unwrap();
                while p < e {
                    let s = (p + max_digits).min(e);
                    out.push((p, s));
                    p = s;
                }
                continue;
            }
            // ' '?[^\s\p{L}\p{N}]+[\r\n]*, else \s*[\r\n]+ | \s+(?!\S) | \s+ | anything
            // else alone
            let e = self
                .symbols(p, b, wln, is_nl)
                .unwrap_or_else(|| self.space_tail(p, b));
            out.push((p, e));
            p = e;
        }
    }

    /// The case-splitting tiktoken regex, alternative by alternative, first match
    /// wins (`C` is `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` with `contractions`, else empty):
    /// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+C`
    /// `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*C`
    /// `|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    /// Call the two letter classes "upper" and "lower": modifier and other letters
    /// (`Lm`, `Lo`) and marks are in both.
    fn case_words(
        &self,
        a: usize,
        b: usize,
        max_digits: usize,
        contractions: bool,
        out: &mut Vec<(usize, usize)>,
    ) {
        let mut p = a;
        while p < b {
            let c = self.c[p];
            let f = self.fl.of(c);
            // The optional lead: neither CR, LF, a letter nor a number.
            let lead = !is_nl(c) && f & (LETTER | NUMBER) == 0;
            let word = (lead && p + 1 < b)
                .then(|| self.upper_lower(p + 1, b))
                .flatten()
                .or_else(|| self.upper_lower(p, b))
                .or_else(|| {
                    let q = if lead && p + 1 < b && self.upper_like(self.c[p + 1]) {
                        p + 1
                    } else if self.upper_like(c) {
                        p
                    } else {
                        return None;
                    };
                    let e = self.run(q, b, |c| self.upper_like(c)).unwrap();
                    Some(self.run(e, b, |c| self.lower_like(c)).unwrap_or(e))
                });
            let e = match word {
                // The contraction is optional and ends the alternative: it never makes
                // the word match fail, so it only extends the match found.
                Some(e) if contractions && e < b => {
                    self.contraction(e, b, Fold::Simple).unwrap_or(e)
                }
                Some(e) => e,
                None => self.case_words_rest(p, b, max_digits),
            };
            out.push((p, e));
            p = e;
        }
    }

    /// `[upper]*[lower]+` at `q`: the upper run, then the lower run after it; where
    /// none follows, backtracking gives back upper characters until one is also
    /// lower, which then ends the match.
    fn upper_lower(&self, q: usize, b: usize) -> Option<usize> {
        let e = self.run(q, b, |c| self.upper_like(c)).unwrap_or(q);
        if let Some(end) = self.run(e, b, |c| self.lower_like(c)) {
            return Some(end);
        }
        (q..e)
            .rev()
            .find(|&k| self.lower_like(self.c[k]))
            .map(|k| k + 1)
    }

    /// The alternatives after the two word ones, at `p`.
    fn case_words_rest(&self, p: usize, b: usize, max_digits: usize) -> usize {
        const SLN: u16 = SPACE | LETTER | NUMBER;
        let c = self.c[p];
        // \p{N}{1,max_digits}
        if self.fl.of(c) & NUMBER != 0 {
            let e = self.run(p, b, |c| self.fl.of(c) & NUMBER != 0).unwrap();
            return e.min(p + max_digits);
        }
        // ' '?[^\s\p{L}\p{N}]+[\r\n/]*, else \s*[\r\n]+ | \s+(?!\S) | \s+ (every other
        // character is a space by now)
        self.symbols(p, b, SLN, |c| is_nl(c) || c == 0x2F)
            .unwrap_or_else(|| self.space_tail(p, b))
    }

    /// `' '?[^<stop>]+[<tail>]*` at `p` (`stop`: flag bits), `None` where it does not match.
    fn symbols(&self, p: usize, b: usize, stop: u16, tail: impl Fn(u32) -> bool) -> Option<usize> {
        let q = if self.c[p] == 0x20 { p + 1 } else { p };
        if self.at(q, b).is_none_or(|g| g & stop != 0) {
            return None;
        }
        let mut e = self.run(q, b, |c| self.fl.of(c) & stop == 0).unwrap();
        while e < b && tail(self.c[e]) {
            e += 1;
        }
        Some(e)
    }

    /// `\s*[\r\n]+ | \s+(?!\S) | \s+` at `p`, or the character at `p` alone.
    fn space_tail(&self, p: usize, b: usize) -> usize {
        let ws_end = self.run(p, b, |c| self.fl.of(c) & SPACE != 0).unwrap_or(p);
        match (p..ws_end).rev().find(|&i| is_nl(self.c[i])) {
            Some(i) => i + 1,
            None => self.spaces(p, b),
        }
    }

    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
    fn upper_like(&self, c: u32) -> bool {
        let f = self.fl.of(c);
        f & ACCENT != 0 || (f & LETTER != 0 && f & LOWER == 0)
    }

    /// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
    fn lower_like(&self, c: u32) -> bool {
        let f = self.fl.of(c);
        f & ACCENT != 0 || (f & LETTER != 0 && f & UPPER == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, s: &str) -> Vec<String> {
        let cpts: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        pre.split(&cpts, &mut out, &mut scratch);
        out.iter()
            .map(|&(a, b)| s.chars().skip(a).take(b - a).collect())
            .collect()
    }

    #[test]
    fn qwen35_keeps_combining_marks_in_words() {
        // "cafe" + U+0301 (a combining acute) + "s"
        let s = "cafe\u{301}s 12";
        assert_eq!(
            words(PreTokenizer::Qwen35, s),
            ["cafe\u{301}s", " ", "1", "2"]
        );
        assert_eq!(
            words(PreTokenizer::Qwen2, s),
            ["cafe", "\u{301}s", " ", "1", "2"]
        );
    }

    #[test]
    fn deepseek_coder_and_gemma4_splits() {
        assert_eq!(
            words(PreTokenizer::DeepseekCoder, "x = foo(12)\n"),
            ["x", " =", " foo", "(", "1", "2", ")", "\n"]
        );
        assert_eq!(
            words(PreTokenizer::Gemma4, "a b\n\nc"),
            ["a b", "\n\n", "c"]
        );
    }

    #[test]
    fn gpt2_regex() {
        let w = words(PreTokenizer::Gpt2, "Hello world's  end!!  \n x");
        assert_eq!(
            w,
            ["Hello", " world", "'s", " ", " end", "!!", "  \n", " x"]
        );
        assert_eq!(
            words(PreTokenizer::Gpt2, "a \n\tb"),
            ["a", " \n", "\t", "b"]
        );
        assert_eq!(words(PreTokenizer::Gpt2, "a  "), ["a", "  "]);
    }

    #[test]
    fn default_applies_four_regexes() {
        assert_eq!(
            words(PreTokenizer::Default, "x 12345, y"),
            ["x", " ", "123", "45", ",", " y"]
        );
    }

    #[test]
    fn smollm_splits_digits_first() {
        assert_eq!(words(PreTokenizer::Smollm, "ab 12"), ["ab", " ", "1", "2"]);
    }

    #[test]
    fn llama3_regex() {
        let w = words(PreTokenizer::Llama3, "I'M 12345 ok?!\n\n  hi");
        assert_eq!(
            w,
            ["I", "'M", " ", "123", "45", " ok", "?!\n\n", " ", " hi"]
        );
        assert_eq!(words(PreTokenizer::Qwen2, "x12"), ["x", "1", "2"]);
    }

    #[test]
    fn deepseek_llm_regexes() {
        let w = words(PreTokenizer::DeepseekLlm, "Hello, 世界 123\n");
        assert_eq!(w, ["Hello", ",", " ", "世界", " ", "123", "\n"]);
        assert_eq!(words(PreTokenizer::DeepseekLlm, "ab  "), ["ab", "  "]);
    }

    #[test]
    fn tekken_regex() {
        // Python's `regex.findall` with the pattern of tekken_240718.json's config.
        assert_eq!(
            words(
                PreTokenizer::Tekken,
                "helloWorld HELLOworld ʰA 中文ABC don't I'M a/b\n/c"
            ),
            [
                "hello",
                "World",
                " HELLOworld",
                " ʰ",
                "A",
                " 中文",
                "ABC",
                " don",
                "'t",
                " I",
                "'M",
                " a",
                "/b",
                "\n",
                "/c"
            ]
        );
        assert_eq!(
            words(
                PreTokenizer::Tekken,
                "x=12;//\n\n  y\u{301}\u{301}Z \u{301}ABC\t\tend  "
            ),
            [
                "x",
                "=",
                "1",
                "2",
                ";//\n\n",
                " ",
                " y\u{301}\u{301}",
                "Z",
                " \u{301}",
                "ABC",
                "\t",
                "\tend",
                "  "
            ]
        );
        assert_eq!(
            words(PreTokenizer::Tekken, "ǅemal ÉCOLEs ß!?\r\n"),
            ["ǅemal", " ÉCOLEs", " ß", "!?\r\n"]
        );
    }

    #[test]
    fn o200k_regex() {
        // Python's `regex.findall` with tiktoken's o200k_base `pat_str`.
        assert_eq!(
            words(
                PreTokenizer::O200k,
                "helloWorld HELLOworld don't I'LL we've She'S 1234567 x=12;//\n\n  y"
            ),
            [
                "hello",
                "World",
                " HELLOworld",
                " don't",
                " I'LL",
                " we've",
                " She'S",
                " ",
                "123",
                "456",
                "7",
                " x",
                "=",
                "12",
                ";//\n\n",
                " ",
                " y"
            ]
        );
        assert_eq!(
            words(
                PreTokenizer::O200k,
                "don'\u{17F} it's'd ABC'm ab'Re 'll \u{2B0}A\u{301}'s \u{663}\u{664}\u{665}\u{666} 12a"
            ),
            [
                "don'\u{17F}",
                " it's",
                "'d",
                " ABC'm",
                " ab'Re",
                " '",
                "ll",
                " \u{2B0}A\u{301}'s",
                " ",
                "\u{663}\u{664}\u{665}",
                "\u{666}",
                " ",
                "12",
                "a"
            ]
        );
        assert_eq!(PreTokenizer::from_name("llama4"), Some(PreTokenizer::O200k));
    }

    #[test]
    fn deepseek_classes_parse() {
        assert_eq!(
            DEEPSEEK_CJK,
            &[(0x4E00, 0x9FA5), (0x0800, 0x4E00), (0xAC00, 0xD7FF)]
        );
        assert_eq!(DEEPSEEK_LETTERS[0], (0x41, 0x5A));
    }
}
