//! Embeddings and reranking: encoder models beside the generation models, run without
//! sampling. The server's embedding and rerank routes (and `llamay embed`) build an
//! [`EmbedRequest`] or a [`RerankRequest`] and call `Runtime::embed` or
//! `Runtime::rerank` (in `retrieval`, above the service, so this room does not
//! import the runtime that holds it).

mod encoders;
mod inputs;

use std::time::Duration;

use llamay_engine::{l2_normalize, Pooling};

pub use encoders::{Encoders, LoadedEncoder, Purpose};
pub(crate) use inputs::frame_pair;
use inputs::prepare_input;

use crate::error::Error;

/// One input to embed.
#[derive(Clone, Debug, PartialEq)]
pub enum EmbedInput {
    /// Text, tokenized with the model's special tokens (`[CLS] … [SEP]` for BERT).
    Text(String),
    /// Token ids, used as they are.
    Tokens(Vec<u32>),
}

/// What every embedding route asks.
#[derive(Clone, Debug, Default)]
pub struct EmbedRequest {
    /// The model's name (empty: the server's `-embed` model).
    pub model: String,
    /// What to embed, one vector each (at least one input).
    pub inputs: Vec<EmbedInput>,
    /// Cut inputs longer than the context instead of refusing them.
    pub truncate: bool,
    /// Keep the first `dimensions` values, renormalised.
    pub dimensions: Option<usize>,
    /// The client's `keep_alive` (Ollama's). Not read by the runtime yet: encoders
    /// stay loaded until newer ones push them out.
    pub keep_alive: Option<Duration>,
}

/// Embeddings, one per input, L2-normalised.
#[derive(Clone, Debug)]
pub struct Embedded {
    /// The name of the encoder that embedded them.
    pub model: String,
    /// One vector per input, in the inputs' order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens read over all inputs (after truncation).
    pub prompt_tokens: usize,
    /// Time spent getting the encoder: its load, or near zero when it was loaded.
    pub load_duration: Duration,
    /// Time the whole request took, load included.
    pub total_duration: Duration,
}

/// A query and the documents to score against it.
#[derive(Clone, Debug, Default)]
pub struct RerankRequest {
    /// The model's name (empty: the server's `-rerank` model).
    pub model: String,
    /// The text the documents are scored against (not empty).
    pub query: String,
    /// The texts to score (at least one).
    pub documents: Vec<String>,
    /// The client's `keep_alive`. Not read by the runtime yet: encoders stay loaded
    /// until newer ones push them out.
    pub keep_alive: Option<Duration>,
}

/// One relevance score per document, in the documents' order (not sorted).
#[derive(Clone, Debug)]
pub struct Reranked {
    /// The name of the cross-encoder that scored them.
    pub model: String,
    /// The classification head's raw score per document (higher: more relevant).
    pub scores: Vec<f32>,
    /// Tokens read over all (query, document) pairs, each pair framed on its own.
    pub prompt_tokens: usize,
}

/// How inputs become vectors (for [`embed_blocking`]).
#[derive(Clone, Copy, Debug)]
pub struct EmbedOptions {
    /// Cut inputs longer than the context instead of refusing them.
    pub truncate: bool,
    /// Keep the first `dimensions` values (renormalised when normalising).
    pub dimensions: Option<usize>,
    /// Instead of the model's pooling.
    pub pooling: Option<Pooling>,
    /// Scale each vector to unit length.
    pub normalize: bool,
}

/// Embeds `inputs` with `enc` on this thread: one vector per input (under
/// [`Pooling::None`], every token's vectors one after another), and the tokens read.
pub fn embed_blocking(
    enc: &LoadedEncoder,
    inputs: &[EmbedInput],
    opts: &EmbedOptions,
) -> Result<(Vec<Vec<f32>>, usize), Error> {
    let pooling = opts.pooling.unwrap_or(match enc.pooling() {
        // A cross-encoder's outputs, or a token-level model's, are no sentence vectors.
        Pooling::Rank | Pooling::None => Pooling::Cls,
        p => p,
    });
    if pooling == Pooling::Rank && !enc.can_rank() {
        return Err(Error::bad_request(format!(
            "{} has no classification head: rank pooling is not possible",
            enc.name
        )));
    }
    let ids = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| prepare_input(enc, i, input, opts.truncate))
        .collect::<Result<Vec<_>, Error>>()?;
    let tokens = ids.iter().map(Vec::len).sum::<usize>();
    let mut vectors = enc.run(&ids, pooling)?;
    let width = if pooling == Pooling::None {
        enc.n_embd()
    } else {
        usize::MAX
    };
    for v in &mut vectors {
        let row_width = width.min(v.len()).max(1);
        for row in v.chunks_mut(row_width) {
            if opts.normalize {
                l2_normalize(row);
            }
        }
        if let Some(d) = opts.dimensions.filter(|_| pooling != Pooling::None) {
            v.truncate(d);
            if opts.normalize {
                l2_normalize(v);
            }
        }
    }
    Ok((vectors, tokens))
}
