//! The on-disk store: llamay's own (read-write) plus an Ollama store (read-only).
//!
//! Layout (Ollama's): `manifests/<host>/<namespace>/<model>/<tag>` holds the raw
//! manifest JSON, `blobs/sha256-<hex>` the content-addressed blobs. Blobs are only
//! ever renamed into place once complete and verified, and manifests are written
//! after their blobs, so a manifest present means a model usable. `store.lock`
//! keeps collection (see `gc`) away from writers between their blobs and their
//! manifest; `urls/` records what each URL pull gave.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::digest::Digest;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{atomic_write, link_or_copy, prune_empty_dirs, StoreLock};
use crate::manifest::{
    Layer, Manifest, ModelConfig, RootFs, MAX_TEXT_LAYER_BYTES, MEDIA_CONFIG, MEDIA_MODEL,
    MEDIA_PARAMS, MEDIA_PROJECTOR, MEDIA_SYSTEM, MEDIA_TEMPLATE,
};
use crate::name::{ModelName, ModelRef};

/// Which store a model was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// llamay's own store (`$LLAMAY_MODELS`).
    Llamay,
    /// An Ollama store, read-only (`$OLLAMA_MODELS` or `~/.ollama/models`).
    Ollama,
    /// A `.gguf` path given directly.
    File,
}

impl Source {
    /// A short label for listings.
    pub fn label(self) -> &'static str {
        match self {
            Source::Llamay => "llamay",
            Source::Ollama => "ollama",
            Source::File => "file",
        }
    }
}

/// A model ready to load: the GGUF plus the extras its manifest carries.
#[derive(Clone, Debug)]
pub struct ResolvedModel {
    /// The store name (`None` for a plain `.gguf` path).
    pub name: Option<ModelName>,
    pub source: Source,
    /// The GGUF file.
    pub gguf: PathBuf,
    /// Ollama's (Go-template) chat template layer, when present.
    pub template: Option<String>,
    /// The default system prompt layer, when present.
    pub system: Option<String>,
    /// Default parameters (a JSON object), when present.
    pub params: Option<serde_json::Value>,
    /// The config blob, when it parses.
    pub config: Option<ModelConfig>,
    /// sha256 of the manifest file (what Ollama calls the model's digest).
    pub manifest_digest: Option<Digest>,
    /// The vision projector blob (`application/vnd.ollama.image.projector`, an
    /// `mmproj` file), when the manifest has one and the blob is in the store.
    pub projector: Option<PathBuf>,
}

/// One row of `list`.
#[derive(Clone, Debug)]
pub struct ListEntry {
    pub name: ModelName,
    pub source: Source,
    /// sha256 of the manifest file.
    pub digest: Digest,
    /// Config plus layers, in bytes.
    pub size: u64,
    /// The manifest's modification time.
    pub modified: SystemTime,
    /// The config blob, when it is present and parses.
    pub config: Option<ModelConfig>,
}

impl ListEntry {
    /// The quantization as the config blob states it (e.g. `Q4_K_M`).
    // TODO(cli): fall back to the GGUF's `general.file_type` when the config has none
    // (imported models); the store does not read GGUF metadata.
    pub fn file_type(&self) -> Option<&str> {
        self.config.as_ref()?.file_type.as_deref()
    }
}

/// A blob as `show` reports it.
#[derive(Clone, Debug)]
pub struct BlobFacts {
    pub layer: Layer,
    /// Where the blob is, or `None` if it is missing.
    pub path: Option<PathBuf>,
}

/// The store's facts about one model, for `show`.
#[derive(Clone, Debug)]
pub struct StoredModel {
    pub name: ModelName,
    pub source: Source,
    pub manifest_path: PathBuf,
    pub manifest_digest: Digest,
    pub manifest: Manifest,
    /// The config blob first, then the layers in manifest order.
    pub blobs: Vec<BlobFacts>,
    pub config: Option<ModelConfig>,
}

/// What `remove` did.
#[derive(Clone, Debug, Default)]
pub struct RemoveReport {
    /// Blobs deleted because no other manifest used them.
    pub deleted_blobs: Vec<Digest>,
    /// Blobs kept because another manifest still uses them.
    pub kept_blobs: Vec<Digest>,
    /// Blobs no manifest uses any more, left for `prune` because a pull (or copy,
    /// import) was writing to the store.
    pub deferred_blobs: Vec<Digest>,
}

/// A manifest found in one of the stores.
struct Found {
    source: Source,
    path: PathBuf,
    bytes: Vec<u8>,
    manifest: Manifest,
}

