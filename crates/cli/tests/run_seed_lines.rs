//! Every `llamay run` command line of the seed's product page, read out of the page
//! itself and run as written, on the seed's own model family. Two things are swapped,
//! and only those: the model (`qwen2.5:0.5b`, a store name) becomes the Qwen2.5 test
//! model's file (Qwen2.5-Coder-0.5B-Instruct), and a grammar file the page names
//! becomes the shared copy of it.

mod common;

use common::run::*;
use llamay_testdata::{real_model, shared_dir, RealModel};

/// The seed product page (`seeds/000_…`).
fn seed_page() -> String {
    let dir = shared_dir().join("seeds");
    let page = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("000_"))
        .expect("the seed product page");
    std::fs::read_to_string(page).unwrap()
}

/// The `llamay run` lines, each joined with the lines the transcript wrapped it onto
/// (a quote left open, or a next line that starts with a flag), `| jq .` and the like
/// cut off.
fn run_lines(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = page.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(cmd) = l
            .strip_prefix("~/llamay $ ")
            .or(Some(l))
            .filter(|c| c.starts_with("llamay run "))
        else {
            continue;
        };
        let mut cmd = cmd.to_string();
        loop {
            let open_quote = cmd.matches('"').count() % 2 == 1;
            // `-p …`, not a list item of the output (`- No internet`).
            let flag_next = lines.peek().is_some_and(|n| {
                n.strip_prefix('-')
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_alphabetic()))
            });
            if !(open_quote || flag_next) {
                break;
            }
            match lines.next() {
                Some(next) => {
                    cmd.push(' ');
                    cmd.push_str(next);
                }
                None => break,
            }
        }
        if let Some((before, _)) = cmd.split_once(" | ") {
            cmd = before.to_string();
        }
        out.push(cmd);
    }
    out
}

/// Words as a shell splits them (double quotes only, which is all the page uses).
fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in cmd.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

#[test]
fn every_run_line_of_the_seed_page_works_as_written() {
    let lines = run_lines(&seed_page());
    assert!(lines.len() >= 6, "{lines:#?}");
    let model = real_model(RealModel::Qwen25);
    let grammars = shared_dir().join("grammars");
    for line in &lines {
        let mut args = words(line);
        assert_eq!(&args[..2], ["llamay", "run"], "{line}");
        args.drain(..2);
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "-m" => args[i + 1] = model.display().to_string(),
                "-grammar-file" => {
                    let name = std::path::Path::new(&args[i + 1])
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    let shared = match name.as_str() {
                        "move.gbnf" => "seed-move.gbnf".to_string(),
                        "arithmetic.gbnf" => "seed-arithmetic.gbnf".to_string(),
                        other => other.to_string(),
                    };
                    args[i + 1] = grammars.join(shared).display().to_string();
                }
                _ => {}
            }
            i += 1;
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&argv, b"");
        assert_eq!(out.code, Some(0), "{line}\n{}", out.stderr);
        assert!(!out.stdout.trim().is_empty(), "{line}: no output");
        assert!(
            out.summary().contains(" · generated "),
            "{line}: {}",
            out.summary()
        );
        if argv.contains(&"-json") {
            serde_json::from_str::<serde_json::Value>(out.stdout.trim())
                .unwrap_or_else(|e| panic!("{line}: not JSON ({e}): {}", out.stdout));
            out.mask_lines("json");
        }
        if argv.contains(&"-grammar-file") {
            out.mask_lines("grammar");
        }
    }
}

#[test]
fn the_page_is_read_as_a_shell_would() {
    let page = "~/llamay $ llamay run -m q -chat -p \"Give me\nmore\" | jq .\nllamay run -m q -n 4\n-p \"x\"\n- an output line\nnot llamay run\n";
    assert_eq!(
        run_lines(page),
        [
            "llamay run -m q -chat -p \"Give me more\"",
            "llamay run -m q -n 4 -p \"x\""
        ]
    );
    assert_eq!(
        words("llamay run -p \"a b\" -n 3"),
        ["llamay", "run", "-p", "a b", "-n", "3"]
    );
}
