//! Code points as llama.cpp sees them: its lax UTF-8 decoder, the general-category
//! classes its pre-tokenizers use (and the letter cases tekken's uses), and GPT-2's
//! byte <-> character mapping.

use std::sync::OnceLock;

/// `\p{L}`.
pub(super) const LETTER: u16 = 1;
/// `\p{N}`.
pub(super) const NUMBER: u16 = 2;
/// `\p{P}`.
pub(super) const PUNCT: u16 = 4;
/// Unicode `White_Space` (what Python's `regex` `\s` matches; llama.cpp's table).
pub(super) const SPACE: u16 = 8;
/// llama.cpp's "control": `\p{Cc}`, `\p{Cf}`, `\p{Co}` and the surrogates (not unassigned `Cn`).
pub(super) const CONTROL: u16 = 16;
/// `\p{M}` (llama.cpp's "accent mark").
pub(super) const ACCENT: u16 = 32;
/// `\p{S}`.
pub(super) const SYMBOL: u16 = 64;
/// `[\p{Lu}\p{Lt}]`: the letters tekken's regex allows only before lowercase ones.
pub(super) const UPPER: u16 = 128;
/// `\p{Ll}`: the letters tekken's regex allows only after uppercase ones.
pub(super) const LOWER: u16 = 256;

/// One past the largest code point.
const N_CPTS: usize = 0x11_0000;

/// Unicode's `White_Space` property: the code points llama.cpp treats as `\s`.
const WHITE_SPACE: &[u32] = &[
    0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
    0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
];

fn table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u16; N_CPTS];
        for (class, bit) in [
            (r"\p{L}", LETTER),
            (r"\p{N}", NUMBER),
            (r"\p{P}", PUNCT),
            (r"[\p{Cc}\p{Cf}\p{Co}]", CONTROL),
            (r"\p{M}", ACCENT),
            (r"\p{S}", SYMBOL),
            (r"[\p{Lu}\p{Lt}]", UPPER),
            (r"\p{Ll}", LOWER),
        ] {
            for (lo, hi) in class_ranges(class) {
                for f in &mut t[lo as usize..=hi as usize] {
                    *f |= bit;
                }
            }
        }
        for &c in WHITE_SPACE {
            t[c as usize] |= SPACE;
        }
        // Surrogates are no `char`, so regex-syntax's `Cs` is empty; llama.cpp decodes
        // them unchecked and counts them as control.
        for f in &mut t[0xD800..=0xDFFF] {
            *f |= CONTROL;
        }
        t
    })
}

/// The code point ranges of a Unicode class, from regex-syntax's tables.
fn class_ranges(class: &str) -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::parse(class).expect("a valid Unicode class");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        _ => unreachable!("a Unicode class parses to a class"),
    }
}

