//! The sampling fields as the API shapes spell them on the wire.

use serde::Deserialize;

/// `stop` as a string or a list of strings.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub(crate) enum StopField {
    One(String),
    Many(Vec<String>),
}

impl StopField {
    pub(crate) fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
    }
}

/// Declares a wire struct with the sampling knobs that OpenAI and Ollama spell alike
/// (`temperature` … `seed`) appended to its own fields, once for every such struct,
/// and gives it `sampling(max_tokens, stop)`: the token limit and the stops differ per
/// route, so the caller passes them. Not `#[serde(flatten)]`: a flattened struct is
/// read from a buffered copy, and serde_json then reports a bad value at the end of
/// the object instead of at the field's own line and column.
macro_rules! with_sampling_knobs {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$field_meta:meta])* $field_vis:vis $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$field_meta])* $field_vis $field: $ty,)*
            $vis temperature: Option<f64>,
            $vis top_p: Option<f64>,
            $vis top_k: Option<i64>,
            $vis min_p: Option<f64>,
            $vis repeat_penalty: Option<f64>,
            $vis frequency_penalty: Option<f64>,
            $vis presence_penalty: Option<f64>,
            $vis seed: Option<i64>,
            $vis llamay_speculate: Option<bool>,
        }

        impl $name {
            fn sampling(&self, max_tokens: Option<i64>, stop: Vec<String>) -> llamay_runtime::SamplingAsk {
                llamay_runtime::SamplingAsk {
                    temperature: self.temperature,
                    top_p: self.top_p,
                    top_k: self.top_k,
                    min_p: self.min_p,
                    repeat_penalty: self.repeat_penalty,
                    frequency_penalty: self.frequency_penalty,
                    presence_penalty: self.presence_penalty,
                    seed: self.seed,
                    max_tokens,
                    stop,
                    speculate: self.llamay_speculate,
                }
            }
        }
    };
}
pub(crate) use with_sampling_knobs;

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::StopField;

    with_sampling_knobs! {
        #[derive(Deserialize, Debug)]
        struct Probe {
            model: String,
            stop: Option<StopField>,
        }
    }

    #[test]
    fn the_knobs_are_read_and_a_bad_one_is_reported_at_its_own_line() {
        let r: Probe =
            serde_json::from_str(r#"{"model": "m", "temperature": 0.5, "seed": 3, "stop": "x"}"#)
                .unwrap();
        let stop = r.stop.clone().map(StopField::into_vec).unwrap_or_default();
        let s = r.sampling(Some(9), stop);
        assert_eq!(r.model, "m");
        assert_eq!(
            (s.temperature, s.seed, s.max_tokens),
            (Some(0.5), Some(3), Some(9))
        );
        assert_eq!(s.stop, ["x"]);
        let e = serde_json::from_str::<Probe>("{\n\"temperature\": \"hot\",\n\"model\": \"m\"\n}")
            .unwrap_err();
        assert_eq!((e.line(), e.column()), (2, 20), "{e}");
    }
}
