//! Response ids and timestamps as the API shapes write them.

use std::time::SystemTime;

use llamay_runtime::short_id;

/// Seconds since the Unix epoch (the `created` fields).
pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An id with an API's prefix (`chatcmpl-`, `cmpl-`, `msg_`...).
pub(crate) fn response_id(prefix: &str) -> String {
    format!("{prefix}{}", short_id())
}
