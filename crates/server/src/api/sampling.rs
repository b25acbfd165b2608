//! The sampling fields as the API shapes spell them on the wire.

use serde::Deserialize;

/// `stop` as a string or a list of strings.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

impl StopField {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
    }
}

/// Builds a [`Sampling`] from a request (or options) struct that spells the shared
/// knobs OpenAI's way (`temperature` … `seed`, as in OpenAI and Ollama alike); the
/// token limit and stops differ per API, so the caller passes them. A macro because
/// the sources are unrelated wire structs that only share field names.
macro_rules! sampling_from {
    ($r:expr, max_tokens: $max:expr, stop: $stop:expr $(,)?) => {
        llamay_runtime::Sampling {
            temperature: $r.temperature,
            top_p: $r.top_p,
            top_k: $r.top_k,
            min_p: $r.min_p,
            repeat_penalty: $r.repeat_penalty,
            frequency_penalty: $r.frequency_penalty,
            presence_penalty: $r.presence_penalty,
            seed: $r.seed,
            max_tokens: $max,
            stop: $stop,
        }
    };
}
pub(crate) use sampling_from;
