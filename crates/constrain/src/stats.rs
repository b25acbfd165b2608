//! Per-matcher statistics, and the two-line summary `llamay run -stats` prints.

use std::time::Duration;

/// What a [`Matcher`](crate::Matcher) did and what its caches held.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatcherStats {
    /// Masks requested.
    pub steps: u64,
    /// Time spent computing or copying masks.
    pub mask_time: Duration,
    /// Masks served from the mask cache.
    pub cache_hits: u64,
    /// Interned states now in the table.
    pub states_used: usize,
    /// State-table capacity.
    pub states_limit: usize,
    /// Most states the table ever held.
    pub states_peak: usize,
    /// Masks now cached.
    pub masks_used: usize,
    /// Mask-cache capacity.
    pub masks_limit: usize,
    /// Masks computed (a state that wanted a mask and had none cached).
    pub states_wanting_mask: u64,
    /// Times the state table was cleared because it was full.
    pub table_clears: u64,
    /// Of the steps, closing masks (a token budget running short; see
    /// [`Matcher::closing_mask`](crate::Matcher::closing_mask)).
    pub closing_steps: u64,
}

impl MatcherStats {
    /// Mean time per mask, in microseconds (0 with no steps).
    pub fn mean_mask_us(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.mask_time.as_secs_f64() * 1e6 / self.steps as f64
        }
    }

    /// Share of mask requests served from the cache, in per cent.
    pub fn hit_rate(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            100.0 * self.cache_hits as f64 / self.steps as f64
        }
    }

    /// The two statistics lines, e.g.
    /// `json mask: 27 steps, 0.05 ms each, 0.4% of decode · 21 cached (77.8% hit rate)` and
    /// `  states 35/4096 (peak 35) · masks 6/256 · 6 states wanted a mask · 0 table clears`.
    /// `label` names the constraint kind (`json`, `grammar`...); `decode` is the total
    /// decode time the mask share is measured against. Closing steps, if any, end the
    /// first line (`· 3 closing`).
    pub fn summary(&self, label: &str, decode: Duration) -> String {
        let share = if decode.is_zero() {
            0.0
        } else {
            100.0 * self.mask_time.as_secs_f64() / decode.as_secs_f64()
        };
        format!(
            "{label} mask: {} steps, {:.2} ms each, {:.1}% of decode · {} cached ({:.1}% hit rate){}\n  states {}/{} (peak {}) · masks {}/{} · {} states wanted a mask · {} table clears",
            self.steps,
            self.mean_mask_us() / 1000.0,
            share,
            self.cache_hits,
            self.hit_rate(),
            if self.closing_steps > 0 {
                format!(" · {} closing", self.closing_steps)
            } else {
                String::new()
            },
            self.states_used,
            self.states_limit,
            self.states_peak,
            self.masks_used,
            self.masks_limit,
            self.states_wanting_mask,
            self.table_clears
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_the_seed_shape() {
        let s = MatcherStats {
            steps: 27,
            mask_time: Duration::from_micros(27 * 50),
            cache_hits: 21,
            states_used: 35,
            states_limit: 4096,
            states_peak: 35,
            masks_used: 6,
            masks_limit: 256,
            states_wanting_mask: 6,
            table_clears: 0,
            closing_steps: 0,
        };
        assert_eq!(
            s.summary("json", Duration::from_micros(27 * 50 * 250)),
            "json mask: 27 steps, 0.05 ms each, 0.4% of decode · 21 cached (77.8% hit rate)\n  states 35/4096 (peak 35) · masks 6/256 · 6 states wanted a mask · 0 table clears"
        );
        let closing = MatcherStats {
            closing_steps: 3,
            ..s
        };
        assert!(closing
            .summary("json", Duration::from_micros(27 * 50 * 250))
            .starts_with("json mask: 27 steps, 0.05 ms each, 0.4% of decode · 21 cached (77.8% hit rate) · 3 closing\n  states 35/4096"));
    }
}
