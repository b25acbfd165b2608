//! Token ids, pieces and detokenized text against llama.cpp's reference
//! (`shared/ref/tokenize/*.json`), for the three reference vocabularies.

use std::collections::BTreeMap;
use std::path::PathBuf;

use llamay_engine::{TokenAttr, Tokenizer};
use llamay_testdata::{real_model, ref_path, RealModel};
use serde_json::Value;

mod common;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn reference(stem: &str) -> Value {
    let p = ref_path(&format!("tokenize/{stem}.json"));
    serde_json::from_slice(&std::fs::read(p).expect("reference json")).expect("json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn opt_id(v: &Value) -> Option<u32> {
    v.as_u64().map(|x| x as u32)
}

#[derive(Default, Debug)]
struct Tally {
    /// category -> (passed, total)
    by_cat: BTreeMap<String, (usize, usize)>,
    errors_survived: usize,
    failures: Vec<String>,
}

/// Checks one variant of one case; returns whether ids, pieces and detok all match.
fn check_variant(
    tok: &Tokenizer,
    input: &[u8],
    parse_special: bool,
    want: &Value,
) -> Result<(), String> {
    let got = tok.encode(input, false, parse_special);
    let want_ids = ids(&want["ids"]);
    if got != want_ids {
        return Err(format!("ids {got:?} != {want_ids:?}"));
    }
    for (i, (id, ph)) in got
        .iter()
        .zip(want["pieces_hex"].as_array().unwrap())
        .enumerate()
    {
        if tok.token_bytes(*id) != hex(ph.as_str().unwrap()).as_slice() {
            return Err(format!(
                "piece {i} (id {id}) {:?} != {ph}",
                tok.token_bytes(*id)
            ));
        }
    }
    let want_detok = match want.get("detok_hex") {
        Some(h) => hex(h.as_str().unwrap()),
        None => want["detok"].as_str().expect("detok").as_bytes().to_vec(),
    };
    let detok = tok.detokenize(&got, false, true);
    if detok != want_detok {
        return Err(format!(
            "detok {:?} != {:?}",
            String::from_utf8_lossy(&detok),
            String::from_utf8_lossy(&want_detok)
        ));
    }
    Ok(())
}

fn run_cases(tok: &Tokenizer, r: &Value) -> Tally {
    let mut t = Tally::default();
    for case in r["cases"].as_array().unwrap() {
        let cat = case["category"].as_str().unwrap().to_string();
        let input = match case["text"].as_str() {
            Some(s) => s.as_bytes().to_vec(),
            None => hex(case["text_hex"].as_str().unwrap()),
        };
        for (variant, parse_special) in [("plain", false), ("special", true)] {
            let want = &case[variant];
            let key = format!("{cat}/{variant}");
            if want.get("error").is_some() {
                // llama.cpp aborted here; we must simply not crash.
                let _ = tok.encode(&input, false, parse_special);
                t.errors_survived += 1;
                continue;
            }
            let e = t.by_cat.entry(key).or_default();
            e.1 += 1;
            match check_variant(tok, &input, parse_special, want) {
                Ok(()) => e.0 += 1,
                Err(m) => t.failures.push(format!(
                    "case {} [{cat}/{variant}] {:?}: {m}",
                    case["idx"],
                    String::from_utf8_lossy(&input)
                )),
            }
        }
    }
    t
}

fn check_vocab(tok: &Tokenizer, r: &Value) {
    let v = &r["vocab"];
    assert_eq!(tok.n_vocab() as u64, v["n_vocab"].as_u64().unwrap());
    let sp = &v["special_ids"];
    let s = tok.special_ids();
    for (name, got) in [
        ("bos", s.bos),
        ("eos", s.eos),
        ("eot", s.eot),
        ("sep", s.sep),
        ("nl", s.nl),
        ("pad", s.pad),
        ("mask", s.mask),
        ("fim_pre", s.fim_pre),
        ("fim_suf", s.fim_suf),
        ("fim_mid", s.fim_mid),
        ("fim_pad", s.fim_pad),
        ("fim_rep", s.fim_rep),
        ("fim_sep", s.fim_sep),
    ] {
        assert_eq!(got, opt_id(&sp[name]), "special id {name}");
    }
    assert_eq!(tok.eog_ids(), ids(&v["eog_ids"]).as_slice(), "eog_ids");
    for &id in tok.eog_ids() {
        assert!(tok.is_eog(id));
    }
    let flags = &v["llama_cpp_flags"];
    assert_eq!(tok.add_bos(), flags["add_bos"].as_bool().unwrap());
    assert_eq!(tok.add_eos(), flags["add_eos"].as_bool().unwrap());
    for (text, id) in v["chat_token_ids"].as_object().unwrap() {
        assert_eq!(tok.token_id(text), opt_id(id), "chat token {text}");
    }
    for (text, want) in v["add_special_example"].as_object().unwrap() {
        assert_eq!(
            tok.encode(text.as_bytes(), true, true),
            ids(want),
            "add_special {text:?}"
        );
    }
    // Attributes of every listed special token; every other token has none of them.
    let names = [
        ("UNKNOWN", TokenAttr::UNKNOWN),
        ("UNUSED", TokenAttr::UNUSED),
        ("NORMAL", TokenAttr::NORMAL),
        ("CONTROL", TokenAttr::CONTROL),
        ("USER_DEFINED", TokenAttr::USER_DEFINED),
        ("BYTE", TokenAttr::BYTE),
        ("LSTRIP", TokenAttr::LSTRIP),
        ("RSTRIP", TokenAttr::RSTRIP),
    ];
    let mut listed = std::collections::HashSet::new();
    for st in v["special_tokens"].as_array().unwrap() {
        let id = st[0].as_u64().unwrap() as u32;
        listed.insert(id);
        assert_eq!(tok.token_text(id), st[1].as_str().unwrap().as_bytes());
        let want = st[2]
            .as_array()
            .unwrap()
            .iter()
            .fold(TokenAttr::UNDEFINED, |a, n| {
                a | names
                    .iter()
                    .find(|x| x.0 == n.as_str().unwrap())
                    .expect("attr name")
                    .1
            });
        assert_eq!(tok.token_attr(id), Some(want), "attrs of {id}");
    }
    let special =
        TokenAttr::CONTROL | TokenAttr::USER_DEFINED | TokenAttr::UNKNOWN | TokenAttr::UNUSED;
    for id in 0..tok.n_vocab() as u32 {
        if !listed.contains(&id) {
            assert!(
                !tok.token_attr(id).unwrap().any(special),
                "token {id} should not be special"
            );
        }
    }
}

fn check_model(stem: &str, model: PathBuf) {
    let tok = common::tokenizer::load(&model);
    let r = reference(stem);
    let t = run_cases(&tok, &r);
    println!("{stem}:");
    for (k, (p, n)) in &t.by_cat {
        println!("  {k:28} {p}/{n}");
    }
    println!("  error cases survived: {}", t.errors_survived);
    for f in t.failures.iter().take(40) {
        println!("  FAIL {f}");
    }
    let hard: Vec<_> = t
        .failures
        .iter()
        .filter(|f| !f.contains("[invalid_utf8/"))
        .collect();
    check_vocab(&tok, &r);
    assert!(
        hard.is_empty(),
        "{} mismatches outside invalid_utf8",
        hard.len()
    );
}

#[test]
fn tiny_bpe_matches_llama_cpp() {
    check_model("tiny-bpe", ref_path("tiny/tiny-llama-F32.gguf"));
}

#[test]
fn smollm2_matches_llama_cpp() {
    check_model("SmolLM2-135M-Instruct.Q4_1", real_model(RealModel::SmolLM2));
}

#[test]
fn gemma3_matches_llama_cpp() {
    check_model("gemma-3-270m-Q4_K_M", real_model(RealModel::Gemma3));
}
