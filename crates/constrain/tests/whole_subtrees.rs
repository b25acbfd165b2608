//! Masks that take whole trie subtrees unwalked agree with the token-by-token answer.
//!
//! A walk takes every token below a trie node at once where its state keeps them all
//! alive: a pushdown state that every character below leads back to (`[^\n]+`), a
//! string state that does (`[^/#]+`), or a pattern state that no character written
//! raw can kill (`.*`, within a `maxLength`). Each mask here is checked against the
//! tokens committed one at a time (and rolled back), with real vocabularies: their
//! multibyte, broken and byte-fallback tokens are what the shortcut must tell apart.

#[path = "common/real_vocab.rs"]
mod real_vocab;

use llamay_constrain::{Constraint, Matcher, TokenMask, Vocabulary};
use llamay_testdata::{RealModel, XorShift};
use std::sync::Arc;

/// The mask as commits tell it: every token tried alone, then rolled back.
fn mask_by_commits(m: &mut Matcher, n: usize) -> TokenMask {
    let mut mask = TokenMask::new(n);
    for t in 0..n as u32 {
        if m.commit(t).is_ok() {
            mask.allow(t);
            m.rollback(1).unwrap();
        }
    }
    mask
}

/// Walks `c` for `steps` tokens picked at random from its masks, comparing each mask
/// with [`mask_by_commits`]; returns the tokens the masks allowed in all.
fn compare_walk(
    name: &str,
    c: &Constraint,
    v: &Vocabulary,
    rng: &mut XorShift,
    steps: usize,
) -> usize {
    let n = v.len();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(n);
    let mut text = Vec::new();
    let mut allowed_in_all = 0;
    for step in 0..steps {
        m.mask(&mut mask);
        let want = mask_by_commits(&mut m, n);
        let differ: Vec<String> = (0..n as u32)
            .filter(|&t| mask.is_allowed(t) != want.is_allowed(t))
            .take(8)
            .map(|t| {
                format!(
                    "{t} {:?} mask {}",
                    v.token_bytes(t).map(String::from_utf8_lossy),
                    mask.is_allowed(t)
                )
            })
            .collect();
        assert!(
            differ.is_empty(),
            "{name}, step {step} after {:?}: {differ:?}",
            String::from_utf8_lossy(&text)
        );
        let choices: Vec<u32> = mask.allowed().filter(|&t| !v.is_eog(t)).collect();
        allowed_in_all += choices.len();
        if choices.is_empty() {
            break;
        }
        let t = choices[rng.below(choices.len())];
        text.extend_from_slice(v.token_bytes(t).unwrap());
        m.commit(t).unwrap();
    }
    allowed_in_all
}

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
        let (c, _) = llamay_constrain::schema::constraint(&schema, v.clone()).unwrap();
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
    let (c, _) = llamay_constrain::schema::constraint(&schema, v.clone()).unwrap();
    assert!(compare_walk("^[^é]+$", &c, &v, &mut rng, 6) > 50);
    let schema = string_schema("^b.*", Some(280));
    let (c, _) = llamay_constrain::schema::constraint(&schema, v.clone()).unwrap();
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
