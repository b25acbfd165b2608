//! Raw text in a call form that quotes it between tags (Qwen3-Coder's
//! `</parameter>`, Gemma 4's `<|"|>`): any text that does not hold the closing tag.

use llamay_constrain::{ByteDfa, Symbol};

/// Any text without `tag` in it (`tag` starts with `<` and holds no other `<`):
/// whatever follows each `<` must not spell the rest of the tag.
pub(crate) fn without(tag: &str) -> llamay_constrain::Result<Symbol> {
    debug_assert!(tag.starts_with('<') && !tag[1..].contains('<'));
    let rest = &tag[1..];
    let breaks: Vec<String> = rest
        .char_indices()
        .map(|(i, c)| {
            format!(
                "{}(?:[^<{}][^<]*)?",
                regex_literal(&rest[..i]),
                regex_literal(&c.to_string())
            )
        })
        .collect();
    let pattern = format!("[^<]*(?:<(?:{}))*", breaks.join("|"));
    Ok(Symbol::Regex(ByteDfa::shared(&pattern)?))
}

/// `text` with every regex metacharacter escaped (valid in a class too).
fn regex_literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$-&~#".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llamay_constrain::{Constraint, GrammarBuilder, Vocabulary};

    use super::*;

    fn accepts(tag: &str, text: &str) -> bool {
        let mut b = GrammarBuilder::new();
        let s = without(tag).unwrap();
        let root = b.rule("root", vec![vec![s]]);
        let g = b.build(root).unwrap();
        let toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let c = Constraint::from_grammar(&g, Arc::new(Vocabulary::new(toks, &[], &[]))).unwrap();
        let mut m = c.matcher();
        m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    }

    #[test]
    fn raw_text_is_anything_but_its_close_tag() {
        for ok in [
            "",
            "Paris",
            "a < b",
            "<",
            "<<",
            "x </param",
            "</parameter",
            "</parameters>",
            "<</parameter",
            "two\nlines </function> é",
        ] {
            assert!(accepts("</parameter>", ok), "{ok:?}");
        }
        for bad in [
            "</parameter>",
            "x</parameter>y",
            "<</parameter>",
            "a\n</parameter>\n",
        ] {
            assert!(!accepts("</parameter>", bad), "{bad:?}");
        }
        for ok in ["a \"quote\"", "<|", "<|\"", "<|\"|", "|\"|>", "<|\"x|>"] {
            assert!(accepts("<|\"|>", ok), "{ok:?}");
        }
        for bad in ["<|\"|>", "say <|\"|> it"] {
            assert!(!accepts("<|\"|>", bad), "{bad:?}");
        }
    }
}
