//! The store without a network: a fake Ollama store, list/show/cp/rm/import, and
//! the errors for bad names and bad files.

mod common;

use common::{files_in, name, tiny, TestModel, TEMPLATE};
use llamay_store::{Digest, ModelConfig, Source, Store, StoreError};

/// A llamay store plus an Ollama store holding `smol:latest` and `user/other:v1`.
struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    ollama: std::path::PathBuf,
    smol: TestModel,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ollama = dir.path().join("ollama-models");
    let smol = TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0");
    smol.write_ollama_store(&ollama, "registry.ollama.ai/library/smol/latest");
    TestModel::from_gguf(&tiny("gemma2-Q5_1"), "Q5_1")
        .write_ollama_store(&ollama, "registry.ollama.ai/user/other/v1");
    let store = Store::new(dir.path().join("llamay-models"), Some(ollama.clone()));
    Fixture {
        _dir: dir,
        store,
        ollama,
        smol,
    }
}

#[test]
fn a_projector_layer_pairs_itself_with_the_model() {
    let f = fixture();
    assert_eq!(f.store.resolve("smol").unwrap().projector, None);
    let projector = b"GGUF projector bytes".to_vec();
    TestModel::from_gguf(&tiny("llama-Q4_0"), "Q4_0")
        .with_layer(llamay_store::MEDIA_PROJECTOR, projector.clone())
        .write_ollama_store(&f.ollama, "registry.ollama.ai/library/seeing/latest");
    let r = f.store.resolve("seeing").unwrap();
    let path = r.projector.expect("the projector layer's blob");
    assert_eq!(std::fs::read(path).unwrap(), projector);
}

fn one_line(e: StoreError) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n') && !s.is_empty(), "{s:?}");
    s
}

#[test]
fn an_ollama_store_lists_and_resolves_read_only() {
    let f = fixture();
    let list = f.store.list().unwrap();
    let names: Vec<String> = list.iter().map(|e| e.name.short()).collect();
    assert_eq!(names, vec!["smol:latest", "user/other:v1"]);
    let smol = &list[0];
    assert_eq!(smol.source, Source::Ollama);
    assert_eq!(smol.file_type(), Some("Q4_0"));
    assert_eq!(smol.size, f.smol.manifest.total_size());

    let r = f.store.resolve("smol").unwrap();
    assert_eq!(r.source, Source::Ollama);
    assert!(r.gguf.starts_with(&f.ollama));
    assert_eq!(&std::fs::read(&r.gguf).unwrap()[..4], b"GGUF");
    assert_eq!(r.template.as_deref(), Some(TEMPLATE));

    // rm never touches the Ollama store.
    let before = files_in(&f.ollama.join("blobs"));
    let err = f.store.remove(&name("smol")).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly(_)));
    assert!(one_line(err).contains("ollama rm"));
    assert_eq!(files_in(&f.ollama.join("blobs")), before);
    assert!(f.store.resolve("smol").is_ok());
}

#[test]
fn llamay_store_wins_a_name_clash() {
    let f = fixture();
    let other = tiny("phi3");
    f.store
        .import(&other, &name("smol"), &ModelConfig::default())
        .unwrap();
    let list = f.store.list().unwrap();
    let smol: Vec<_> = list.iter().filter(|e| e.name == name("smol")).collect();
    assert_eq!(smol.len(), 1);
    assert_eq!(smol[0].source, Source::Llamay);
    let r = f.store.resolve("smol").unwrap();
    assert_eq!(r.source, Source::Llamay);
    assert_eq!(
        Digest::of_file(&r.gguf).unwrap(),
        Digest::of_file(&other).unwrap()
    );
    // Removing llamay's copy uncovers Ollama's again.
    f.store.remove(&name("smol")).unwrap();
    assert_eq!(f.store.resolve("smol").unwrap().source, Source::Ollama);
}

#[test]
fn import_show_cp_rm_round_trip() {
    let f = fixture();
    let store = &f.store;
    // Import from a file on the store's file system, so it is hard-linked.
    let src = f.ollama.parent().unwrap().join("My Model.gguf");
    std::fs::copy(tiny("gemma3-Q4_K"), &src).unwrap();
    let cfg = ModelConfig {
        file_type: Some("Q4_K".into()),
        ..Default::default()
    };
    let digest = store.import(&src, &name("mine:v1"), &cfg).unwrap();
    assert_eq!(digest, Digest::of_file(&src).unwrap());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let a = std::fs::metadata(&src).unwrap();
        let b = std::fs::metadata(store.blob_path(&digest)).unwrap();
        assert_eq!(a.ino(), b.ino(), "same file system: hard link expected");
    }

    let entry = store
        .list()
        .unwrap()
        .into_iter()
        .find(|e| e.name == name("mine:v1"))
        .unwrap();
    assert_eq!(entry.source, Source::Llamay);
    assert_eq!(entry.file_type(), Some("Q4_K"));

    let facts = store.show(&name("mine:v1")).unwrap();
    assert_eq!(
        facts.manifest_digest,
        Digest::of_file(&facts.manifest_path).unwrap()
    );
    assert_eq!(facts.blobs.len(), 2);
    assert!(facts
        .blobs
        .iter()
        .all(|b| b.path.as_ref().is_some_and(|p| p.is_file())));
    assert_eq!(facts.manifest.layers[0].digest, digest);
    assert_eq!(facts.config.unwrap().model_format.as_deref(), Some("gguf"));

    store.copy(&name("mine:v1"), &name("copy")).unwrap();
    assert_eq!(
        store.resolve("copy").unwrap().gguf,
        store.resolve("mine:v1").unwrap().gguf
    );
    // rm of one name keeps the blobs the other still uses.
    let rep = store.remove(&name("mine:v1")).unwrap();
    assert!(rep.deleted_blobs.is_empty());
    assert!(rep.kept_blobs.contains(&digest));
    assert!(store.blob_path(&digest).is_file());
    assert!(matches!(
        store.resolve("mine:v1"),
        Err(StoreError::NotFound(_))
    ));
    // rm of the last user deletes them, and prunes the manifest folders.
    let rep = store.remove(&name("copy")).unwrap();
    assert!(rep.deleted_blobs.contains(&digest));
    assert_eq!(files_in(&store.blobs_dir()), Vec::<String>::new());
    assert_eq!(
        files_in(&store.root().join("manifests")),
        Vec::<String>::new()
    );
    assert!(src.is_file(), "the imported file itself stays");
}

