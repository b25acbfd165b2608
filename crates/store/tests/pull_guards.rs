//! What a pull may not do: count a damaged blob as present, take over a name
//! that holds another model, reach a private address unless allowed, or believe a
//! declared size (and leave a file of it behind).

mod common;

use common::{files_in, fresh_store, name, tiny, Registry, TestModel};
use llamay_store::{blocking, Digest, ModelConfig, NoProgress, PullOptions, StoreError};

/// Flips one byte of a file, keeping its size.
fn damage(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// Bytes on disk under `dir`, apparent sizes (a sparse file counts in full).
fn apparent_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_present_blob_with_the_right_size_but_wrong_bytes_is_fetched_again() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let (_dir, store) = fresh_store();
    blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    let blob = store.blob_path(&model.gguf_digest);
    damage(&blob);
    let served = reg.served(&model.gguf_digest);

    let again = blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    assert_eq!(
        again.blobs_present, 4,
        "the damaged blob must not count as present"
    );
    assert!(reg.served(&model.gguf_digest) > served);
    assert_eq!(Digest::of_file(&blob).unwrap(), model.gguf_digest);
}

#[test]
fn a_url_model_whose_blob_was_damaged_is_not_reported_already_pulled() {
    let reg = Registry::start();
    let bytes = std::fs::read(tiny("gemma3-Q6_K")).unwrap();
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("m.gguf".into(), bytes.clone());
    let (_dir, store) = fresh_store();
    let url = format!("{}/files/m.gguf", reg.base());
    blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap();
    let gguf = store.resolve("m").unwrap().gguf;
    damage(&gguf);

    // The same URL again: the name is its own, but the blob no longer hashes right.
    blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap();
    let served = *reg.inner.lock().unwrap().served.get("m.gguf").unwrap();
    assert_eq!(served, 2 * bytes.len() as u64, "fetched again");
    assert_eq!(
        std::fs::read(store.resolve("m").unwrap().gguf).unwrap(),
        bytes
    );
    // And once it is whole, a third pull downloads nothing.
    blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap();
    let served = *reg.inner.lock().unwrap().served.get("m.gguf").unwrap();
    assert_eq!(served, 2 * bytes.len() as u64);
}

#[test]
fn a_url_pull_never_takes_over_a_name_that_holds_another_model() {
    let reg = Registry::start();
    let old = tiny("llama-Q4_0");
    let new_bytes = std::fs::read(tiny("phi3")).unwrap();
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("mine.gguf".into(), new_bytes.clone());
    let (_dir, store) = fresh_store();
    let old_digest = store
        .import(&old, &name("mine"), &ModelConfig::default())
        .unwrap();
    let old_manifest = std::fs::read(store.manifest_path(&name("mine"))).unwrap();
    let url = format!("{}/files/mine.gguf", reg.base());

    let err = blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");
    assert!(
        err.to_string().contains("'mine:latest' already exists"),
        "{err}"
    );
    assert!(
        reg.seen().is_empty(),
        "refused before anything is sent: {:?}",
        reg.seen()
    );
    assert_eq!(
        std::fs::read(store.manifest_path(&name("mine"))).unwrap(),
        old_manifest
    );
    assert_eq!(
        Digest::of_file(&store.resolve("mine").unwrap().gguf).unwrap(),
        old_digest
    );

    // Asked to replace, it does, and the old GGUF (used by no one now) is collected.
    let opts = PullOptions {
        replace: true,
        ..reg.options()
    };
    blocking::pull_url(&store, &url, &opts, &NoProgress).unwrap();
    assert_eq!(
        std::fs::read(store.resolve("mine").unwrap().gguf).unwrap(),
        new_bytes
    );
    assert!(!store.blob_path(&old_digest).exists());
    // Pulled from this URL now, the name is its own: pulling again needs no replace.
    let manifest = std::fs::read(store.manifest_path(&name("mine"))).unwrap();
    blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap();
    assert_eq!(
        std::fs::read(store.manifest_path(&name("mine"))).unwrap(),
        manifest
    );
    assert_eq!(files_in(&store.blobs_dir()).len(), 2);
}

