//! `-html`: one self-contained page (inline CSS and SVG, no script, nothing fetched):
//! a bar chart per field (accuracy, invented and missed rates per mode), the per-mode
//! rates, and the worst documents with their outputs side by side.

use std::fmt::Write;

use super::summary::{percentile, rate, Evaluation};

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const COLOURS: [&str; 2] = ["#2b6cb0", "#c05621"];

/// One field's chart: three groups (accuracy, invented, missed), a bar per mode.
fn chart(e: &Evaluation, f: usize) -> String {
    let (w, h, top, left) = (360.0, 170.0, 20.0, 40.0);
    let plot_h = h - top - 30.0;
    let groups = ["accuracy", "invented", "missed"];
    let mut svg = String::new();
    let name = escape(&e.fields[f].name);
    let _ = write!(
        svg,
        r#"<svg class="field-chart" data-field="{name}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{name}">"#
    );
    for k in 0..=4 {
        let y = top + plot_h * (1.0 - k as f64 / 4.0);
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{w}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="10" text-anchor="end">{}%</text>"##,
            left - 4.0,
            y + 3.0,
            k * 25
        );
    }
    let group_w = (w - left) / groups.len() as f64;
    let bar_w = (group_w - 20.0) / e.modes.len().max(1) as f64;
    for (g, label) in groups.iter().enumerate() {
        let x0 = left + g as f64 * group_w + 10.0;
        for m in 0..e.modes.len() {
            let s = e.field_stats(m, f);
            let v = match g {
                0 => rate(s.correct, s.n),
                1 => rate(s.invented, s.null_expected),
                _ => rate(s.missed, s.value_expected),
            };
            let bh = plot_h * v;
            let x = x0 + m as f64 * bar_w;
            let _ = write!(
                svg,
                r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{} {label}: {:.1}%</title></rect>"#,
                top + plot_h - bh,
                bar_w - 2.0,
                COLOURS[m % 2],
                e.modes[m].as_str(),
                100.0 * v
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle">{label}</text>"#,
            x0 + (group_w - 20.0) / 2.0,
            h - 10.0
        );
    }
    svg.push_str("</svg>");
    svg
}

fn pretty(v: &Option<serde_json::Value>, text: &str) -> String {
    match v {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
        None => format!("(did not parse)\n{text}"),
    }
}

/// The page.
pub fn render(e: &Evaluation) -> String {
    let mut p = String::new();
    p.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(p, "<title>llamay eval · {}</title>", escape(&e.model));
    p.push_str(
        "<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}\
         .charts{display:flex;flex-wrap:wrap;gap:1.5em}.chart{border:1px solid #ddd;padding:.5em}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;\
         vertical-align:top;text-align:left}pre{white-space:pre-wrap;margin:0;max-width:32em}\
         .legend span{display:inline-block;width:1em;height:1em;margin:0 .3em 0 1em;vertical-align:middle}\
         .wrong{background:#fde8e8}.ok{background:#e6f4ea}</style></head><body>",
    );
    let _ = write!(
        p,
        "<h1>llamay eval</h1><p>{} documents · model <code>{}</code> · temperature {}</p>",
        e.docs.len(),
        escape(&e.model),
        e.temperature
    );
    p.push_str("<p class=\"legend\">");
    for (m, mode) in e.modes.iter().enumerate() {
        let _ = write!(
            p,
            "<span style=\"background:{}\"></span>{}",
            COLOURS[m % 2],
            mode.as_str()
        );
    }
    p.push_str("</p><h2>Fields</h2><div class=\"charts\">");
    for f in 0..e.fields.len() {
        let _ = write!(
            p,
            "<div class=\"chart\"><h3>{}</h3>{}</div>",
            escape(&e.fields[f].name),
            chart(e, f)
        );
    }
    p.push_str("</div><h2>Rates</h2><table><tr><th></th>");
    for m in &e.modes {
        let _ = write!(p, "<th>{}</th>", m.as_str());
    }
    p.push_str("</tr>");
    let row = |p: &mut String, name: &str, cell: &dyn Fn(usize) -> String| {
        let _ = write!(p, "<tr><th>{name}</th>");
        for m in 0..e.modes.len() {
            let _ = write!(p, "<td>{}</td>", cell(m));
        }
        p.push_str("</tr>");
    };
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    row(&mut p, "parse rate", &|m| {
        let s = e.mode_stats(m);
        pct(rate(s.parsed, s.docs))
    });
    row(&mut p, "schema-valid rate", &|m| {
        let s = e.mode_stats(m);
        pct(rate(s.valid, s.docs))
    });
    row(&mut p, "quotes grounded", &|m| {
        let s = e.mode_stats(m);
        format!("{} / {}", s.grounded, s.quoted)
    });
    for (f, field) in e.fields.iter().enumerate() {
        row(
            &mut p,
            &format!("{} invented / missed", escape(&field.name)),
            &|m| {
                let s = e.field_stats(m, f);
                format!(
                    "{} of {} · {} of {}",
                    s.invented, s.null_expected, s.missed, s.value_expected
                )
            },
        );
    }
    row(&mut p, "latency p50 / p95", &|m| {
        let s = e.mode_stats(m);
        format!(
            "{:.0} / {:.0} ms",
            percentile(&s.latencies_ms, 0.5),
            percentile(&s.latencies_ms, 0.95)
        )
    });
    p.push_str("</table><h2>Worst documents</h2><table><tr><th>document</th><th>expected</th>");
    for m in &e.modes {
        let _ = write!(p, "<th>{}</th>", m.as_str());
    }
    p.push_str("</tr>");
    for d in e.worst(8) {
        let _ = write!(
            p,
            "<tr class=\"doc\"><td><b>{}</b><pre>{}</pre></td><td><pre>{}</pre></td>",
            escape(&d.case.id),
            escape(&d.case.input),
            escape(&serde_json::to_string_pretty(&d.case.expected).unwrap_or_default())
        );
        for r in &d.runs {
            let class = if r.score() == 1.0 { "ok" } else { "wrong" };
            let body = match &r.error {
                Some(err) => format!("error: {err}"),
                None => pretty(&r.value, &r.text),
            };
            let _ = write!(
                p,
                "<td class=\"{class}\"><pre>{}</pre><small>{:.0}% of fields</small></td>",
                escape(&body),
                100.0 * r.score()
            );
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
    if !e.bad_lines.is_empty() {
        p.push_str("<h2>Skipped data lines</h2><ul>");
        for b in &e.bad_lines {
            let _ = write!(p, "<li>line {}: {}</li>", b.line, escape(&b.error));
        }
        p.push_str("</ul>");
    }
    p.push_str("</body></html>\n");
    p
}
