//! A response's output items as they form: `reasoning`, then a `message` with one
//! `output_text` part, then `function_call`s. The same builder serves a whole
//! response and a stream; a stream also gets each step as the events the official
//! SDK assembles (`response.output_item.added`, `response.content_part.added`, the
//! deltas, their `.done`s, `response.output_item.done`). A call streamed piece by
//! piece is an open `function_call` item whose arguments grow by
//! `response.function_call_arguments.delta`.

use serde_json::{json, Value};

use llamay_runtime::ToolCall;

use crate::ids::response_id;

enum Open {
    Reasoning {
        id: String,
        text: String,
    },
    Message {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        args: String,
    },
}

/// The output so far, and the events a stream sends for it.
#[derive(Default)]
pub(super) struct Draft {
    /// Finished items.
    pub items: Vec<Value>,
    open: Option<Open>,
    seq: u64,
    messages: usize,
    /// Calls streamed piece by piece (the first calls of `finish`'s list).
    streamed_calls: usize,
    /// Events not yet sent (a stream drains them; a whole response ignores them).
    pub events: Vec<Value>,
}

impl Draft {
    /// Queues an event of `kind` with its sequence number.
    pub(super) fn event(&mut self, kind: &str, mut v: Value) {
        v["type"] = json!(kind);
        v["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.events.push(v);
    }

    fn index(&self) -> usize {
        self.items.len()
    }

    pub(super) fn reasoning(&mut self, t: &str) {
        if !matches!(self.open, Some(Open::Reasoning { .. })) {
            self.close();
            let id = response_id("rs_");
            self.event("response.output_item.added", json!({"output_index": self.index(),
                "item": {"type": "reasoning", "id": id, "summary": [], "content": [], "status": "in_progress"}}));
            self.event(
                "response.content_part.added",
                json!({"output_index": self.index(),
                "item_id": id, "content_index": 0, "part": {"type": "reasoning_text", "text": ""}}),
            );
            self.open = Some(Open::Reasoning {
                id,
                text: String::new(),
            });
        }
        let index = self.index();
        if let Some(Open::Reasoning { id, text }) = &mut self.open {
            text.push_str(t);
            let id = id.clone();
            self.event(
                "response.reasoning_text.delta",
                json!({"output_index": index, "item_id": id, "content_index": 0, "delta": t}),
            );
        }
    }

    pub(super) fn text(&mut self, t: &str) {
        if !matches!(self.open, Some(Open::Message { .. })) {
            self.close();
            let id = response_id("msg_");
            self.event("response.output_item.added", json!({"output_index": self.index(),
                "item": {"type": "message", "id": id, "role": "assistant", "content": [], "status": "in_progress"}}));
            self.event(
                "response.content_part.added",
                json!({"output_index": self.index(),
                "item_id": id, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
            );
            self.open = Some(Open::Message {
                id,
                text: String::new(),
            });
            self.messages += 1;
        }
        let index = self.index();
        if let Some(Open::Message { id, text }) = &mut self.open {
            text.push_str(t);
            let id = id.clone();
            if !t.is_empty() {
                self.event(
                    "response.output_text.delta",
                    json!({"output_index": index, "item_id": id, "content_index": 0,
                        "delta": t, "logprobs": []}),
                );
            }
        }
    }

    /// Opens a `function_call` item (closing the open one).
    pub(super) fn call_start(&mut self, call_id: &str, name: &str) {
        self.close();
        let id = response_id("fc_");
        self.event(
            "response.output_item.added",
            json!({"output_index": self.index(), "item": {"type": "function_call", "id": id,
                "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"}}),
        );
        self.open = Some(Open::Call {
            id,
            call_id: call_id.to_string(),
            name: name.to_string(),
            args: String::new(),
        });
        self.streamed_calls += 1;
    }

    /// More of the open call's arguments.
    pub(super) fn call_args(&mut self, delta: &str) {
        let index = self.index();
        if let Some(Open::Call { id, args, .. }) = &mut self.open {
            args.push_str(delta);
            let id = id.clone();
            self.event(
                "response.function_call_arguments.delta",
                json!({"output_index": index, "item_id": id, "delta": delta}),
            );
        }
    }

    /// Ends the output: the open item, an empty message when there is nothing else
    /// to show, then the calls not streamed.
    pub(super) fn finish(&mut self, calls: &[ToolCall], status: &str) {
        if calls.is_empty() && self.messages == 0 {
            self.text("");
        }
        self.close_as(status);
        for c in calls.iter().skip(self.streamed_calls) {
            self.call_start(&c.id, &c.name);
            self.call_args(&c.arguments_text());
            self.close();
        }
    }

    fn close(&mut self) {
        self.close_as("completed");
    }

    fn close_as(&mut self, status: &str) {
        let index = self.index();
        let item = match self.open.take() {
            None => return,
            Some(Open::Reasoning { id, text }) => {
                let part = json!({"type": "reasoning_text", "text": text});
                self.event(
                    "response.reasoning_text.done",
                    json!({"output_index": index,
                    "item_id": id, "content_index": 0, "text": text}),
                );
                self.event(
                    "response.content_part.done",
                    json!({"output_index": index,
                    "item_id": id, "content_index": 0, "part": part}),
                );
                json!({"type": "reasoning", "id": id, "summary": [], "content": [part], "status": "completed"})
            }
            Some(Open::Message { id, text }) => {
                let part =
                    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                self.event(
                    "response.output_text.done",
                    json!({"output_index": index,
                    "item_id": id, "content_index": 0, "text": text, "logprobs": []}),
                );
                self.event(
                    "response.content_part.done",
                    json!({"output_index": index,
                    "item_id": id, "content_index": 0, "part": part}),
                );
                json!({"type": "message", "id": id, "role": "assistant", "content": [part], "status": status})
            }
            Some(Open::Call {
                id,
                call_id,
                name,
                args,
            }) => {
                self.event(
                    "response.function_call_arguments.done",
                    json!({"output_index": index, "item_id": id, "name": name, "arguments": args}),
                );
                json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                    "arguments": args, "status": "completed"})
            }
        };
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.items.push(item);
    }
}
