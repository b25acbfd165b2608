//! Turning a generation's events into a streamed response body. Each API module
//! supplies the function that writes its own wire format (SSE or NDJSON); dropping
//! the body (the client went away) drops the event receiver, which the engine sees
//! before its next step.

use std::collections::VecDeque;

use axum::body::Body;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;

use llamay_runtime::Error;
use llamay_runtime::GenEvent;

/// What a formatter does with one event: the bytes to send, and whether the
/// stream is over.
pub(crate) struct Frames {
    pub bytes: Vec<Bytes>,
    pub end: bool,
}

/// A body that first sends `head`, then whatever `format` makes of each event.
pub(crate) fn body<F>(events: UnboundedReceiver<GenEvent>, head: Vec<Bytes>, format: F) -> Body
where
    F: FnMut(GenEvent) -> Frames + Send + 'static,
{
    struct State<F> {
        events: UnboundedReceiver<GenEvent>,
        queue: VecDeque<Bytes>,
        format: F,
        ended: bool,
    }
    let state = State {
        events,
        queue: head.into(),
        format,
        ended: false,
    };
    let s = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(b) = st.queue.pop_front() {
                return Some((Ok::<Bytes, std::io::Error>(b), st));
            }
            if st.ended {
                return None;
            }
            let ev = st.events.recv().await.unwrap_or_else(|| {
                GenEvent::Error(Error::internal(
                    "the engine stopped before the generation finished",
                ))
            });
            let f = (st.format)(ev);
            st.ended = f.end;
            st.queue.extend(f.bytes);
        }
    });
    Body::from_stream(s)
}

/// One SSE event: an optional `event:` line and a `data:` line.
pub(crate) fn sse(event: Option<&str>, data: &serde_json::Value) -> Bytes {
    let mut s = String::new();
    if let Some(e) = event {
        s.push_str("event: ");
        s.push_str(e);
        s.push('\n');
    }
    s.push_str("data: ");
    s.push_str(&data.to_string());
    s.push_str("\n\n");
    Bytes::from(s)
}

/// One NDJSON line.
pub(crate) fn ndjson(v: &serde_json::Value) -> Bytes {
    let mut s = v.to_string();
    s.push('\n');
    Bytes::from(s)
}
