//! An independent RFC 8259 recogniser (recursive descent), for documents serde_json
//! cannot hold (numbers beyond f64).
#![allow(dead_code)]

pub fn is_json(s: &[u8]) -> bool {
    let mut p = P { s, i: 0 };
    p.ws();
    p.value(0) && {
        p.ws();
        p.i == s.len()
    }
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        let ok = self.peek() == Some(b);
        self.i += usize::from(ok);
        ok
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn digits(&mut self) -> usize {
        let st = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - st
    }
    fn value(&mut self, depth: usize) -> bool {
        if depth > 500 {
            return false;
        }
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.eat(b'}') {
                    return true;
                }
                loop {
                    self.ws();
                    if !self.string() {
                        return false;
                    }
                    self.ws();
                    if !self.eat(b':') {
                        return false;
                    }
                    self.ws();
                    if !self.value(depth + 1) {
                        return false;
                    }
                    self.ws();
                    if self.eat(b'}') {
                        return true;
                    }
                    if !self.eat(b',') {
                        return false;
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.eat(b']') {
                    return true;
                }
                loop {
                    self.ws();
                    if !self.value(depth + 1) {
                        return false;
                    }
                    self.ws();
                    if self.eat(b']') {
                        return true;
                    }
                    if !self.eat(b',') {
                        return false;
                    }
                }
            }
            Some(b'"') => self.string(),
            Some(b't') => self.lit(b"true"),
            Some(b'f') => self.lit(b"false"),
            Some(b'n') => self.lit(b"null"),
            _ => self.number(),
        }
    }
    fn lit(&mut self, l: &[u8]) -> bool {
        let ok = self.s[self.i..].starts_with(l);
        self.i += if ok { l.len() } else { 0 };
        ok
    }
    fn number(&mut self) -> bool {
        self.eat(b'-');
        if !self.eat(b'0')
            && (!self.peek().is_some_and(|b| (b'1'..=b'9').contains(&b)) || self.digits() == 0)
        {
            return false;
        }
        if self.eat(b'.') && self.digits() == 0 {
            return false;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return false;
            }
        }
        true
    }
    fn string(&mut self) -> bool {
        if !self.eat(b'"') {
            return false;
        }
        let start = self.i;
        loop {
            match self.peek() {
                None => return false,
                Some(b'"') => {
                    let ok = std::str::from_utf8(&self.s[start..self.i]).is_ok();
                    self.i += 1;
                    return ok;
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                if !self.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                                    return false;
                                }
                                self.i += 1;
                            }
                        }
                        _ => return false,
                    }
                }
                Some(b) if b < 0x20 => return false,
                Some(_) => self.i += 1,
            }
        }
    }
}
