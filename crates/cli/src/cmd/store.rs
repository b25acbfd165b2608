//! The model-store commands: `llamay pull | list | cp | rm | import | prune`, the
//! store half of `show`, and `ensure_model` for `run`/`serve` (pull a missing
//! model). Pulls typed here may reach private addresses: the user named them.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use llamay_store::{
    blocking, ModelConfig, ModelName, ModelRef, Progress, PullEvent, PullOptions, ResolvedModel,
    Store, StoredModel,
};

/// Where to pull from: shared by `pull` and by `run`/`serve` when they pull.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RegistryArgs {
    /// Registry base URL used instead of the name's host (else $LLAMAY_REGISTRY)
    #[arg(long, value_name = "URL")]
    pub registry: Option<String>,
    /// Allow plain-http registries and unverified TLS certificates
    #[arg(long)]
    pub insecure: bool,
}

impl RegistryArgs {
    /// The store's pull options for these flags.
    pub fn options(&self) -> PullOptions {
        PullOptions {
            registry: self.registry.clone(),
            insecure: self.insecure,
            allow_private: true,
            ..PullOptions::default()
        }
    }
}

/// `llamay pull NAME|URL`
#[derive(clap::Args, Debug, Clone)]
pub struct PullArgs {
    /// Model name ([host/][namespace/]model[:tag]) or an https URL of a .gguf file
    pub model: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Let a URL pull replace a different model already stored under its name
    #[arg(long)]
    pub replace: bool,
}

/// `llamay list`
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ListArgs {}

/// `llamay cp SRC DST`
#[derive(clap::Args, Debug, Clone)]
pub struct CpArgs {
    pub source: String,
    pub destination: String,
}

/// `llamay rm NAME...`
#[derive(clap::Args, Debug, Clone)]
pub struct RmArgs {
    #[arg(required = true)]
    pub names: Vec<String>,
}

/// `llamay prune`
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PruneArgs {}

/// `llamay import FILE.gguf [NAME]`
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The .gguf file to add
    pub file: PathBuf,
    /// The name to give it (default: the file name without .gguf)
    pub name: Option<String>,
}

/// Opens the store the environment names ($LLAMAY_MODELS, $OLLAMA_MODELS).
pub fn open_store() -> Result<Store> {
    Ok(Store::from_env()?)
}

/// `llamay pull`.
pub fn run_pull(args: &PullArgs) -> Result<()> {
    let store = open_store()?;
    let progress = TermProgress::new();
    let opts = PullOptions {
        replace: args.replace,
        ..args.registry.options()
    };
    let report = match ModelRef::parse(&args.model)? {
        ModelRef::Url(url) => blocking::pull_url(&store, &url, &opts, &progress)?,
        ModelRef::Name(name) => blocking::pull(&store, &name, &opts, &progress)?,
        ModelRef::File(path) => anyhow::bail!(
            "{} is a local file: use `llamay import {} NAME`",
            path.display(),
            path.display()
        ),
    };
    progress.finish();
    eprintln!("pulled {}", report.name.short());
    Ok(())
}

/// Resolves a model for `run`/`serve`, pulling it first (with progress on stderr)
/// when it is a name or URL not in the store.
pub fn ensure_model(model: &str, registry: &RegistryArgs) -> Result<ResolvedModel> {
    let store = open_store()?;
    let progress = TermProgress::new();
    let r = blocking::ensure(&store, model, &registry.options(), &progress);
    progress.finish();
    Ok(r?)
}

