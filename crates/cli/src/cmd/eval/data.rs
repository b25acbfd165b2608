//! The evaluation set: JSON lines of `{"input": "...", "expected": {...}}`, with an
//! optional `id` and `sources` (names to texts, for `x-llamay-quote`). A line that is
//! not such an object is reported by its number; the others still run.

use std::collections::BTreeMap;

use serde_json::Value;

/// One document to extract from.
#[derive(Clone, Debug)]
pub struct Case {
    /// 1-based line in the data file.
    pub line: usize,
    pub id: String,
    pub input: String,
    pub expected: Value,
    pub sources: BTreeMap<String, String>,
}

/// A line that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub error: String,
}

/// Reads every line; blank lines are skipped.
pub fn parse(text: &str) -> (Vec<Case>, Vec<BadLine>) {
    let mut cases = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match case(raw, line) {
            Ok(c) => cases.push(c),
            Err(error) => bad.push(BadLine { line, error }),
        }
    }
    (cases, bad)
}

fn case(raw: &str, line: usize) -> Result<Case, String> {
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("not valid JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let input = obj
        .get("input")
        .and_then(Value::as_str)
        .ok_or("\"input\" is missing or not a string")?
        .to_string();
    let expected = obj
        .get("expected")
        .cloned()
        .ok_or("\"expected\" is missing")?;
    if !expected.is_object() {
        return Err("\"expected\" is not an object".into());
    }
    let id = match obj.get("id") {
        None => format!("line {line}"),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err("\"id\" is not a string or number".into()),
    };
    let mut sources = BTreeMap::new();
    if let Some(s) = obj.get("sources") {
        let s = s
            .as_object()
            .ok_or("\"sources\" is not an object of names to texts")?;
        for (k, t) in s {
            let t = t
                .as_str()
                .ok_or_else(|| format!("source {k:?} is not a string"))?;
            sources.insert(k.clone(), t.to_string());
        }
    }
    Ok(Case {
        line,
        id,
        input,
        expected,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_named_and_the_rest_kept() {
        let text = concat!(
            "{\"input\": \"a\", \"expected\": {\"x\": 1}}\n",
            "\n",
            "{\"input\": \"b\", \"expected\": {\"x\": 2}\n",
            "[1, 2]\n",
            "{\"input\": 3, \"expected\": {}}\n",
            "{\"id\": 7, \"input\": \"c\", \"expected\": {}, \"sources\": {\"po\": \"PO 1\"}}\n",
        );
        let (cases, bad) = parse(text);
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].id, "7");
        assert_eq!(cases[1].line, 6);
        assert_eq!(cases[1].sources["po"], "PO 1");
        let lines: Vec<usize> = bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, [3, 4, 5]);
        assert!(bad[0].error.contains("not valid JSON"));
        assert!(bad[2].error.contains("\"input\""));
    }
}
