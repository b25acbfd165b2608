//! Pulls against a registry of our own on 127.0.0.1 (see `common`).

mod common;

use std::sync::{Arc, Barrier, Mutex};

use common::{files_in, fresh_store, name, tiny, Registry, TestModel, PARAMS, SYSTEM, TEMPLATE};
use llamay_store::{blocking, Digest, NoProgress, PullEvent, Store, StoreError};

/// Files in `blobs/` that are not finished blobs.
fn leftovers(store: &Store) -> Vec<String> {
    files_in(&store.blobs_dir())
        .into_iter()
        .filter(|f| !(f.starts_with("sha256-") && f.len() == 7 + 64))
        .collect()
}

#[test]
fn clean_pull_in_parallel_ranges_resolves_with_extras() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let (_dir, store) = fresh_store();
    let events = Mutex::new(Vec::new());
    let progress = |e: PullEvent| events.lock().unwrap().push(e);
    let report = blocking::pull(&store, &name("tiny"), &reg.options(), &progress).unwrap();
    assert_eq!((report.blobs, report.blobs_present), (5, 0));

    let r = store.resolve("tiny").unwrap();
    assert_eq!(
        std::fs::read(&r.gguf).unwrap(),
        std::fs::read(&model.gguf).unwrap()
    );
    assert_eq!(r.template.as_deref(), Some(TEMPLATE));
    assert_eq!(r.system.as_deref(), Some(SYSTEM));
    assert_eq!(r.params, Some(serde_json::from_str(PARAMS).unwrap()));
    assert_eq!(r.config.unwrap().file_type.as_deref(), Some("Q4_0"));
    // The stored manifest is the registry's, byte for byte.
    let stored = std::fs::read(store.manifest_path(&name("tiny"))).unwrap();
    assert_eq!(stored, model.manifest.to_bytes());
    assert_eq!(report.manifest_digest, Digest::of_bytes(&stored));
    assert_eq!(leftovers(&store), Vec::<String>::new());
    assert_eq!(files_in(&store.blobs_dir()).len(), 5);

    // The 0.8 MB model blob came as several 256 KiB ranges, through the redirect.
    let size = std::fs::metadata(&model.gguf).unwrap().len();
    let ranges: Vec<_> = reg
        .seen()
        .into_iter()
        .filter(|s| s.path == format!("/store/{}", model.gguf_digest))
        .collect();
    assert_eq!(ranges.len() as u64, size.div_ceil(256 << 10), "{ranges:?}");
    assert!(ranges.iter().all(|s| s.range.is_some()));
    assert_eq!(reg.served(&model.gguf_digest), size);

    let events = events.into_inner().unwrap();
    assert_eq!(
        events.first(),
        Some(&PullEvent::Status("pulling manifest".into()))
    );
    assert_eq!(events.last(), Some(&PullEvent::Status("success".into())));
    let last_for_model = events
        .iter()
        .rev()
        .find_map(|e| match e {
            PullEvent::Blob {
                digest,
                total,
                completed,
            } if *digest == model.gguf_digest => Some((*total, *completed)),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_for_model, (size, size));

    // A second pull finds everything present and downloads nothing.
    let before = reg.served(&model.gguf_digest);
    let again = blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    assert_eq!(again.blobs_present, 5);
    assert_eq!(reg.served(&model.gguf_digest), before);
}

