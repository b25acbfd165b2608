//! Who may drive the server: the browser and network boundary every request crosses
//! before a handler runs.
//!
//! A web page the user visits can send requests to a loopback server. Three checks
//! stop it: a foreign `Origin` is refused (browsers send one on every cross-origin
//! request and every POST), a foreign `Host` is refused (DNS rebinding makes a
//! page's own name point at 127.0.0.1, but its `Host` stays that name), and a body a
//! browser sends must be declared `application/json` (the content types a page can
//! send without a preflight are form encodings, `text/plain`, or none, and that is
//! how a page on an allowed origin could still be tricked into a form post). A body
//! from a program that is not a browser (no `Origin`, no cross-site `Sec-Fetch-Site`;
//! browsers send both on every POST) is read as JSON whatever its type, because
//! `curl -d` and LiteLLM's Ollama providers send JSON untyped. Model management
//! changes what is on disk, so beyond loopback it also needs the API key.

use std::net::IpAddr;

use axum::http::{header, HeaderMap, Method, Uri};

/// The boundary's settings, from `serve`'s flags.
#[derive(Clone, Debug, Default)]
pub struct Boundary {
    /// `-allow-origin`: origins (`scheme://host[:port]`) allowed besides loopback
    /// ones; `*` allows any.
    pub allowed_origins: Vec<String>,
    /// `-allow-host`: `Host` names allowed besides loopback names and the bound
    /// address; `*` allows any.
    pub allowed_hosts: Vec<String>,
    /// The host part of the address the server listens on.
    pub bound_host: String,
    /// Whether the server listens beyond loopback.
    pub beyond_loopback: bool,
    /// Whether requests must carry the API key (it is set).
    pub has_key: bool,
}

/// Why a request was stopped at the boundary (the router answers it in the shape
/// of the API the path belongs to).
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 403, with the reason.
    Forbidden(String),
    /// 415: a browser's body is not declared JSON.
    NotJson,
}

/// Routes that change the model store.
const STATE_CHANGING: [&str; 4] = ["/api/pull", "/api/copy", "/api/delete", "/api/create"];

/// Whether a route changes what is on disk (model management, and later contexts and
/// snapshots).
pub(crate) fn changes_state(path: &str) -> bool {
    STATE_CHANGING.contains(&path)
}

impl Boundary {
    /// Checks one request's origin, host, body type and, for model management beyond
    /// loopback, that a key guards it. The key itself is checked by the router.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        // Health probes (orchestrators send the pod's address as `Host`) read nothing.
        if uri.path() == "/health" && *method == Method::GET {
            return Ok(());
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin) {
                return Err(Refusal::Forbidden(format!(
                    "requests from origin {} are refused: only loopback origins and those \
                     given to -allow-origin may use this server",
                    quote(origin)
                )));
            }
        }
        let host = uri.authority().map(|a| a.as_str().to_string()).or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        });
        if let Some(host) = host {
            if !self.host_allowed(&host) {
                return Err(Refusal::Forbidden(format!(
                    "requests for host {} are refused: only loopback names, the address the \
                     server listens on and names given to -allow-host are served",
                    quote(&host)
                )));
            }
        }
        if has_body(headers) && from_browser(headers) && !is_json(headers) {
            return Err(Refusal::NotJson);
        }
        if changes_state(uri.path()) && self.beyond_loopback && !self.has_key {
            return Err(Refusal::Forbidden(
                "model management needs -api-key when the server listens beyond loopback".into(),
            ));
        }
        Ok(())
    }

    /// Whether a browser page from `origin` may use the server.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        if self.allowed_origins.iter().any(|o| o == "*" || o == origin) {
            return true;
        }
        let Some(rest) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        is_loopback_name(split_host(rest))
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = split_host(host);
        is_loopback_name(name)
            || name.eq_ignore_ascii_case(&self.bound_host)
            || self
                .allowed_hosts
                .iter()
                .any(|h| h == "*" || h.eq_ignore_ascii_case(name))
    }
}

/// Whether `addr` (`host:port`) listens beyond loopback.
pub(crate) fn beyond_loopback(host: &str) -> bool {
    !is_loopback_name(host)
}

/// The host of `host[:port]` or `[v6][:port]`, without brackets.
pub(crate) fn split_host(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match s.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) && !h.contains(':') => h,
        _ => s,
    }
}