/// llamay's model store, with an optional read-only Ollama store behind it.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    ollama: Option<PathBuf>,
}

impl Store {
    /// A store rooted at `root`, reading `ollama` (an Ollama `models` folder) too.
    pub fn new(root: impl Into<PathBuf>, ollama: Option<PathBuf>) -> Store {
        Store {
            root: root.into(),
            ollama,
        }
    }

    /// The store the environment names: `$LLAMAY_MODELS`, else the user's data
    /// folder (`~/.local/share/llamay/models` on Linux); plus `$OLLAMA_MODELS`, else
    /// `~/.ollama/models`, when that folder exists.
    pub fn from_env() -> Result<Store> {
        let root = match std::env::var_os("LLAMAY_MODELS").filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => dirs::data_dir()
                .ok_or_else(|| {
                    StoreError::Other("no data folder for this user: set LLAMAY_MODELS".to_string())
                })?
                .join("llamay")
                .join("models"),
        };
        let ollama = match std::env::var_os("OLLAMA_MODELS").filter(|v| !v.is_empty()) {
            Some(d) => Some(PathBuf::from(d)),
            None => dirs::home_dir().map(|h| h.join(".ollama").join("models")),
        }
        .filter(|d| d.is_dir());
        Ok(Store::new(root, ollama))
    }

    /// llamay's store folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The Ollama store folder read alongside, if any.
    pub fn ollama_root(&self) -> Option<&Path> {
        self.ollama.as_deref()
    }

    /// The `blobs/` folder of llamay's store.
    pub fn blobs_dir(&self) -> PathBuf {
        self.root.join("blobs")
    }

    /// Where snapshots of named contexts (KV blocks and tokens, content-addressed
    /// like blobs) live: beside `blobs/`, where the collection of unused model blobs
    /// never looks.
    pub fn snapshots_dir(&self) -> PathBuf {
        self.root.join("snapshots")
    }

    /// Stores a snapshot under its sha256 (written once: the same bytes have the same
    /// name) and returns that digest.
    pub fn put_snapshot(&self, bytes: &[u8]) -> Result<Digest> {
        let digest = Digest::of_bytes(bytes);
        let path = self.snapshots_dir().join(digest.file_name());
        if !path.is_file() {
            atomic_write(&path, bytes)?;
        }
        Ok(digest)
    }

    /// The snapshot stored under `digest`, if there is one.
    pub fn read_snapshot(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let path = self.snapshots_dir().join(digest.file_name());
        if !path.is_file() {
            return Ok(None);
        }
        fs::read(&path).at(&path).map(Some)
    }

    /// Where llamay's store keeps (or would keep) a blob.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs_dir().join(digest.file_name())
    }

    /// The records of URL pulls.
    pub(crate) fn urls_dir(&self) -> PathBuf {
        self.root.join("urls")
    }

    /// The store lock's file.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.root.join("store.lock")
    }

    /// Holds collection off while blobs are added ahead of their manifest.
    pub(crate) fn hold_for_writing(&self) -> Result<StoreLock> {
        StoreLock::shared(&self.lock_path())
    }

    /// The manifest of `name` in llamay's own store, if it is there and parses.
    pub(crate) fn own_manifest(&self, name: &ModelName) -> Option<Manifest> {
        let bytes = fs::read(self.manifest_path(name)).ok()?;
        Manifest::parse(&bytes).ok()
    }

    /// Where llamay's store keeps (or would keep) a name's manifest.
    pub fn manifest_path(&self, name: &ModelName) -> PathBuf {
        self.root.join("manifests").join(name.manifest_rel_path())
    }

    /// The blob's file in llamay's store, else in the Ollama store.
    pub fn find_blob(&self, digest: &Digest) -> Option<PathBuf> {
        let own = self.blob_path(digest);
        if own.is_file() {
            return Some(own);
        }
        let ollama = self.ollama.as_deref()?.join("blobs");
        // Early Ollama versions named blobs `sha256:<hex>`.
        [digest.file_name(), digest.to_string()]
            .into_iter()
            .map(|f| ollama.join(f))
            .find(|p| p.is_file())
    }

    /// The blob in the Ollama store, if it is there with the expected size.
    pub(crate) fn ollama_blob(&self, layer: &Layer) -> Option<PathBuf> {
        self.find_blob(&layer.digest)
            .filter(|p| !p.starts_with(&self.root))
            .filter(|p| fs::metadata(p).is_ok_and(|m| m.len() == layer.size))
    }

    /// True if a complete blob of this size is in llamay's store.
    pub(crate) fn has_blob(&self, layer: &Layer) -> bool {
        fs::metadata(self.blob_path(&layer.digest)).is_ok_and(|m| m.len() == layer.size)
    }

    fn roots(&self) -> impl Iterator<Item = (Source, &Path)> {
        std::iter::once((Source::Llamay, self.root.as_path()))
            .chain(self.ollama.as_deref().map(|o| (Source::Ollama, o)))
    }

    /// The manifest for `name` (llamay's store first), or `None` if neither has it.
    fn find(&self, name: &ModelName) -> Result<Option<Found>> {
        for (source, root) in self.roots() {
            let path = root.join("manifests").join(name.manifest_rel_path());
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).at(path),
            };
            let manifest = Manifest::parse(&bytes).map_err(|reason| StoreError::BadManifest {
                path: path.display().to_string(),
                reason,
            })?;
            return Ok(Some(Found {
                source,
                path,
                bytes,
                manifest,
            }));
        }
        Ok(None)
    }

    fn find_required(&self, name: &ModelName) -> Result<Found> {
        self.find(name)?
            .ok_or_else(|| StoreError::NotFound(name.short()))
    }

    /// True if either store has a manifest for `name`.
    pub fn contains(&self, name: &ModelName) -> Result<bool> {
        Ok(self.find(name)?.is_some())
    }

    /// Resolves a name or `.gguf` path to the files a run needs. A URL resolves to
    /// the model a `pull` of it made.
    pub fn resolve(&self, model: &str) -> Result<ResolvedModel> {
        match ModelRef::parse(model)? {
            ModelRef::File(path) => resolve_file(&path),
            ModelRef::Url(url) => self.resolve_name(&crate::name::url_model_name(&url)?),
            ModelRef::Name(name) => self.resolve_name(&name),
        }
    }

    /// Resolves a store name to its GGUF blob and extras.
    pub fn resolve_name(&self, name: &ModelName) -> Result<ResolvedModel> {
        let found = self.find_required(name)?;
        let m = &found.manifest;
        let model_layer = m
            .layer(MEDIA_MODEL)
            .ok_or_else(|| StoreError::NoModelLayer(name.short()))?;
        let gguf = self.find_blob(&model_layer.digest).ok_or_else(|| {
            StoreError::Other(format!(
                "blob {} of '{}' is missing from the store; pull the model again",
                model_layer.digest,
                name.short()
            ))
        })?;
        let text = |media: &str| -> Result<Option<String>> {
            match m.layer(media) {
                Some(l) => self.read_text_blob(l).map(Some),
                None => Ok(None),
            }
        };
        let params = match text(MEDIA_PARAMS)? {
            Some(t) => Some(
                serde_json::from_str(&t).map_err(|e| StoreError::BadManifest {
                    path: found.path.display().to_string(),
                    reason: format!("params layer is not JSON: {e}"),
                })?,
            ),
            None => None,
        };
        Ok(ResolvedModel {
            name: Some(name.clone()),
            source: found.source,
            gguf,
            template: text(MEDIA_TEMPLATE)?,
            system: text(MEDIA_SYSTEM)?,
            params,
            config: self.read_config(m),
            manifest_digest: Some(Digest::of_bytes(&found.bytes)),
            projector: m
                .layer(MEDIA_PROJECTOR)
                .and_then(|l| self.find_blob(&l.digest)),
        })
    }

    fn read_text_blob(&self, layer: &Layer) -> Result<String> {
        if layer.size > MAX_TEXT_LAYER_BYTES {
            return Err(StoreError::Other(format!(
                "{} layer {} is {} bytes, too large to read",
                layer.media_type, layer.digest, layer.size
            )));
        }
        let path = self
            .find_blob(&layer.digest)
            .ok_or_else(|| StoreError::Other(format!("blob {} is missing", layer.digest)))?;
        let mut buf = Vec::new();
        fs::File::open(&path)
            .and_then(|f| f.take(MAX_TEXT_LAYER_BYTES).read_to_end(&mut buf))
            .at(&path)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn read_config(&self, m: &Manifest) -> Option<ModelConfig> {
        let text = self.read_text_blob(&m.config).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Every model in both stores, sorted by short name; llamay's store wins a clash.
    /// Entries whose name or manifest does not parse are skipped.
    pub fn list(&self) -> Result<Vec<ListEntry>> {
        let mut out: Vec<ListEntry> = Vec::new();
        let mut seen = HashSet::new();
        for (source, root) in self.roots() {
            for (name, path) in manifest_files(&root.join("manifests"))? {
                if !seen.insert(name.clone()) {
                    continue;
                }
                let Ok(bytes) = fs::read(&path) else { continue };
                let Ok(manifest) = Manifest::parse(&bytes) else {
                    continue;
                };
                let modified = fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                out.push(ListEntry {
                    name,
                    source,
                    digest: Digest::of_bytes(&bytes),
                    size: manifest.total_size(),
                    modified,
                    config: self.read_config(&manifest),
                });
            }
        }
        out.sort_by_cached_key(|e| e.name.short());
        Ok(out)
    }

    /// The store's facts about one model (manifest, layers, paths).
    pub fn show(&self, name: &ModelName) -> Result<StoredModel> {
        let found = self.find_required(name)?;
        let blobs = found
            .manifest
            .blobs()
            .map(|l| BlobFacts {
                layer: l.clone(),
                path: self.find_blob(&l.digest),
            })
            .collect();
        Ok(StoredModel {
            name: name.clone(),
            source: found.source,
            manifest_digest: Digest::of_bytes(&found.bytes),
            config: self.read_config(&found.manifest),
            manifest_path: found.path,
            manifest: found.manifest,
            blobs,
        })
    }

    /// Copies `src` to the name `dst` in llamay's store. A model from the Ollama
    /// store has its blobs linked (or copied) into llamay's store first, so the copy
    /// does not depend on the Ollama store staying as it is. The blobs only a
    /// replaced `dst` used are collected.
    pub fn copy(&self, src: &ModelName, dst: &ModelName) -> Result<()> {
        let writing = self.hold_for_writing()?;
        let found = self.find_required(src)?;
        for layer in found.manifest.blobs() {
            if self.has_blob(layer) {
                continue;
            }
            let from = self.find_blob(&layer.digest).ok_or_else(|| {
                StoreError::Other(format!(
                    "blob {} of '{}' is missing; pull it again",
                    layer.digest,
                    src.short()
                ))
            })?;
            link_or_copy(&from, &self.blob_path(&layer.digest))?;
        }
        let replaced = self.own_manifest(dst).map(|m| m.digests());
        atomic_write(&self.manifest_path(dst), &found.bytes)?;
        drop(writing);
        self.collect_unused(&replaced.unwrap_or_default());
        Ok(())
    }

    /// Removes `name` from llamay's store, and the blobs no other manifest of
    /// llamay's store uses (unless a pull is writing to the store: then they are
    /// left for `prune`). Never touches the Ollama store.
    pub fn remove(&self, name: &ModelName) -> Result<RemoveReport> {
        let path = self.manifest_path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(match self.find(name)? {
                    Some(f) if f.source == Source::Ollama => StoreError::ReadOnly(name.short()),
                    _ => StoreError::NotFound(name.short()),
                });
            }
            Err(e) => return Err(e).at(path),
        };
        // A manifest that does not parse is still removed; it just frees no blobs.
        let digests: Vec<Digest> = Manifest::parse(&bytes)
            .map(|m| m.blobs().map(|l| l.digest.clone()).collect())
            .unwrap_or_default();
        fs::remove_file(&path).at(&path)?;
        if let Some(dir) = path.parent() {
            prune_empty_dirs(dir, &self.root.join("manifests"));
        }
        let c = self.collect(&digests)?;
        Ok(RemoveReport {
            deleted_blobs: c.deleted,
            kept_blobs: c.kept,
            deferred_blobs: c.deferred,
        })
    }

    /// Every blob digest the manifests of llamay's store refer to. A manifest that
    /// does not parse still keeps every digest its text names: collection errs on
    /// the side of keeping.
    pub(crate) fn digests_in_use(&self) -> Result<HashSet<Digest>> {
        let mut set = HashSet::new();
        for (_, path) in manifest_files(&self.root.join("manifests"))? {
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).at(path),
            };
            match Manifest::parse(&bytes) {
                Ok(m) => set.extend(m.digests()),
                Err(_) => set.extend(digests_named_in(&bytes)),
            }
        }
        Ok(set)
    }

    /// Imports a `.gguf` file as `name`: the file is hard-linked into `blobs/` when
    /// on the same file system (else copied), and a manifest is written so it lists
    /// like a pulled model. `config` fills the config blob (`file_type` etc.); the
    /// format, rootfs and layer digest are set here.
    pub fn import(&self, file: &Path, name: &ModelName, config: &ModelConfig) -> Result<Digest> {
        check_gguf_magic(file)?;
        let writing = self.hold_for_writing()?;
        let digest = Digest::of_file(file)?;
        let size = fs::metadata(file).at(file)?.len();
        let layer = Layer {
            media_type: MEDIA_MODEL.to_string(),
            digest: digest.clone(),
            size,
            from: None,
        };
        if !self.has_blob(&layer) {
            link_or_copy(file, &self.blob_path(&digest))?;
        }
        let replaced = self.own_manifest(name).map(|m| m.digests());
        let bytes = self.model_manifest_bytes(layer, config)?;
        atomic_write(&self.manifest_path(name), &bytes)?;
        drop(writing);
        self.collect_unused(&replaced.unwrap_or_default());
        Ok(digest)
    }

    /// Writes the config blob for a single GGUF layer already in `blobs/` and
    /// returns the manifest to write for it (import and URL pulls).
    pub(crate) fn model_manifest_bytes(
        &self,
        layer: Layer,
        config: &ModelConfig,
    ) -> Result<Vec<u8>> {
        let mut config = config.clone();
        config
            .model_format
            .get_or_insert_with(|| "gguf".to_string());
        config.rootfs = Some(RootFs {
            kind: "layers".to_string(),
            diff_ids: vec![layer.digest.to_string()],
        });
        let config_bytes = serde_json::to_vec(&config).expect("a config always serialises");
        let config_layer = self.write_blob(&config_bytes, MEDIA_CONFIG)?;
        Ok(Manifest::new(config_layer, vec![layer]).to_bytes())
    }

    /// Stores a small blob given in memory.
    pub(crate) fn write_blob(&self, bytes: &[u8], media_type: &str) -> Result<Layer> {
        let digest = Digest::of_bytes(bytes);
        let path = self.blob_path(&digest);
        if !path.is_file() {
            atomic_write(&path, bytes)?;
        }
        Ok(Layer {
            media_type: media_type.to_string(),
            digest,
            size: bytes.len() as u64,
            from: None,
        })
    }

    /// Writes a manifest's raw bytes (as received, so its digest is the registry's).
    pub(crate) fn write_manifest_bytes(&self, name: &ModelName, bytes: &[u8]) -> Result<()> {
        atomic_write(&self.manifest_path(name), bytes)
    }
}

