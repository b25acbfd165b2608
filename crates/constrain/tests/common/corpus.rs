//! The shared schema corpus (`shared/corpus`): jsonschemabench files (schema + tests) and
//! the seed schemas with their instances, in one shape.
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;

/// One corpus schema with its test documents (`(data, valid)`).
pub struct Case {
    pub name: String,
    pub schema: Value,
    pub tests: Vec<(Value, bool)>,
}

fn dir(name: &str) -> PathBuf {
    llamay_testdata::shared_dir().join("corpus").join(name)
}

fn sorted_files(d: &PathBuf, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .expect("corpus directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn read(p: &PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every corpus schema: the seeds first, then jsonschemabench in file-name order.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for p in sorted_files(&dir("seed"), ".schema.json") {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let inst = PathBuf::from(
            p.to_string_lossy()
                .replace(".schema.json", ".instances.json"),
        );
        let tests = match inst.exists() {
            true => read(&inst)
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v.clone(), true))
                .collect(),
            false => Vec::new(),
        };
        out.push(Case {
            name: format!("seed/{name}"),
            schema: read(&p),
            tests,
        });
    }
    for p in sorted_files(&dir("jsonschemabench"), ".json") {
        let mut file = read(&p);
        let tests = file["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| (t["data"].clone(), t["valid"] == Value::Bool(true)))
            .collect();
        out.push(Case {
            name: p.file_name().unwrap().to_string_lossy().into_owned(),
            schema: file["schema"].take(),
            tests,
        });
    }
    out
}

/// Whether `v` mentions `key` anywhere.
pub fn mentions(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, v)| k == key || mentions(v, key)),
        Value::Array(a) => a.iter().any(|v| mentions(v, key)),
        _ => false,
    }
}

/// Whether every keyword of the schema is enforced, so a validator's verdict must match
/// the matcher's: nothing reported but unknown keys (they mean nothing to a validator
/// either). A `oneOf` whose exclusivity is not enforced is reported.
pub fn judged(report: &llamay_constrain::SchemaReport) -> bool {
    use llamay_constrain::NotEnforced;
    report
        .entries
        .iter()
        .all(|e| e.kind == NotEnforced::Unknown)
}

/// Whether an environment variable asks for the whole corpus rather than the CI sample.
pub fn everything(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "all")
}

/// An environment variable as a number, or `default`.
pub fn env_usize(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