#[test]
fn interrupted_pull_resumes_where_it_stopped() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let size = std::fs::metadata(&model.gguf).unwrap().len();
    let key = model.gguf_digest.to_string();
    reg.inner
        .lock()
        .unwrap()
        .drop_after
        .insert(key.clone(), 300_000);
    let (_dir, store) = fresh_store();
    let mut opts = reg.options();
    opts.chunk_size = 16 << 20; // one range, so the drop cuts the only request
    opts.retries = 0;

    let err = blocking::pull(&store, &name("tiny"), &opts, &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::Registry(_)), "{err}");
    assert!(!err.to_string().contains('\n'));
    // Nothing finished is claimed: no manifest, no blob, but the partial is kept.
    assert!(!store.manifest_path(&name("tiny")).exists());
    assert!(!store.blob_path(&model.gguf_digest).exists());
    let partial = format!("{}.partial", model.gguf_digest.file_name());
    assert!(files_in(&store.blobs_dir()).contains(&partial));
    assert_eq!(reg.served(&model.gguf_digest), 300_000);

    blocking::pull(&store, &name("tiny"), &opts, &NoProgress).unwrap();
    let requests: Vec<_> = reg
        .seen()
        .into_iter()
        .filter(|s| s.path == format!("/store/{key}"))
        .collect();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].range_start(), 0);
    let resumed_at = requests[1].range_start();
    assert!(
        resumed_at > 0 && resumed_at <= 300_000,
        "resumed at {resumed_at}"
    );
    // Only the missing tail was sent again.
    assert_eq!(
        reg.served(&model.gguf_digest),
        300_000 + (size - resumed_at)
    );
    assert_eq!(
        std::fs::read(store.blob_path(&model.gguf_digest)).unwrap(),
        std::fs::read(&model.gguf).unwrap()
    );
    assert_eq!(leftovers(&store), Vec::<String>::new());
}

#[test]
fn dropped_connection_is_retried_from_the_same_offset_within_one_pull() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("gemma3-Q4_K"), "Q4_K");
    reg.add_model("g", "q4", &model);
    let key = model.gguf_digest.to_string();
    reg.inner
        .lock()
        .unwrap()
        .drop_after
        .insert(key.clone(), 200_000);
    let (_dir, store) = fresh_store();
    let mut opts = reg.options();
    opts.retries = 2;
    blocking::pull(&store, &name("g:q4"), &opts, &NoProgress).unwrap();
    let starts: Vec<u64> = reg
        .seen()
        .into_iter()
        .filter(|s| s.path == format!("/store/{key}"))
        .map(|s| s.range_start())
        .collect();
    // Chunks are fetched in parallel, so whichever request reached the server first was
    // cut after 200,000 bytes; it alone was asked again, from where it was cut.
    let chunk = 256u64 << 10;
    let retries: Vec<u64> = starts.iter().copied().filter(|s| s % chunk != 0).collect();
    assert_eq!(retries.len(), 1, "{starts:?}");
    let cut_chunk = retries[0] / chunk * chunk;
    assert!(starts.contains(&cut_chunk), "{starts:?}");
    assert!(
        retries[0] > cut_chunk && retries[0] <= cut_chunk + 200_000,
        "{starts:?}"
    );
    assert_eq!(
        Digest::of_file(&store.resolve("g:q4").unwrap().gguf).unwrap(),
        model.gguf_digest
    );
}

#[test]
fn corrupt_blob_is_refused_and_nothing_is_kept() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("phi3"), "Q4_K_M");
    reg.add_model("bad", "latest", &model);
    {
        let mut g = reg.inner.lock().unwrap();
        let blob = g.blobs.get_mut(&model.gguf_digest.to_string()).unwrap();
        blob[1000] ^= 0xff;
    }
    let (_dir, store) = fresh_store();
    let err = blocking::pull(&store, &name("bad"), &reg.options(), &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(model.gguf_digest.hex()) && !msg.contains('\n'),
        "{msg}"
    );
    assert!(!store.manifest_path(&name("bad")).exists());
    assert!(!store.blob_path(&model.gguf_digest).exists());
    assert_eq!(leftovers(&store), Vec::<String>::new());
    assert!(store.list().unwrap().is_empty());
    assert!(store.resolve("bad").is_err());
}

#[test]
fn unknown_tag_and_unreachable_registry_give_clear_errors() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let (_dir, store) = fresh_store();

    let err = blocking::pull(&store, &name("tiny:nope"), &reg.options(), &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::NotInRegistry { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("model 'tiny:nope' not found in registry {}", reg.base())
    );
    assert!(store.list().unwrap().is_empty());

    // A port nobody listens on stands in for "no network".
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut opts = reg.options();
    opts.registry = Some(format!("http://127.0.0.1:{port}"));
    let err = blocking::ensure(&store, "tiny", &opts, &NoProgress).unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("no network?"), "{err}");
    assert!(!err.to_string().contains('\n'));

    // Plain http needs --insecure.
    let mut opts = reg.options();
    opts.insecure = false;
    let err = blocking::pull(&store, &name("tiny"), &opts, &NoProgress).unwrap_err();
    assert!(err.to_string().contains("--insecure"), "{err}");
}

