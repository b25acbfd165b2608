//! The encoder models a server knows: the `-embed` and `-rerank` models, and any other
//! encoder a request names (resolved like every model name, through the registry),
//! loaded on first use and kept (they are small; the least recently used of more than
//! [`MAX_LOADED_ENCODERS`] is dropped).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llamay_engine::{Encoder, GgufFile, LoadOptions, Pooling, Tokenizer};

use crate::error::Error;
use crate::registry::{ModelSpec, Registry};

/// Most encoders loaded at once.
const MAX_LOADED_ENCODERS: usize = 4;

/// What a request wants an encoder for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Embed,
    Rerank,
}

/// A loaded encoder and its tokenizer.
pub struct LoadedEncoder {
    pub name: String,
    pub encoder: Arc<Encoder>,
    pub tokenizer: Arc<Tokenizer>,
    /// One pass at a time: the encoder's thread pool runs one job.
    running: Mutex<()>,
    last_used: Mutex<Instant>,
}

impl LoadedEncoder {
    /// Loads the encoder at `path` under `name`.
    pub fn load(name: &str, path: &Path, opts: &LoadOptions) -> Result<LoadedEncoder, Error> {
        let cannot =
            |e: &dyn std::fmt::Display| Error::bad_request(format!("cannot load {name}: {e}"));
        let file = GgufFile::open(path).map_err(|e| cannot(&e))?;
        if !Encoder::is_encoder(&file) {
            return Err(not_an_encoder(name));
        }
        let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| cannot(&e))?;
        let encoder = Encoder::from_gguf(file, opts).map_err(|e| cannot(&e))?;
        Ok(LoadedEncoder {
            name: name.to_string(),
            encoder,
            tokenizer: Arc::new(tokenizer),
            running: Mutex::new(()),
            last_used: Mutex::new(Instant::now()),
        })
    }

    /// Runs texts of token ids through the encoder (one caller at a time).
    pub fn run(&self, ids: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, Error> {
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        self.encoder
            .encode(&refs, pooling)
            .map_err(|e| Error::internal(format!("{}: {e}", self.name)))
    }
}

fn not_an_encoder(name: &str) -> Error {
    Error::bad_request(format!(
        "model {name:?} is a generation model, not an embedding model (encoder): it has no \
         embedding or rerank capability here; start the server with -embed ENCODER.gguf or \
         -rerank RERANKER.gguf, or name an encoder"
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

    pub fn embed_model(&self) -> Option<&ModelSpec> {
        self.embed.as_ref()
    }

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
        if purpose == Purpose::Rerank && !enc.encoder.can_rank() {
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
        if !Encoder::is_encoder(&file) {
            return Err(not_an_encoder(&spec.name));
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
