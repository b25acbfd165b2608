//! The model store: Ollama-style model names, the on-disk store (Ollama's
//! `manifests/` + `blobs/` layout, which also lets an existing Ollama store be read
//! as it is), and pulls from an Ollama-protocol registry or a direct GGUF URL.
