//! A model loaded in this process (`llamay run --local`, or when no server is up).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use llamay_engine::LoadOptions;
use llamay_runtime::snapshot;
use llamay_runtime::{
    chat_channels, generate_continuing, generate_pieces, DraftModel, Finish, Generation,
    GenerationParams, ImageInput, LoadedModel, MediaPrompt, PromptLayers, TemplateSource,
    DEFAULT_CONSTRAINT_CACHE_BYTES,
};

use super::backend::{Backend, Input, Reply};
use super::constraint::{Constraint, QuoteSources};

pub struct Local {
    pub(super) lm: LoadedModel,
    path: PathBuf,
    /// `-kv` as given, for the details line.
    kv: String,
    /// `-prompt-cache FILE`: where the prompt's KV is kept between runs.
    pub prompt_cache: Option<PathBuf>,
    /// `-draft MODEL`: the model that writes the drafts.
    pub draft: Option<DraftModel>,
}

impl Local {
    pub fn load(model: &str, opts: &LoadOptions, kv: &str) -> anyhow::Result<Local> {
        let (path, layers) = resolve_model(model)?;
        let lm =
            LoadedModel::load_with_layers(&path, opts, DEFAULT_CONSTRAINT_CACHE_BYTES, &layers)
                .with_context(|| format!("cannot load {}", path.display()))?;
        Ok(Local {
            lm,
            path,
            kv: kv.to_string(),
            prompt_cache: None,
            draft: None,
        })
    }
}

/// Loads `-draft MODEL` beside `main`, refusing one whose tokens are not `main`'s:
/// its drafts are token ids of `main`'s vocabulary.
pub fn load_draft(
    model: &str,
    opts: &LoadOptions,
    main: &LoadedModel,
) -> anyhow::Result<DraftModel> {
    let (path, _) = resolve_model(model)?;
    let d = LoadedModel::load(&path, opts)
        .with_context(|| format!("cannot load the draft model {}", path.display()))?;
    DraftModel::sharing_tokens(d.model, &d.tokenizer, &main.tokenizer)
        .map_err(|e| anyhow::anyhow!("the draft model {}: {e}", path.display()))
}

/// `-prompt-cache FILE`: a KV snapshot of the last prompt, tied to the model file.
struct PromptCache {
    path: PathBuf,
    /// `sha256:…` of the model file.
    model_digest: String,
}

impl PromptCache {
    fn open(path: &std::path::Path, model: &std::path::Path) -> anyhow::Result<PromptCache> {
        let digest = llamay_store::Digest::of_file(model)
            .with_context(|| format!("cannot hash {}", model.display()))?;
        Ok(PromptCache {
            path: path.to_path_buf(),
            model_digest: digest.to_string(),
        })
    }

    /// A sequence holding what the file has of `tokens` (none when the file is
    /// missing; a note on stderr when it cannot serve), and how many tokens that is.
    fn resume(&self, lm: &LoadedModel, tokens: &[u32]) -> (llamay_engine::SeqState, usize) {
        let fresh = || (lm.model.new_sequence(), 0);
        let Ok(bytes) = std::fs::read(&self.path) else {
            return fresh();
        };
        match snapshot::resume(&lm.model, &self.model_digest, &bytes, tokens) {
            Ok(seq) => {
                // The last prompt token is always fed again, for its logits.
                let n = seq.len().min(tokens.len().saturating_sub(1));
                (seq, n)
            }
            Err(why) => {
                eprintln!(
                    "llamay: the prompt cache {} is not used: {why}",
                    self.path.display()
                );
                fresh()
            }
        }
    }

    /// Writes the prompt's KV (a temporary file renamed over the old one).
    fn save(&self, lm: &LoadedModel, seq: &llamay_engine::SeqState, tokens: &[u32]) {
        let bytes = snapshot::of_sequence(&lm.model, &self.model_digest, seq, tokens);
        let tmp = self.path.with_extension("tmp");
        let written = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            eprintln!(
                "llamay: cannot write the prompt cache {}: {e}",
                self.path.display()
            );
        }
    }
}

/// A file, or a store name (pulled if missing) with its Ollama layers.
fn resolve_model(m: &str) -> anyhow::Result<(PathBuf, PromptLayers)> {
    let p = PathBuf::from(m);
    if p.is_file() {
        return Ok((p, PromptLayers::default()));
    }
    let r = crate::cmd::store::ensure_model(m, &Default::default())?;
    Ok((r.gguf.clone(), PromptLayers::of(&r)))
}

