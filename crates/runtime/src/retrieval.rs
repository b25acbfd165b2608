//! `Runtime::embed` and `Runtime::rerank`: the service's door to the encoders of the
//! `embed` room (kept here so that room never imports the service that holds it).

use std::time::Instant;

use llamay_engine::Pooling;

use crate::embed::{
    embed_blocking, frame_pair, EmbedOptions, EmbedRequest, Embedded, Purpose, RerankRequest,
    Reranked,
};
use crate::error::Error;
use crate::service::Runtime;

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
