//! What `llamay serve` prints when it starts: the seed's log line and route banner.

use llamay_runtime::RegistryConfig;

/// `5m0s`, `1h0m0s`, `30s`: Go's duration spelling, as the seed's log line has it.
pub(crate) fn go_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// Facts about the serve model for the log line.
pub(crate) struct LogFacts<'a> {
    pub name: &'a str,
    pub arch: &'a str,
    pub params: u64,
    pub context: usize,
    pub threads: usize,
    pub kv: &'a str,
    /// Terms over every served lexicon.
    pub lexicon_terms: usize,
}

/// `time=… level=INFO msg="llamay serving" addr=… model=… arch=… max-loaded=2 …`
pub(crate) fn log_line(addr: &str, m: &LogFacts, cfg: &RegistryConfig) -> String {
    let now = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.3f%:z");
    format!(
        "time={now} level=INFO msg=\"llamay serving\" addr={addr} model={} arch={} max-loaded={} keepalive={} params=\"{:.2} GB\" context={} threads={} kv={} lexicon={}",
        m.name,
        m.arch,
        cfg.max_loaded,
        go_duration(cfg.keep_alive),
        m.params as f64 / 1e9,
        m.context,
        m.threads,
        m.kv,
        m.lexicon_terms,
    )
}

/// The route banner (only routes this server answers). The embedding and rerank rows
/// name the `-embed` / `-rerank` models when there are some, else say how to start one.
pub(crate) fn routes(addr: &str, embed: Option<&str>, rerank: Option<&str>) -> String {
    let u = format!("http://{addr}");
    let embed = match embed {
        Some(m) => format!("(and /api/embed, /api/embeddings; model {m})"),
        None => "(start with -embed <encoder.gguf>)".into(),
    };
    let rerank = match rerank {
        Some(m) => format!("(and /v1/rerank; model {m})"),
        None => "(start with -rerank <reranker.gguf>)".into(),
    };
    format!(
        "\n  OpenAI      POST {u}/v1/chat/completions   (and /v1/completions, GET /v1/models)\n  \
         Responses   POST {u}/v1/responses          (and GET, DELETE /v1/responses/ID)\n  \
         Anthropic   POST {u}/v1/messages\n  \
         Ollama      POST {u}/api/chat              (and /api/generate, /api/tags, /api/show, /api/ps)\n  \
         Embeddings  POST {u}/v1/embeddings         {embed}\n  \
         Rerank      POST {u}/rerank                {rerank}\n  \
         Models      POST {u}/api/pull              (and /api/copy, /api/delete)\n  \
         Catalog     GET  {u}/v1/catalog/models\n  \
         Stats       GET  {u}/v1/stats\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_are_spelled_like_go() {
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(3661)), "1h1m1s");
        assert_eq!(go_duration(Duration::from_secs(7)), "7s");
    }
}
