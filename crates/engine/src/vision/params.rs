//! A projector file's shape: the `clip.*` metadata llama.cpp's `clip` loader reads
//! (`clip.projector_type`, `clip.vision.*`), checked once at load.

use crate::gguf::GgufFile;
use crate::model::ModelError;

/// The most tiles a side of a sliced picture (Idefics3) may take: SmolVLM's files
/// take 4 or 5; the bound keeps a bad file from asking for millions.
const MAX_TILES_A_SIDE: usize = 16;

/// The projectors llamay runs (llama.cpp's `PROJECTOR_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectorType {
    /// LLaVA: a CLIP ViT read at its second-to-last layer, then `mm.0`, GELU, `mm.2`.
    Mlp,
    /// Gemma 3: a SigLIP ViT, average pooling, the soft-embedding RMS norm and
    /// `mm.input_projection`.
    Gemma3,
    /// Idefics3 (SmolVLM): a SigLIP ViT over each tile of the picture and an overview,
    /// the pixel shuffle (`scale_factor`² patches into one row), then `mm.model.fc`.
    Idefics3,
}

impl ProjectorType {
    /// Whether an image's rows see each other whatever their order when the language
    /// model reads them (llama.cpp's `mtmd_decode_use_non_causal`: Gemma 3's do).
    pub fn non_causal(self) -> bool {
        matches!(self, ProjectorType::Gemma3)
    }

    /// The name `clip.projector_type` gives.
    pub fn name(self) -> &'static str {
        match self {
            ProjectorType::Mlp => "mlp",
            ProjectorType::Gemma3 => "gemma3",
            ProjectorType::Idefics3 => "idefics3",
        }
    }

    fn from_name(s: &str) -> Option<ProjectorType> {
        [
            ProjectorType::Mlp,
            ProjectorType::Gemma3,
            ProjectorType::Idefics3,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// The feed-forward activation of the ViT's blocks (`clip.use_gelu`, `clip.use_silu`,
/// else llama.cpp's default, quick GELU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VitActivation {
    Gelu,
    GeluQuick,
    Silu,
}

/// How the picture is fitted to the encoder's square input (llama.cpp's
/// `image_resize_algo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ResizeFilter {
    Bilinear,
    Bicubic,
    Lanczos,
}

#[derive(Clone, Debug)]
pub(super) struct VisionParams {
    pub projector: ProjectorType,
    /// The side of the square the picture is fitted into, in pixels.
    pub image_size: usize,
    pub patch_size: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    /// Blocks in the file.
    pub n_layer: usize,
    pub eps: f32,
    pub mean: [f32; 3],
    pub std: [f32; 3],
    pub activation: VitActivation,
    pub filter: ResizeFilter,
    /// The colour of the letterbox bands.
    pub pad_color: [u8; 3],
    /// Patches per side of one output row: Gemma 3's pooling kernel, Idefics3's
    /// pixel-shuffle factor.
    pub merge: usize,
    /// Idefics3's tiling: the picture's longer side is scaled to this many pixels,
    /// then cut into `image_size` tiles (`clip.vision.preproc_image_size`).
    pub longest_edge: Option<usize>,
}

