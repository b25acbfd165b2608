//! Responses kept for later requests (`previous_response_id`, `GET /v1/responses/{id}`):
//! a bounded map with a time to live, so a long-running server's memory stays flat.
//! It knows no API shape: a response is its JSON and the conversation that led to it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use llamay_runtime::ChatMessage;

/// Responses kept at most; the oldest goes first.
pub(crate) const MAX_KEPT: usize = 1024;
/// How long a response is kept.
pub(crate) const KEPT_TTL: Duration = Duration::from_secs(3600);

/// One kept response.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    /// The response object as it was returned.
    pub response: serde_json::Value,
    /// The turns a continuation starts from: the input, then this response's output.
    pub conversation: Vec<ChatMessage>,
}

pub(crate) struct KeptResponses {
    inner: Mutex<Inner>,
    max: usize,
    ttl: Duration,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, (Instant, Kept)>,
    order: VecDeque<String>,
}

impl Default for KeptResponses {
    fn default() -> Self {
        KeptResponses::new(MAX_KEPT, KEPT_TTL)
    }
}

impl KeptResponses {
    pub(crate) fn new(max: usize, ttl: Duration) -> KeptResponses {
        KeptResponses {
            inner: Mutex::new(Inner::default()),
            max: max.max(1),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn put(&self, id: String, kept: Kept) {
        let mut g = self.lock();
        expire(&mut g, self.ttl);
        if g.by_id.insert(id.clone(), (Instant::now(), kept)).is_none() {
            g.order.push_back(id);
        }
        while g.order.len() > self.max {
            if let Some(old) = g.order.pop_front() {
                g.by_id.remove(&old);
            }
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Kept> {
        let mut g = self.lock();
        expire(&mut g, self.ttl);
        g.by_id.get(id).map(|(_, k)| k.clone())
    }

    /// Removes a response; whether it was there.
    pub(crate) fn remove(&self, id: &str) -> bool {
        let mut g = self.lock();
        expire(&mut g, self.ttl);
        let found = g.by_id.remove(id).is_some();
        if found {
            g.order.retain(|o| o != id);
        }
        found
    }
}

/// Drops what outlived the TTL (the order is the insertion order, oldest first).
fn expire(g: &mut Inner, ttl: Duration) {
    while let Some(id) = g.order.front() {
        match g.by_id.get(id) {
            Some((at, _)) if at.elapsed() <= ttl => break,
            _ => {
                let id = g.order.pop_front().unwrap_or_default();
                g.by_id.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(n: i64) -> Kept {
        Kept {
            response: serde_json::json!(n),
            conversation: Vec::new(),
        }
    }

    #[test]
    fn bounded_and_expiring() {
        let k = KeptResponses::new(2, Duration::from_secs(60));
        k.put("a".into(), kept(1));
        k.put("b".into(), kept(2));
        k.put("c".into(), kept(3));
        assert!(k.get("a").is_none(), "the oldest went first");
        assert_eq!(k.get("c").unwrap().response, 3);
        assert!(k.remove("b"));
        assert!(!k.remove("b"));
        let k = KeptResponses::new(8, Duration::ZERO);
        k.put("a".into(), kept(1));
        std::thread::sleep(Duration::from_millis(5));
        assert!(k.get("a").is_none(), "past its time");
    }
}