impl Local {
    /// A prompt of text: the chat's channels, the prompt cache and drafts as asked.
    /// Returns the generation and the prompt cache's line.
    fn generate_text(
        &self,
        input: &Input,
        automaton: &Option<llamay_constrain::Constraint>,
        params: &GenerationParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> anyhow::Result<(Generation, Option<String>)> {
        let lm = &self.lm;
        let tokens = match input {
            Input::Raw(text, _) => lm.encode_raw(text),
            Input::Chat(messages) => lm.encode_chat(messages, None)?,
        };
        // A harmony model's chat shows its `final` channel (its analysis stays out).
        let channels = match input {
            Input::Chat(_) => chat_channels(lm, automaton.as_ref(), params.max_tokens)
                .map_err(|e| anyhow::anyhow!(e.message))?,
            Input::Raw(..) => None,
        };
        let cache = match &self.prompt_cache {
            Some(p) => Some(PromptCache::open(p, &self.path)?),
            None => None,
        };
        let (start, reused) = match &cache {
            Some(c) => c.resume(lm, &tokens),
            None => (lm.model.new_sequence(), 0),
        };
        let params = GenerationParams {
            draft_model: self.draft.clone(),
            ..params.clone()
        };
        let g = generate_continuing(
            &lm.model,
            &lm.tokenizer,
            start,
            &tokens,
            (&params, automaton.as_ref(), channels.as_ref()),
            cancel,
            on_text,
            &mut |seq| {
                if let Some(c) = &cache {
                    c.save(lm, seq, &tokens);
                }
            },
        )?;
        let line = cache.map(|c| {
            format!(
                "prompt cache {}: {reused} of {} prompt tokens reused",
                c.path.display(),
                tokens.len()
            )
        });
        Ok((g, line))
    }

    /// A prompt with images: each encoded by the projector (`-mmproj`) and fed as its
    /// rows between the text's tokens.
    fn generate_images(
        &self,
        input: &Input,
        images: &[ImageInput],
        automaton: &Option<llamay_constrain::Constraint>,
        params: &GenerationParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Generation> {
        let lm = &self.lm;
        let Some(vision) = lm.vision() else {
            anyhow::bail!(
                "{} has no vision support (capability \"vision\"): give its projector with \
                 -mmproj FILE",
                self.path.display()
            );
        };
        if self.prompt_cache.is_some() {
            anyhow::bail!("-prompt-cache keeps text prompts only, not images");
        }
        let text = match input {
            Input::Raw(text, _) => text.clone(),
            Input::Chat(messages) => {
                // Images become libmtmd's markers (`-image`s before the text).
                let messages: Vec<_> = messages.iter().cloned().map(|m| m.with_markers()).collect();
                lm.render_chat(&messages, None, None)?.1
            }
        };
        let bytes: Vec<&[u8]> = images.iter().map(|im| &*im.0).collect();
        let prompt = MediaPrompt::encode(&lm.tokenizer, vision, &text, &bytes)
            .map_err(|e| anyhow::anyhow!("cannot read the prompt's images: {e}"))?;
        Ok(generate_pieces(
            &lm.model,
            &lm.tokenizer,
            &prompt.pieces(),
            (params, automaton.as_ref()),
            cancel,
            on_text,
        )?)
    }
}

impl Backend for Local {
    fn generate(
        &mut self,
        input: &Input,
        constraint: &Constraint,
        sources: &QuoteSources,
        params: &GenerationParams,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Reply> {
        let lm = &self.lm;
        let spec = constraint.spec_with(&sources.for_input(Some(input.user_text())))?;
        let compile_start = Instant::now();
        let (automaton, _) = spec.build(lm).map_err(|e| anyhow::anyhow!(e.message))?;
        let compile_time = compile_start.elapsed();
        let mut text = String::new();
        let mut on_text = |s: &str| {
            text.push_str(s);
            on_text(s);
        };
        let images = input.images();
        let (g, cache_line) = if images.is_empty() {
            self.generate_text(input, &automaton, params, cancel, &mut on_text)?
        } else {
            (
                self.generate_images(input, &images, &automaton, params, cancel, &mut on_text)?,
                None,
            )
        };
        let mut stats = vec![g.stats.summary(g.finish.as_str())];
        stats.extend(cache_line);
        if let Some(m) = &g.stats.mask {
            stats.push(m.summary(spec.kind(), g.stats.decode_time));
        }
        let template = match lm.template_source {
            TemplateSource::File => "from the file".to_string(),
            TemplateSource::Builtin(b) => format!("builtin {}", format!("{b:?}").to_lowercase()),
            TemplateSource::OllamaLayer => "the Ollama template layer".to_string(),
            TemplateSource::Harmony => "harmony (OpenAI's renderer)".to_string(),
        };
        let mut details = vec![
            format!(
                "model {} · {} threads · ctx {} · kv {} · template {template}",
                self.path.display(),
                lm.model.n_threads(),
                lm.model.n_ctx(),
                self.kv,
            ),
            format!(
                "constraint compiled in {:.2} ms · {} tokens forced without sampling ({} fast-forwarded)",
                compile_time.as_secs_f64() * 1e3,
                g.stats.forced_tokens,
                g.stats.fast_forwarded_tokens,
            ),
        ];
        if g.stats.drafted_tokens > 0 {
            details.push(format!(
                "speculation: {} tokens drafted, {} taken ({:.0}%)",
                g.stats.drafted_tokens,
                g.stats.accepted_tokens,
                100.0 * g.stats.accepted_tokens as f64 / g.stats.drafted_tokens as f64
            ));
        }
        if let Some(report) = spec.schema_report() {
            let report = report.to_string();
            if !report.is_empty() {
                details.push(format!("schema: {report}"));
            }
        }
        Ok(Reply {
            text,
            cancelled: g.finish == Finish::Cancelled,
            stats,
            details,
        })
    }

    fn describe(&self) -> anyhow::Result<String> {
        Ok(crate::cmd::show::render(
            &self.path.display().to_string(),
            self.lm.model.facts(),
        ))
    }
}
