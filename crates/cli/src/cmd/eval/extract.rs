//! The JSON in a free-text reply, taken the way a user's parser would: the first JSON
//! value in the text, after stripping Markdown code fences.

use serde_json::Value;

/// The first JSON object or array in `text` (fences such as ```` ```json ```` are
/// ignored), or `None` when there is none that parses.
pub fn first_json_value(text: &str) -> Option<Value> {
    let unfenced: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n");
    for (i, c) in unfenced.char_indices() {
        if c != '{' && c != '[' {
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(&unfenced[i..]).into_iter::<Value>();
        if let Some(Ok(v)) = stream.next() {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fences_and_chatter_are_skipped() {
        let t = "Sure! Here it is:\n```json\n{\"a\": 1, \"b\": [2]}\n```\nAnything else?";
        assert_eq!(first_json_value(t), Some(json!({"a": 1, "b": [2]})));
        assert_eq!(first_json_value("{\"a\": {\"b\": 2}} {\"c\": 3}"), Some(json!({"a": {"b": 2}})));
        // A brace that starts no valid value is passed over.
        assert_eq!(first_json_value("f(x) {oops} then {\"ok\": true}"), Some(json!({"ok": true})));
        assert_eq!(first_json_value("no json here"), None);
        assert_eq!(first_json_value("{\"cut\": "), None);
    }
}