/// Every `sha256:<64 hex>` a text names (for a manifest that does not parse).
fn digests_named_in(bytes: &[u8]) -> Vec<Digest> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices("sha256:")
        .filter_map(|(i, _)| text.get(i..i + 7 + 64))
        .filter_map(|s| Digest::parse(s).ok())
        .collect()
}

/// A `.gguf` path as a resolved model, after checking it is a readable GGUF.
fn resolve_file(path: &Path) -> Result<ResolvedModel> {
    check_gguf_magic(path)?;
    Ok(ResolvedModel {
        name: None,
        source: Source::File,
        gguf: path.to_path_buf(),
        template: None,
        system: None,
        params: None,
        projector: None,
        config: None,
        manifest_digest: None,
    })
}

/// Checks that `path` is a readable file starting with the GGUF magic.
pub fn check_gguf_magic(path: &Path) -> Result<()> {
    let mut magic = [0u8; 4];
    let mut f = fs::File::open(path).at(path)?;
    if f.metadata().at(path)?.is_dir() {
        return Err(StoreError::NotGguf {
            path: path.to_path_buf(),
            reason: "it is a folder".to_string(),
        });
    }
    f.read_exact(&mut magic).map_err(|_| StoreError::NotGguf {
        path: path.to_path_buf(),
        reason: "shorter than the 4-byte magic".to_string(),
    })?;
    if &magic != b"GGUF" {
        return Err(StoreError::NotGguf {
            path: path.to_path_buf(),
            reason: format!("it starts with {magic:02x?}, not \"GGUF\""),
        });
    }
    Ok(())
}

/// Every `manifests/<host>/<namespace>/<model>/<tag>` file whose path is a valid
/// name. A missing folder is an empty store.
fn manifest_files(dir: &Path) -> Result<Vec<(ModelName, PathBuf)>> {
    fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
        let Ok(rd) = fs::read_dir(dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok())
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .collect()
    }
    let mut out = Vec::new();
    for (host, h) in subdirs(dir) {
        for (ns, n) in subdirs(&h) {
            for (model, m) in subdirs(&n) {
                for (tag, t) in subdirs(&m) {
                    if !t.is_file() || tag.contains(".tmp-") {
                        continue;
                    }
                    if let Ok(name) = ModelName::parse(&format!("{host}/{ns}/{model}:{tag}")) {
                        out.push((name, t));
                    }
                }
            }
        }
    }
    Ok(out)
}
