//! The one compile-and-cache path of a request's constraint: what the request asked
//! ([`Surfaces`]) becomes its [`ConstraintSpec`] here, inside [`Runtime::start`], for
//! every API shape. API handlers only read their wire fields into `Surfaces`.
//!
//! A schema's model-independent form (the grammar IR) is kept by its compile key (the
//! schema, how it is read, what its extensions see), so a schema sent again is
//! compiled once; a refusal is kept the same way, so a client retrying a schema that
//! failed gets the same answer for a hash lookup. Compiles run on a blocking thread,
//! at most two at once, so a burst of huge grammars cannot take every core from
//! decoding. The vocabulary-specific automaton is cached per model
//! (`LoadedModel::constraints`).
//!
//! [`Runtime::start`]: crate::Runtime::start

use std::sync::Arc;

use crate::constraint::{ConstraintSpec, Gbnf, SchemaMemo, Surfaces};
use crate::error::Error;
use crate::settings::ConstraintSettings;

/// Bytes of compiles a resolver keeps unless told otherwise (`serve` gives it a
/// quarter of `-constraint-cache-mb`); the memo starts over when full.
pub const DEFAULT_MEMO_BYTES: usize = 64 << 20;

/// Compiles resolved at once.
const TURNS: usize = 2;

/// The runtime's constraint resolver (see the module docs).
pub struct Resolver {
    turns: tokio::sync::Semaphore,
    memo: Arc<SchemaMemo>,
    /// `serve -grammar-file`: the grammar of requests that bring no constraint.
    default_grammar: Option<Arc<Gbnf>>,
    /// The served lexicons and the compile budget (shared with compiles running on
    /// blocking threads).
    settings: Arc<ConstraintSettings>,
}

impl Resolver {
    /// A resolver with `default_grammar` for requests that ask for nothing, keeping
    /// [`DEFAULT_MEMO_BYTES`] of compiles.
    pub fn new(default_grammar: Option<Arc<Gbnf>>) -> Resolver {
        Resolver::with_memo_bytes(default_grammar, DEFAULT_MEMO_BYTES)
    }

    /// A resolver keeping at most `bytes` of compiles (grammar IR and refusals).
    pub fn with_memo_bytes(default_grammar: Option<Arc<Gbnf>>, bytes: usize) -> Resolver {
        Resolver {
            turns: tokio::sync::Semaphore::new(TURNS),
            memo: Arc::new(SchemaMemo::new(bytes)),
            default_grammar,
            settings: Arc::default(),
        }
    }

    /// The same resolver under `settings` (its lexicons, its compile budget).
    pub fn with_settings(self, settings: ConstraintSettings) -> Resolver {
        Resolver {
            settings: Arc::new(settings),
            ..self
        }
    }

    /// The lexicons this resolver serves and the budget it compiles under.
    pub fn settings(&self) -> &ConstraintSettings {
        &self.settings
    }

    /// The constraint a request asked for, checked and compiled (or taken from the
    /// memo); a request that asked for nothing gets the server's default grammar, if
    /// it has one. Offered tools have their say later, once the model's convention is
    /// known (`tools::plan`).
    pub async fn resolve(&self, asked: Surfaces) -> Result<ConstraintSpec, Error> {
        let spec = if asked.is_light() {
            asked.resolve_in(Some(&self.memo), &self.settings)?
        } else {
            let _turn = self
                .turns
                .acquire()
                .await
                .map_err(|_| Error::internal("the constraint compiler is closed"))?;
            let (memo, settings) = (self.memo.clone(), self.settings.clone());
            tokio::task::spawn_blocking(move || asked.resolve_in(Some(&memo), &settings))
                .await
                .map_err(|e| Error::internal(format!("compiling the constraint failed: {e}")))??
        };
        Ok(ConstraintSpec::decide(spec, self.default_grammar.as_ref()))
    }

