//! The terminal table: fields × modes, then the per-mode rates.

use super::summary::{percentile, rate, Evaluation};

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// The whole table as text.
pub fn render(e: &Evaluation) -> String {
    let width = e
        .fields
        .iter()
        .map(|f| f.name.len())
        .chain([16])
        .max()
        .unwrap_or(16);
    let col = 26;
    let mut out = String::new();
    out.push_str(&format!(
        "{} documents · {} · temperature {}\n\n",
        e.docs.len(),
        e.model,
        e.temperature
    ));
    out.push_str(&format!("{:<width$}", "field"));
    for m in &e.modes {
        out.push_str(&format!("  {:<col$}", m.as_str()));
    }
    out.push('\n');
    for (f, field) in e.fields.iter().enumerate() {
        out.push_str(&format!("{:<width$}", field.name));
        for m in 0..e.modes.len() {
            let s = e.field_stats(m, f);
            let cell = format!(
                "{:>6} inv {}/{} mis {}/{}",
                pct(rate(s.correct, s.n)),
                s.invented,
                s.null_expected,
                s.missed,
                s.value_expected
            );
            out.push_str(&format!("  {cell:<col$}"));
        }
        out.push('\n');
    }
    out.push('\n');
    let rows: [(&str, &dyn Fn(usize) -> String); 6] = [
        ("parse rate", &|m| {
            let s = e.mode_stats(m);
            pct(rate(s.parsed, s.docs))
        }),
        ("schema-valid", &|m| {
            let s = e.mode_stats(m);
            pct(rate(s.valid, s.docs))
        }),
        ("quote grounded", &|m| {
            let s = e.mode_stats(m);
            if s.quoted == 0 {
                "-".into()
            } else {
                format!(
                    "{} ({}/{})",
                    pct(rate(s.grounded, s.quoted)),
                    s.grounded,
                    s.quoted
                )
            }
        }),
        ("errors", &|m| e.mode_stats(m).errors.to_string()),
        ("tokens / doc", &|m| {
            let s = e.mode_stats(m);
            format!("{:.1}", rate(s.tokens, s.docs))
        }),
        ("latency p50/p95", &|m| {
            let s = e.mode_stats(m);
            format!(
                "{:.0} / {:.0} ms",
                percentile(&s.latencies_ms, 0.5),
                percentile(&s.latencies_ms, 0.95)
            )
        }),
    ];
    for (name, cell) in rows {
        out.push_str(&format!("{name:<width$}"));
        for m in 0..e.modes.len() {
            out.push_str(&format!("  {:<col$}", cell(m)));
        }
        out.push('\n');
    }
    if !e.bad_lines.is_empty() {
        out.push_str(&format!("\n{} data lines skipped:\n", e.bad_lines.len()));
        for b in &e.bad_lines {
            out.push_str(&format!("  line {}: {}\n", b.line, b.error));
        }
    }
    out
}