#[test]
fn replace_with_the_same_file_leaves_the_model_as_it_was() {
    let reg = Registry::start();
    let gguf = tiny("gemma2-Q5_1");
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("same.gguf".into(), std::fs::read(&gguf).unwrap());
    let (_dir, store) = fresh_store();
    let cfg = ModelConfig {
        file_type: Some("Q5_1".into()),
        ..Default::default()
    };
    store.import(&gguf, &name("same"), &cfg).unwrap();
    let manifest = std::fs::read(store.manifest_path(&name("same"))).unwrap();
    let opts = PullOptions {
        replace: true,
        ..reg.options()
    };
    let url = format!("{}/files/same.gguf", reg.base());
    blocking::pull_url(&store, &url, &opts, &NoProgress).unwrap();
    assert_eq!(
        std::fs::read(store.manifest_path(&name("same"))).unwrap(),
        manifest,
        "the digest did not change, so neither does the manifest"
    );
}

#[test]
fn private_addresses_are_refused_unless_allowed() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("f.gguf".into(), std::fs::read(&model.gguf).unwrap());
    let (_dir, store) = fresh_store();
    let denied = PullOptions {
        allow_private: false,
        ..reg.options()
    };
    // A literal loopback IP, for a registry pull and a URL pull.
    let err = blocking::pull(&store, &name("tiny"), &denied, &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::PrivateAddress { .. }), "{err}");
    assert!(err.to_string().contains("loopback"), "{err}");
    let url = format!("{}/files/f.gguf", reg.base());
    let err = blocking::pull_url(&store, &url, &denied, &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::PrivateAddress { .. }), "{err}");
    // A name that resolves to loopback is refused after resolution.
    let by_name = format!("http://localhost:{}/files/f.gguf", reg.addr.port());
    let err = blocking::pull_url(&store, &by_name, &denied, &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::PrivateAddress { .. }), "{err}");
    assert!(err.to_string().contains("localhost"), "{err}");
    assert!(reg.seen().is_empty(), "{:?}", reg.seen());
    assert!(!err.to_string().contains('\n'));

    // Allowed, both work.
    blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    blocking::pull_url(&store, &by_name, &reg.options(), &NoProgress).unwrap();
}

#[test]
fn a_url_whose_size_is_a_lie_leaves_nothing_behind() {
    let reg = Registry::start();
    let bytes = std::fs::read(tiny("llama-F32")).unwrap();
    {
        let mut g = reg.inner.lock().unwrap();
        g.files.insert("big.gguf".into(), bytes.clone());
        // HEAD says 1 TiB; ranged answers state the real size.
        g.claimed_size.insert("big.gguf".into(), 1 << 40);
    }
    let (_dir, store) = fresh_store();
    let url = format!("{}/files/big.gguf", reg.base());
    let err = blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::SizeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("1099511627776"), "{err}");
    assert_eq!(files_in(&store.blobs_dir()), Vec::<String>::new());
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_lying_content_length_without_ranges_leaves_nothing_behind() {
    let reg = Registry::start();
    let bytes = std::fs::read(tiny("llama-F32")).unwrap();
    {
        let mut g = reg.inner.lock().unwrap();
        g.files.insert("big.gguf".into(), bytes.clone());
        // Every answer is a 200 claiming 1 TiB and ending after the real bytes.
        g.claimed_size.insert("big.gguf".into(), 1 << 40);
        g.ignore_range = true;
    }
    let (_dir, store) = fresh_store();
    let url = format!("{}/files/big.gguf", reg.base());
    let opts = PullOptions {
        retries: 1,
        ..reg.options()
    };
    blocking::pull_url(&store, &url, &opts, &NoProgress).unwrap_err();
    assert_eq!(files_in(&store.blobs_dir()), Vec::<String>::new());
    assert!(apparent_bytes(&store.blobs_dir()) < bytes.len() as u64);
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_blob_larger_in_the_manifest_than_on_the_server_leaves_nothing_behind() {
    let reg = Registry::start();
    let mut model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    let real = model.manifest.layers[0].size;
    model.manifest.layers[0].size = real + (3 << 20);
    reg.add_model("tiny", "latest", &model);
    let (_dir, store) = fresh_store();
    let err = blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::SizeMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("has {real}")),
        "names the size the server gave: {err}"
    );
    // The config blob was fine and stays; nothing of the model blob does.
    let files = files_in(&store.blobs_dir());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(!files[0].contains(model.gguf_digest.hex()), "{files:?}");
    assert!(!store.manifest_path(&name("tiny")).exists());
}
