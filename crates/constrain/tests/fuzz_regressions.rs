//! Inputs the fuzz targets found (see docs/fuzzing.md), kept as tests.

use llamay_constrain::{Constraint, TokenMask, Vocabulary};
use std::sync::Arc;

/// `gbnf` target: a grammar where any character may open one more `term` (the `.`
/// before `expr`) and names and nestings read the same letters, so configurations hold
/// thousands of items over ever deeper stacks. The walk's table clears, which keep the
/// rollback history, spelled every kept item's whole stack out: 2.5 GB for these 230
/// tokens (the fuzzer's 2 GB limit); and the table was bounded by states, not items.
/// Now about 45 MB (copied stacks shared, items budgeted).
#[test]
fn a_grammar_nesting_at_every_character_walks_with_its_table_cleared() {
    let grammar = "root  ::=.(expr \"=\" ws term \"\\n\")+\n\
                   expr  ::= term ([-+*/] term)+\n\
                   term  ::= ident | num | .\"(\" ?ws expr \")\" ws\n\
                   ident ::= [ofz\x1c [a-piece]* ws\n\
                   num   ::= [0-9]+ ws\n\
                   ws    ::=";
    // The walk's choices, as the fuzz target reads them: token = allowed[c % allowed].
    let choices = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
      \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00nes= it\
      \x09{\x09\x09\x09har+)*\x0ajp-char     ::= hiragana [\xe3\x81\x81-\xe3\x82\
      \x9f[hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh{]\x0akatakana    ::= [\xe3\x82\xa1-\
      \xe3\x83\xbf%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%i\x0a\x09/e :\x00\x00\x00\x00\
      \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\
      \x00\x00\x00\x00\x00\x00\x00\x00 [ \x5ct\x5cn]*\x0a";
    let vocab = Arc::new(Vocabulary::new(
        (0..=255u8).map(|b| vec![b]).collect(),
        &[],
        &[],
    ));
    let c = Constraint::from_gbnf(grammar, vocab).unwrap();
    let mut m = c.matcher();
    let mut mask = TokenMask::new(256);
    for (step, &choice) in choices.iter().enumerate() {
        m.mask(&mut mask);
        let allowed: Vec<u32> = mask.allowed().collect();
        assert!(!allowed.is_empty(), "dead end at step {step}");
        m.commit(allowed[choice as usize % allowed.len()]).unwrap();
    }
    let stats = m.stats();
    assert!(stats.table_clears > 0, "{stats:?}");
    // The history survived the clears.
    m.rollback(200).unwrap();
    m.mask(&mut mask);
    assert!(mask.count() > 0);
}
