//! What several of the runtime's test binaries share (each includes it with
//! `mod common;`).

use llamay_engine::LoadOptions;
use llamay_runtime::LoadedModel;
use llamay_testdata::{real_model, RealModel};

/// One of the real test models, with a context of `n_ctx` positions, decoding on
/// `n_threads` threads (`None`: one per physical core).
pub fn load(which: RealModel, n_ctx: usize, n_threads: Option<usize>) -> LoadedModel {
    load_path(&real_model(which), n_ctx, n_threads)
}

/// [`load`] for a model file of any origin (the tiny mixture-of-experts ones).
pub fn load_path(path: &std::path::Path, n_ctx: usize, n_threads: Option<usize>) -> LoadedModel {
    let opts = LoadOptions {
        n_ctx: Some(n_ctx),
        n_threads,
        ..LoadOptions::default()
    };
    LoadedModel::load(path, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
