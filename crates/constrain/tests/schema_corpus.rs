//! JSON Schema front-end over the shared corpus: counts and floors.

use std::collections::BTreeMap;
use std::path::PathBuf;

use llamay_constrain::{compile_schema, NotEnforced, SchemaError};
use serde_json::Value;

fn corpus_dir(name: &str) -> PathBuf {
    llamay_testdata::shared_dir().join("corpus").join(name)
}

fn load(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(corpus_dir(dir)).expect("corpus directory") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap();
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A refusal's reason class: the keyword plus the message with quoted parts removed.
fn reason(e: &SchemaError) -> String {
    let m = &e.message;
    let tail = if m.contains("cannot honour; send a schema without it") {
        "unsupported".to_string()
    } else {
        let after = m
            .split_once(&format!("\"{}\" ", e.keyword))
            .map_or(m.as_str(), |(_, t)| t);
        after
            .split(['"', ',', ':', '('])
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let tail: String = tail.chars().filter(|c| !c.is_ascii_digit()).collect();
    format!(
        "{}: {}",
        e.keyword,
        tail.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

#[test]
fn jsonschemabench_acceptance() {
    let files = load("jsonschemabench");
    assert!(files.len() > 1000, "corpus has {} files", files.len());
    let mut ok = 0usize;
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut not_enforced: BTreeMap<String, usize> = BTreeMap::new();
    for (name, file) in &files {
        let schema = &file["schema"];
        match compile_schema(schema) {
            Ok(c) => {
                ok += 1;
                let mut kws: Vec<&str> = c
                    .report
                    .entries
                    .iter()
                    .map(|e| e.keyword.as_str())
                    .collect();
                kws.sort();
                kws.dedup();
                for k in kws {
                    *not_enforced.entry(k.to_string()).or_default() += 1;
                }
            }
            Err(e) => {
                if std::env::var("SCHEMA_CORPUS_VERBOSE").is_ok() {
                    eprintln!("{name}: {}", e.message);
                }
                *reasons.entry(reason(&e)).or_default() += 1;
            }
        }
    }
    let total = files.len();
    let rate = ok as f64 / total as f64;
    println!(
        "jsonschemabench: {ok}/{total} compile ({:.1}%)",
        100.0 * rate
    );
    let mut by_count: Vec<_> = reasons.into_iter().collect();
    by_count.sort_by_key(|e| std::cmp::Reverse(e.1));
    for (r, n) in &by_count {
        println!("  refused {n:5}  {r}");
    }
    let mut ne: Vec<_> = not_enforced.into_iter().collect();
    ne.sort_by_key(|e| std::cmp::Reverse(e.1));
    for (k, n) in ne.iter().take(25) {
        println!("  schemas with not-enforced {k}: {n}");
    }
    assert!(
        rate >= FLOOR,
        "acceptance {rate:.3} fell below the measured floor {FLOOR}"
    );
}

/// Measured 1695/1962 = 86.4% (llguidance: ~86%), minus a margin.
const FLOOR: f64 = 0.85;

/// The tree keeps every valid corpus instance, except those with keys a closed
/// object does not declare (llamay closes objects by default, on purpose), and
/// rejects every invalid instance of a schema whose keywords are all enforced.
#[test]
fn jsonschemabench_instances_against_the_tree() {
    use llamay_constrain::SchemaMismatch;
    let mut valid = [0usize; 4]; // fits, cut by closed object, by inferred type, otherwise
    let mut invalid = [0usize; 3]; // rejected, accepted, not judged (keywords not enforced)
    let mut wrong = Vec::new();
    for (name, file) in load("jsonschemabench") {
        let Ok(c) = compile_schema(&file["schema"]) else {
            continue;
        };
        // Unknown keys mean nothing to any validator; ignored keywords, bounds over
        // the limit and oneOf's exclusivity (reported where not enforced) do.
        let judged = c
            .report
            .entries
            .iter()
            .all(|e| e.kind == NotEnforced::Unknown);
        for t in file["tests"].as_array().into_iter().flatten() {
            let data = &t["data"];
            let fits = c.check(data);
            if t["valid"] == Value::Bool(true) {
                match fits {
                    Ok(()) => valid[0] += 1,
                    Err(SchemaMismatch::ExtraKey(_)) => valid[1] += 1,
                    Err(SchemaMismatch::WrongType(why)) => {
                        valid[2] += 1;
                        println!("  {name}: valid instance cut by an inferred type: {why}");
                    }
                    Err(SchemaMismatch::Other(why)) => {
                        valid[3] += 1;
                        wrong.push(format!("{name}: valid instance rejected: {why}"));
                    }
                }
            } else if !judged {
                invalid[2] += 1;
            } else if fits.is_err() {
                invalid[0] += 1;
            } else {
                invalid[1] += 1;
                let text: String = data.to_string().chars().take(300).collect();
                wrong.push(format!("{name}: invalid instance accepted: {text}"));
            }
        }
    }
    println!(
        "valid instances: {} fit, {} cut by a closed object and {} by an inferred type \
         (both by design), {} cut otherwise",
        valid[0], valid[1], valid[2], valid[3]
    );
    println!(
        "invalid instances: {} rejected, {} accepted, {} not judged (schema not fully enforced)",
        invalid[0], invalid[1], invalid[2]
    );
    for w in wrong.iter().take(40) {
        println!("  {w}");
    }
    assert!(
        valid[0] > 2000 && invalid[0] > 2000,
        "too few instances checked"
    );
    // Measured: 4 (two schemas whose untyped `properties` hold strings).
    assert!(
        valid[2] <= 4,
        "{} valid instances cut by inferred types",
        valid[2]
    );
    assert!(wrong.is_empty(), "{} instances judged wrongly", wrong.len());
}

/// Writes a JSON value in a spelling llamay's number rules accept: integral numbers
/// as digits, others as plain decimals without exponent; strings and keys as
/// serde_json escapes them; no whitespace.
fn spell(v: &Value, out: &mut String) {
    use llamay_constrain::internals::Decimal;
    match v {
        Value::Number(n) => match Decimal::from_json(n) {
            Some(d) => out.push_str(&d.to_string()),
            None => out.push_str(&n.to_string()),
        },
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                spell(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                spell(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Every schema that compiles lowers and builds an automaton; every valid instance
/// the tree keeps walks through it byte by byte, and every invalid instance the
/// tree rejects (of a fully enforced schema) is refused by it.
#[test]
fn jsonschemabench_instances_on_the_automaton() {
    use llamay_constrain::Constraint;
    use llamay_constrain::Vocabulary;
    use std::sync::Arc;
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    toks.push(b"</s>".to_vec());
    let vocab = Arc::new(Vocabulary::new(toks, &[256], &[]));
    let (mut compiled, mut lowered) = (0usize, 0usize);
    let mut lower_fail: BTreeMap<String, usize> = BTreeMap::new();
    let (mut walked, mut valid_cut, mut rejected, mut invalid_walked) =
        (0usize, 0usize, 0usize, 0usize);
    let mut wrong = Vec::new();
    let started = std::time::Instant::now();
    for (name, file) in load("jsonschemabench") {
        let schema = &file["schema"];
        let Ok(tree) = compile_schema(schema) else {
            continue;
        };
        compiled += 1;
        let t0 = std::time::Instant::now();
        let built = Constraint::from_schema(schema, vocab.clone());
        if std::env::var("SCHEMA_CORPUS_VERBOSE").is_ok() && t0.elapsed().as_millis() > 200 {
            eprintln!("slow build {name}: {:?}", t0.elapsed());
        }
        let c = match built {
            Ok((c, _)) => c,
            Err(e) => {
                println!("  {name}: lowering refused: {}", e.message);
                *lower_fail.entry(reason(&e)).or_default() += 1;
                continue;
            }
        };
        lowered += 1;
        let judged = tree
            .report
            .entries
            .iter()
            .all(|e| e.kind == NotEnforced::Unknown);
        let t1 = std::time::Instant::now();
        for t in file["tests"].as_array().into_iter().flatten() {
            if std::env::var("SCHEMA_CORPUS_VERBOSE").is_ok() && t1.elapsed().as_millis() > 500 {
                eprintln!("slow feed {name}: {:?}", t1.elapsed());
            }
            let data = &t["data"];
            let fits = tree.check(data).is_ok();
            let valid = t["valid"] == Value::Bool(true);
            if !(fits || (!valid && judged)) {
                continue;
            }
            let mut text = String::new();
            spell(data, &mut text);
            let mut m = c.matcher();
            let ok = text.bytes().all(|b| m.commit_bytes(&[b]).is_ok()) && m.is_accepting();
            let short: String = text.chars().take(200).collect();
            match (fits, ok) {
                (true, true) => walked += 1,
                (true, false) => {
                    valid_cut += 1;
                    wrong.push(format!("{name}: fitting instance cut off: {short}"));
                }
                (false, false) => rejected += 1,
                (false, true) => {
                    invalid_walked += 1;
                    wrong.push(format!("{name}: invalid instance accepted: {short}"));
                }
            }
        }
    }
    println!(
        "lowered {lowered}/{compiled} compiled schemas in {:?}",
        started.elapsed()
    );
    for (r, n) in &lower_fail {
        println!("  lowering refused {n:4}  {r}");
    }
    println!(
        "instances fed byte by byte: {walked} fitting accepted, {valid_cut} fitting cut off, \
         {rejected} invalid rejected, {invalid_walked} invalid accepted"
    );
    for w in wrong.iter().take(30) {
        println!("  {w}");
    }
    assert!(walked > 2000 && rejected > 2000, "too few instances fed");
    assert!(
        wrong.is_empty(),
        "{} instances judged wrongly by the automaton",
        wrong.len()
    );
    assert!(
        lowered as f64 >= 0.99 * compiled as f64,
        "{lowered}/{compiled} lowered"
    );
}
