//! Matcher API: rollback, forced bytes, finishing, special tokens, caches and statistics,
//! state-table clears, sharing across threads.

mod common;
#[path = "common/json_check.rs"]
mod json_check;
use common::*;
use llamay_constrain::{Constraint, ConstraintCache, Limits, Matcher, TokenMask};
use std::time::Duration;

fn tok(c: &Constraint, s: &str) -> u32 {
    let v = c.vocab();
    (0..v.len() as u32)
        .find(|&t| !v.is_special(t) && v.token_bytes(t) == Some(s.as_bytes()))
        .unwrap()
}

#[test]
fn rollback_restores_masks_and_acceptance() {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab.clone()).unwrap();
    let mut m = c.matcher();
    let mut before = TokenMask::new(vocab.len());
    let mut after = TokenMask::new(vocab.len());
    m.commit(tok(&c, "{\"")).unwrap();
    m.mask(&mut before);
    for t in ["a", "\":", "1", "}"] {
        m.commit(tok(&c, t)).unwrap();
    }
    assert!(m.is_accepting());
    m.commit(eog).unwrap();
    assert!(m.is_finished());
    m.mask(&mut after);
    assert_eq!(after.count(), 0);
    m.rollback(5).unwrap();
    assert!(!m.is_accepting() && !m.is_finished());
    m.mask(&mut after);
    assert_eq!(before, after);
    assert!(m.rollback(2).is_err());
    m.rollback(1).unwrap();
    m.mask(&mut after);
    assert!(after.is_allowed(tok(&c, "{")) && !after.is_allowed(eog));

    // History is bounded: a long array, then rolling back more than MAX_ROLLBACK fails.
    let mut m = c.matcher();
    m.commit(tok(&c, "[")).unwrap();
    for i in 0..(2 * llamay_constrain::MAX_ROLLBACK) {
        m.commit(tok(&c, if i % 2 == 0 { "1" } else { "," }))
            .unwrap();
    }
    assert!(m.rollback(llamay_constrain::MAX_ROLLBACK * 5 / 4).is_err());
    m.rollback(llamay_constrain::MAX_ROLLBACK - 1).unwrap(); // back to just after a "1"
    m.mask(&mut after);
    assert!(
        after.is_allowed(tok(&c, "1"))
            && after.is_allowed(tok(&c, ","))
            && after.is_allowed(tok(&c, "]"))
    );
}

#[test]
fn forced_bytes_and_finish() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let c =
        Constraint::from_gbnf("root ::= \"hello\" (\" world\" | \"!\")", vocab.clone()).unwrap();
    let mut m = c.matcher();
    assert_eq!(m.forced_bytes(), b"hello");
    m.commit(tok(&c, "h")).unwrap();
    assert_eq!(m.forced_bytes(), b"ello");
    for t in ["e", "l", "l", "o"] {
        m.commit(tok(&c, t)).unwrap();
    }
    assert_eq!(m.forced_bytes(), b"");
    m.commit(tok(&c, " ")).unwrap();
    assert_eq!(m.forced_bytes(), b"world");
    assert!(m.commit(special).is_err() && m.commit(eog).is_err());
    m.commit_bytes(b"world").unwrap();
    assert!(m.is_accepting() && m.is_finished());
    let mut mask = TokenMask::new(vocab.len());
    m.mask(&mut mask);
    assert_eq!(mask.allowed().collect::<Vec<_>>(), vec![eog]);
    // An accepting state that can continue is not finished.
    let c = Constraint::from_gbnf("root ::= [0-9]+", vocab).unwrap();
    let mut m = c.matcher();
    m.commit(tok(&c, "12")).unwrap();
    assert!(m.is_accepting() && !m.is_finished());
}

