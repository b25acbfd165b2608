//! The output-constraint fields every generation route accepts beyond its own shape's:
//! llamay's `llamay_regex`, `llamay_choice`, `llamay_lexicon`, `llamay_options`, and
//! vLLM's `guided_regex` / `guided_choice` / `guided_json` / `guided_grammar` (so a
//! client written for vLLM works unchanged). Each route flattens [`ExactFields`] into
//! its request and calls [`ExactFields::read`] after its own fields, so llamay's and the
//! route's own names win over vLLM's.

use llamay_runtime::{Error, Surfaces};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Default)]
pub(crate) struct ExactFields {
    llamay_regex: Option<String>,
    llamay_choice: Option<Value>,
    llamay_lexicon: Option<Value>,
    llamay_options: Option<Value>,
    guided_regex: Option<String>,
    guided_choice: Option<Value>,
    guided_json: Option<Value>,
    guided_grammar: Option<String>,
}

impl ExactFields {
    /// Adds these fields to `s`.
    pub(crate) fn read(&self, s: &mut Surfaces) -> Result<(), Error> {
        s.regex_field("llamay_regex", self.llamay_regex.as_ref());
        s.regex_field("guided_regex", self.guided_regex.as_ref());
        s.choice_field("llamay_choice", self.llamay_choice.as_ref())?;
        s.choice_field("guided_choice", self.guided_choice.as_ref())?;
        s.llamay_lexicon(self.llamay_lexicon.as_ref())?;
        s.llamay_options(self.llamay_options.as_ref())?;
        match &self.guided_json {
            None => {}
            // vLLM takes the schema as an object or as its JSON text.
            Some(Value::String(text)) => {
                let v: Value = serde_json::from_str(text).map_err(|e| {
                    Error::bad_request(format!("guided_json is not a JSON schema: {e}"))
                })?;
                s.schema("guided_json", &v);
            }
            Some(v) => s.schema("guided_json", v),
        }
        if let (None, Some(g)) = (&s.grammar, &self.guided_grammar) {
            s.grammar = Some(("guided_grammar", g.clone()));
        }
        Ok(())
    }
}
