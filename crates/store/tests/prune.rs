//! Collecting unused blobs: `prune`, the collection after `rm`, and the store lock
//! that keeps both away from a pull between its first blob and its manifest; and a
//! pull dropped midway (a client that left) leaving the store usable.

mod common;

use std::time::Duration;

use common::{files_in, fresh_store, name, tiny, Registry, TestModel};
use llamay_store::{blocking, Digest, ModelConfig, NoProgress, Store};

/// Waits (a minute at most) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Bytes of a file (0 if it is not there).
fn len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Every blob of `name`'s manifest is in the store and hashes right.
fn whole(store: &Store, model: &str) -> bool {
    let facts = store.show(&name(model)).unwrap();
    facts.blobs.iter().all(|b| {
        b.path
            .as_ref()
            .is_some_and(|p| Digest::of_file(p).is_ok_and(|d| d == b.layer.digest))
    })
}

#[test]
fn prune_deletes_unused_blobs_and_leftovers_and_nothing_in_use() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let (_dir, store) = fresh_store();
    blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    store
        .import(&tiny("phi3"), &name("other"), &ModelConfig::default())
        .unwrap();
    let in_use = files_in(&store.blobs_dir());
    // An orphan blob and what an interrupted pull leaves.
    let orphan = Digest::of_bytes(b"nobody uses me");
    std::fs::write(store.blob_path(&orphan), b"nobody uses me").unwrap();
    let partial = format!("{}.partial", Digest::of_bytes(b"x").file_name());
    std::fs::write(store.blobs_dir().join(&partial), vec![0u8; 1000]).unwrap();
    std::fs::write(store.blobs_dir().join("notes.txt"), b"not ours").unwrap();

    let report = store.try_prune().unwrap().expect("nothing holds the store");
    assert_eq!(report.deleted_blobs, vec![orphan]);
    assert_eq!(report.deleted_files, vec![partial]);
    assert_eq!(report.freed_bytes, 14 + 1000);
    let mut left = in_use.clone();
    left.push("notes.txt".into());
    left.sort();
    assert_eq!(files_in(&store.blobs_dir()), left);
    assert!(whole(&store, "tiny") && whole(&store, "other"));
    // Nothing more to do.
    let again = store.prune().unwrap();
    assert!(again.deleted_blobs.is_empty() && again.deleted_files.is_empty());
}

#[test]
fn a_manifest_that_does_not_parse_still_keeps_the_blobs_it_names() {
    let (_dir, store) = fresh_store();
    let digest = store
        .import(&tiny("phi3"), &name("odd"), &ModelConfig::default())
        .unwrap();
    let path = store.manifest_path(&name("odd"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"schemaVersion\":2", "\"schemaVersion\":3"),
    )
    .unwrap();
    let report = store.prune().unwrap();
    assert!(report.deleted_blobs.is_empty(), "{report:?}");
    assert!(store.blob_path(&digest).is_file());
}

#[test]
fn a_blob_a_concurrent_pull_fetched_is_not_collected() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-F32"), "F32");
    reg.add_model("big", "latest", &model);
    let (_dir, store) = fresh_store();
    store
        .import(&tiny("phi3"), &name("gone"), &ModelConfig::default())
        .unwrap();
    let gone = store.show(&name("gone")).unwrap();
    // The model blob stops after 300,000 bytes until the gate opens; the config
    // blob before it is then whole in `blobs/` with no manifest using it yet.
    let gate = reg.hold_after(&model.gguf_digest.to_string(), 300_000);
    let puller = {
        let (store, opts) = (store.clone(), reg.options());
        std::thread::spawn(move || blocking::pull(&store, &name("big"), &opts, &NoProgress))
    };
    let partial = store
        .blobs_dir()
        .join(format!("{}.partial", model.gguf_digest.file_name()));
    wait_until("the model blob reached the hold", || {
        len(&partial) >= 300_000
    });
    let config = store.blob_path(&model.manifest.config.digest);
    assert!(config.is_file(), "fetched, not yet in a manifest");

    // Collection now would find the config blob unused: it must not run.
    assert!(
        store.try_prune().unwrap().is_none(),
        "the pull holds the store"
    );
    // rm still removes the model, but leaves its blobs for later.
    let rm = store.remove(&name("gone")).unwrap();
    assert!(rm.deleted_blobs.is_empty(), "{rm:?}");
    assert_eq!(rm.deferred_blobs.len(), 2, "{rm:?}");
    assert!(gone
        .blobs
        .iter()
        .all(|b| b.path.as_ref().unwrap().is_file()));
    // A waiting prune runs once the pull is done.
    let pruner = {
        let store = store.clone();
        std::thread::spawn(move || store.prune())
    };
    assert!(config.is_file());
    gate.send(true).unwrap();
    puller.join().unwrap().unwrap();
    let report = pruner.join().unwrap().unwrap();

    assert!(whole(&store, "big"));
    let mut deferred = rm.deferred_blobs.clone();
    deferred.sort();
    assert_eq!(report.deleted_blobs, deferred);
    assert_eq!(files_in(&store.blobs_dir()).len(), 5);
}

#[test]
fn a_pull_dropped_midway_releases_the_store_and_resumes_later() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-F32"), "F32");
    reg.add_model("big", "latest", &model);
    let (_dir, store) = fresh_store();
    let mut opts = reg.options();
    opts.chunk_size = 16 << 20; // one range
    let gate = reg.hold_after(&model.gguf_digest.to_string(), 300_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let task = {
        let (store, opts) = (store.clone(), opts.clone());
        rt.spawn(async move { llamay_store::pull(&store, &name("big"), &opts, &NoProgress).await })
    };
    let partial = store
        .blobs_dir()
        .join(format!("{}.partial", model.gguf_digest.file_name()));
    wait_until("the model blob reached the hold", || {
        len(&partial) >= 300_000
    });
    // What the server does when the client that asked for the pull leaves.
    task.abort();
    assert!(rt.block_on(task).unwrap_err().is_cancelled());
    // No lock is left held or on disk, and no manifest claims the model.
    let leftovers: Vec<String> = files_in(&store.blobs_dir())
        .into_iter()
        .filter(|f| f.ends_with(".lock"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
    assert!(!store.manifest_path(&name("big")).exists());
    assert!(partial.is_file());

    // A later pull resumes from what the dropped one had written.
    gate.send(true).unwrap();
    blocking::pull(&store, &name("big"), &opts, &NoProgress).unwrap();
    let key = format!("/store/{}", model.gguf_digest);
    let starts: Vec<u64> = reg
        .seen()
        .into_iter()
        .filter(|s| s.path == key)
        .map(|s| s.range_start())
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[1], 300_000, "resumed where the dropped pull stopped");
    assert!(whole(&store, "big"));
    assert!(
        store.try_prune().unwrap().is_some(),
        "the store is free again"
    );
}
