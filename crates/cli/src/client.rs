//! Talking to a running `llamay serve` (or anything that speaks Ollama's routes):
//! `llamay run` uses it so a model is not loaded twice, `ps` and `stop` ask it.

use std::time::Duration;

use anyhow::{anyhow, Context};
use serde_json::Value;

/// Where `llamay serve` listens unless told otherwise.
pub const DEFAULT_HOST: &str = "localhost:11435";

/// A server's address and key, from `$LLAMAY_HOST` (as `OLLAMA_HOST` names Ollama's)
/// and `$LLAMAY_API_KEY`.
pub struct ServerClient {
    base: String,
    key: Option<String>,
    http: reqwest::blocking::Client,
}

/// What a server answered to a request it refused.
#[derive(Debug)]
pub struct ServerError {
    pub status: u16,
    pub message: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server answered {}: {}", self.status, self.message)
    }
}

impl std::error::Error for ServerError {}

impl ServerClient {
    pub fn from_env() -> anyhow::Result<ServerClient> {
        let host = std::env::var("LLAMAY_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let key = std::env::var("LLAMAY_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        // No overall timeout: a streamed reply lasts as long as the model writes.
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_millis(800))
            .timeout(None)
            .build()
            .context("cannot start an HTTP client")?;
        Ok(ServerClient {
            base: base_url(&host),
            key,
            http,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Whether a server answers here at all (a quick `GET /api/version`).
    pub fn is_up(&self) -> bool {
        self.request(reqwest::Method::GET, "/api/version")
            .timeout(Duration::from_secs(2))
            .send()
            .is_ok_and(|r| r.status().is_success())
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::blocking::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    pub fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let r = self
            .request(reqwest::Method::GET, path)
            .send()
            .map_err(|e| self.unreachable(e))?;
        json_or_error(r)
    }

    /// A POST whose response is read by the caller (a stream, say), once it is known
    /// to be a success.
    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<reqwest::blocking::Response> {
        let r = self
            .request(reqwest::Method::POST, path)
            .json(body)
            .send()
            .map_err(|e| self.unreachable(e))?;
        if r.status().is_success() {
            Ok(r)
        } else {
            Err(refusal(r).into())
        }
    }

    pub fn post_json(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let r = self.post(path, body)?;
        r.json().context("the server's answer is not JSON")
    }

    fn unreachable(&self, e: reqwest::Error) -> anyhow::Error {
        anyhow!(
            "no llamay server answers at {} ({e}); start one with `llamay serve` or set LLAMAY_HOST",
            self.base
        )
    }
}

fn json_or_error(r: reqwest::blocking::Response) -> anyhow::Result<Value> {
    if !r.status().is_success() {
        return Err(refusal(r).into());
    }
    r.json().context("the server's answer is not JSON")
}

/// The message out of an error body in any of the three shapes.
fn refusal(r: reqwest::blocking::Response) -> ServerError {
    let status = r.status().as_u16();
    let text = r.text().unwrap_or_default();
    ServerError {
        status,
        message: error_message(&text),
    }
}

pub fn error_message(body: &str) -> String {
    let v: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => return body.trim().to_string(),
    };
    let e = &v["error"];
    e.as_str()
        .or_else(|| e["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| body.trim().to_string())
}

/// `host:port`, `http://host:port` or `https://…` (a trailing slash dropped); a bare
/// `:port` means this machine, as with `OLLAMA_HOST`.
fn base_url(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if host.starts_with("http://") || host.starts_with("https://") {
        return host.to_string();
    }
    if let Some(port) = host.strip_prefix(':') {
        return format!("http://localhost:{port}");
    }
    format!("http://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_become_base_urls() {
        assert_eq!(base_url("localhost:11435"), "http://localhost:11435");
        assert_eq!(base_url("http://10.0.0.2:80/"), "http://10.0.0.2:80");
        assert_eq!(base_url("https://h.example"), "https://h.example");
        assert_eq!(base_url(":9000"), "http://localhost:9000");
    }

    #[test]
    fn error_messages_come_out_of_every_shape() {
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message(r#"{"error":{"message":"bad schema","type":"x"}}"#),
            "bad schema"
        );
        assert_eq!(
            error_message(r#"{"type":"error","error":{"type":"x","message":"m"}}"#),
            "m"
        );
        assert_eq!(error_message("plain text\n"), "plain text");
    }
}
