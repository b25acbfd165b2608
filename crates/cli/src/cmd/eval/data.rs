//! The evaluation set: JSON lines of `{"input": "...", "expected": {...}}`, with an
//! optional `id`, `sources` (names to texts, for `x-llamay-quote`) and `images`
//! (files beside the data, or base64 data URLs: a scan or photo of the document,
//! which may then have no `input` text). A line that is not such an object, or
//! whose image cannot be read, is reported by its number; the others still run.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use llamay_runtime::ImageInput;
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
    /// The document's pictures, shown to the model where the prompt puts `{input}`.
    pub images: Vec<ImageInput>,
}

/// A line that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub error: String,
}

/// Reads every line (image paths relative to `dir`, the data file's folder); blank
/// lines are skipped.
pub fn parse(text: &str, dir: &Path) -> (Vec<Case>, Vec<BadLine>) {
    let mut cases = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match case(raw, line, dir) {
            Ok(c) => cases.push(c),
            Err(error) => bad.push(BadLine { line, error }),
        }
    }
    (cases, bad)
}

fn case(raw: &str, line: usize, dir: &Path) -> Result<Case, String> {
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("not valid JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let images = match obj.get("images") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| image(i, dir))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"images\" is not an array of file names".into()),
    };
    let input = match obj.get("input") {
        Some(Value::String(s)) => s.clone(),
        None if !images.is_empty() => String::new(),
        _ => return Err("\"input\" is missing or not a string".into()),
    };
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
        images,
    })
}

/// One entry of `images`: a base64 data URL, or a file (relative to `dir`).
fn image(v: &Value, dir: &Path) -> Result<ImageInput, String> {
    let s = v
        .as_str()
        .ok_or("\"images\" holds something that is not a string")?;
    if let Some(rest) = s.strip_prefix("data:") {
        let data = rest
            .split_once(";base64,")
            .map(|(_, d)| d)
            .ok_or("an image data URL must be base64 (data:image/png;base64,...)")?;
        return base64::engine::general_purpose::STANDARD
            .decode(data)
            .map(|b| ImageInput(b.into()))
            .map_err(|e| format!("an image data URL is not valid base64 ({e})"));
    }
    let path = dir.join(s);
    std::fs::read(&path)
        .map(|b| ImageInput(b.into()))
        .map_err(|e| format!("cannot read the image {}: {e}", path.display()))
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
        let (cases, bad) = parse(text, Path::new("."));
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].id, "7");
        assert_eq!(cases[1].line, 6);
        assert_eq!(cases[1].sources["po"], "PO 1");
        let lines: Vec<usize> = bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, [3, 4, 5]);
        assert!(bad[0].error.contains("not valid JSON"));
        assert!(bad[2].error.contains("\"input\""));
    }

    #[test]
    fn images_are_read_beside_the_data_or_inline_and_may_stand_for_the_input() {
        let dir = std::env::temp_dir().join(format!("llamay-eval-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("scan.png"), b"PNG bytes").unwrap();
        let text = concat!(
            "{\"images\": [\"scan.png\", \"data:image/png;base64,UE5H\"], \"expected\": {}}\n",
            "{\"images\": [\"gone.png\"], \"expected\": {}}\n",
            "{\"images\": [\"data:image/png,PNG\"], \"expected\": {}}\n",
            "{\"images\": \"scan.png\", \"expected\": {}}\n",
            "{\"expected\": {}}\n",
        );
        let (cases, bad) = parse(text, &dir);
        assert_eq!(cases.len(), 1, "{bad:?}");
        assert_eq!(cases[0].input, "");
        assert_eq!(&*cases[0].images[0].0, b"PNG bytes");
        assert_eq!(&*cases[0].images[1].0, b"PNG");
        let errors: Vec<&str> = bad.iter().map(|b| b.error.as_str()).collect();
        assert!(errors[0].contains("gone.png"), "{errors:?}");
        assert!(errors[1].contains("must be base64"), "{errors:?}");
        assert!(errors[2].contains("not an array"), "{errors:?}");
        assert!(errors[3].contains("\"input\""), "{errors:?}");
    }
}
