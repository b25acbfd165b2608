//! The encoder models a server knows: the `-embed` and `-rerank` models, and any other
//! encoder a request names (resolved like every model name, through the registry),
//! loaded on first use and kept (they are small; the least recently used of more than
//! [`MAX_LOADED_ENCODERS`] is dropped).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llamay_engine::{Encoder, GgufFile, LoadOptions, Model, Pooling, Tokenizer};

use crate::error::Error;
use crate::registry::{ModelSpec, Registry};

/// Most encoders loaded at once.
const MAX_LOADED_ENCODERS: usize = 4;

/// What a request wants an encoder for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Embeddings: any encoder, or a decoder whose hidden states are pooled.
    Embed,
    /// Reranking: an encoder with a classification head (a cross-encoder).
    Rerank,
}

/// The network behind a [`LoadedEncoder`].
enum Net {
    Encoder(Arc<Encoder>),
    /// A decoder serving embeddings: its final hidden states, pooled (last token by
    /// default, or the mean), as llama.cpp allows.
    Decoder(Arc<Model>),
}

/// A model loaded to embed (an encoder, or a decoder used as one) and its tokenizer.
pub struct LoadedEncoder {
    /// The name it was loaded under (its resolved model name), reported in responses.
    pub name: String,
    net: Net,
    /// The tokenizer read from the model's GGUF.
    pub tokenizer: Arc<Tokenizer>,
    /// One pass at a time: the model's thread pool runs one job.
    running: Mutex<()>,
    last_used: Mutex<Instant>,
}

impl LoadedEncoder {
    /// Loads the model at `path` under `name`: an encoder, or a decoder to embed with.
    pub fn load(name: &str, path: &Path, opts: &LoadOptions) -> Result<LoadedEncoder, Error> {
        let cannot =
            |e: &dyn std::fmt::Display| Error::bad_request(format!("cannot load {name}: {e}"));
        let file = GgufFile::open(path).map_err(|e| cannot(&e))?;
        let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| cannot(&e))?;
        let net = if Encoder::is_encoder(&file) {
            Net::Encoder(Encoder::from_gguf(file, opts).map_err(|e| cannot(&e))?)
        } else {
            Net::Decoder(Model::from_gguf(file, opts).map_err(|e| cannot(&e))?)
        };
        Ok(LoadedEncoder {
            name: name.to_string(),
            net,
            tokenizer: Arc::new(tokenizer),
            running: Mutex::new(()),
            last_used: Mutex::new(Instant::now()),
        })
    }

    /// Width of a pooled vector.
    pub fn n_embd(&self) -> usize {
        match &self.net {
            Net::Encoder(e) => e.n_embd(),
            Net::Decoder(m) => m.facts().embedding_length.unwrap_or(0) as usize,
        }
    }

    /// The longest input, in tokens.
    pub fn n_ctx(&self) -> usize {
        match &self.net {
            Net::Encoder(e) => e.n_ctx(),
            Net::Decoder(m) => m.n_ctx(),
        }
    }

    /// The vocabulary's size: token-id inputs must stay below it.
    pub fn n_vocab(&self) -> usize {
        match &self.net {
            Net::Encoder(e) => e.n_vocab(),
            Net::Decoder(m) => m.n_vocab(),
        }
    }

    /// The pooling the model asks for (a decoder: its `pooling_type`, else the last
    /// token).
    pub fn pooling(&self) -> Pooling {
        match &self.net {
            Net::Encoder(e) => e.pooling(),
            Net::Decoder(m) => {
                let f = m.gguf();
                let key = format!("{}.pooling_type", f.architecture().unwrap_or(""));
                match f.opt_u32(&key).ok().flatten().and_then(Pooling::from_llama) {
                    Some(Pooling::Mean) => Pooling::Mean,
                    _ => Pooling::Last,
                }
            }
        }
    }

    /// Whether the model has a classification head to rerank with.
    pub fn can_rank(&self) -> bool {
        matches!(&self.net, Net::Encoder(e) if e.can_rank())
    }

    /// Whether the model is a decoder used as an embedder.
    pub fn is_decoder(&self) -> bool {
        matches!(self.net, Net::Decoder(_))
    }

    /// Runs texts of token ids and pools each (one caller at a time).
    pub fn run(&self, ids: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, Error> {
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let fail = |e: llamay_engine::ModelError| Error::internal(format!("{}: {e}", self.name));
        match &self.net {
            Net::Encoder(enc) => {
                let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
                enc.encode(&refs, pooling).map_err(fail)
            }
            Net::Decoder(m) => {
                let e = self.n_embd();
                ids.iter()
                    .map(|t| {
                        let h = m.hidden_states(t).map_err(fail)?;
                        Ok(match pooling {
                            Pooling::None => h,
                            Pooling::Mean => {
                                let mut v = vec![0f64; e];
                                for r in h.chunks_exact(e) {
                                    v.iter_mut().zip(r).for_each(|(a, &x)| *a += x as f64);
                                }
                                let n = (h.len() / e).max(1) as f64;
                                v.into_iter().map(|a| (a / n) as f32).collect()
                            }
                            Pooling::Cls => h[..e].to_vec(),
                            Pooling::Last | Pooling::Rank => h[h.len() - e..].to_vec(),
                        })
                    })
                    .collect()
            }
        }
    }
}