#[test]
fn caches_and_statistics() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let c = Constraint::any_json(vocab.clone()).unwrap();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let doc = r#"{"a":[1,2,3,4,5,6,7,8,9,10]}"#;
    for b in doc.bytes() {
        m.mask(&mut mask);
        m.commit(b as u32).unwrap();
    }
    m.mask(&mut mask);
    assert!(mask.is_allowed(eog) && !mask.is_allowed(special));
    // The matcher's own copy is the same mask, and counts as a step too.
    assert_eq!(m.mask_ref(), &mask);
    let s = m.stats();
    assert_eq!(s.steps, doc.len() as u64 + 2);
    assert!(s.cache_hits > 5, "{s:?}");
    assert_eq!(s.cache_hits + s.states_wanting_mask, s.steps);
    assert_eq!(s.masks_used as u64, s.states_wanting_mask);
    m.commit(eog).unwrap();
    assert_eq!(m.mask_ref().count(), 0);
    assert!(s.states_used > 0 && s.states_used <= s.states_peak && s.states_limit == 4096);
    assert_eq!(s.table_clears, 0);
    let line = s.summary("json", Duration::from_secs(1));
    assert!(
        line.starts_with(&format!("json mask: {} steps, ", s.steps))
            && line.contains("states wanted a mask"),
        "{line}"
    );
}

#[test]
fn small_state_table_clears_and_stays_correct() {
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let small = Constraint::any_json(vocab.clone())
        .unwrap()
        .with_limits(Limits {
            states: 16,
            masks: 4,
        });
    let mut rng = Rng::new(21);
    let mut clears = 0;
    for _ in 0..60 {
        let w = random_walk(&small, eog, special, &mut rng, 60, 3000, &|t| {
            t.iter().all(|b| b"}]\"0:".contains(b))
        });
        if w.finished {
            assert!(
                json_check::is_json(&w.bytes),
                "{:?}",
                String::from_utf8_lossy(&w.bytes)
            );
        }
        // Replay through one matcher, checking mask agreement with an unbounded one.
        let big = Constraint::any_json(vocab.clone()).unwrap();
        let (mut a, mut b): (Matcher, Matcher) = (small.matcher(), big.matcher());
        let (mut ma, mut mb) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
        for &byte in &w.bytes {
            a.mask(&mut ma);
            b.mask(&mut mb);
            assert_eq!(ma, mb);
            a.commit(byte as u32).unwrap();
            b.commit(byte as u32).unwrap();
        }
        // Rolling back across clears still works.
        let n = w.bytes.len().min(7);
        a.rollback(n).unwrap();
        b.rollback(n).unwrap();
        a.mask(&mut ma);
        b.mask(&mut mb);
        assert_eq!(ma, mb);
        clears += a.stats().table_clears;
        assert!(a.stats().masks_used <= 4);
    }
    assert!(clears > 10, "{clears} clears");
}

#[test]
fn constraints_are_shared_across_threads_and_cached_by_content() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Constraint>();
    assert_send_sync::<ConstraintCache>();
    let (vocab, eog, special) = synthetic_vocab(&[]);
    let cache = ConstraintCache::new(vocab, 64 << 20);
    let g = "root ::= \"a\"+ \"b\"";
    let c1 = cache.gbnf(g).unwrap();
    let c2 = cache.gbnf(g).unwrap();
    assert!(c1.ptr_eq(&c2));
    assert_eq!(cache.len(), 1);
    assert!(cache.gbnf("root ::= <think>").is_err());
    assert_eq!(cache.len(), 1);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let c = c1.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(i);
                let w = random_walk(&c, eog, special, &mut rng, 5, 100, &|t| t == b"b");
                assert!(
                    w.finished
                        && w.bytes.ends_with(b"b")
                        && w.bytes[..w.bytes.len() - 1].iter().all(|&b| b == b'a')
                );
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn split_string_masks_equal_plain_walks() {
    let (vocab, eog, special) = synthetic_vocab(&["ab\"", "\"}", "é\"]", "\\u00e9\""]);
    let c = Constraint::any_json(vocab.clone()).unwrap();
    let mut rng = Rng::new(8);
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    let mut compared = 0;
    // Padded like a caller's tensor row: the words past the vocabulary must be cleared.
    let (mut words, mut want) = (vec![0u32; vocab.len().div_ceil(32) + 2], Vec::new());
    for _ in 0..40 {
        let w = random_walk(&c, eog, special, &mut rng, 60, 3000, &|t| {
            t.iter().all(|b| b"}]\"0:".contains(b))
        });
        let mut m = c.matcher();
        for &byte in &w.bytes {
            m.mask(&mut a);
            m.mask_by_plain_walk(&mut b);
            assert_eq!(a, b);
            words.fill(u32::MAX);
            m.write_mask_words(&mut words);
            want.resize(words.len(), 0);
            a.write_u32_words(&mut want);
            assert_eq!(words, want);
            assert_eq!(m.mask_ref(), &a);
            compared += 1;
            m.commit(byte as u32).unwrap();
        }
    }
    assert!(compared > 1000);
}