#[test]
fn two_concurrent_pulls_of_one_model_share_one_copy() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-F32"), "F32");
    reg.add_model("big", "latest", &model);
    reg.inner.lock().unwrap().piece_delay = Some(std::time::Duration::from_millis(3));
    let (_dir, store) = fresh_store();
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (store, opts, barrier) = (store.clone(), reg.options(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                blocking::pull(&store, &name("big"), &opts, &NoProgress)
            })
        })
        .collect();
    let reports: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    // Between them the two pulls downloaded each blob once.
    let downloaded: usize = reports.iter().map(|r| r.blobs - r.blobs_present).sum();
    assert_eq!(downloaded, 5);
    let size = std::fs::metadata(&model.gguf).unwrap().len();
    assert_eq!(reg.served(&model.gguf_digest), size);
    assert_eq!(files_in(&store.blobs_dir()).len(), 5);
    assert_eq!(leftovers(&store), Vec::<String>::new());
    assert_eq!(store.list().unwrap().len(), 1);
    assert_eq!(
        Digest::of_file(&store.resolve("big").unwrap().gguf).unwrap(),
        model.gguf_digest
    );
}

#[test]
fn ensure_pulls_once_then_resolves_locally() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("gemma2-Q5_1"), "Q5_1");
    reg.add_model("gemma", "2b", &model);
    let (_dir, store) = fresh_store();
    let r = blocking::ensure(&store, "gemma:2b", &reg.options(), &NoProgress).unwrap();
    assert_eq!(Digest::of_file(&r.gguf).unwrap(), model.gguf_digest);
    let requests = reg.seen().len();
    let r2 = blocking::ensure(&store, "gemma:2b", &reg.options(), &NoProgress).unwrap();
    assert_eq!(r2.gguf, r.gguf);
    assert_eq!(
        reg.seen().len(),
        requests,
        "a present model must not touch the registry"
    );
}

#[test]
fn url_pull_names_the_model_after_the_file() {
    let reg = Registry::start();
    let gguf = tiny("gemma3-Q6_K");
    let bytes = std::fs::read(&gguf).unwrap();
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("Tiny-Gemma3.Q6_K.gguf".into(), bytes.clone());
    reg.inner
        .lock()
        .unwrap()
        .files
        .insert("notes.gguf".into(), b"hello world".to_vec());
    let (_dir, store) = fresh_store();
    let url = format!("{}/files/Tiny-Gemma3.Q6_K.gguf?download=true", reg.base());
    let events = Mutex::new(Vec::new());
    let progress = |e: PullEvent| events.lock().unwrap().push(e);
    let report = blocking::pull_url(&store, &url, &reg.options(), &progress).unwrap();
    assert_eq!(report.name.short(), "Tiny-Gemma3.Q6_K:latest");
    let r = store.resolve("Tiny-Gemma3.Q6_K").unwrap();
    assert_eq!(std::fs::read(&r.gguf).unwrap(), bytes);
    // The URL itself resolves to the pulled model, and ensure does not fetch again.
    assert_eq!(store.resolve(&url).unwrap().gguf, r.gguf);
    let n = reg.seen().len();
    blocking::ensure(&store, &url, &reg.options(), &NoProgress).unwrap();
    assert_eq!(reg.seen().len(), n);
    assert!(events.into_inner().unwrap().iter().any(|e| matches!(
        e,
        PullEvent::File { completed, total, .. } if completed == total && *total == bytes.len() as u64
    )));
    assert_eq!(leftovers(&store), Vec::<String>::new());

    // A file that is not a GGUF is refused and removed.
    let err = blocking::pull_url(
        &store,
        &format!("{}/files/notes.gguf", reg.base()),
        &reg.options(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, StoreError::NotGguf { .. }), "{err}");
    assert_eq!(leftovers(&store), Vec::<String>::new());
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn a_server_that_ignores_range_still_yields_a_verified_blob() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("gemma2-F16"), "F16");
    reg.add_model("norange", "latest", &model);
    reg.inner.lock().unwrap().ignore_range = true;
    let (_dir, store) = fresh_store();
    blocking::pull(&store, &name("norange"), &reg.options(), &NoProgress).unwrap();
    assert_eq!(
        Digest::of_file(&store.resolve("norange").unwrap().gguf).unwrap(),
        model.gguf_digest
    );
    assert_eq!(leftovers(&store), Vec::<String>::new());
}

