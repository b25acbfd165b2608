//! `GET /v1/catalog/models`: per served or stored model, what it can do and on which
//! endpoints (the hosted provider's catalog, seed 004): output formats, tool calling,
//! reasoning controls, context length, and the schema limits every endpoint holds
//! schemas to. A request for what an entry says the model cannot do is refused with a
//! 400 naming the capability (the runtime checks it before any inference).

use std::collections::HashSet;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::http::{json_response, AppState};
use llamay_runtime::{Capabilities, ConstraintSettings, ModelSpec};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/catalog/models", get(catalog))
}

async fn catalog(State(st): State<AppState>) -> Response {
    let registry = &st.runtime.registry;
    let mut specs: Vec<ModelSpec> = registry.default_model().cloned().into_iter().collect();
    if let Some(store) = registry.store() {
        for e in store.list().unwrap_or_default() {
            if let Ok(spec) = registry.resolve(&e.name.short()) {
                specs.push(spec);
            }
        }
    }
    let loaded: HashSet<String> = registry
        .loaded()
        .iter()
        .map(|i| i.spec.name.clone())
        .collect();
    let mut seen = HashSet::new();
    let specs: Vec<ModelSpec> = specs
        .into_iter()
        .filter(|s| seen.insert(s.name.clone()))
        .collect();
    let data = tokio::task::spawn_blocking(move || {
        specs
            .iter()
            .filter_map(|s| {
                let caps = Capabilities::of_model(&s.path, s.projector.as_deref()).ok()?;
                Some(entry(
                    s,
                    &caps,
                    loaded.contains(&s.name),
                    st.runtime.constraints.settings(),
                ))
            })
            .collect::<Vec<Value>>()
    })
    .await
    .unwrap_or_default();
    json_response(StatusCode::OK, json!({"object": "list", "data": data}))
}

/// One model's entry.
pub(crate) fn entry(
    spec: &ModelSpec,
    caps: &Capabilities,
    loaded: bool,
    settings: &ConstraintSettings,
) -> Value {
    let limits = schema_limits();
    let gen = caps.completion();
    let tools = caps.tools();
    // What each generation endpoint accepts as an output format.
    let formats = |list: &[&str]| -> Value {
        if gen {
            json!(list)
        } else {
            json!([])
        }
    };
    let tool_controls = json!({
        "tool_calling": tools,
        "parallel_tool_calls": tools,
        "strict_tools": tools,
        "tool_choice": if tools { json!(["auto", "none", "required", "named"]) } else { json!([]) },
    });
    let mut endpoints = json!({
        "/v1/chat/completions": {"formats": formats(&["text", "json_object", "json_schema", "grammar"])},
        "/v1/responses": {"formats": formats(&["text", "json_object", "json_schema", "grammar"])},
        "/v1/messages": {"formats": formats(&["text", "json_schema", "grammar"])},
        "/api/chat": {"formats": formats(&["text", "json", "json_schema", "grammar"])},
        "/v1/completions": {"formats": formats(&["text", "json_object", "json_schema", "grammar"]), "tool_calling": false},
        "/api/generate": {"formats": formats(&["text", "json", "json_schema", "grammar"]), "tool_calling": false},
    });
    for path in [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/api/chat",
    ] {
        if let (Some(e), Some(t)) = (endpoints[path].as_object_mut(), tool_controls.as_object()) {
            e.extend(t.clone());
        }
    }
    json!({
        "id": spec.name,
        "object": "model",
        "loaded": loaded,
        "architecture": caps.architecture,
        "context_length": caps.context_length,
        "capabilities": caps.ollama_names(),
        "endpoints": endpoints,
        "tool_calling": tools,
        "parallel_tool_calls": tools,
        "strict_tools": tools,
        "reasoning": caps.thinking.map(|c| json!({
            "convention": c.family, "open": c.open, "close": c.close,
        })),
        "reasoning_controls": {
            "thinking_toggle": caps.thinking_toggle(),
            "budget": caps.thinking.is_some(),
            // `none` turns thinking off: only where it has a toggle.
            "effort": match (caps.thinking.is_some(), caps.thinking_toggle()) {
                (true, true) => json!(["none", "minimal", "low", "medium", "high"]),
                (true, false) => json!(["minimal", "low", "medium", "high"]),
                (false, _) => json!([]),
            },
        },
        "embedding": caps.embedding,
        "rerank": false,
        "schema_limits": limits,
        "lexicons": settings.lexicons()
            .values()
            .map(|l| json!({"name": l.name(), "terms": l.len()}))
            .collect::<Vec<Value>>(),
        "constraints": {
            "exact": ["llamay_regex", "llamay_choice", "llamay_lexicon", "guided_regex", "guided_choice", "guided_json", "guided_grammar"],
            "options": {"additional_properties": ["closed", "open"]},
            "formats": llamay_constrain_formats(),
            "schema_extensions": ["x-llamay-quote", "x-llamay-lexicon"],
            // A quote's value must be a span of its source (docs/quote.md).
            "quote": {
                "types": ["string", "number", "integer"],
                "sources": ["input", "llamay_sources"],
                "normalize": ["none", "whitespace", "case"],
                "source_bytes": llamay_runtime::MAX_QUOTE_SOURCE_BYTES,
            },
        },
    })
}

/// The `format`s a schema's strings are held to (the rest are reported, not enforced).
fn llamay_constrain_formats() -> Value {
    json!(llamay_runtime::ENFORCED_FORMATS)
}

fn schema_limits() -> Value {
    let l = llamay_runtime::schema_limits();
    json!({
        "properties_per_object": l.properties_per_object,
        "enum_members": l.enum_members,
        "any_of_alternatives": l.any_of_alternatives,
        "pattern_states": l.pattern_states,
        "recursion_depth": l.recursion_depth,
        "whitespace_budget": l.whitespace_budget,
    })
}
