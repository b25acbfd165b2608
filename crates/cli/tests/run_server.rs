//! With a server up, `llamay run` is served by it (the model is not loaded twice),
//! `llamay ps` lists what it holds and `llamay stop` unloads it; `--local` and load
//! flags keep the work in the process.

mod common;

use std::process::{Command, Stdio};

use common::serve::{client, Server};
use serde_json::Value;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `llamay ARGS` pointed at `server` by `$LLAMAY_HOST`.
fn llamay(server: &Server, args: &[&str]) -> Out {
    let host = server.base.trim_start_matches("http://");
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(args)
        .env("LLAMAY_HOST", host)
        .env_remove("LLAMAY_API_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Generations the server has finished (its `requests` counts every HTTP request,
/// this lookup included).
fn generations(s: &Server) -> u64 {
    let v: Value = client()
        .get(s.url("/v1/stats"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    v["completed"].as_u64().unwrap()
}

#[test]
fn run_ps_and_stop_talk_to_the_running_server() {
    let s = Server::start(&[]);
    let m = s.model_arg.clone();
    let prompt = ["-n", "16", "--temp", "0", "-p", "The capital of France is"];

    let before = generations(&s);
    let served = llamay(&s, &[&["run", "-m", &m][..], &prompt].concat());
    assert_eq!(served.code, Some(0), "{}", served.stderr);
    assert_eq!(
        generations(&s),
        before + 1,
        "the server did not serve the run"
    );
    assert!(served.stderr.contains("prompt "), "{}", served.stderr);

    // The same run in this process writes the same text, and the server sees nothing.
    let local = llamay(&s, &[&["run", "--local", "-m", &m][..], &prompt].concat());
    assert_eq!(local.code, Some(0), "{}", local.stderr);
    assert_eq!(generations(&s), before + 1, "--local went to the server");
    assert_eq!(served.stdout, local.stdout);
    // Load flags describe a model this process loads.
    let threads = llamay(
        &s,
        &[&["run", "-threads", "1", "-m", &m][..], &prompt].concat(),
    );
    assert_eq!(threads.code, Some(0), "{}", threads.stderr);
    assert_eq!(generations(&s), before + 1, "-threads went to the server");

    // A constrained run through the server: its mask line comes back too.
    let json = llamay(
        &s,
        &[
            "run",
            "-m",
            &m,
            "-chat",
            "-json",
            "-n",
            "60",
            "-p",
            "Describe a dog as JSON.",
        ],
    );
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    serde_json::from_str::<Value>(json.stdout.trim()).unwrap();
    assert!(json.stderr.contains("json mask: "), "{}", json.stderr);
    assert_eq!(generations(&s), before + 2);

    let ps = llamay(&s, &["ps"]);
    assert_eq!(ps.code, Some(0), "{}", ps.stderr);
    let header = ps.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("UNTIL"),
        "{}",
        ps.stdout
    );
    let row = ps
        .stdout
        .lines()
        .find(|l| l.starts_with(&s.model))
        .unwrap_or_else(|| panic!("{} not in ps:\n{}", s.model, ps.stdout));
    assert!(row.contains("from now"), "{row}");

    let stop = llamay(&s, &["stop", &s.model]);
    assert_eq!(stop.code, Some(0), "{}", stop.stderr);
    let ps = llamay(&s, &["ps"]);
    assert_eq!(ps.stdout.lines().count(), 1, "still loaded:\n{}", ps.stdout);
    // Stopping what is not loaded says so.
    let again = llamay(&s, &["stop", &s.model]);
    assert_eq!(again.code, Some(1));
    assert!(again.stderr.contains("is not loaded"), "{}", again.stderr);
}

#[test]
fn ps_without_a_server_says_where_it_looked() {
    let out = Command::new(env!("CARGO_BIN_EXE_llamay"))
        .arg("ps")
        .env("LLAMAY_HOST", "127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no llamay server answers at http://127.0.0.1:9"),
        "{err}"
    );
}
