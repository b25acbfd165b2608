//! A prompt holding images laid out as llama.cpp's libmtmd does (`mtmd_tokenize`):
//! the text split at each media marker, each text part tokenized alone (special
//! tokens parsed, no BOS), each marker an image, wrapped in the projector's begin
//! and end tokens (Gemma 3: `<start_of_image>` … `<end_of_image>`; Idefics3: each
//! tile and the overview in its own text), then the BOS (and EOS) the vocabulary asks
//! for at the ends.

use llamay_engine::{ImageLayout, ProjectorType, Tokenizer};

pub use crate::chat::MEDIA_MARKER;

/// One chunk of a prompt holding images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MediaChunk {
    /// Token ids.
    Tokens(Vec<u32>),
    /// A run of rows of the prompt's `image`-th picture (0-based, in marker order):
    /// its `part`-th ([`ImageLayout`]: the whole picture, or one of Idefics3's tiles,
    /// then its overview).
    Image {
        /// The picture.
        image: usize,
        /// The run of its rows.
        part: usize,
    },
}

/// The text libmtmd writes around an image's rows, per projector.
fn wrappers(projector: ProjectorType) -> (&'static str, &'static str) {
    match projector {
        ProjectorType::Gemma3 => ("<start_of_image>", "<end_of_image>"),
        // Idefics3's text goes around each of its runs of rows (`tiles`).
        ProjectorType::Mlp | ProjectorType::Idefics3 => ("", ""),
    }
}

/// Splits `text` at its [`MEDIA_MARKER`]s into chunks; the markers must be one per
/// picture of `images` (each picture's layout, from `VisionEncoder::layout`).
pub fn split_media(
    tokenizer: &Tokenizer,
    text: &str,
    projector: ProjectorType,
    images: &[ImageLayout],
) -> Result<Vec<MediaChunk>, String> {
    let n_markers = text.matches(MEDIA_MARKER).count();
    if n_markers != images.len() {
        return Err(format!(
            "the prompt has {n_markers} image place(s) ({MEDIA_MARKER}) for {} image(s)",
            images.len()
        ));
    }
    let (beg, end) = wrappers(projector);
    let mut chunks = Chunks(Vec::new());
    for (i, part) in text.split(MEDIA_MARKER).enumerate() {
        if i > 0 {
            chunks.text(tokenizer, beg);
            let image = i - 1;
            match images[image].grid {
                Some(grid) => tiles(tokenizer, &mut chunks, image, grid)?,
                None => chunks.0.push(MediaChunk::Image { image, part: 0 }),
            }
            chunks.text(tokenizer, end);
        }
        chunks.text(tokenizer, part);
    }
    let mut chunks = chunks.0;
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

/// Chunks as libmtmd's `add_text` builds them: text joins the text chunk before it.
struct Chunks(Vec<MediaChunk>);

impl Chunks {
    fn ids(&mut self, ids: &[u32]) {
        match self.0.last_mut() {
            Some(MediaChunk::Tokens(last)) => last.extend_from_slice(ids),
            _ if ids.is_empty() => {}
            _ => self.0.push(MediaChunk::Tokens(ids.to_vec())),
        }
    }

    /// `t` tokenized alone, special tokens parsed, no BOS.
    fn text(&mut self, tokenizer: &Tokenizer, t: &str) {
        self.ids(&tokenizer.encode(t.as_bytes(), false, true));
    }
}

/// Idefics3's picture (libmtmd's `MTMD_SLICE_TMPL_IDEFICS3`): each tile after
/// `<fake_token_around_image><row_R_col_C>`, a newline token after each row of tiles
/// but the last, then `\n\n`, `<fake_token_around_image>`, `<global-img>`, the
/// overview and `<fake_token_around_image>`. The loose tokens are looked up by their
/// text, not tokenized, as libmtmd does.
fn tiles(
    tokenizer: &Tokenizer,
    chunks: &mut Chunks,
    image: usize,
    (rows, cols): (usize, usize),
) -> Result<(), String> {
    let fake = lookup(tokenizer, "<fake_token_around_image>")?;
    let newline = lookup(tokenizer, "\n")?;
    let before_overview = [
        lookup(tokenizer, "\n\n")?,
        fake,
        lookup(tokenizer, "<global-img>")?,
    ];
    for y in 0..rows {
        for x in 0..cols {
            let label = format!("<fake_token_around_image><row_{}_col_{}>", y + 1, x + 1);
            chunks.text(tokenizer, &label);
            let part = y * cols + x;
            chunks.0.push(MediaChunk::Image { image, part });
        }
        if y + 1 < rows {
            chunks.ids(&[newline]);
        }
    }
    chunks.ids(&before_overview);
    let part = rows * cols;
    chunks.0.push(MediaChunk::Image { image, part });
    chunks.ids(&[fake]);
    Ok(())
}

/// The first token whose text is `piece` (libmtmd's `lookup_token`).
fn lookup(tokenizer: &Tokenizer, piece: &str) -> Result<u32, String> {
    (0..tokenizer.n_vocab() as u32)
        .find(|&id| tokenizer.token_bytes(id) == piece.as_bytes())
        .ok_or_else(|| {
            format!("the vocabulary has no token {piece:?}, which idefics3 pictures need")
        })
}

/// A whole prompt's chunks: [`split_media`], then the rules for running it. A
/// template that writes the BOS itself gets no second one (as for text), and the
/// prompt must end with text, whose last position gives the next token's logits.
pub fn prompt_chunks(
    tokenizer: &Tokenizer,
    text: &str,
    projector: ProjectorType,
    images: &[ImageLayout],
) -> Result<Vec<MediaChunk>, String> {
    let mut chunks = split_media(tokenizer, text, projector, images)?;
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
    /// Each picture's rows, cut into the parts [`MediaChunk::Image`] numbers.
    pub images: Vec<Vec<llamay_engine::ImageEmbeddings>>,
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
        let decoded = images
            .iter()
            .enumerate()
            .map(|(i, im)| {
                let d = llamay_engine::decode_image(im).map_err(|e| format!("image {i}: {e}"))?;
                let layout = encoder
                    .layout(d.width, d.height)
                    .map_err(|e| format!("image {i}: {e}"))?;
                Ok((d, layout))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let layouts: Vec<_> = decoded.iter().map(|(_, l)| *l).collect();
        let chunks = prompt_chunks(tokenizer, text, projector, &layouts)?;
        let images = decoded
            .iter()
            .enumerate()
            .map(|(i, (d, layout))| {
                let rows = encoder.encode(d).map_err(|e| format!("image {i}: {e}"))?;
                Ok(rows.split(layout))
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
                MediaChunk::Image { image, part } => {
                    crate::PromptPiece::Image(&self.images[*image][*part], self.projector)
                }
            })
            .collect()
    }
}
