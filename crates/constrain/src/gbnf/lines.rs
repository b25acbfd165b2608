//! Byte offset -> 1-based (line, column), answered without rescanning the text.
//!
//! A line ends at `\n` (a `\r` before it is an ordinary character of the line, as
//! before); the column counts Unicode characters, not bytes.

/// Bytes per block of the character-count table: a column is counted from the nearest
/// block start, so no query scans more than this many bytes of its line.
const BLOCK: usize = 64;

/// Where lines start, and how many characters precede each block of the text.
pub(super) struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset of each line's first byte (the first is 0).
    line_starts: Vec<usize>,
    /// Characters before byte `i * BLOCK`.
    chars_before_block: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text` in one pass.
    pub(super) fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut line_starts = vec![0];
        line_starts.extend(
            (0..bytes.len())
                .filter(|&i| bytes[i] == b'\n')
                .map(|i| i + 1),
        );
        let mut chars_before_block = Vec::with_capacity(bytes.len() / BLOCK + 1);
        let mut chars = 0u32;
        for block in bytes.chunks(BLOCK) {
            chars_before_block.push(chars);
            chars += count_chars(block);
        }
        chars_before_block.push(chars);
        LineIndex {
            text,
            line_starts,
            chars_before_block,
        }
    }

    /// The 1-based line and column of byte `pos` (clamped to the end of the text).
    pub(super) fn line_col(&self, pos: usize) -> (u32, u32) {
        let pos = pos.min(self.text.len());
        // The last line starting at or before `pos`.
        let line = self.line_starts.partition_point(|&s| s <= pos) - 1;
        let col = self.chars_before(pos) - self.chars_before(self.line_starts[line]);
        (line as u32 + 1, col + 1)
    }

    /// Characters in `text[..pos]`.
    fn chars_before(&self, pos: usize) -> u32 {
        let block = pos / BLOCK;
        let start = block * BLOCK;
        self.chars_before_block[block] + count_chars(&self.text.as_bytes()[start..pos])
    }
}

/// Characters that start in `bytes` (every byte but UTF-8 continuation bytes).
fn count_chars(bytes: &[u8]) -> u32 {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u32
}

#[cfg(test)]
mod tests {
    use super::LineIndex;

    /// The parser's former per-call rescan, kept as the reference.
    fn rescan(text: &str, pos: usize) -> (u32, u32) {
        let before = &text[..pos.min(text.len())];
        let line = before.matches('\n').count() as u32 + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
        (line, col)
    }

    #[test]
    fn matches_the_rescan_at_every_character_boundary() {
        let long_line = format!("root ::= \"{}\" x\n", "é😀a".repeat(40));
        let texts = [
            "",
            "root ::= \"a\"",
            "a ::= \"x\"\r\nroot ::= a\r\n\r\n  b ::= [é-ü]\n",
            "\n\n\nroot ::= \"ぁ\" \"😀\"\r\nx",
            "\r\r\nroot\r::= \"a\"",
            long_line.as_str(),
        ];
        for text in texts {
            let index = LineIndex::new(text);
            for pos in (0..=text.len() + 2).filter(|&p| p > text.len() || text.is_char_boundary(p))
            {
                assert_eq!(
                    index.line_col(pos),
                    rescan(text, pos),
                    "{text:?} at byte {pos}"
                );
            }
        }
    }

    #[test]
    fn known_positions() {
        let text = "a ::= \"é\"\r\nroot ::= a 😀 b\nb ::= \"x\"";
        let index = LineIndex::new(text);
        let at = |needle: &str| index.line_col(text.find(needle).unwrap());
        assert_eq!(index.line_col(0), (1, 1));
        // `\r` is a character of line 1; line 2 starts after the `\n`.
        assert_eq!(index.line_col(text.find('\r').unwrap()), (1, 10));
        assert_eq!(at("root"), (2, 1));
        // Two characters after `root ::= a `: the emoji counts once, not four bytes.
        assert_eq!(at("😀"), (2, 12));
        assert_eq!(at(" b\n"), (2, 13));
        assert_eq!(at("b ::="), (3, 1));
        assert_eq!(index.line_col(text.len()), (3, 10));
    }
}
