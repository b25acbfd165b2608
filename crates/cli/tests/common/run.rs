//! Shared helpers for the `run_*` tests: running the real binary, reading its
//! statistics lines, and checking output against a grammar independently of any
//! model's vocabulary.

#![allow(dead_code)] // each test file uses a different subset

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use llamay_constrain::{Constraint, Vocabulary};

/// The seed's `-json` prompt.
pub const SEED_JSON_PROMPT: &str =
    "Give me a JSON object with keys name, port and tls for a local server.";

/// The seed's order prompt.
pub const SEED_ORDER_PROMPT: &str =
    "Order 7 from Acme: 3 widgets at 4.50 EUR each, ship to Lyon, postcode 69001.";

pub fn shared(rel: &str) -> PathBuf {
    llamay_testdata::shared_dir().join(rel)
}

/// What one `llamay run` printed.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The first statistics line (`prompt … · stop: …`), panicking with the
    /// whole stderr if there is none.
    pub fn summary(&self) -> &str {
        self.stderr
            .lines()
            .find(|l| l.starts_with("prompt "))
            .unwrap_or_else(|| panic!("no statistics line in stderr:\n{}", self.stderr))
    }

    /// The stop reason the statistics line reports.
    pub fn stop(&self) -> &str {
        self.summary()
            .rsplit_once("stop: ")
            .map(|(_, s)| s.trim())
            .unwrap_or_else(|| panic!("no stop reason in {:?}", self.summary()))
    }

    /// The `<label> mask:` line and the states line after it.
    pub fn mask_lines(&self, label: &str) -> (&str, &str) {
        let lines: Vec<&str> = self.stderr.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.starts_with(&format!("{label} mask: ")))
            .unwrap_or_else(|| panic!("no {label} mask line in stderr:\n{}", self.stderr));
        (lines[i], lines.get(i + 1).copied().unwrap_or(""))
    }

    /// The mask's share of decode, in per cent, from the mask line.
    pub fn mask_share(&self, label: &str) -> f64 {
        let (l, _) = self.mask_lines(label);
        let pct = l
            .split(", ")
            .find_map(|p| p.split_once("% of decode").map(|x| x.0))
            .unwrap_or_else(|| panic!("no share in {l:?}"));
        pct.parse().unwrap_or_else(|_| panic!("bad share in {l:?}"))
    }

    pub fn assert_ok(&self) {
        assert_eq!(self.code, Some(0), "llamay run failed:\n{}", self.stderr);
    }
}

/// Runs `llamay run <args>` with `stdin` as its input.
pub fn run(args: &[&str], stdin: &[u8]) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .arg("run")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the llamay binary starts");
    // A run that never reads stdin may close it first: ignore a broken pipe.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    let out = child.wait_with_output().expect("llamay run ends");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `llamay run -m <model> -threads 2 <args>` (a fixed thread count, so the
/// arithmetic, and so what a seed samples, does not depend on the machine's cores).
pub fn run_model(model: &Path, args: &[&str]) -> Out {
    let m = model.to_str().expect("UTF-8 model path");
    let mut all = vec!["-m", m, "-threads", "2"];
    all.extend_from_slice(args);
    run(&all, b"")
}

/// A byte-level view of a grammar, built on a vocabulary of the 256 single bytes so
/// the check owes nothing to the model's tokenizer or the mask caches.
pub struct ByteGrammar(Constraint);

impl ByteGrammar {
    pub fn gbnf(text: &str) -> Self {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(Vec::new()); // an end-of-generation token, id 256
        let vocab = Arc::new(Vocabulary::new(tokens, &[256], &[256]));
        ByteGrammar(Constraint::from_gbnf(text, vocab).expect("the grammar compiles"))
    }

    /// Whether the grammar accepts exactly these bytes.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let mut m = self.0.matcher();
        m.commit_bytes(bytes).is_ok() && m.is_accepting()
    }

    /// Whether some continuation of these bytes is accepted.
    pub fn is_viable_prefix(&self, bytes: &[u8]) -> bool {
        bytes.is_empty() || self.0.matcher().commit_bytes(bytes).is_ok()
    }
}