fn not_a_reranker(name: &str) -> Error {
    Error::bad_request(format!(
        "model {name:?} is a generation model, not a reranker (a cross-encoder with a \
         classification head): it has no rerank capability; start the server with \
         -rerank RERANKER.gguf"
    ))
    .at("model")
}

/// The server's encoders.
#[derive(Default)]
pub struct Encoders {
    embed: Option<ModelSpec>,
    rerank: Option<ModelSpec>,
    opts: LoadOptions,
    loaded: Mutex<Vec<Arc<LoadedEncoder>>>,
    loading: tokio::sync::Mutex<()>,
}

impl Encoders {
    /// The `-embed` and `-rerank` models (either may be absent), loaded with `opts`.
    pub fn new(embed: Option<ModelSpec>, rerank: Option<ModelSpec>, opts: LoadOptions) -> Encoders {
        Encoders {
            embed,
            rerank,
            opts,
            ..Default::default()
        }
    }

    /// The `-embed` model, the embedding routes' default; `None` without one.
    pub fn embed_model(&self) -> Option<&ModelSpec> {
        self.embed.as_ref()
    }

    /// The `-rerank` model, the rerank routes' default; `None` without one.
    pub fn rerank_model(&self) -> Option<&ModelSpec> {
        self.rerank.as_ref()
    }

    /// The `-embed` or `-rerank` model `name` answers to, if any.
    pub fn served(&self, name: &str) -> Option<&ModelSpec> {
        [&self.embed, &self.rerank]
            .into_iter()
            .flatten()
            .find(|s| !name.trim().is_empty() && s.answers_to(name.trim()))
    }

    /// The encoder for a request: by name, else the server's model for `purpose`.
    pub async fn get(
        &self,
        name: &str,
        purpose: Purpose,
        registry: &Registry,
    ) -> Result<(Arc<LoadedEncoder>, Duration), Error> {
        let spec = self.resolve(name, purpose, registry)?;
        let t0 = Instant::now();
        let enc = match self.find(&spec.name) {
            Some(e) => e,
            None => {
                let _guard = self.loading.lock().await;
                match self.find(&spec.name) {
                    Some(e) => e,
                    None => {
                        let opts = self.opts.clone();
                        let s = spec.clone();
                        let enc = tokio::task::spawn_blocking(move || {
                            LoadedEncoder::load(&s.name, &s.path, &opts)
                        })
                        .await
                        .map_err(|e| Error::internal(format!("loading failed: {e}")))??;
                        let enc = Arc::new(enc);
                        let mut l = self.lock();
                        if l.len() >= MAX_LOADED_ENCODERS {
                            if let Some(i) = (0..l.len()).min_by_key(|&i| {
                                *l[i].last_used.lock().unwrap_or_else(|e| e.into_inner())
                            }) {
                                l.remove(i);
                            }
                        }
                        l.push(enc.clone());
                        enc
                    }
                }
            }
        };
        *enc.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        if purpose == Purpose::Rerank && !enc.can_rank() {
            return Err(Error::bad_request(format!(
                "model {:?} has no classification head (rank pooling): it cannot rerank; \
                 start the server with -rerank RERANKER.gguf",
                enc.name
            ))
            .at("model"));
        }
        Ok((enc, t0.elapsed()))
    }

    fn resolve(
        &self,
        name: &str,
        purpose: Purpose,
        registry: &Registry,
    ) -> Result<ModelSpec, Error> {
        if name.trim().is_empty() {
            let (spec, flag) = match purpose {
                Purpose::Embed => (&self.embed, "-embed ENCODER.gguf"),
                Purpose::Rerank => (&self.rerank, "-rerank RERANKER.gguf"),
            };
            return spec.clone().ok_or_else(|| {
                Error::bad_request(format!(
                    "no model was named and this server has none for this route (start it with {flag})"
                ))
                .at("model")
            });
        }
        if let Some(s) = self.served(name) {
            return Ok(s.clone());
        }
        let spec = registry.resolve(name)?;
        let file = GgufFile::open(&spec.path)
            .map_err(|e| Error::bad_request(format!("cannot open {}: {e}", spec.name)))?;
        // A decoder embeds (pooling its hidden states); it never reranks.
        if purpose == Purpose::Rerank && !Encoder::is_encoder(&file) {
            return Err(not_a_reranker(&spec.name));
        }
        Ok(spec)
    }

    fn find(&self, name: &str) -> Option<Arc<LoadedEncoder>> {
        self.lock().iter().find(|e| e.name == name).cloned()
    }

    /// The encoders loaded now.
    pub fn loaded(&self) -> Vec<Arc<LoadedEncoder>> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<LoadedEncoder>>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}