/// `llamay list`: NAME, ID, SIZE, QUANT, MODIFIED, SOURCE.
pub fn run_list(_args: &ListArgs) -> Result<()> {
    let store = open_store()?;
    let entries = store.list()?;
    let now = SystemTime::now();
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|e| {
            [
                e.name.short(),
                e.digest.hex()[..12].to_string(),
                format_size(e.size),
                e.file_type()
                    .map(str::to_string)
                    .or_else(|| gguf_file_type(&store, &e.name))
                    .unwrap_or_else(|| "-".to_string()),
                format_age(now, e.modified),
                e.source.label().to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "ID", "SIZE", "QUANT", "MODIFIED", "SOURCE"].map(String::from);
    let mut out = std::io::stdout().lock();
    write_table(&mut out, &header, &rows)?;
    Ok(())
}

/// `llamay cp`.
pub fn run_cp(args: &CpArgs) -> Result<()> {
    let store = open_store()?;
    let src = ModelName::parse(&args.source)?;
    let dst = ModelName::parse(&args.destination)?;
    store.copy(&src, &dst)?;
    println!("copied '{}' to '{}'", src.short(), dst.short());
    Ok(())
}

/// `llamay rm`.
pub fn run_rm(args: &RmArgs) -> Result<()> {
    let store = open_store()?;
    for n in &args.names {
        let name = ModelName::parse(n)?;
        let report = store.remove(&name)?;
        println!(
            "deleted '{}' ({} blob(s) freed, {} still used by other models)",
            name.short(),
            report.deleted_blobs.len(),
            report.kept_blobs.len()
        );
        if !report.deferred_blobs.is_empty() {
            println!(
                "  {} unused blob(s) kept while a pull writes to the store; `llamay prune` frees them later",
                report.deferred_blobs.len()
            );
        }
    }
    Ok(())
}

/// `llamay prune`: deletes the blobs no model uses and what interrupted pulls
/// left, after the pulls in progress finish.
pub fn run_prune(_args: &PruneArgs) -> Result<()> {
    let store = open_store()?;
    let report = match store.try_prune()? {
        Some(r) => r,
        None => {
            eprintln!("waiting for the pulls in progress to finish...");
            store.prune()?
        }
    };
    println!(
        "pruned {} unused blob(s) and {} leftover file(s), {} freed",
        report.deleted_blobs.len(),
        report.deleted_files.len(),
        format_size(report.freed_bytes)
    );
    Ok(())
}

/// `llamay import`.
pub fn run_import(args: &ImportArgs) -> Result<()> {
    let store = open_store()?;
    let name = match &args.name {
        Some(n) => ModelName::parse(n)?,
        None => {
            let stem = args
                .file
                .file_stem()
                .and_then(|s| s.to_str())
                .with_context(|| format!("{} has no usable file name", args.file.display()))?;
            ModelName::from_file_stem(stem)?
        }
    };
    let digest = store.import(&args.file, &name, &config_from_gguf(&args.file))?;
    println!(
        "imported {} as '{}' ({digest})",
        args.file.display(),
        name.short()
    );
    Ok(())
}

/// The store's facts about a model, for `show` (which adds the GGUF's own facts).
pub fn store_facts(name: &str) -> Result<StoredModel> {
    let store = open_store()?;
    Ok(store.show(&ModelName::parse(name)?)?)
}

/// Prints the store facts of `show`.
pub fn print_store_facts(f: &StoredModel, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "  name        {}", f.name)?;
    writeln!(out, "  store       {}", f.source.label())?;
    writeln!(out, "  manifest    {}", f.manifest_path.display())?;
    writeln!(out, "  digest      {}", f.manifest_digest)?;
    if let Some(ft) = f.config.as_ref().and_then(|c| c.file_type.as_deref()) {
        writeln!(out, "  quantization {ft}")?;
    }
    writeln!(out, "  layers")?;
    for b in &f.blobs {
        let kind = if b.layer.media_type == llamay_store::MEDIA_CONFIG {
            "config"
        } else {
            b.layer.media_type.rsplit('.').next().unwrap_or("?")
        };
        let path = b
            .path
            .as_ref()
            .map_or_else(|| "(missing)".to_string(), |p| p.display().to_string());
        writeln!(
            out,
            "    {kind:<10} {:>10}  {}  {path}",
            format_size(b.layer.size),
            b.layer.digest
        )?;
    }
    Ok(())
}

pub fn write_table<const N: usize>(
    out: &mut impl Write,
    header: &[String; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths = header.clone().map(|h| h.chars().count());
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in std::iter::once(header).chain(rows) {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("    ").trim_end())?;
    }
    Ok(())
}

/// Sizes as Ollama prints them: decimal units, `397 MB`, `1.6 GB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit < UNITS.len() - 1 {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `5 seconds ago`, `3 days ago`, ... as `list` prints the modification time.
pub fn format_age(now: SystemTime, then: SystemTime) -> String {
    let secs = now.duration_since(then).unwrap_or(Duration::ZERO).as_secs();
    format!("{} ago", span(secs))
}

/// `4 minutes from now`, as `ps` prints when a model is unloaded.
pub fn format_until(now: SystemTime, then: SystemTime) -> String {
    match then.duration_since(now) {
        Ok(d) => format!("{} from now", span(d.as_secs())),
        Err(_) => "now".to_string(),
    }
}

