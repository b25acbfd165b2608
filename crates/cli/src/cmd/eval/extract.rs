//! The JSON in a free-text reply, taken the way a user's parser would: the first JSON
//! value in the text, after stripping Markdown code fences.

use serde_json::Value;

/// The JSON object or array the text's first `{` or `[` starts (fences such as
/// ```` ```json ```` are ignored), or `None` when it does not parse.
pub fn first_json_value(text: &str) -> Option<Value> {
    let unfenced: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n");
    // Where the first value starts; if that does not parse, neither would a user's.
    let start = unfenced.find(['{', '['])?;
    let mut stream = serde_json::Deserializer::from_str(&unfenced[start..]).into_iter::<Value>();
    stream.next()?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fences_and_chatter_are_skipped() {
        let t = "Sure! Here it is:\n```json\n{\"a\": 1, \"b\": [2]}\n```\nAnything else?";
        assert_eq!(first_json_value(t), Some(json!({"a": 1, "b": [2]})));
        assert_eq!(
            first_json_value("{\"a\": {\"b\": 2}} {\"c\": 3}"),
            Some(json!({"a": {"b": 2}}))
        );
        // The first brace decides, as in a user's parser.
        assert_eq!(first_json_value("f(x) {oops} then {\"ok\": true}"), None);
        assert_eq!(first_json_value("no json here"), None);
        assert_eq!(first_json_value("{\"cut\": "), None);
    }
}
