//! Sampling settings as the API shapes spell them, checked and turned into
//! [`GenerationParams`]. Out-of-range values are 400s, not silently clamped.

use llamay_engine::SamplerConfig;

use crate::error::Error;
use crate::generate::{GenerationParams, DEFAULT_DRAFT};
use crate::ids::fresh_seed;

/// Most stop strings per request, and their longest length in bytes.
const MAX_STOPS: usize = 16;
const MAX_STOP_BYTES: usize = 512;
/// The token limit when a request sets none (the context bounds it further).
pub const DEFAULT_MAX_TOKENS: usize = 4096;

/// Every sampling knob any API shape has, as the client asked for it: unchecked, and
/// `None` where the client said nothing. [`SamplingAsk::into_params`] checks it into the
/// [`GenerationParams`] of one generation.
#[derive(Debug, Default, Clone)]
pub struct SamplingAsk {
    /// 0 to 100; 0 is greedy. `None` here and below: the engine's default.
    pub temperature: Option<f64>,
    /// Nucleus sampling's probability mass, 0 to 1 (1 disables).
    pub top_p: Option<f64>,
    /// Keep the k most likely tokens; 0 or more (0 disables).
    pub top_k: Option<i64>,
    /// Drop tokens less likely than this share of the top one's probability, 0 to 1.
    pub min_p: Option<f64>,
    /// Penalty on recently seen tokens' logits, 0 to 100 (1 disables).
    pub repeat_penalty: Option<f64>,
    /// Subtracted once per recent occurrence of a token, -2 to 2.
    pub frequency_penalty: Option<f64>,
    /// Subtracted once if a token occurred recently, -2 to 2.
    pub presence_penalty: Option<f64>,
    /// The sampler's seed (taken as its 64 bits); `None`: a fresh random seed.
    pub seed: Option<i64>,
    /// `None`: the default. The context bounds it further.
    pub max_tokens: Option<i64>,
    /// Stop strings: at most 16, each at most 512 bytes; empty ones are dropped.
    pub stop: Vec<String>,
    /// `false`: draft nothing ahead (`llamay_speculate`); drafts never change the
    /// output, only its speed.
    pub speculate: Option<bool>,
}

impl SamplingAsk {
    /// Checks the values and builds the generation settings.
    pub fn into_params(self) -> Result<GenerationParams, Error> {
        let mut cfg = SamplerConfig {
            seed: self.seed.map(|s| s as u64).unwrap_or_else(fresh_seed),
            ..SamplerConfig::default()
        };
        if let Some(t) = self.temperature {
            cfg.temperature = ranged("temperature", t, 0.0, 100.0)? as f32;
        }
        if let Some(p) = self.top_p {
            cfg.top_p = ranged("top_p", p, 0.0, 1.0)? as f32;
        }
        if let Some(k) = self.top_k {
            if k < 0 {
                return Err(Error::bad_request(format!(
                    "top_k must be 0 or more, not {k}"
                )));
            }
            cfg.top_k = k as usize;
        }
        if let Some(p) = self.min_p {
            cfg.min_p = ranged("min_p", p, 0.0, 1.0)? as f32;
        }
        if let Some(p) = self.repeat_penalty {
            cfg.repeat_penalty = ranged("repeat_penalty", p, 0.0, 100.0)? as f32;
        }
        if let Some(p) = self.frequency_penalty {
            cfg.frequency_penalty = ranged("frequency_penalty", p, -2.0, 2.0)? as f32;
        }
        if let Some(p) = self.presence_penalty {
            cfg.presence_penalty = ranged("presence_penalty", p, -2.0, 2.0)? as f32;
        }
        let max_tokens = match self.max_tokens {
            None => DEFAULT_MAX_TOKENS,
            Some(n) if n < 1 => {
                return Err(Error::bad_request(format!(
                    "the token limit must be at least 1, not {n}"
                )))
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let stop: Vec<String> = self.stop.into_iter().filter(|s| !s.is_empty()).collect();
        if stop.len() > MAX_STOPS {
            return Err(Error::bad_request(format!(
                "at most {MAX_STOPS} stop strings are allowed, not {}",
                stop.len()
            )));
        }
        if let Some(s) = stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
            return Err(Error::bad_request(format!(
                "a stop string is {} bytes; the limit is {MAX_STOP_BYTES}",
                s.len()
            )));
        }
        Ok(GenerationParams {
            max_tokens,
            sampler: cfg,
            stop,
            fast_forward: true,
            draft: match self.speculate {
                Some(false) => 0,
                _ => DEFAULT_DRAFT,
            },
            draft_model: None,
        })
    }
}

fn ranged(name: &str, v: f64, lo: f64, hi: f64) -> Result<f64, Error> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(Error::bad_request(format!("{name} must be between {lo} and {hi}, not {v}")).at(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_are_refused_and_empty_stops_dropped() {
        let ok = SamplingAsk {
            temperature: Some(0.0),
            max_tokens: Some(5),
            stop: vec!["".into(), "\n".into()],
            seed: Some(7),
            ..SamplingAsk::default()
        }
        .into_params()
        .unwrap();
        assert_eq!(ok.max_tokens, 5);
        assert_eq!(ok.stop, vec!["\n".to_string()]);
        assert_eq!(ok.sampler.seed, 7);
        assert_eq!(ok.sampler.temperature, 0.0);
        for bad in [
            SamplingAsk {
                temperature: Some(-1.0),
                ..SamplingAsk::default()
            },
            SamplingAsk {
                top_p: Some(1.5),
                ..SamplingAsk::default()
            },
            SamplingAsk {
                max_tokens: Some(0),
                ..SamplingAsk::default()
            },
            SamplingAsk {
                max_tokens: Some(-1),
                ..SamplingAsk::default()
            },
            SamplingAsk {
                top_k: Some(-3),
                ..SamplingAsk::default()
            },
            SamplingAsk {
                temperature: Some(f64::NAN),
                ..SamplingAsk::default()
            },
        ] {
            assert_eq!(
                bad.into_params().unwrap_err().kind,
                crate::error::ErrorKind::InvalidRequest
            );
        }
    }
}
