//! Manifests (Docker image manifest v2, schema 2, as Ollama uses it) and the
//! model config blob they point at.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// The manifest media type the registry is asked for.
pub const MEDIA_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The config blob's media type.
pub const MEDIA_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// The GGUF weights.
pub const MEDIA_MODEL: &str = "application/vnd.ollama.image.model";
/// A Go-template chat template.
pub const MEDIA_TEMPLATE: &str = "application/vnd.ollama.image.template";
/// Default sampling parameters (a JSON object).
pub const MEDIA_PARAMS: &str = "application/vnd.ollama.image.params";
/// A default system prompt.
pub const MEDIA_SYSTEM: &str = "application/vnd.ollama.image.system";
/// The model's license text.
pub const MEDIA_LICENSE: &str = "application/vnd.ollama.image.license";
/// A LoRA adapter.
pub const MEDIA_ADAPTER: &str = "application/vnd.ollama.image.adapter";
/// A multimodal projector.
pub const MEDIA_PROJECTOR: &str = "application/vnd.ollama.image.projector";
/// Example messages.
pub const MEDIA_MESSAGES: &str = "application/vnd.ollama.image.messages";

/// Manifests larger than this are refused: real ones are a few hundred bytes.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Text layers (template, system, params, config) larger than this are not read
/// into memory.
pub const MAX_TEXT_LAYER_BYTES: u64 = 16 << 20;

/// One blob reference: what it is, its digest and its size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer {
    /// What the blob holds (`application/vnd.ollama.image.model`, ...).
    pub media_type: String,
    /// sha256 of the blob, which names its file.
    pub digest: Digest,
    /// Bytes.
    pub size: u64,
    /// Ollama records where a layer came from when a model was created from another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// A model manifest: the config blob plus the layers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default = "default_media_type")]
    pub media_type: String,
    pub config: Layer,
    pub layers: Vec<Layer>,
}

fn default_media_type() -> String {
    MEDIA_MANIFEST.to_string()
}

impl Manifest {
    /// Parses and checks a manifest (schema version 2, sane sizes).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(format!("{} bytes is too large for a manifest", bytes.len()));
        }
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if m.schema_version != 2 {
            return Err(format!("schema version {} (expected 2)", m.schema_version));
        }
        Ok(m)
    }

    /// A manifest for a model made locally (import, URL pull).
    pub fn new(config: Layer, layers: Vec<Layer>) -> Manifest {
        Manifest {
            schema_version: 2,
            media_type: MEDIA_MANIFEST.to_string(),
            config,
            layers,
        }
    }

    /// The config blob followed by every layer: all blobs the manifest needs.
    pub fn blobs(&self) -> impl Iterator<Item = &Layer> {
        std::iter::once(&self.config).chain(self.layers.iter())
    }

    /// The digests of every blob, each once.
    pub fn digests(&self) -> Vec<Digest> {
        let mut out: Vec<Digest> = Vec::new();
        for l in self.blobs() {
            if !out.contains(&l.digest) {
                out.push(l.digest.clone());
            }
        }
        out
    }

    /// The first layer of a media type.
    pub fn layer(&self, media_type: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.media_type == media_type)
    }

    /// Total size of config and layers, as Ollama's `list` reports it.
    pub fn total_size(&self) -> u64 {
        self.blobs().map(|l| l.size).sum()
    }

    /// The manifest serialised for writing.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest always serialises")
    }
}

/// The config blob's JSON as Ollama writes it; every field is optional because
/// registries and older clients omit some.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_families: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// The quantization, e.g. `Q4_K_M`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<RootFs>,
}

/// The `rootfs` member of a config: the layer digests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFs {
    #[serde(rename = "type")]
    pub kind: String,
    pub diff_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
      "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":485},
      "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","size":397807936},
                {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","size":1482}]}"#;

    #[test]
    fn parses_an_ollama_manifest() {
        let m = Manifest::parse(SAMPLE.as_bytes()).unwrap();
        assert_eq!(m.layers.len(), 2);
        assert_eq!(m.layer(MEDIA_MODEL).unwrap().size, 397807936);
        assert_eq!(m.total_size(), 485 + 397807936 + 1482);
        assert_eq!(Manifest::parse(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn refuses_bad_manifests() {
        assert!(Manifest::parse(b"{").is_err());
        assert!(Manifest::parse(SAMPLE.replace(":2,", ":1,").as_bytes()).is_err());
        assert!(Manifest::parse(SAMPLE.replace("sha256:aaaa", "sha256:zz").as_bytes()).is_err());
        assert!(Manifest::parse(SAMPLE.replace("485", "-1").as_bytes()).is_err());
    }
}