#[test]
fn canonical_string_masks_equal_plain_walks() {
    use llamay_constrain::{GrammarBuilder, JsonString, Symbol};
    let (vocab, eog, special) = synthetic_vocab(&[
        "abcdefgh",
        "\";",
        "\",",
        "b\";\"c",
        "xyzxyzxyzxyz",
        "ab\"",
        "\\u0078",
        "éé",
    ]);
    let specs = [
        JsonString::any().with_length(3, Some(30)),
        JsonString::any().with_length(0, Some(5)),
        JsonString::any().with_length(2, Some(4)),
        JsonString::any().with_length(1, Some(1)),
        JsonString::any().with_length(12, None),
        JsonString::matching("[a-z]*x")
            .unwrap()
            .with_length(0, Some(20)),
        JsonString::matching("[a-zé ]{2,}").unwrap(),
        JsonString::excluding(["ab", "abc"]),
        // Patterns that stop refusing characters somewhere (the schema front-end's
        // unanchored form, a free tail), whose masks are cut from the plain string's.
        JsonString::matching("(?s:.*)(?:x[a-z])(?s:.*)").unwrap(),
        JsonString::matching("ab(?s:.*)")
            .unwrap()
            .with_length(4, None),
        JsonString::matching("(?s:.*)(?:é)")
            .unwrap()
            .with_length(0, Some(6)),
        JsonString {
            exclude: vec![b"abx".to_vec(), b"xyz".to_vec()],
            ..JsonString::matching("(?s:.*)(?:b|x)(?s:.*)").unwrap()
        },
    ];
    let mut rng = Rng::new(17);
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    let mut compared = 0;
    for spec in specs {
        let mut g = GrammarBuilder::new();
        let show = spec.pattern.as_ref().map(|d| d.pattern().to_string());
        // Two strings in a row, so states also differ by stack position.
        let s = g.rule("s", vec![vec![Symbol::json_string(spec)]]);
        let spec = format!("{show:?}");
        let root = g.rule(
            "root",
            // Two alternatives share each string: states with one item per alternative.
            vec![
                vec![Symbol::rule(s), Symbol::lit(","), Symbol::rule(s)],
                vec![Symbol::rule(s), Symbol::lit(";"), Symbol::rule(s)],
            ],
        );
        let c = Constraint::from_grammar(&g.build(root).unwrap(), vocab.clone()).unwrap();
        for _ in 0..30 {
            // Closing also wants what the patterns need before the quote.
            let w = random_walk(&c, eog, special, &mut rng, 30, 400, &|t| {
                [&b"\""[..], b",", b"x", b"b", "é".as_bytes()].contains(&t)
            });
            assert!(
                w.finished,
                "{spec}: {:?}",
                String::from_utf8_lossy(&w.bytes)
            );
            let mut m = c.matcher();
            for &byte in &w.bytes {
                m.mask(&mut a);
                m.mask_by_plain_walk(&mut b);
                assert_eq!(a, b, "after {:?}", String::from_utf8_lossy(&w.bytes));
                compared += 1;
                m.commit(byte as u32).unwrap();
            }
        }
    }
    assert!(compared > 1000, "{compared}");
}

