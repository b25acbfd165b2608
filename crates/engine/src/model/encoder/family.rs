//! What sets each encoder architecture apart from the shared post-norm graph: how a token
//! learns its position, and the feed-forward block. Everything else (fused or separate
//! Q/K/V, optional biases, token types, pooling) is read off the file.

/// How a token's position enters the pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Positions {
    /// A learned table (`position_embd`) added to the embeddings.
    Table,
    /// Rotary on queries and keys in every layer, NeoX halves (`rope.freq_base`).
    Rotary,
}

/// The feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FeedForward {
    /// `down·gelu(up·x + b) + b`.
    Gelu,
    /// `down·(silu(gate·x) * up·x)`. llama.cpp's graph for this form passes no FFN
    /// biases, so any the file has are not read.
    SwiGlu,
}

/// One encoder architecture (`general.architecture`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct EncoderFamily {
    pub name: &'static str,
    pub positions: Positions,
    pub ffn: FeedForward,
}

/// BERT, MiniLM, BGE and the cross-encoders.
const BERT: EncoderFamily = EncoderFamily {
    name: "bert",
    positions: Positions::Table,
    ffn: FeedForward::Gelu,
};

/// nomic-embed-text (v1, v1.5).
const NOMIC_BERT: EncoderFamily = EncoderFamily {
    name: "nomic-bert",
    positions: Positions::Rotary,
    ffn: FeedForward::SwiGlu,
};

const FAMILIES: &[EncoderFamily] = &[BERT, NOMIC_BERT];

/// The family of architecture `name`, if the encoder runs it.
/// Every encoder family's name.
pub(in crate::model) fn names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name).collect()
}

pub(super) fn find(name: &str) -> Option<&'static EncoderFamily> {
    FAMILIES.iter().find(|f| f.name == name)
}
