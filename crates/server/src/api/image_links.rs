//! Linked images (`serve -allow-image-urls`): before a body is read, each http(s)
//! URL where an image goes on any API shape (OpenAI's `image_url`, Responses'
//! `input_image.image_url`, an Anthropic `url` source, Ollama's `images`) is fetched
//! under the pull rules and put in its place as a base64 data URL, so each shape's
//! parser (`image_wire`) reads inline images only and the prefix cache keys a
//! linked picture by its pixels, as it does an inline one.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use futures_util::future::try_join_all;
use llamay_store::{FetchLimits, PullOptions};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::{parse_body, AppState};

/// Linked images one request may name: each is a fetch the server makes for it.
const MAX_LINKED_IMAGES: usize = 16;

/// What `-allow-image-urls` lets a request fetch, per image.
pub(crate) const DEFAULT_IMAGE_LIMITS: FetchLimits = FetchLimits {
    max_bytes: 20 << 20,
    timeout: Duration::from_secs(30),
};

/// Parses a request body into `T` after fetching the images it links to, where the
/// server allows that (elsewhere the links reach the parser, which refuses them).
pub(crate) async fn parse_with_links<T: DeserializeOwned>(
    st: &AppState,
    body: &[u8],
) -> Result<T, ApiError> {
    let body = match st.image_urls {
        Some(limits) => inline_links(st, limits, body).await?,
        None => Cow::Borrowed(body),
    };
    parse_body(&body)
}

/// `body` with every linked image replaced by its bytes as a data URL; the body as
/// it came when it links none (or is not JSON: the parser says so).
async fn inline_links<'b>(
    st: &AppState,
    limits: FetchLimits,
    body: &'b [u8],
) -> Result<Cow<'b, [u8]>, ApiError> {
    if !body.windows(4).any(|w| w == b"http") {
        return Ok(Cow::Borrowed(body));
    }
    let Ok(mut doc) = serde_json::from_slice::<Value>(body) else {
        return Ok(Cow::Borrowed(body));
    };
    let mut links = Vec::new();
    collect_links(&mut doc, &mut links);
    if links.is_empty() {
        return Ok(Cow::Borrowed(body));
    }
    let mut urls: Vec<String> = links.iter().map(|s| s.to_string()).collect();
    urls.sort();
    urls.dedup();
    if urls.len() > MAX_LINKED_IMAGES {
        return Err(ApiError::bad_request(format!(
            "{} image URLs in one request; at most {MAX_LINKED_IMAGES} are fetched",
            urls.len()
        )));
    }
    let opts = PullOptions {
        insecure: st.insecure_pulls,
        allow_private: st.allow_private_pulls,
        ..PullOptions::default()
    };
    let fetched = try_join_all(urls.iter().map(|url| {
        let opts = &opts;
        async move {
            llamay_store::fetch_small(url, opts, limits)
                .await
                .map(|bytes| (url.clone(), data_url(&bytes)))
                .map_err(|e| ApiError::bad_request(format!("image URL {url}: {e}")))
        }
    }))
    .await?;
    let inline: HashMap<String, String> = fetched.into_iter().collect();
    for link in links {
        *link = inline[link.as_str()].clone();
    }
    let bytes = serde_json::to_vec(&doc).expect("a JSON value always serialises");
    Ok(Cow::Owned(bytes))
}

fn data_url(bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("data:application/octet-stream;base64,{b64}")
}

fn is_link(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// The http(s) strings of `v` that sit where an image goes.
fn collect_links<'v>(v: &'v mut Value, out: &mut Vec<&'v mut String>) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|i| collect_links(i, out)),
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match key.as_str() {
                    // Responses' `input_image` (a string), OpenAI's `{"url": ...}`.
                    "image_url" if child.is_string() => push_link(child, out),
                    "image_url" => {
                        if let Some(url) = child.get_mut("url") {
                            push_link(url, out)
                        }
                    }
                    // Anthropic's `{"type": "url", "url": ...}`.
                    "source" => {
                        if child.get("type").and_then(Value::as_str) == Some("url") {
                            if let Some(url) = child.get_mut("url") {
                                push_link(url, out)
                            }
                        }
                    }
                    // Ollama's list of strings.
                    "images" if child.is_array() => {
                        if let Value::Array(items) = child {
                            items.iter_mut().for_each(|i| push_link(i, out))
                        }
                    }
                    _ => collect_links(child, out),
                }
            }
        }
        _ => {}
    }
}

/// Adds `v` when it is an http(s) string.
fn push_link<'v>(v: &'v mut Value, out: &mut Vec<&'v mut String>) {
    if let Value::String(s) = v {
        if is_link(s) {
            out.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn links(mut v: Value) -> Vec<String> {
        let mut out = Vec::new();
        collect_links(&mut v, &mut out);
        out.into_iter().map(|s| s.clone()).collect()
    }

    #[test]
    fn links_are_found_where_each_shape_puts_an_image_and_nowhere_else() {
        let body = json!({
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "see https://not.an/image"},
                    {"type": "image_url", "image_url": {"url": "https://a.test/1.png"}},
                    {"type": "input_image", "image_url": "http://a.test/2.png"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    {"type": "image", "source": {"type": "url", "url": "https://a.test/3.png"}},
                    {"type": "image", "source": {"type": "base64", "data": "https://x"}},
                ]},
                {"role": "user", "content": "hi", "images": ["https://a.test/4.png", "iVBO"]},
            ],
            "tools": [{"function": {"description": "https://docs.test"}}],
        });
        assert_eq!(
            links(body),
            [
                "https://a.test/1.png",
                "http://a.test/2.png",
                "https://a.test/3.png",
                "https://a.test/4.png"
            ]
        );
    }
}