#[test]
fn pattern_walks_sharing_subtrees_equal_plain_walks() {
    use llamay_constrain::{GrammarBuilder, JsonString, Symbol};
    // Word states share most first-byte subtrees with the state before them; near the
    // word limit they stop doing so.
    let (vocab, _, _) = synthetic_vocab(&["a b c d e f ", "ab cd\""]);
    let spec = JsonString::matching("(?:[a-z]+ ){0,12}[a-z]+").unwrap();
    let mut g = GrammarBuilder::new();
    let root = g.rule("root", vec![vec![Symbol::json_string(spec)]]);
    let c = Constraint::from_grammar(&g.build(root).unwrap(), vocab.clone()).unwrap();
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    for text in [
        "\"a b c d e f g h i j k l m\"",
        "\"ab cd ef gh ij kl mn op qr st uv wx yz\"",
    ] {
        let mut m = c.matcher();
        for (k, byte) in text.bytes().enumerate() {
            m.mask(&mut a);
            m.mask_by_plain_walk(&mut b);
            assert_eq!(a, b, "after {:?}", &text[..k]);
            m.commit(byte as u32).unwrap();
        }
        assert!(m.is_accepting());
    }
}

#[test]
fn schemas_sharing_a_pattern_tail_share_its_masks_exactly() {
    use llamay_constrain::{GrammarBuilder, JsonString, Symbol};
    let (vocab, _, _) = synthetic_vocab(&["-1", "-12\"", "zz-"]);
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    // The second and third constraints meet the first one's tails ("-[0-9]{2}" and
    // on) on the vocabulary; the third one's tail differs at its end.
    for (pattern, text) in [
        ("x-[0-9]{2}", "\"x-12\""),
        ("(yy|zz)-[0-9]{2}", "\"zz-34\""),
        ("(yy|zz)-[0-9]{2}q?", "\"yy-56q\""),
    ] {
        let mut g = GrammarBuilder::new();
        let spec = JsonString::matching(pattern).unwrap();
        let root = g.rule("root", vec![vec![Symbol::json_string(spec)]]);
        let c = Constraint::from_grammar(&g.build(root).unwrap(), vocab.clone()).unwrap();
        let mut m = c.matcher();
        for (k, byte) in text.bytes().enumerate() {
            m.mask(&mut a);
            m.mask_by_plain_walk(&mut b);
            assert_eq!(a, b, "{pattern} after {:?}", &text[..k]);
            m.commit(byte as u32).unwrap();
        }
        assert!(m.is_accepting());
    }
}

/// A matcher takes the state table a finished one handed back to the vocabulary,
/// emptied: masks are those of a matcher on a table of its own, whether the earlier
/// grammar tracked a whitespace budget (two transition rows per state) or not, and
/// however many states it left there.
#[test]
fn a_reused_state_table_gives_the_masks_of_a_fresh_one() {
    let (vocab, _, _) = synthetic_vocab(&[]);
    let json = Constraint::any_json(vocab.clone()).unwrap();
    let gbnf = Constraint::from_gbnf("root ::= [a-z]+ \"!\" | \"{}\"", vocab.clone()).unwrap();
    let masks = |c: &Constraint, m: &mut Matcher, text: &[u8]| {
        let mut out = Vec::new();
        for &b in text {
            let mut mask = TokenMask::new(vocab.len());
            m.mask(&mut mask);
            out.push(mask);
            m.commit_bytes(&[b]).unwrap();
        }
        assert_eq!(m.constraint().vocab().len(), c.vocab().len());
        out
    };
    let json_text = b"{\"a\": [1, {\"b\": null}], \"c\": \"d\"}";
    let gbnf_text = b"abc!";
    // Fresh tables: each matcher is made while the other lives, so neither is reused.
    let (mut a, mut b) = (json.matcher(), gbnf.matcher());
    let want_json = masks(&json, &mut a, json_text);
    let want_gbnf = masks(&gbnf, &mut b, gbnf_text);
    drop((a, b));
    for _ in 0..3 {
        let mut m = gbnf.matcher();
        assert_eq!(masks(&gbnf, &mut m, gbnf_text), want_gbnf);
        drop(m);
        let mut m = json.matcher();
        assert_eq!(masks(&json, &mut m, json_text), want_json);
        assert_eq!(m.stats().states_peak, m.stats().states_used);
    }
}
