use std::time::Duration;

use llamay_constrain::MatcherStats;

/// What a generation cost.
#[derive(Clone, Debug, Default)]
pub struct GenerationStats {
    /// The prompt's length in tokens, a cached prefix included.
    pub prompt_tokens: usize,
    /// Time spent feeding the prompt (only the part not already in the sequence).
    pub prompt_time: Duration,
    /// Tokens generated, EOG excluded.
    pub generated_tokens: usize,
    /// Time spent after the prompt: sampling, masks and the generated tokens' passes.
    pub decode_time: Duration,
    /// Tokens taken without sampling because the constraint allowed only one
    /// continuation.
    pub forced_tokens: usize,
    /// Of those, tokens fed in the same forward pass as the token before them.
    pub fast_forwarded_tokens: usize,
    /// Tokens drafted ahead (speculative decoding).
    pub drafted_tokens: usize,
    /// Of those, the ones the decoder chose: they cost no pass of their own.
    pub accepted_tokens: usize,
    /// The constraint's mask work (strict tool calls' included, and the search for
    /// forced bytes); `None` when nothing was constrained.
    pub mask: Option<MatcherStats>,
}

impl GenerationStats {
    /// The first statistics line of `llamay run`:
    /// `prompt 25 tokens in 175ms (142.5 tok/s) · generated 26 in 1.473s (17.7 tok/s) · stop: eog`.
    pub fn summary(&self, stop: &str) -> String {
        format!(
            "prompt {} tokens in {} ({:.1} tok/s) · generated {} in {} ({:.1} tok/s) · stop: {stop}",
            self.prompt_tokens,
            format_duration(self.prompt_time),
            rate(self.prompt_tokens, self.prompt_time),
            self.generated_tokens,
            format_duration(self.decode_time),
            rate(self.generated_tokens, self.decode_time),
        )
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// `175ms` below a second, `1.473s` above, as the seed's transcripts print them.
pub(super) fn format_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_reads_like_the_seed() {
        let s = GenerationStats {
            prompt_tokens: 25,
            prompt_time: Duration::from_millis(175),
            generated_tokens: 26,
            decode_time: Duration::from_millis(1473),
            ..GenerationStats::default()
        };
        assert_eq!(
            s.summary("eog"),
            "prompt 25 tokens in 175ms (142.9 tok/s) · generated 26 in 1.473s (17.7 tok/s) · stop: eog"
        );
    }
}
