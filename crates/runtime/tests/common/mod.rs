//! What several of the runtime's test binaries share (each includes it with
//! `mod common;`).

use llamay_engine::LoadOptions;
use llamay_runtime::LoadedModel;
use llamay_testdata::{real_model, RealModel};

/// One of the real test models, with a context of `n_ctx` positions, decoding on
/// `n_threads` threads (`None`: one per physical core).
pub fn load(which: RealModel, n_ctx: usize, n_threads: Option<usize>) -> LoadedModel {
    let opts = LoadOptions {
        n_ctx: Some(n_ctx),
        n_threads,
        ..LoadOptions::default()
    };
    LoadedModel::load(&real_model(which), &opts).unwrap_or_else(|e| panic!("{which:?}: {e}"))
}