    /// The figures of `/v1/stats`' `constraints` object.
    pub fn stats_json(&self) -> serde_json::Value {
        self.memo.stats_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asking(schema: serde_json::Value) -> Surfaces {
        let mut s = Surfaces::default();
        s.schema("response_format", &schema);
        s
    }

    /// A schema sent again is compiled once: the second request shares the first's
    /// IR, and the figures count one hit in two lookups. A refusal is kept too.
    #[tokio::test]
    async fn a_repeated_schema_is_compiled_once() {
        let r = Resolver::new(None);
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let ir = |spec: ConstraintSpec| match spec {
            ConstraintSpec::Schema(s) => s.grammar.clone(),
            other => panic!("{other:?}"),
        };
        let first = ir(r.resolve(asking(schema.clone())).await.unwrap());
        // Another request's input changes nothing for a schema without quotes.
        let mut again = asking(schema);
        again.input("another prompt".into());
        let second = ir(r.resolve(again).await.unwrap());
        assert!(Arc::ptr_eq(&first, &second), "the IR was compiled again");
        let other = ir(r.resolve(asking(json!({"type": "string"}))).await.unwrap());
        assert!(!Arc::ptr_eq(&first, &other));
        let stats = r.stats_json();
        assert_eq!(
            (
                stats["schema_lookups"].as_u64(),
                stats["schema_hits"].as_u64()
            ),
            (Some(3), Some(1))
        );

        let bad = json!({"type": "object", "properties": {"a": {"not": {}}}});
        let e1 = r.resolve(asking(bad.clone())).await.unwrap_err();
        let e2 = r.resolve(asking(bad)).await.unwrap_err();
        assert_eq!(e1.message, e2.message);
        assert_eq!(r.stats_json()["schema_hits"].as_u64(), Some(2));
    }

    /// The memo stays within its bytes: past them it starts over.
    #[tokio::test]
    async fn the_memo_keeps_within_its_bytes() {
        let schema = |i: usize| json!({"type": "object", "properties": {format!("k{i}"): {"type": "string", "pattern": "^[a-z]{3}$"}}});
        // The size of one compile, then a bound of three and a half of them.
        let probe = Resolver::new(None);
        probe.resolve(asking(schema(0))).await.unwrap();
        let one = probe.stats_json()["schema_bytes"].as_u64().unwrap() as usize;
        assert!(one > 100, "{one} bytes");
        let bound = one * 7 / 2;
        let r = Resolver::with_memo_bytes(None, bound);
        for i in 0..50 {
            r.resolve(asking(schema(i))).await.unwrap();
            let s = r.stats_json();
            assert!(s["schema_bytes"].as_u64().unwrap() as usize <= bound, "{s}");
            assert!(
                (1..=3).contains(&s["schemas_kept"].as_u64().unwrap()),
                "{s}"
            );
        }
        // A compile bigger than the whole bound is not kept at all.
        let tiny = Resolver::with_memo_bytes(None, 16);
        tiny.resolve(asking(schema(0))).await.unwrap();
        assert_eq!(tiny.stats_json()["schemas_kept"].as_u64(), Some(0));
    }

    /// A schema that quotes its input is compiled per input.
    #[tokio::test]
    async fn a_quoting_schema_is_kept_per_input() {
        let r = Resolver::new(None);
        let schema = json!({"type": "string", "x-llamay-quote": true});
        let with = |input: &str| {
            let mut s = asking(schema.clone());
            s.input(input.into());
            s
        };
        r.resolve(with("one text")).await.unwrap();
        r.resolve(with("another text")).await.unwrap();
        assert_eq!(r.stats_json()["schema_hits"].as_u64(), Some(0));
        r.resolve(with("one text")).await.unwrap();
        assert_eq!(r.stats_json()["schema_hits"].as_u64(), Some(1));
    }

    /// Nothing asked: the server's default grammar.
    #[tokio::test]
    async fn the_default_grammar_fills_an_empty_ask() {
        let g = crate::constraint::checked_grammar("test", "root ::= \"x\"").unwrap();
        let r = Resolver::new(Some(g));
        assert!(matches!(
            r.resolve(Surfaces::default()).await.unwrap(),
            ConstraintSpec::Grammar(_)
        ));
        assert!(matches!(
            Resolver::new(None)
                .resolve(Surfaces::default())
                .await
                .unwrap(),
            ConstraintSpec::None
        ));
    }
}