#[test]
fn copying_from_the_ollama_store_brings_the_blobs_along() {
    let f = fixture();
    f.store
        .copy(&name("smol"), &name("mine/smol:copy"))
        .unwrap();
    let r = f.store.resolve("mine/smol:copy").unwrap();
    assert_eq!(r.source, Source::Llamay);
    assert!(r.gguf.starts_with(f.store.root()));
    assert_eq!(files_in(&f.store.blobs_dir()).len(), 5);
    let ollama_blobs = files_in(&f.ollama.join("blobs"));
    f.store.remove(&name("mine/smol:copy")).unwrap();
    assert_eq!(files_in(&f.store.blobs_dir()), Vec::<String>::new());
    assert_eq!(files_in(&f.ollama.join("blobs")), ollama_blobs);
}

#[test]
fn bad_names_files_and_manifests_give_one_line_errors() {
    let f = fixture();
    let store = &f.store;
    let dir = f.ollama.parent().unwrap();
    for bad in ["", "a/b/c/d", "bad name", "ns.x/m", "m:"] {
        let e = store.resolve(bad).unwrap_err();
        assert!(matches!(e, StoreError::InvalidName { .. }), "{bad:?}: {e}");
        one_line(e);
    }
    assert!(matches!(
        store.resolve("nosuch"),
        Err(StoreError::NotFound(_))
    ));
    assert!(one_line(store.show(&name("nosuch")).unwrap_err()).contains("not found"));
    assert!(matches!(
        store.remove(&name("nosuch")),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.copy(&name("nosuch"), &name("x")),
        Err(StoreError::NotFound(_))
    ));

    let missing = dir.join("missing.gguf");
    assert!(
        one_line(store.resolve(missing.to_str().unwrap()).unwrap_err()).contains("missing.gguf")
    );
    let text = dir.join("text.gguf");
    std::fs::write(&text, "not a model").unwrap();
    assert!(matches!(
        store.resolve(text.to_str().unwrap()),
        Err(StoreError::NotGguf { .. })
    ));
    let e = store
        .import(&text, &name("t"), &ModelConfig::default())
        .unwrap_err();
    assert!(one_line(e).contains("not a GGUF file"));
    let short = dir.join("short.gguf");
    std::fs::write(&short, "GG").unwrap();
    assert!(matches!(
        store.import(&short, &name("t"), &ModelConfig::default()),
        Err(StoreError::NotGguf { .. })
    ));
    assert!(!store.contains(&name("t")).unwrap());

    // A plain GGUF path resolves as it is.
    let r = store.resolve(tiny("phi3").to_str().unwrap()).unwrap();
    assert_eq!(r.source, Source::File);

    // A corrupt manifest: skipped by list, a clear error on resolve.
    let path = store.manifest_path(&name("broken"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{ not json").unwrap();
    assert!(!store
        .list()
        .unwrap()
        .iter()
        .any(|e| e.name == name("broken")));
    let e = store.resolve("broken").unwrap_err();
    assert!(matches!(e, StoreError::BadManifest { .. }));
    one_line(e);
    // rm still removes it.
    store.remove(&name("broken")).unwrap();

    // A manifest whose GGUF blob is gone.
    f.store.copy(&name("smol"), &name("gone")).unwrap();
    let gguf = f.store.resolve("gone").unwrap().gguf;
    let llamay_blob = store.blob_path(&Digest::of_file(&gguf).unwrap());
    std::fs::remove_file(&llamay_blob).unwrap();
    // ... still found in the Ollama store behind it:
    assert!(store.resolve("gone").unwrap().gguf.starts_with(&f.ollama));
    let alone = Store::new(store.root(), None);
    assert!(one_line(alone.resolve("gone").unwrap_err()).contains("missing"));
}

#[test]
fn from_env_honours_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    let ollama = dir.path().join("o");
    std::fs::create_dir_all(&ollama).unwrap();
    std::env::set_var("LLAMAY_MODELS", dir.path().join("l"));
    std::env::set_var("OLLAMA_MODELS", &ollama);
    let s = Store::from_env().unwrap();
    assert_eq!(s.root(), dir.path().join("l"));
    assert_eq!(s.ollama_root(), Some(ollama.as_path()));
    std::env::set_var("OLLAMA_MODELS", dir.path().join("absent"));
    assert_eq!(Store::from_env().unwrap().ollama_root(), None);
}