/// `1 second`, `5 minutes`, `3 days`: the largest unit that fits.
fn span(secs: u64) -> String {
    let (n, unit) = match secs {
        s if s < 60 => (s, "second"),
        s if s < 3600 => (s / 60, "minute"),
        s if s < 86_400 => (s / 3600, "hour"),
        s if s < 7 * 86_400 => (s / 86_400, "day"),
        s if s < 30 * 86_400 => (s / (7 * 86_400), "week"),
        s if s < 365 * 86_400 => (s / (30 * 86_400), "month"),
        s => (s / (365 * 86_400), "year"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// Renders pull events on stderr: bars with speed and ETA on a terminal, plain
/// lines (at most one every few seconds per blob) otherwise.
pub struct TermProgress {
    multi: Option<MultiProgress>,
    bars: Mutex<HashMap<String, ProgressBar>>,
    last_line: Mutex<HashMap<String, Instant>>,
}

impl TermProgress {
    /// Bars when stderr is a terminal, else plain lines.
    pub fn new() -> TermProgress {
        TermProgress {
            multi: std::io::stderr().is_terminal().then(MultiProgress::new),
            bars: Mutex::new(HashMap::new()),
            last_line: Mutex::new(HashMap::new()),
        }
    }

    /// Finishes the bars still drawn.
    pub fn finish(&self) {
        for (_, bar) in self.bars.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            bar.finish();
        }
    }

    fn bytes(&self, key: &str, label: String, total: u64, completed: u64) {
        match &self.multi {
            Some(multi) => {
                let mut bars = self.bars.lock().unwrap_or_else(|e| e.into_inner());
                let bar = bars.entry(key.to_string()).or_insert_with(|| {
                    let style = ProgressStyle::with_template(
                        "{msg} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
                    )
                    .expect("a valid template")
                    .progress_chars("=> ");
                    let bar = multi.add(ProgressBar::new(total).with_style(style));
                    bar.set_message(label);
                    bar
                });
                bar.set_position(completed);
                if completed >= total {
                    bar.finish();
                }
            }
            None => {
                let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
                let due = last
                    .get(key)
                    .is_none_or(|t| t.elapsed() >= Duration::from_secs(5));
                if due || completed >= total {
                    last.insert(key.to_string(), Instant::now());
                    let pct = (completed * 100).checked_div(total).unwrap_or(100);
                    eprintln!(
                        "{label}: {pct}% ({}/{})",
                        format_size(completed),
                        format_size(total)
                    );
                }
            }
        }
    }
}

impl Default for TermProgress {
    fn default() -> Self {
        TermProgress::new()
    }
}

impl Progress for TermProgress {
    fn on_event(&self, event: PullEvent) {
        match event {
            PullEvent::Status(s) => match &self.multi {
                Some(m) => {
                    let _ = m.println(&s);
                }
                None => eprintln!("{s}"),
            },
            PullEvent::Blob {
                digest,
                total,
                completed,
            } => self.bytes(
                digest.hex(),
                format!("pulling {}", digest.short()),
                total,
                completed,
            ),
            PullEvent::File {
                file_name,
                total,
                completed,
            } => self.bytes(&file_name, format!("pulling {file_name}"), total, completed),
        }
    }
}

/// The quantization named in a stored model's GGUF header (for models whose config
/// blob does not say, such as imported ones).
fn gguf_file_type(store: &Store, name: &ModelName) -> Option<String> {
    let resolved = store.resolve_name(name).ok()?;
    let facts = gguf_facts(&resolved.gguf)?;
    facts.file_type
}

fn gguf_facts(path: &std::path::Path) -> Option<llamay_engine::ModelFacts> {
    let f = llamay_engine::GgufFile::open(path).ok()?;
    llamay_engine::ModelFacts::from_gguf(&f).ok()
}

/// The config an imported model gets, filled from its GGUF header the way Ollama
/// fills it for models it creates (format, family, size, quantization).
fn config_from_gguf(path: &std::path::Path) -> ModelConfig {
    let mut config = ModelConfig::default();
    if let Some(facts) = gguf_facts(path) {
        config.model_format = Some("gguf".into());
        config.model_family = Some(facts.architecture.clone());
        config.model_families = Some(vec![facts.architecture.clone()]);
        config.model_type = Some(crate::units::human_count(facts.parameters));
        config.file_type = facts.file_type;
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages_read_like_ollamas() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(999), "999 B");
        assert_eq!(format_size(828_896), "829 KB");
        assert_eq!(format_size(1_600_000_000), "1.6 GB");
        let now = SystemTime::now();
        assert_eq!(format_age(now, now), "0 seconds ago");
        assert_eq!(
            format_age(now, now - Duration::from_secs(3600)),
            "1 hour ago"
        );
        assert_eq!(
            format_age(now, now - Duration::from_secs(3 * 86_400)),
            "3 days ago"
        );
        assert_eq!(
            format_age(now, now + Duration::from_secs(10)),
            "0 seconds ago"
        );
        assert_eq!(
            format_until(now, now + Duration::from_secs(4 * 60 + 30)),
            "4 minutes from now"
        );
        assert_eq!(format_until(now, now - Duration::from_secs(1)), "now");
    }

    #[test]
    fn table_columns_line_up() {
        let header = ["A", "BB", "C", "D", "E", "F"].map(String::from);
        let rows = [["long-name", "x", "y", "z", "w", "v"].map(String::from)];
        let mut out = Vec::new();
        write_table(&mut out, &header, &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].find("BB"), lines[1].find('x'));
    }
}
