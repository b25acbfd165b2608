//! A bounds-checked little-endian reader: every read is checked against the end of
//! the buffer before it happens, so a lying length can never index past it.

use super::error::{GgufError, What};

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    pub(super) fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    pub(super) fn bytes(&mut self, n: u64, what: What) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                len: self.buf.len() as u64,
            });
        }
        let n = n as usize;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(super) fn array<const N: usize>(&mut self, what: What) -> Result<[u8; N], GgufError> {
        let s = self.bytes(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(super) fn u32(&mut self, what: What) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(super) fn u64(&mut self, what: What) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length then bytes (not necessarily valid UTF-8).
    pub(super) fn string(&mut self, what: What) -> Result<&'a [u8], GgufError> {
        let n = self.u64(what)?;
        self.bytes(n, what)
    }
}