#[test]
fn blobs_already_in_the_ollama_store_are_linked_not_downloaded() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    reg.add_model("tiny", "latest", &model);
    let dir = tempfile::tempdir().unwrap();
    let ollama = dir.path().join("ollama");
    model.write_ollama_store(&ollama, "registry.ollama.ai/library/tiny-old/latest");
    let store = Store::new(dir.path().join("models"), Some(ollama));
    let report = blocking::pull(&store, &name("tiny"), &reg.options(), &NoProgress).unwrap();
    assert_eq!(report.blobs_present, 5);
    assert_eq!(reg.served(&model.gguf_digest), 0);
    let r = store.resolve("tiny").unwrap();
    assert!(r.gguf.starts_with(store.root()));
    assert_eq!(Digest::of_file(&r.gguf).unwrap(), model.gguf_digest);
}

#[test]
fn concurrent_and_repeated_url_pulls_download_once() {
    let reg = Registry::start();
    let bytes = std::fs::read(tiny("llama-F32")).unwrap();
    {
        let mut g = reg.inner.lock().unwrap();
        g.files.insert("m.gguf".into(), bytes.clone());
        g.piece_delay = Some(std::time::Duration::from_millis(2));
    }
    let (_dir, store) = fresh_store();
    let url = format!("{}/files/m.gguf", reg.base());
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (store, opts, barrier, url) =
                (store.clone(), reg.options(), barrier.clone(), url.clone());
            std::thread::spawn(move || {
                barrier.wait();
                blocking::pull_url(&store, &url, &opts, &NoProgress)
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    blocking::pull_url(&store, &url, &reg.options(), &NoProgress).unwrap();
    let served = *reg.inner.lock().unwrap().served.get("m.gguf").unwrap();
    assert_eq!(served, bytes.len() as u64);
    assert_eq!(files_in(&store.blobs_dir()).len(), 2);
    assert_eq!(leftovers(&store), Vec::<String>::new());
}

/// Child side of the two-process test: pulls `big` when told to by the parent.
#[test]
fn child_process_pull() {
    let (Ok(root), Ok(registry)) = (
        std::env::var("LLAMAY_TEST_CHILD_ROOT"),
        std::env::var("LLAMAY_TEST_CHILD_REGISTRY"),
    ) else {
        return; // only meaningful when spawned by the parent test below
    };
    let store = Store::new(root, None);
    let mut opts = llamay_store::PullOptions {
        registry: Some(registry),
        insecure: true,
        allow_private: true,
        ..Default::default()
    };
    opts.chunk_size = 256 << 10;
    blocking::pull(&store, &name("big"), &opts, &NoProgress).unwrap();
}

#[test]
fn two_processes_pulling_one_model_share_one_copy() {
    let reg = Registry::start();
    let model = TestModel::from_gguf(&tiny("llama-F32"), "F32");
    reg.add_model("big", "latest", &model);
    reg.inner.lock().unwrap().piece_delay = Some(std::time::Duration::from_millis(3));
    let (_dir, store) = fresh_store();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_process_pull", "--test-threads=1"])
                .env("LLAMAY_TEST_CHILD_ROOT", store.root())
                .env("LLAMAY_TEST_CHILD_REGISTRY", reg.base())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
    }
    let size = std::fs::metadata(&model.gguf).unwrap().len();
    assert_eq!(
        reg.served(&model.gguf_digest),
        size,
        "downloaded once in all"
    );
    assert_eq!(files_in(&store.blobs_dir()).len(), 5);
    assert_eq!(leftovers(&store), Vec::<String>::new());
    assert_eq!(
        Digest::of_file(&store.resolve("big").unwrap().gguf).unwrap(),
        model.gguf_digest
    );
}
