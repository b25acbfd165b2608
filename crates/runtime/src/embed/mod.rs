//! Embeddings and reranking: encoder models beside the generation models, run without
//! sampling. The server's embedding and rerank routes (and `llamay embed`) build an
//! [`EmbedRequest`] or a [`RerankRequest`] and call [`Runtime::embed`] or
//! [`Runtime::rerank`].

mod encoders;
mod inputs;

use std::time::{Duration, Instant};

use llamay_engine::{l2_normalize, Pooling};

pub use encoders::{Encoders, LoadedEncoder, Purpose};
use inputs::{frame_pair, prepare_input};

use crate::error::Error;
use crate::service::Runtime;

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
    pub inputs: Vec<EmbedInput>,
    /// Cut inputs longer than the context instead of refusing them.
    pub truncate: bool,
    /// Keep the first `dimensions` values, renormalised.
    pub dimensions: Option<usize>,
    pub keep_alive: Option<Duration>,
}

/// Embeddings, one per input, L2-normalised.
#[derive(Clone, Debug)]
pub struct Embedded {
    pub model: String,
    pub vectors: Vec<Vec<f32>>,
    pub prompt_tokens: usize,
    pub load_duration: Duration,
    pub total_duration: Duration,
}

/// A query and the documents to score against it.
#[derive(Clone, Debug, Default)]
pub struct RerankRequest {
    /// The model's name (empty: the server's `-rerank` model).
    pub model: String,
    pub query: String,
    pub documents: Vec<String>,
    pub keep_alive: Option<Duration>,
}

/// One relevance score per document, in the documents' order (not sorted).
#[derive(Clone, Debug)]
pub struct Reranked {
    pub model: String,
    pub scores: Vec<f32>,
    pub prompt_tokens: usize,
}

impl Runtime {
    /// Embeds every input of `req` in one engine call (texts packed into few passes).
    pub async fn embed(&self, req: EmbedRequest) -> Result<Embedded, Error> {
        let t0 = Instant::now();
        if req.inputs.is_empty() {
            return Err(Error::bad_request("input is empty: send at least one text").at("input"));
        }
        let (enc, load_duration) = self
            .encoders
            .get(&req.model, Purpose::Embed, &self.registry)
            .await?;
        let width = enc.n_embd();
        if let Some(d) = req.dimensions {
            if d == 0 || d > width {
                return Err(Error::bad_request(format!(
                    "dimensions must be between 1 and {width} for {}",
                    enc.name
                ))
                .at("dimensions"));
            }
        }
        let opts = EmbedOptions {
            truncate: req.truncate,
            dimensions: req.dimensions,
            pooling: None,
            normalize: true,
        };
        let e = enc.clone();
        let inputs = req.inputs;
        let (vectors, prompt_tokens) =
            tokio::task::spawn_blocking(move || embed_blocking(&e, &inputs, &opts))
                .await
                .map_err(|e| Error::internal(format!("embedding failed: {e}")))??;
        self.stats
            .prompt_tokens
            .fetch_add(prompt_tokens as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(Embedded {
            model: enc.name.clone(),
            vectors,
            prompt_tokens,
            load_duration,
            total_duration: t0.elapsed(),
        })
    }

    /// Scores every document of `req` against its query with a cross-encoder (rank
    /// pooling), each pair framed as llama.cpp frames it: `[CLS] query [SEP] document`.
    pub async fn rerank(&self, req: RerankRequest) -> Result<Reranked, Error> {
        if req.query.is_empty() {
            return Err(Error::bad_request("query is empty").at("query"));
        }
        if req.documents.is_empty() {
            return Err(
                Error::bad_request("documents is empty: send at least one document")
                    .at("documents"),
            );
        }
        let (enc, _) = self
            .encoders
            .get(&req.model, Purpose::Rerank, &self.registry)
            .await?;
        let e = enc.clone();
        let (scores, prompt_tokens) = tokio::task::spawn_blocking(move || {
            let q = e.tokenizer.encode(req.query.as_bytes(), false, false);
            let pairs = req
                .documents
                .iter()
                .enumerate()
                .map(|(i, d)| frame_pair(&e, &q, i, d))
                .collect::<Result<Vec<_>, Error>>()?;
            let tokens = pairs.iter().map(Vec::len).sum::<usize>();
            let scores = e.run(&pairs, Pooling::Rank)?;
            Ok::<_, Error>((
                scores.into_iter().map(|s| s[0]).collect::<Vec<f32>>(),
                tokens,
            ))
        })
        .await
        .map_err(|e| Error::internal(format!("reranking failed: {e}")))??;
        Ok(Reranked {
            model: enc.name.clone(),
            scores,
            prompt_tokens,
        })
    }
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

/// A generation request (chat, completion) to an encoder-only model.
pub(crate) fn cannot_generate(name: &str) -> Error {
    Error::bad_request(format!(
        "model {name:?} is an embedding model (encoder only): it has no generation (chat or \
         completion) capability; use /v1/embeddings, /api/embed or /rerank with it"
    ))
    .at("model")
}
