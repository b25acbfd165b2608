//! The benchmark's figures, as a table for people and as one JSON object.

use serde_json::{json, Value};

use crate::units::human_count;

/// Slack the memory budget allows above the file and the KV cache (issue 9: peak
/// resident memory ≤ model file + KV cache + 64 MB).
pub const MEMORY_SLACK: u64 = 64 << 20;

/// Minimum, median and maximum of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (the median of an even count is the mean of the middle
    /// two, as Python's `statistics.median`). `None` when empty.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    fn json(&self) -> Value {
        json!({"min": self.min, "median": self.median, "max": self.max})
    }
}

/// Batched decode at one batch size.
#[derive(Clone, Debug)]
pub struct BatchFigures {
    pub batch: usize,
    pub aggregate: Spread,
    pub per_seq: Spread,
}

/// Everything `llamay bench` reports.
#[derive(Clone, Debug)]
pub struct Report {
    pub model: String,
    pub name: Option<String>,
    pub arch: String,
    pub parameters: u64,
    pub file_type: Option<String>,
    pub file_size: u64,
    pub threads: usize,
    pub kernels: String,
    pub kv_type: String,
    pub reps: usize,
    pub load_s: f64,
    pub n_prompt: usize,
    pub n_gen: usize,
    pub n_short: usize,
    pub pp: Spread,
    pub tg: Spread,
    pub batched: Vec<BatchFigures>,
    pub first_gen_ids: Vec<u32>,
    /// VmHWM, when the platform reports it.
    pub peak_rss: Option<u64>,
    pub kv_bytes: u64,
}

impl Report {
    /// File + KV cache + [`MEMORY_SLACK`].
    pub fn memory_budget(&self) -> u64 {
        self.file_size + self.kv_bytes + MEMORY_SLACK
    }

    pub fn to_json(&self) -> Value {
        json!({
            "engine": "llamay",
            "model": self.model,
            "name": self.name,
            "arch": self.arch,
            "parameters": self.parameters,
            "file_type": self.file_type,
            "file_size": self.file_size,
            "threads": self.threads,
            "kernels": self.kernels,
            "kv_type": self.kv_type,
            "reps": self.reps,
            "load_s": self.load_s,
            "n_prompt": self.n_prompt,
            "n_gen": self.n_gen,
            "n_short": self.n_short,
            "pp_tps": self.pp.json(),
            "tg_tps": self.tg.json(),
            "batched": self.batched.iter().map(|b| json!({
                "batch": b.batch,
                "aggregate_tps": b.aggregate.json(),
                "per_seq_tps": b.per_seq.json(),
            })).collect::<Vec<_>>(),
            "first_gen_ids": self.first_gen_ids,
            "memory": {
                "peak_rss_bytes": self.peak_rss,
                "file_size": self.file_size,
                "kv_bytes": self.kv_bytes,
                "budget_bytes": self.memory_budget(),
                "within_budget": self.peak_rss.map(|r| r <= self.memory_budget()),
            },
        })
    }

    /// The human-readable table.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let ftype = self.file_type.as_deref().unwrap_or("-");
        out += &format!("model    {}{name}\n", self.model);
        out += &format!(
            "         {} · {} params · {ftype} · {}\n",
            self.arch,
            human_count(self.parameters),
            mb(self.file_size)
        );
        out += &format!(
            "engine   {} threads · kernels {} · kv {} · loaded in {:.2} s\n",
            self.threads, self.kernels, self.kv_type, self.load_s
        );
        out += &format!("runs     {} (tok/s: min / median / max)\n\n", self.reps);
        out += &format!("{:<28} {:>9} {:>9} {:>9}\n", "test", "min", "median", "max");
        let mut row = |label: String, s: &Spread| {
            out += &format!(
                "{label:<28} {:>9.1} {:>9.1} {:>9.1}\n",
                s.min, s.median, s.max
            );
        };
        row(format!("prompt {}", self.n_prompt), &self.pp);
        row(
            format!("decode {} (after {})", self.n_gen, self.n_short),
            &self.tg,
        );
        for b in &self.batched {
            row(
                format!("batch {} × {}, aggregate", b.batch, self.n_gen),
                &b.aggregate,
            );
            row(
                format!("batch {} × {}, per sequence", b.batch, self.n_gen),
                &b.per_seq,
            );
        }
        let rss = self.peak_rss.map_or("unknown".to_string(), mb);
        let verdict = match self.peak_rss {
            Some(r) if r <= self.memory_budget() => "within",
            Some(_) => "OVER",
            None => "not checked",
        };
        out += &format!(
            "\nmemory   peak RSS {rss} · file {} + KV {} + 64 MiB = {} ({verdict})\n",
            mb(self.file_size),
            mb(self.kv_bytes),
            mb(self.memory_budget())
        );
        out
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_the_middle_value_or_the_mean_of_the_middle_two() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 10.0));
        assert_eq!(Spread::of(&[5.0]).unwrap().median, 5.0);
        assert!(Spread::of(&[]).is_none());
    }
}
