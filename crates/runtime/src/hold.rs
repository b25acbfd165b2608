//! Holding a generation's text back until it is whole, when tools are offered.
//!
//! A partial call is nothing a caller can act on, and text streamed as it comes
//! could show a call as `content` before it is recognised. So the events of a
//! generation with tools pass through here: its text is gathered, and at the end
//! one `Text` (the content, if any) and the `Done` (carrying the calls) go out.

use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::request::GenEvent;
use crate::tools::{parse, ToolSet};

/// Events in, held events out. A client that goes away closes the returned
/// receiver; the task then drops `events`, which the engine sees at its next step.
pub(crate) fn hold(
    mut events: UnboundedReceiver<GenEvent>,
    set: Arc<ToolSet>,
) -> UnboundedReceiver<GenEvent> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(async move {
        let mut text = String::new();
        loop {
            let ev = tokio::select! {
                _ = tx.closed() => return,
                ev = events.recv() => ev,
            };
            match ev {
                Some(GenEvent::Text(t)) => text.push_str(&t),
                // Thinking holds no calls: it passes as it comes.
                Some(e @ GenEvent::Reasoning(_)) => {
                    let _ = tx.send(e);
                }
                Some(GenEvent::Done(mut o)) => {
                    let p = parse(&text, &set);
                    if let Some(c) = p.content {
                        let _ = tx.send(GenEvent::Text(c));
                    }
                    o.tool_calls = p.calls;
                    let _ = tx.send(GenEvent::Done(o));
                    return;
                }
                Some(e @ GenEvent::Error(_)) => {
                    let _ = tx.send(e);
                    return;
                }
                None => return,
            }
        }
    });
    rx
}
