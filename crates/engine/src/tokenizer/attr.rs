//! Token types (as stored in GGUF) and token attributes (as llama.cpp derives them).

/// `tokenizer.ggml.token_type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenType {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

impl TokenType {
    /// Any other stored value is `Undefined`, as in llama.cpp.
    pub fn from_i64(v: i64) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }

    fn attr(self) -> TokenAttr {
        match self {
            TokenType::Undefined => TokenAttr::UNDEFINED,
            TokenType::Normal => TokenAttr::NORMAL,
            TokenType::Unknown => TokenAttr::UNKNOWN,
            TokenType::Control => TokenAttr::CONTROL,
            TokenType::UserDefined => TokenAttr::USER_DEFINED,
            TokenType::Unused => TokenAttr::UNUSED,
            TokenType::Byte => TokenAttr::BYTE,
        }
    }
}

/// llama.cpp's `llama_token_attr` bit set: the stored type plus what its loader adds
/// (CONTROL for end-of-turn-looking tokens, UNUSED for control tokens named "unused",
/// strip flags for a few model families).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TokenAttr(pub u32);

impl TokenAttr {
    pub const UNDEFINED: TokenAttr = TokenAttr(0);
    pub const UNKNOWN: TokenAttr = TokenAttr(1 << 0);
    pub const UNUSED: TokenAttr = TokenAttr(1 << 1);
    pub const NORMAL: TokenAttr = TokenAttr(1 << 2);
    pub const CONTROL: TokenAttr = TokenAttr(1 << 3);
    pub const USER_DEFINED: TokenAttr = TokenAttr(1 << 4);
    pub const BYTE: TokenAttr = TokenAttr(1 << 5);
    pub const NORMALIZED: TokenAttr = TokenAttr(1 << 6);
    pub const LSTRIP: TokenAttr = TokenAttr(1 << 7);
    pub const RSTRIP: TokenAttr = TokenAttr(1 << 8);
    pub const SINGLE_WORD: TokenAttr = TokenAttr(1 << 9);

    pub fn from_type(t: TokenType) -> TokenAttr {
        t.attr()
    }

    /// Whether any bit of `other` is set.
    #[inline]
    pub fn any(self, other: TokenAttr) -> bool {
        self.0 & other.0 != 0
    }

    #[inline]
    pub fn with(self, other: TokenAttr) -> TokenAttr {
        TokenAttr(self.0 | other.0)
    }

    #[inline]
    pub fn without(self, other: TokenAttr) -> TokenAttr {
        TokenAttr(self.0 & !other.0)
    }
}

impl std::ops::BitOr for TokenAttr {
    type Output = TokenAttr;
    fn bitor(self, rhs: TokenAttr) -> TokenAttr {
        self.with(rhs)
    }
}
