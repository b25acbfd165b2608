//! `-source [NAME=]FILE`: the texts `x-llamay-quote` values must be spans of.

use std::collections::BTreeMap;
use std::path::Path;

use super::UsageError;

/// Reads each `NAME=FILE` (or `FILE`, named by its file stem) into a source map.
pub fn read_sources(args: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for a in args {
        let (name, path) = match a.split_once('=') {
            Some((n, p)) if !n.is_empty() && !n.contains('/') => (n.to_string(), p),
            _ => {
                let stem = Path::new(a).file_stem().and_then(|s| s.to_str());
                (stem.unwrap_or(a).to_string(), a.as_str())
            }
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("cannot read source {path}: {e}")))?;
        if out.insert(name.clone(), text).is_some() {
            return Err(UsageError(format!("two sources are named {name:?}")).into());
        }
    }
    Ok(out)
}