/// A flags lookup bound to the table, to keep the `OnceLock` check out of hot loops.
#[derive(Clone, Copy)]
pub(super) struct Flags(&'static [u16]);

impl Flags {
    pub(super) fn get() -> Flags {
        Flags(table())
    }

    #[inline]
    pub(super) fn of(self, cpt: u32) -> u16 {
        self.0.get(cpt as usize).copied().unwrap_or(0)
    }
}

pub(super) const REPLACEMENT: u32 = 0xFFFD;

/// Decodes like llama.cpp's `unicode_cpts_from_utf8`: structurally valid sequences are
/// taken as they are (overlong forms and surrogates included, unchecked), and a byte
/// that starts no valid sequence becomes U+FFFD and is skipped alone.
///
/// One deliberate difference: a 4-byte sequence above U+10FFFF (`f4 90 80 80`) makes
/// llama.cpp abort later, when it re-encodes the code point; here its lead byte is
/// treated as invalid instead (so it becomes U+FFFD and each continuation byte does too).
pub(super) fn decode_lax(bytes: &[u8], out: &mut Vec<u32>) {
    out.clear();
    out.reserve(bytes.len());
    let n = bytes.len();
    let cont = |i: usize| i < n && bytes[i] & 0xC0 == 0x80;
    let mut i = 0;
    while i < n {
        let b = bytes[i];
        if b < 0x80 {
            out.push(b as u32);
            i += 1;
            continue;
        }
        let (len, init) = match b {
            0xC0..=0xDF => (2, (b & 0x1F) as u32),
            0xE0..=0xEF => (3, (b & 0x0F) as u32),
            0xF0..=0xF7 => (4, (b & 0x07) as u32),
            _ => (0, 0),
        };
        if len == 0 || !(1..len).all(|k| cont(i + k)) {
            out.push(REPLACEMENT);
            i += 1;
            continue;
        }
        let cpt = (1..len).fold(init, |acc, k| (acc << 6) | (bytes[i + k] & 0x3F) as u32);
        if cpt > 0x10FFFF {
            out.push(REPLACEMENT);
            i += 1;
            continue;
        }
        out.push(cpt);
        i += len;
    }
}

/// Encodes a code point like llama.cpp's `unicode_cpt_to_utf8` (surrogates included).
#[inline]
pub(super) fn encode_lax(cpt: u32, out: &mut Vec<u8>) {
    match cpt {
        0..=0x7F => out.push(cpt as u8),
        0x80..=0x7FF => {
            out.extend_from_slice(&[0xC0 | (cpt >> 6) as u8, 0x80 | (cpt & 0x3F) as u8])
        }
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (cpt >> 12) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xF0 | ((cpt >> 18) & 0x07) as u8,
            0x80 | ((cpt >> 12) & 0x3F) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
    }
}

/// The length llama.cpp assigns to a UTF-8 sequence from its first byte alone.
#[inline]
pub(super) fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

/// GPT-2's byte -> character table: printable Latin-1 bytes stand for themselves, the
/// other 68 bytes take U+0100.. in byte order.
pub(super) fn gpt2_byte_to_char() -> [u32; 256] {
    let mut map = [0u32; 256];
    let mut next = 256;
    for (b, m) in map.iter_mut().enumerate() {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        *m = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
    }
    map
}

/// The inverse of [`gpt2_byte_to_char`]: `None` for characters no byte maps to.
pub(super) fn gpt2_char_to_byte(c: u32) -> Option<u8> {
    static INV: OnceLock<[i16; 324]> = OnceLock::new();
    let inv = INV.get_or_init(|| {
        let mut inv = [-1i16; 324];
        for (b, c) in gpt2_byte_to_char().iter().enumerate() {
            inv[*c as usize] = b as i16;
        }
        inv
    });
    inv.get(c as usize).and_then(|&b| u8::try_from(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        let flags = |c: u32| Flags::get().of(c);
        assert_eq!(flags('a' as u32), LETTER | LOWER);
        assert_eq!(flags('é' as u32), LETTER | LOWER);
        assert_eq!(flags('É' as u32), LETTER | UPPER);
        assert_eq!(flags(0x1C5), LETTER | UPPER); // ǅ, titlecase
        assert_eq!(flags(0x2B0), LETTER); // ʰ, a modifier letter
        assert_eq!(flags('中' as u32), LETTER);
        assert_eq!(flags('7' as u32), NUMBER);
        assert_eq!(flags('٣' as u32), NUMBER);
        assert_eq!(flags('!' as u32), PUNCT);
        assert_eq!(flags('$' as u32), SYMBOL);
        assert_eq!(flags(0x301), ACCENT);
        assert_eq!(flags(0x200B), CONTROL);
        assert_eq!(flags(' ' as u32), SPACE);
        assert_eq!(flags(0x3000), SPACE);
        assert_eq!(flags(0x1C), CONTROL);
        assert_eq!(flags(0xD800), CONTROL);
        assert_eq!(flags(0x11_0000), 0);
    }

    #[test]
    fn lax_decoding_follows_llama_cpp() {
        let mut v = Vec::new();
        decode_lax(b"a\xff\xc0\x80\xed\xa0\x80\xe2\x82", &mut v);
        assert_eq!(v, [0x61, REPLACEMENT, 0, 0xD800, REPLACEMENT, REPLACEMENT]);
        decode_lax(b"\xf4\x90\x80\x80", &mut v);
        assert_eq!(v, [REPLACEMENT; 4]);
        let mut b = Vec::new();
        encode_lax(0xD800, &mut b);
        assert_eq!(b, b"\xed\xa0\x80");
    }

    #[test]
    fn gpt2_mapping_is_a_bijection() {
        let m = gpt2_byte_to_char();
        assert_eq!(m[b'!' as usize], '!' as u32);
        assert_eq!(m[b' ' as usize], 0x120);
        assert_eq!(m[b'\n' as usize], 0x10A);
        for b in 0..=255u8 {
            assert_eq!(gpt2_char_to_byte(m[b as usize]), Some(b));
        }
        assert_eq!(gpt2_char_to_byte(0x20), None);
    }
}
