//! Every shared GBNF grammar, walked at random over a synthetic vocabulary and checked by
//! an independent recogniser; known members accepted token by token, non-members refused.

mod common;
use common::*;
use llamay_constrain::{parse_gbnf, Constraint, TokenMask};
use recognise_impl::recognises;
use std::fs;

#[path = "common/recognise.rs"]
mod recognise_impl;

fn grammar(name: &str) -> String {
    fs::read_to_string(llamay_testdata::shared_dir().join("grammars").join(name)).unwrap()
}

const EXTRA: &[&str] = &[
    "1. ", "O-O", "Nf3", "e4", " e5", "x", "int ", "float ", "return ", "while(", "if(", "//",
    "/*", "*/", "main", "();", "= ", " = ", "- ", "ア", "。", "、", "一", "ひ", "Hello", " world",
    ".\n", "==", "<=", "{\n", "}\n", "(", ")",
];

fn closer(t: &[u8]) -> bool {
    t.iter().all(|b| b"\n)}]\";0=".contains(b))
}

#[test]
fn random_walks_stay_in_every_shared_grammar() {
    let (vocab, eog, special) = synthetic_vocab(EXTRA);
    let dir = llamay_testdata::shared_dir().join("grammars");
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".gbnf") && !n.starts_with("bad-"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 9);
    let mut rng = Rng::new(5);
    for name in &names {
        let text = grammar(name);
        let g = parse_gbnf(&text).unwrap();
        let c = Constraint::from_grammar(&g, vocab.clone()).unwrap();
        let (mut finished, mut nonempty) = (0, 0);
        for _ in 0..40 {
            let w = random_walk(&c, eog, special, &mut rng, 40, 1500, &closer);
            if w.finished {
                finished += 1;
                nonempty += usize::from(!w.bytes.is_empty());
                assert!(
                    recognises(&g, &w.bytes),
                    "{name}: the recogniser refuses {:?}",
                    String::from_utf8_lossy(&w.bytes)
                );
            }
        }
        assert!(finished >= 30, "{name}: only {finished}/40 walks finished");
        assert!(
            nonempty >= 20,
            "{name}: walks are mostly empty ({nonempty})"
        );
    }
}

#[test]
fn members_are_accepted_and_non_members_refused() {
    let (vocab, eog, _) = synthetic_vocab(EXTRA);
    let mut rng = Rng::new(9);
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "seed-move.gbnf",
            &["e2e4", "Ke1e2", "Nb1c3"],
            &["e2e9", "Xe2e4", "e2", "e2e4 "],
        ),
        (
            "seed-arithmetic.gbnf",
            &[
                "a=b\n",
                "(x1 +2)*y = 3 \n",
                "8 +30 +29+13 = 120\n\n\n",
                "a=1\nb=2\n",
            ],
            &["a=b", "=1\n", "a==b\n"],
        ),
        (
            "list.gbnf",
            &["- one\n- two words\n"],
            &["- \n", "-x\n", "- a\u{2028}b\n"],
        ),
        (
            "chess.gbnf",
            &["1. e4 e5\n2. Nf3 Nc6\n", "1. O-O O-O-O\n10. exd5+ Qxd5#\n"],
            &["1. e4 e5\n", "1. e9 e5\n2. a1 a2\n"],
        ),
        (
            "json.gbnf",
            &["{\"a\": [1, \"x\\n\", true], \"b\": {}}"],
            &["[1]", "{\"a\":1.5}"],
        ),
        (
            "json_arr.gbnf",
            &["[\n{\"a\": -1.5e3},\nnull]"],
            &["[1]", "[\n1,]"],
        ),
        (
            "english.gbnf",
            &["Hello, world! (ok)\tyes"],
            &["héllo", " lead"],
        ),
        (
            "japanese.gbnf",
            &["ひらがな、カタカナ。漢字"],
            &["abc", "ひ  ら", "ひ "],
        ),
        (
            "c.gbnf",
            &[
                "int main(){int x = 1;while(x<10){x = x+1;}return x;}",
                "float f(int a){// hi\n/* c */}",
            ],
            &["int main(){", "int 1x(){}"],
        ),
    ];
    for &(name, good, bad) in cases {
        let g = parse_gbnf(&grammar(name)).unwrap();
        let c = Constraint::from_grammar(&g, vocab.clone()).unwrap();
        for s in good {
            assert!(
                recognises(&g, s.as_bytes()),
                "oracle disagrees on {name} {s:?}"
            );
            for _ in 0..4 {
                assert!(
                    accepts_chunked(&c, s.as_bytes(), &mut rng, 5),
                    "{name}: refused {s:?}"
                );
            }
            accepts_tokens(&c, eog, s.as_bytes()).unwrap_or_else(|e| panic!("{name} {s:?}: {e}"));
        }
        for s in bad {
            assert!(
                !recognises(&g, s.as_bytes()),
                "oracle disagrees on {name} {s:?}"
            );
            assert!(
                !accepts_chunked(&c, s.as_bytes(), &mut rng, 5),
                "{name}: accepted {s:?}"
            );
        }
    }
}

#[test]
fn cached_and_detached_masks_equal_plain_walks() {
    let (vocab, eog, special) = synthetic_vocab(EXTRA);
    let mut rng = Rng::new(13);
    let mut compared = 0;
    for name in [
        "json.gbnf",
        "c.gbnf",
        "seed-arithmetic.gbnf",
        "chess.gbnf",
        "json_arr.gbnf",
    ] {
        let c = Constraint::from_gbnf(&grammar(name), vocab.clone()).unwrap();
        let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
        for _ in 0..15 {
            let w = random_walk(&c, eog, special, &mut rng, 40, 1500, &closer);
            let mut m = c.matcher();
            for &byte in &w.bytes {
                m.mask(&mut a);
                m.mask_by_plain_walk(&mut b);
                assert_eq!(a, b, "{name} after {:?}", String::from_utf8_lossy(&w.bytes));
                compared += 1;
                m.commit(byte as u32).unwrap();
            }
        }
    }
    assert!(compared > 1000, "{compared}");
}
