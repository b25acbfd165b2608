use super::parse_gbnf;
use std::fs;

fn grammar_files() -> Vec<(String, String)> {
    let dir = llamay_testdata::shared_dir().join("grammars");
    let mut v: Vec<(String, String)> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gbnf"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(
        v.len() >= 14,
        "expected the shared grammars, found {}",
        v.len()
    );
    v
}

#[test]
fn every_good_shared_grammar_compiles() {
    for (name, text) in grammar_files()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("bad-"))
    {
        let g = parse_gbnf(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.rules()[g.root().0 as usize].name, "root", "{name}");
    }
}

#[test]
fn every_bad_shared_grammar_is_refused_by_name_and_place() {
    let expect = [
        (
            "bad-left-recursion.gbnf",
            "2:1: rule `expr` is left-recursive (expr -> expr)",
        ),
        (
            "bad-repetition-bound.gbnf",
            "1:15: repetition bound 5000 is above the limit of 4096",
        ),
        (
            "bad-token-terminal.gbnf",
            "1:10: token terminal `<think>` is not supported",
        ),
        ("bad-undefined-rule.gbnf", "2:15: undefined rule `word`"),
        ("bad-unterminated-string.gbnf", "1:10: unterminated string"),
    ];
    let files = grammar_files();
    let bad: Vec<_> = files
        .iter()
        .filter(|(n, _)| n.starts_with("bad-"))
        .collect();
    assert_eq!(
        bad.len(),
        expect.len(),
        "a new bad-*.gbnf needs an expectation here"
    );
    for (name, text) in bad {
        let want = expect.iter().find(|(n, _)| n == name).unwrap().1;
        let msg = parse_gbnf(text).unwrap_err().to_string();
        assert!(
            msg.starts_with(want),
            "{name}: got {msg:?}, want prefix {want:?}"
        );
    }
    let msg = parse_gbnf(
        &files
            .iter()
            .find(|(n, _)| n == "bad-left-recursion.gbnf")
            .unwrap()
            .1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("expr ::= term (\"+\" term)*"),
        "suggestion missing: {msg}"
    );
}

#[test]
fn syntax_details() {
    let g = parse_gbnf(
        "root ::= [^a-c\\]] \"\\x41\\u00e9\\U0001F600\" . x{2} x{1,} x{0,3}\nx ::= \"x\" # c\n",
    )
    .unwrap();
    assert!(g.to_string().contains("root ::="));
    let bad = [
        ("root ::= \"a\" <[1000]>", "1:14: token terminal `<[1000]>`"),
        ("root ::= [a-", "1:10: unterminated character class"),
        ("root ::= \"\\q\"", "1:11: unknown escape"),
        (
            "root ::= a\na ::= \"x\"\na ::= \"y\"",
            "3:1: rule `a` is defined twice",
        ),
        ("foo ::= \"x\"", "the grammar has no `root` rule"),
        ("root ::= \"x\"{3,2}", "1:13: repetition {3,2}"),
        ("root ::= (\"x\"", "1:10: unclosed `(`"),
        (
            "root ::= a b\na ::= b \"x\"\nb ::= \"\" | a",
            "2:1: rule `a` is left-recursive (a -> b -> a)",
        ),
        ("root ::= \"x\" ::=", "1:14: expected end of line"),
    ];
    for (text, want) in bad {
        let msg = parse_gbnf(text).unwrap_err().to_string();
        assert!(
            msg.starts_with(want),
            "{text:?}: got {msg:?}, want {want:?}"
        );
    }
    assert!(parse_gbnf(&"(".repeat(1000)).is_err());
}

#[test]
fn nested_repetitions_are_refused_before_being_built() {
    let vocab = std::sync::Arc::new(crate::Vocabulary::new(vec![b"a".to_vec()], &[], &[]));
    let t0 = std::time::Instant::now();
    let err = crate::Constraint::from_gbnf("root ::= ((\"abc\"{4096}){4096}){4096}", vocab.clone())
        .unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
    assert!(t0.elapsed().as_millis() < 500);
    assert!(crate::Constraint::from_gbnf("root ::= [a-z]{4096}", vocab).is_ok());
}

/// `n` rules, one per line, each offering a literal or the next rule; CRLF line ends,
/// multi-byte characters and comments, so line and column counting is exercised.
fn chain_grammar(n: usize) -> String {
    let mut g = String::from("root ::= r0\n");
    for i in 0..n {
        let next = if i + 1 < n {
            format!(" r{}", i + 1)
        } else {
            String::new()
        };
        g += &format!("r{i} ::= \"é{i}\"{next} | \"😀\" # ü\r\n");
    }
    g
}

#[test]
fn fourteen_thousand_rules_parse_with_their_origins() {
    let n = 14_000;
    let text = chain_grammar(n);
    let g = parse_gbnf(&text).unwrap();
    assert_eq!(g.rules().len(), n + 1);
    for (i, rule) in g.rules().iter().enumerate() {
        // `root` is rule 0 on line 1 (declared when first referenced, `r0` is rule 1).
        let want = if rule.name == "root" {
            1
        } else {
            rule.name[1..].parse::<u32>().unwrap() + 2
        };
        assert_eq!(rule.origin, Some((want, 1)), "rule {i} `{}`", rule.name);
    }
    // An error after all of it is placed on its line, columns counted in characters.
    let bad = format!("{text}  ü ::= \"x\"");
    let msg = parse_gbnf(&bad).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("{}:3: expected a rule name", n + 2)),
        "{msg}"
    );
    let bad = format!("{text}ok ::= \"x\" ü");
    let msg = parse_gbnf(&bad).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("{}:12: expected end of line", n + 2)),
        "{msg}"
    );
    let vocab = std::sync::Arc::new(crate::Vocabulary::new(
        (0..=255u8).map(|b| vec![b]).collect(),
        &[],
        &[],
    ));
    let c = crate::Constraint::from_grammar(&g, vocab).unwrap();
    let mut m = c.matcher();
    for b in "é0é1😀".bytes() {
        m.commit(u32::from(b)).unwrap();
    }
    assert!(m.is_accepting());
}
