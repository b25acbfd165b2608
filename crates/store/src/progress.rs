//! Pull progress as events: the CLI draws a bar from them, the server turns them
//! into Ollama's `/api/pull` NDJSON lines.

use crate::digest::Digest;

/// One step of a pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullEvent {
    /// A phase: `pulling manifest`, `verifying sha256 digest`, `writing manifest`,
    /// `success` (Ollama's wording).
    Status(String),
    /// Bytes of one blob so far. Sent when a blob starts, at most every ~100 ms
    /// while it downloads, and when it is complete (`completed == total`).
    Blob {
        digest: Digest,
        total: u64,
        completed: u64,
    },
    /// Bytes of a file pulled by URL (its digest is known only at the end).
    File {
        file_name: String,
        total: u64,
        completed: u64,
    },
}

impl PullEvent {
    /// The event as Ollama's `/api/pull` streams it:
    /// `{"status":"pulling <12 hex>","digest":"sha256:..","total":N,"completed":M}`.
    pub fn to_ollama_json(&self) -> serde_json::Value {
        match self {
            PullEvent::Status(s) => serde_json::json!({ "status": s }),
            PullEvent::Blob {
                digest,
                total,
                completed,
            } => serde_json::json!({
                "status": format!("pulling {}", digest.short()),
                "digest": digest.to_string(),
                "total": total,
                "completed": completed,
            }),
            PullEvent::File {
                file_name,
                total,
                completed,
            } => serde_json::json!({
                "status": format!("pulling {file_name}"),
                "total": total,
                "completed": completed,
            }),
        }
    }
}

/// Receives pull events; called from the pulling task, so it should be quick.
pub trait Progress: Send + Sync {
    fn on_event(&self, event: PullEvent);
}

impl<F: Fn(PullEvent) + Send + Sync> Progress for F {
    fn on_event(&self, event: PullEvent) {
        self(event)
    }
}

/// Discards all events.
pub struct NoProgress;

impl Progress for NoProgress {
    fn on_event(&self, _: PullEvent) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_json_shapes() {
        let d = Digest::of_bytes(b"x");
        let j = PullEvent::Blob {
            digest: d.clone(),
            total: 10,
            completed: 4,
        }
        .to_ollama_json();
        assert_eq!(j["status"], format!("pulling {}", &d.hex()[..12]));
        assert_eq!(j["digest"], d.to_string());
        assert_eq!(
            (j["total"].as_u64(), j["completed"].as_u64()),
            (Some(10), Some(4))
        );
        let s = PullEvent::Status("success".into()).to_ollama_json();
        assert_eq!(s, serde_json::json!({"status": "success"}));
    }
}