/// `localhost`, a name under `.localhost` (RFC 6761 keeps them on this machine),
/// or a loopback address.
fn is_loopback_name(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn has_body(headers: &HeaderMap) -> bool {
    // HTTP/1.1 has a body exactly when it declares a length or a transfer coding; a
    // browser's fetch always declares one.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    declared.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// Whether a browser sent the request: browsers put `Origin` on every POST and
/// `Sec-Fetch-Site` on every request; `same-origin` and `none` (typed by the user)
/// are the two values no other site can cause.
fn from_browser(headers: &HeaderMap) -> bool {
    let fetch_site = headers
        .get("sec-fetch-site")
        .map(|v| v.to_str().unwrap_or("").to_ascii_lowercase());
    headers.contains_key(header::ORIGIN)
        || fetch_site.is_some_and(|s| s != "same-origin" && s != "none")
}

/// `application/json`, or any `+json` type, with or without parameters.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// At most a hundred bytes of a header value, for a message.
fn quote(s: &str) -> String {
    let cut: String = s.chars().take(100).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn local() -> Boundary {
        Boundary {
            bound_host: "127.0.0.1".into(),
            ..Boundary::default()
        }
    }

    fn status(b: &Boundary, m: Method, path: &str, h: &HeaderMap) -> u16 {
        let uri: Uri = path.parse().unwrap();
        match b.check(&m, &uri, h) {
            Ok(()) => 200,
            Err(Refusal::Forbidden(_)) => 403,
            Err(Refusal::NotJson) => 415,
        }
    }

    #[test]
    fn an_sdk_request_passes_and_a_page_does_not() {
        let b = local();
        let sdk = headers(&[
            (header::HOST, "127.0.0.1:11435"),
            (header::CONTENT_TYPE, "application/json"),
            (header::CONTENT_LENGTH, "2"),
        ]);
        assert_eq!(status(&b, Method::POST, "/api/pull", &sdk), 200);
        let mut page = sdk.clone();
        page.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert_eq!(status(&b, Method::POST, "/api/pull", &page), 403);
        page.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert_eq!(status(&b, Method::POST, "/api/pull", &page), 403);
        page.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:3000"),
        );
        assert_eq!(status(&b, Method::POST, "/api/pull", &page), 200);
        let mut rebound = sdk.clone();
        rebound.insert(header::HOST, HeaderValue::from_static("evil.example:11435"));
        assert_eq!(status(&b, Method::POST, "/api/pull", &rebound), 403);
        // A page on an allowed (loopback) origin still cannot post a form.
        let mut browser = sdk.clone();
        browser.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:3000"),
        );
        let mut fetched = sdk.clone();
        fetched.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ] {
            for from in [&browser, &fetched] {
                let mut plain = from.clone();
                plain.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
                assert_eq!(status(&b, Method::POST, "/api/pull", &plain), 415, "{ct}");
            }
            // curl -d and LiteLLM: no Origin, no Sec-Fetch-Site, a form type.
            let mut curl = sdk.clone();
            curl.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
            assert_eq!(status(&b, Method::POST, "/api/chat", &curl), 200, "{ct}");
        }
        let mut none = browser.clone();
        none.remove(header::CONTENT_TYPE);
        assert_eq!(status(&b, Method::POST, "/v1/chat/completions", &none), 415);
        let mut untyped = sdk.clone();
        untyped.remove(header::CONTENT_TYPE);
        assert_eq!(
            status(&b, Method::POST, "/v1/chat/completions", &untyped),
            200
        );
        let mut typed_by_user = untyped.clone();
        typed_by_user.insert("sec-fetch-site", HeaderValue::from_static("none"));
        assert_eq!(
            status(&b, Method::POST, "/api/generate", &typed_by_user),
            200
        );
        let charset = headers(&[
            (header::CONTENT_TYPE, "Application/JSON; charset=utf-8"),
            (header::CONTENT_LENGTH, "2"),
        ]);
        assert_eq!(status(&b, Method::POST, "/api/chat", &charset), 200);
        assert_eq!(status(&b, Method::GET, "/api/tags", &HeaderMap::new()), 200);
    }

    #[test]
    fn allow_lists_and_the_key_beyond_loopback() {
        let b = Boundary {
            allowed_origins: vec!["https://app.example".into()],
            allowed_hosts: vec!["box.lan".into()],
            bound_host: "0.0.0.0".into(),
            beyond_loopback: true,
            has_key: false,
        };
        let h = headers(&[
            (header::HOST, "box.lan:11435"),
            (header::ORIGIN, "https://app.example"),
        ]);
        assert_eq!(status(&b, Method::GET, "/api/tags", &h), 200);
        assert_eq!(status(&b, Method::DELETE, "/api/delete", &h), 403);
        let keyed = Boundary {
            has_key: true,
            ..b.clone()
        };
        assert_eq!(status(&keyed, Method::DELETE, "/api/delete", &h), 200);
        let other = headers(&[(header::HOST, "other.lan")]);
        assert_eq!(status(&b, Method::GET, "/api/tags", &other), 403);
    }

    #[test]
    fn hosts_split_with_ports_and_brackets() {
        assert_eq!(split_host("[::1]:8080"), "::1");
        assert_eq!(split_host("localhost:1"), "localhost");
        assert_eq!(split_host("127.0.0.1"), "127.0.0.1");
        assert_eq!(split_host("::1"), "::1");
        assert!(is_loopback_name("127.3.4.5") && is_loopback_name("a.localhost"));
        assert!(!is_loopback_name("localhost.evil.example"));
        assert!(beyond_loopback("0.0.0.0") && !beyond_loopback("localhost"));
    }
}
