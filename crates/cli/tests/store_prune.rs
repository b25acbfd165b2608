//! `llamay prune` and the collection after `llamay rm`, on a private store.

use std::path::Path;
use std::process::Command;

fn llamay(store: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(args)
        .env("LLAMAY_MODELS", store)
        .env("OLLAMA_MODELS", store.join("no-ollama"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn prune_frees_what_no_model_uses_and_rm_collects_its_own_blobs() {
    let dir = std::env::temp_dir().join(format!("llamay-store-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tiny = &llamay_testdata::tiny_models()[0];
    let (ok, _, err) = llamay(&dir, &["import", tiny.to_str().unwrap(), "kept"]);
    assert!(ok, "{err}");
    let blobs = dir.join("blobs");
    let in_use = files_in(&blobs);
    assert_eq!(in_use.len(), 2, "{in_use:?}");
    let orphan = format!("sha256-{}", "ab".repeat(32));
    std::fs::write(blobs.join(&orphan), b"no manifest uses this").unwrap();
    let partial = format!("sha256-{}.partial", "cd".repeat(32));
    std::fs::write(blobs.join(&partial), vec![0u8; 4096]).unwrap();

    let (ok, out, err) = llamay(&dir, &["prune"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("pruned 1 unused blob(s) and 1 leftover file(s)"),
        "{out}"
    );
    assert_eq!(files_in(&blobs), in_use);
    let (ok, out, _) = llamay(&dir, &["list"]);
    assert!(ok && out.contains("kept:latest"), "{out}");

    // rm deletes the model's blobs itself; prune then has nothing left to do.
    let (ok, out, err) = llamay(&dir, &["rm", "kept"]);
    assert!(ok, "{err}");
    assert!(out.contains("2 blob(s) freed"), "{out}");
    assert_eq!(files_in(&blobs), Vec::<String>::new());
    let (ok, out, _) = llamay(&dir, &["prune"]);
    assert!(ok && out.contains("pruned 0 unused blob(s)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
