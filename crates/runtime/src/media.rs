//! A prompt holding images laid out as llama.cpp's libmtmd does (`mtmd_tokenize`):
//! the text split at each media marker, each text part tokenized alone (special
//! tokens parsed, no BOS), each marker an image, wrapped in the projector's begin
//! and end tokens (Gemma 3: `<start_of_image>` … `<end_of_image>`), then the BOS
//! (and EOS) the vocabulary asks for at the ends.

use llamay_engine::{ProjectorType, Tokenizer};

pub use crate::chat::MEDIA_MARKER;

/// One chunk of a prompt holding images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MediaChunk {
    /// Token ids.
    Tokens(Vec<u32>),
    /// The prompt's `n`-th image (0-based), in marker order.
    Image(usize),
}

/// The text libmtmd writes around an image's rows, per projector.
fn wrappers(projector: ProjectorType) -> (&'static str, &'static str) {
    match projector {
        ProjectorType::Gemma3 => ("<start_of_image>", "<end_of_image>"),
        ProjectorType::Mlp => ("", ""),
    }
}

/// Splits `text` at its [`MEDIA_MARKER`]s into chunks; the markers must be exactly
/// `n_images`.
pub fn split_media(
    tokenizer: &Tokenizer,
    text: &str,
    projector: ProjectorType,
    n_images: usize,
) -> Result<Vec<MediaChunk>, String> {
    let n_markers = text.matches(MEDIA_MARKER).count();
    if n_markers != n_images {
        return Err(format!(
            "the prompt has {n_markers} image place(s) ({MEDIA_MARKER}) for {n_images} image(s)"
        ));
    }
    let (beg, end) = wrappers(projector);
    let mut chunks = Vec::new();
    let add_text = |chunks: &mut Vec<MediaChunk>, t: &str| {
        let ids = tokenizer.encode(t.as_bytes(), false, true);
        match chunks.last_mut() {
            Some(MediaChunk::Tokens(last)) => last.extend(ids),
            _ if ids.is_empty() => {}
            _ => chunks.push(MediaChunk::Tokens(ids)),
        }
    };
    for (i, part) in text.split(MEDIA_MARKER).enumerate() {
        if i > 0 {
            add_text(&mut chunks, beg);
            chunks.push(MediaChunk::Image(i - 1));
            add_text(&mut chunks, end);
        }
        add_text(&mut chunks, part);
    }
    if let (true, Some(bos)) = (tokenizer.add_bos(), tokenizer.bos()) {
        match chunks.first_mut() {
            Some(MediaChunk::Tokens(first)) => first.insert(0, bos),
            _ => chunks.insert(0, MediaChunk::Tokens(vec![bos])),
        }
    }
    if let (true, Some(eos)) = (tokenizer.add_eos(), tokenizer.eos()) {
        match chunks.last_mut() {
            Some(MediaChunk::Tokens(last)) => last.push(eos),
            _ => chunks.push(MediaChunk::Tokens(vec![eos])),
        }
    }
    Ok(chunks)
}

/// A whole prompt's chunks: [`split_media`], then the rules for running it. A
/// template that writes the BOS itself gets no second one (as for text), and the
/// prompt must end with text, whose last position gives the next token's logits.
pub fn prompt_chunks(
    tokenizer: &Tokenizer,
    text: &str,
    projector: ProjectorType,
    n_images: usize,
) -> Result<Vec<MediaChunk>, String> {
    let mut chunks = split_media(tokenizer, text, projector, n_images)?;
    if let (Some(MediaChunk::Tokens(first)), Some(bos)) = (chunks.first_mut(), tokenizer.bos()) {
        if tokenizer.add_bos() && first.len() > 1 && first[0] == bos && first[1] == bos {
            first.remove(0);
        }
    }
    if !matches!(chunks.last(), Some(MediaChunk::Tokens(_))) {
        return Err("the prompt ends with an image: the model needs text after it".into());
    }
    Ok(chunks)
}

/// A prompt's images decoded and encoded by `encoder`, and its text cut at its
/// markers: what [`crate::generate_pieces`] feeds once turned into pieces
/// ([`MediaPrompt::pieces`]). Every image is encoded here, eagerly: the one-sequence
/// path (`llamay run`) has no prefix cache to skip an image with.
pub struct MediaPrompt {
    /// The prompt in libmtmd's order.
    pub chunks: Vec<MediaChunk>,
    /// Each image's rows, as [`MediaChunk::Image`] numbers them.
    pub images: Vec<llamay_engine::ImageEmbeddings>,
    projector: ProjectorType,
}

impl MediaPrompt {
    /// `text` must hold one [`MEDIA_MARKER`] per image, in order; `images` are each
    /// picture's file bytes (PNG, JPEG, WebP, GIF).
    pub fn encode(
        tokenizer: &Tokenizer,
        encoder: &llamay_engine::VisionEncoder,
        text: &str,
        images: &[&[u8]],
    ) -> Result<MediaPrompt, String> {
        let projector = encoder.projector();
        let chunks = prompt_chunks(tokenizer, text, projector, images.len())?;
        let images = images
            .iter()
            .enumerate()
            .map(|(i, im)| {
                let decoded =
                    llamay_engine::decode_image(im).map_err(|e| format!("image {i}: {e}"))?;
                encoder
                    .encode(&decoded)
                    .map_err(|e| format!("image {i}: {e}"))
            })
            .collect::<Result<_, String>>()?;
        Ok(MediaPrompt {
            chunks,
            images,
            projector,
        })
    }

    /// The chunks as [`crate::generate_pieces`] takes them.
    pub fn pieces(&self) -> Vec<crate::PromptPiece<'_>> {
        self.chunks
            .iter()
            .map(|c| match c {
                MediaChunk::Tokens(ids) => crate::PromptPiece::Tokens(ids),
                MediaChunk::Image(i) => crate::PromptPiece::Image(&self.images[*i], self.projector),
            })
            .collect()
    }
}