impl VisionParams {
    pub(super) fn from_gguf(f: &GgufFile) -> Result<VisionParams, ModelError> {
        let invalid = |m: String| ModelError::Invalid(m);
        let type_name = match f.opt_str("clip.projector_type")? {
            Some(s) => s,
            None => f.opt_str("clip.vision.projector_type")?.ok_or_else(|| {
                invalid("metadata clip.projector_type is missing: not a projector file".into())
            })?,
        };
        let projector = ProjectorType::from_name(type_name).ok_or_else(|| {
            invalid(format!(
                "projector type {type_name:?} (clip.projector_type) is not supported \
                 (llamay runs mlp, gemma3, idefics3)"
            ))
        })?;
        if f.opt_bool("clip.has_vision_encoder")? == Some(false) {
            return Err(invalid(
                "clip.has_vision_encoder is false: the file has no vision encoder".into(),
            ));
        }
        let dim = |k: &str| -> Result<usize, ModelError> {
            let v = f.get_u32(k)?;
            if v == 0 || v > 1 << 16 {
                return Err(invalid(format!("metadata {k} = {v} is out of range")));
            }
            Ok(v as usize)
        };
        let n_embd = dim("clip.vision.embedding_length")?;
        let n_head = dim("clip.vision.attention.head_count")?;
        if n_embd % n_head != 0 {
            return Err(invalid(format!(
                "clip.vision.embedding_length {n_embd} is not a multiple of \
                 clip.vision.attention.head_count {n_head}"
            )));
        }
        if let Some(kv) = f.opt_u32("clip.vision.attention.head_count_kv")? {
            if kv as usize != n_head {
                return Err(invalid(format!(
                    "clip.vision.attention.head_count_kv {kv} differs from head_count \
                     {n_head}: grouped ViT attention is not supported"
                )));
            }
        }
        let image_size = dim("clip.vision.image_size")?;
        let patch_size = dim("clip.vision.patch_size")?;
        if patch_size > image_size || image_size > 4096 {
            return Err(invalid(format!(
                "clip.vision.image_size {image_size} with patch_size {patch_size} is out of range"
            )));
        }
        let color = |k: &str| -> Result<[f32; 3], ModelError> {
            let v = f.array_f32(k)?;
            if v.len() < 3 {
                return Err(invalid(format!("{k} has {} values, not 3", v.len())));
            }
            Ok([v[0], v[1], v[2]])
        };
        let mean = color("clip.vision.image_mean")?;
        let std = color("clip.vision.image_std")?;
        if std.iter().any(|&s| !s.is_normal()) {
            return Err(invalid(format!(
                "clip.vision.image_std {std:?} cannot divide"
            )));
        }
        let eps = f.get_f32("clip.vision.attention.layer_norm_epsilon")?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(invalid(format!(
                "clip.vision.attention.layer_norm_epsilon {eps} is not a small positive number"
            )));
        }
        let activation = match (
            f.opt_bool("clip.use_gelu")?.unwrap_or(false),
            f.opt_bool("clip.use_silu")?.unwrap_or(false),
        ) {
            (true, true) => {
                return Err(invalid(
                    "clip.use_gelu and clip.use_silu are both true".into(),
                ))
            }
            (true, false) => VitActivation::Gelu,
            (false, true) => VitActivation::Silu,
            (false, false) => VitActivation::GeluQuick,
        };
        // What llama.cpp's `load_hparams` sets for each type (and its fixed-size
        // preprocessor: one square, letterboxed with PAD_CEIL).
        for unsupported in [
            "clip.vision.image_grid_pinpoints",
            "clip.vision.feature_layer",
        ] {
            if f.get(unsupported).is_some() {
                return Err(invalid(format!(
                    "metadata {unsupported} (tiling, stacked feature layers) is not supported"
                )));
            }
        }
        let side = image_size / patch_size;
        let scale_factor = || -> Result<Option<usize>, ModelError> {
            Ok(f.opt_u32("clip.vision.projector.scale_factor")?
                .map(|v| v as usize))
        };
        let (filter, pad_color, merge) = match projector {
            ProjectorType::Mlp => (ResizeFilter::Bicubic, [122, 116, 104], 1),
            ProjectorType::Gemma3 => {
                let merge = scale_factor()?.unwrap_or(4);
                if merge == 0 || merge > side {
                    return Err(invalid(format!(
                        "clip.vision.projector.scale_factor {merge} does not fit {side} patches a side"
                    )));
                }
                (ResizeFilter::Bilinear, [0, 0, 0], merge)
            }
            ProjectorType::Idefics3 => {
                // llama.cpp's default is 1, which its pixel shuffle refuses; a side
                // it does not divide would be padded there but counted unpadded.
                let merge = scale_factor()?.unwrap_or(1);
                if merge < 2 || side % merge != 0 {
                    return Err(invalid(format!(
                        "clip.vision.projector.scale_factor {merge} must be at least 2 and \
                         divide the {side} patches a side"
                    )));
                }
                (ResizeFilter::Lanczos, [0, 0, 0], merge)
            }
        };
        let longest_edge = match projector {
            ProjectorType::Idefics3 => {
                // Older conversions without it take llama.cpp's other slicing path,
                // which llamay does not run.
                let key = "clip.vision.preproc_image_size";
                let v = f.opt_u32(key)?.ok_or_else(|| {
                    invalid(format!(
                        "metadata {key} is missing: idefics3 files without it are not supported"
                    ))
                })? as usize;
                if v == 0 || v > MAX_TILES_A_SIDE * image_size {
                    return Err(invalid(format!(
                        "{key} {v} is out of range for tiles of {image_size} pixels"
                    )));
                }
                Some(v)
            }
            _ => None,
        };
        let n_layer = dim("clip.vision.block_count")?;
        if projector == ProjectorType::Mlp && n_layer < 2 {
            return Err(invalid(
                "an mlp projector reads the second-to-last block: clip.vision.block_count \
                 must be at least 2"
                    .into(),
            ));
        }
        Ok(VisionParams {
            projector,
            image_size,
            patch_size,
            n_embd,
            n_ff: dim("clip.vision.feed_forward_length")?,
            n_head,
            n_layer,
            eps,
            mean,
            std,
            activation,
            filter,
            pad_color,
            merge,
            longest_edge,
        })
    }

    /// Patches a side of the encoder's input.
    pub(super) fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }

    /// The blocks llama.cpp runs: LLaVA reads the second-to-last layer's output.
    pub(super) fn layers_run(&self) -> usize {
        match self.projector {
            ProjectorType::Mlp => self.n_layer - 1,
            ProjectorType::Gemma3 | ProjectorType::Idefics3 => self.n_layer,
        }
    }
}
