//! Masks that take whole trie subtrees unwalked agree with the token-by-token answer.
//!
//! A walk takes every token below a trie node at once where its state keeps them all
//! alive: a pushdown state that every character below leads back to (`[^\n]+`), a
//! string state that does (`[^/#]+`), or a pattern state that no character written
//! raw can kill (`.*`, within a `maxLength`). Each mask here is checked against the
//! tokens committed one at a time (and rolled back), with real vocabularies: their
//! multibyte, broken and byte-fallback tokens are what the shortcut must tell apart.

#[path = "common/by_commits.rs"]
mod by_commits;
#[path = "common/real_vocab.rs"]
mod real_vocab;

use by_commits::{compare_walk, mask_by_commits};
use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use llamay_testdata::{RealModel, XorShift};
use std::sync::Arc;

fn string_schema(pattern: &str, max: Option<u32>) -> serde_json::Value {
    let mut s = serde_json::json!({"type": "string", "pattern": pattern});
    if let Some(max) = max {
        s["maxLength"] = max.into();
    }
    s
}

fn check(model: RealModel, steps: usize) {
    let rv = real_vocab::load(model);
    let v: Arc<Vocabulary> = rv.vocab.clone();
    let mut rng = XorShift::new(24);
    let grammars = [
        (
            "bullets",
            "root ::= item+\nitem ::= \"- \" [^\\r\\n]+ \"\\n\"",
        ),
        ("words", "root ::= [a-zA-Z0-9 ,.]+ \"!\""),
        ("not-latin", "root ::= [^a-z\"]+ \"a\""),
        ("not-e-acute", "root ::= [^é\"\\n]+ \"a\""),
    ];
    for (name, g) in grammars {
        let c = Constraint::from_gbnf(g, v.clone()).unwrap();
        let allowed = compare_walk(name, &c, &v, &mut rng, steps);
        assert!(allowed > 1000, "{name}: {allowed}");
    }
    let patterns = [
        ("^(.+)/(.+)$", None),
        ("^[^/#]+/[^/#]+#[0-9]+$", None),
        ("^(?:\\S+\\s+){0,3}\\S+$", None),
        ("^[0-9]+\\..*", Some(12)),
        ("^https://x\\.com/.*?(ab)?\\.(gif|jpg)$", None),
        ("^é[^é]*", None),
    ];
    for (pattern, max) in patterns {
        let schema = string_schema(pattern, max);
        let (c, _) = llamay_constrain::Constraint::from_schema(&schema, v.clone()).unwrap();
        let allowed = compare_walk(pattern, &c, &v, &mut rng, steps);
        assert!(allowed > 100, "{pattern}: {allowed}");
    }
}

#[test]
fn whole_subtrees_agree_with_commits_on_smollm2() {
    check(RealModel::SmolLM2, 8);
}

#[test]
fn whole_subtrees_agree_with_commits_on_gemma3() {
    check(RealModel::Gemma3, 3);
}

/// A vocabulary built to meet the shortcut's edges: a lead byte with every
/// continuation below it and nothing more (a node in the middle of a character), a
/// broken token (a stray continuation byte) among many that loop, and a token that
/// ends partway through a character.
#[test]
fn whole_subtrees_stop_at_broken_and_unfinished_characters() {
    let mut tokens: Vec<Vec<u8>> = vec![b"</s>".to_vec(), b"a".to_vec(), b"\"".to_vec()];
    for c in '\u{C0}'..='\u{FF}' {
        tokens.push(c.to_string().into_bytes());
    }
    for c in b'a'..=b'z' {
        tokens.extend([
            vec![b'q', c],
            vec![b'q', c, b'q'],
            vec![b'p', c],
            vec![b'p', c, b'p'],
        ]);
    }
    // Below `q`, a stray continuation byte; below `p`, a character cut short (valid).
    tokens.push(b"q\x80".to_vec());
    tokens.push("p中".as_bytes()[..3].to_vec());
    // A token longer than a node's reach can count (255 bytes), for a bounded string.
    tokens.extend([b"b".to_vec(), vec![b'b'; 300], vec![b'b'; 40]]);
    let v = Arc::new(Vocabulary::new(tokens, &[0], &[]));
    let mut rng = XorShift::new(7);
    let grammar = "root ::= [^é\"]+ \"\\\"\"";
    let c = Constraint::from_gbnf(grammar, v.clone()).unwrap();
    assert!(compare_walk(grammar, &c, &v, &mut rng, 6) > 50);
    let schema = string_schema("^[^é]+$", None);
    let (c, _) = llamay_constrain::Constraint::from_schema(&schema, v.clone()).unwrap();
    assert!(compare_walk("^[^é]+$", &c, &v, &mut rng, 6) > 50);
    let schema = string_schema("^b.*", Some(280));
    let (c, _) = llamay_constrain::Constraint::from_schema(&schema, v.clone()).unwrap();
    let mut m = c.matcher();
    m.commit_bytes(b"\"").unwrap();
    let mut mask = TokenMask::new(v.len());
    m.mask(&mut mask);
    assert_eq!(mask, mask_by_commits(&mut m, v.len()));
    let long = (0..v.len() as u32).find(|&t| v.token_bytes(t).is_some_and(|b| b.len() == 300));
    assert!(
        !mask.is_allowed(long.unwrap()),
        "300 characters in a string of at most 280"
    );
}
