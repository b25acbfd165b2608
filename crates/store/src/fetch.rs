//! One small file by URL, for a request that names it (an image a client links to),
//! under the same rules as a pull: public addresses only unless private pulls are
//! allowed (checked on the literal URL, after DNS and across redirects), verified
//! TLS over https unless insecure. A client's URL must not make the server read a
//! large file or wait on a slow host, so the body is capped and the whole exchange
//! has one deadline.

use std::time::Duration;

use reqwest::header::CONTENT_LENGTH;

use crate::error::{Result, StoreError};
use crate::pull::{net_error, PullOptions};

/// How much a fetch may read, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct FetchLimits {
    /// Bytes of body; a larger file is refused (by its declared length before
    /// reading, else as soon as the body passes it).
    pub max_bytes: u64,
    /// From the first connection to the last byte, redirects included.
    pub timeout: Duration,
}

/// The body of `url`, fetched under `opts`' address and TLS rules and `limits`.
pub async fn fetch_small(url: &str, opts: &PullOptions, limits: FetchLimits) -> Result<Vec<u8>> {
    opts.check_target(url)?;
    let client = opts.client()?;
    let host = url.split('/').nth(2).unwrap_or(url).to_string();
    let exchange = async {
        let mut resp = client
            .get(url)
            .send()
            .await
            .map_err(|e| net_error(e, url, &host))?;
        if !resp.status().is_success() {
            return Err(StoreError::Other(format!(
                "{url} answered HTTP {}",
                resp.status()
            )));
        }
        let too_large = || {
            StoreError::Other(format!(
                "{url} is larger than {} bytes, the most a linked file may be",
                limits.max_bytes
            ))
        };
        let declared = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limits.max_bytes) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| net_error(e, url, &host))? {
            if (body.len() + chunk.len()) as u64 > limits.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(limits.timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Other(format!(
                "{url} did not answer in full within {:.0?}",
                limits.timeout
            )))
        })
}
