//! A generation's events when tools are offered: its calls are taken out of the text.
//!
//! A stream sends its text as it is written and each call piece by piece
//! ([`CallStream`]); a whole response, Ollama's shape and `whole_tool_calls` hold the
//! text back until it is whole, then send one `Text` (the content, if any) and the
//! `Done` carrying the calls. Either way `Done` carries the calls as the whole text
//! reads.

use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::request::GenEvent;
use crate::tools::stream::{CallStream, Piece};
use crate::tools::{parse, ToolSet};

/// Events in, events with calls out. A client that goes away closes the returned
/// receiver; the task then drops `events`, which the engine sees at its next step.
pub(crate) fn hold(
    mut events: UnboundedReceiver<GenEvent>,
    set: Arc<ToolSet>,
    streamed: bool,
) -> UnboundedReceiver<GenEvent> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(async move {
        let mut split = streamed.then(|| CallStream::new(set.clone()));
        let mut text = String::new();
        loop {
            let ev = tokio::select! {
                _ = tx.closed() => return,
                ev = events.recv() => ev,
            };
            match ev {
                Some(GenEvent::Text(t)) => match &mut split {
                    Some(s) => send_pieces(&tx, s.push(&t)),
                    None => text.push_str(&t),
                },
                // Thinking holds no calls: it passes as it comes.
                Some(e @ GenEvent::Reasoning(_)) => {
                    let _ = tx.send(e);
                }
                Some(GenEvent::Done(mut o)) => {
                    o.tool_calls = match split.take() {
                        Some(s) => {
                            let (pieces, calls) = s.finish();
                            send_pieces(&tx, pieces);
                            calls
                        }
                        None => {
                            let p = parse(&text, &set);
                            if let Some(c) = p.content {
                                let _ = tx.send(GenEvent::Text(c));
                            }
                            p.calls
                        }
                    };
                    let _ = tx.send(GenEvent::Done(o));
                    return;
                }
                Some(e @ GenEvent::Error(_)) => {
                    let _ = tx.send(e);
                    return;
                }
                // The engine sends no calls of its own.
                Some(GenEvent::CallStart { .. } | GenEvent::CallArgs { .. }) => {}
                None => return,
            }
        }
    });
    rx
}

fn send_pieces(tx: &UnboundedSender<GenEvent>, pieces: Vec<Piece>) {
    for p in pieces {
        let ev = match p {
            Piece::Text(t) => GenEvent::Text(t),
            Piece::CallStart { index, id, name } => GenEvent::CallStart { index, id, name },
            Piece::CallArgs { index, delta } => GenEvent::CallArgs { index, delta },
        };
        let _ = tx.send(ev);
    }
}
