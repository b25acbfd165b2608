//! Streaming a generation that was offered tools.
//!
//! Text goes out as it is written, held back only while it could still begin a call:
//! the bytes that could be the start of `<tool_call>`, and an answer that so far is
//! only whitespace, a marker (`[TOOL_CALLS]`) or the start of a bare JSON call
//! (`{"name"`). Once a call opens, its name goes out (with its id) as soon as the name
//! is whole and names an offered tool, then its arguments as the model writes them, so
//! every concatenation of the deltas is a prefix of the final arguments text (strict
//! `auto` calls are constrained from their opener on, so each prefix is also a valid
//! JSON prefix).
//!
//! The calls the caller finally gets are still read from the whole text by [`parse`],
//! the same reading a whole answer gets; the streamed calls are matched to them at the
//! end (their ids and arguments text kept). A call the stream could not follow (in a
//! code fence, or an answer that starts as JSON but not as a call) is decided at the
//! end and goes out then, whole.

use std::sync::Arc;

use serde_json::Value;

use super::parse::{cut_open, next_block, parse, Block, CLOSE_TAG};
use super::{gemma, xml, ToolCall, ToolSet};
use crate::chat::{BARE_OPENER, MARKERS};
use crate::ids::call_id;

/// What a stream sends for the text it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Answer text (content).
    Text(String),
    /// A call opened: its place among the calls, its id and the tool's name.
    CallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// More of call `index`'s arguments, as written.
    CallArgs { index: usize, delta: String },
}

/// One generation's text, split into content and calls as it arrives.
pub(crate) struct CallStream {
    set: Arc<ToolSet>,
    /// Everything written, for the final reading.
    all: String,
    /// Text not yet placed: it may still begin a call.
    pending: String,
    mode: Mode,
    /// Calls met so far, in order (offered or not).
    calls: Vec<Followed>,
    /// Calls started on the stream (those sent a `CallStart`).
    started: usize,
}

enum Mode {
    /// Only whitespace or markers so far: a bare call may still open.
    Start,
    /// Free text, in which `<tool_call>` opens a call.
    Text,
    /// Inside a call region.
    Call(Region),
    /// Decided at the end (a fence, JSON that is not plainly a call, text after a
    /// bare call).
    Held,
}

/// Where a call region ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    /// `<tool_call>` … `</tool_call>`: one object, then the close tag.
    Block,
    /// The whole answer is one call object.
    Bare,
    /// The whole answer is a list of call objects (`[TOOL_CALLS][…]`).
    List,
    /// Gemma 4's `<|tool_call>` … `<tool_call|>`: the call is read when it closes.
    Gemma,
}

impl RegionKind {
    fn of(block: Block) -> RegionKind {
        match block {
            Block::Tool => RegionKind::Block,
            Block::Gemma => RegionKind::Gemma,
        }
    }
}

struct Region {
    kind: RegionKind,
    scan: Scan,
    /// The object (Block, Bare) or the list (List) is over.
    over: bool,
    /// A list's `[` has been read.
    in_list: bool,
    /// After a block's object: what came since, until the close tag.
    after: String,
    /// A block holding the XML form: its reader, from the `<` that opened it.
    xml: Option<xml::Reader>,
}

/// A JSON scan of one call object, a character at a time.
#[derive(Default)]
struct Scan {
    depth: usize,
    in_str: bool,
    esc: bool,
    /// At depth 1: what comes next.
    expect: Expect,
    /// The raw text of the key or the string value being read.
    raw: String,
    key: String,
    capture: Capture,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Expect {
    #[default]
    Key,
    Colon,
    Value,
    /// Inside a value at depth 1 (or a nested one), until `,` or `}` at depth 1.
    InValue,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Capture {
    #[default]
    None,
    Key,
    /// The `name` value (a string).
    Name,
    /// The arguments object, from its `{` until it closes.
    Args,
    /// Arguments written as a JSON string holding an object.
    ArgsString,
}

/// A call the stream is following.
#[derive(Default)]
struct Followed {
    name: Option<String>,
    /// The arguments text as written (whitespace and all).
    args: String,
    /// Its place on the stream, once started.
    index: Option<usize>,
    id: String,
    /// Not a call the caller gets (tool not offered, or past the first without
    /// parallel calls): nothing of it is sent.
    dropped: bool,
    /// Argument bytes already sent.
    sent: usize,
}

impl CallStream {
    pub(crate) fn new(set: Arc<ToolSet>) -> CallStream {
        CallStream {
            set,
            all: String::new(),
            pending: String::new(),
            mode: Mode::Start,
            calls: Vec::new(),
            started: 0,
        }
    }

    /// Takes the next text; returns what can go out now.
    pub(crate) fn push(&mut self, text: &str) -> Vec<Piece> {
        self.all.push_str(text);
        self.pending.push_str(text);
        let mut out = Vec::new();
        self.advance(&mut out);
        coalesce(out)
    }

    /// The generation is over: what is still to send, and the calls as the whole text
    /// reads (the streamed ones keep their ids and their arguments text).
    pub(crate) fn finish(mut self) -> (Vec<Piece>, Vec<ToolCall>) {
        let parsed = parse(&self.all, &self.set);
        let mut out = Vec::new();
        if matches!(self.mode, Mode::Start | Mode::Held) && self.started == 0 {
            if let Some(c) = parsed.content {
                out.push(Piece::Text(c));
            }
        }
        let streamed: Vec<&Followed> = self.calls.iter().filter(|c| c.index.is_some()).collect();
        let cut_tag = cut_open(&self.pending) > 0;
        if matches!(self.mode, Mode::Text) && self.calls.is_empty() && !cut_tag {
            // The whitespace held at the end of a plain answer is its own (before a
            // cut-off tag it is not: the content ends trimmed there).
            self.text(self.pending.clone(), &mut out);
        }
        let mut calls = parsed.calls;
        for (i, call) in calls.iter_mut().enumerate() {
            match streamed.get(i) {
                Some(f) => {
                    call.id = f.id.clone();
                    let same = f.name.as_deref() == Some(call.name.as_str())
                        && serde_json::from_str::<Value>(&f.args)
                            .is_ok_and(|a| a == call.arguments);
                    if same {
                        call.written = Some(f.args.clone());
                    }
                }
                None => {
                    out.push(Piece::CallStart {
                        index: i,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    out.push(Piece::CallArgs {
                        index: i,
                        delta: call.arguments_text(),
                    });
                }
            }
        }
        self.pending.clear();
        (out, calls)
    }

    fn may_stream_text(&self) -> bool {
        !self.set.is_forced()
    }

    fn advance(&mut self, out: &mut Vec<Piece>) {
        loop {
            match self.mode {
                Mode::Held => return,
                Mode::Start => {
                    if !self.start() {
                        return;
                    }
                }
                Mode::Text => {
                    if let Some((at, block)) = next_block(&self.pending) {
                        // Whitespace between calls is their layout, not content.
                        let before = self.pending[..at].trim_end().to_string();
                        self.text(before, out);
                        self.pending.drain(..at + block.open().len());
                        self.mode = Mode::Call(Region::new(RegionKind::of(block)));
                    } else {
                        // Held: a tag's possible start, and the whitespace before it
                        // (content ends trimmed when a call follows).
                        let tag = cut_open(&self.pending);
                        let body = &self.pending[..self.pending.len() - tag];
                        let cut = body.trim_end().len();
                        let free: String = self.pending.drain(..cut).collect();
                        self.text(free, out);
                        return;
                    }
                }
                Mode::Call(_) => {
                    if !self.call(out) {
                        return;
                    }
                }
            }
        }
    }

    /// Decides what an answer that began blank is; false while it cannot be told yet.
    fn start(&mut self) -> bool {
        let lead = self.pending.len() - self.pending.trim_start().len();
        let t = &self.pending[lead..];
        if t.is_empty() {
            return false;
        }
        if let Some(m) = MARKERS.iter().find(|m| t.starts_with(**m)) {
            // A marker before calls is the convention's, not content.
            self.pending.drain(..lead + m.len());
            return true;
        }
        let list_rest = t.strip_prefix('[').map(str::trim_start);
        let block = Block::ALL.into_iter().find(|b| t.starts_with(b.open()));
        let kind = if let Some(b) = block {
            Some(RegionKind::of(b))
        } else if t.starts_with(BARE_OPENER) {
            Some(RegionKind::Bare)
        } else if list_rest.is_some_and(|r| r.starts_with(BARE_OPENER)) {
            Some(RegionKind::List)
        } else {
            None
        };
        if let Some(kind) = kind {
            let skip = lead + block.map_or(0, |b| b.open().len());
            self.pending.drain(..skip);
            self.mode = Mode::Call(Region::new(kind));
            return true;
        }
        let undecided = Block::ALL.iter().any(|b| b.open().starts_with(t))
            || BARE_OPENER.starts_with(t)
            || "```".starts_with(t)
            || MARKERS.iter().any(|m| m.starts_with(t))
            || list_rest.is_some_and(|r| BARE_OPENER.starts_with(r));
        if undecided {
            return false;
        }
        if t.starts_with(['{', '[']) || t.starts_with("```") {
            self.mode = Mode::Held;
            return false;
        }
        self.mode = Mode::Text;
        true
    }

    fn text(&self, t: String, out: &mut Vec<Piece>) {
        if !t.is_empty() && self.may_stream_text() {
            out.push(Piece::Text(t));
        }
    }

    /// Feeds pending text to the open region; true when the region ended and
    /// something may follow.
    fn call(&mut self, out: &mut Vec<Piece>) -> bool {
        let pending = std::mem::take(&mut self.pending);
        if matches!(&self.mode, Mode::Call(r) if r.xml.is_some() && !r.over) {
            return self.xml(&pending, out);
        }
        if matches!(&self.mode, Mode::Call(r) if r.kind == RegionKind::Gemma) {
            return self.gemma(&pending, out);
        }
        for (i, c) in pending.char_indices() {
            let Mode::Call(region) = &mut self.mode else {
                unreachable!("call() runs in Mode::Call")
            };
            if region.over {
                match region.kind {
                    RegionKind::Block => {
                        region.after.push(c);
                        if region.after.ends_with(CLOSE_TAG) {
                            self.mode = Mode::Text;
                            self.pending = pending[i + c.len_utf8()..].to_string();
                            return true;
                        }
                        continue;
                    }
                    // The answer was the call(s): anything after is decided at the end.
                    RegionKind::Bare | RegionKind::List | RegionKind::Gemma => {
                        self.mode = Mode::Held;
                        return false;
                    }
                }
            }
            if region.scan.depth == 0 {
                match c {
                    '{' => {
                        self.calls.push(Followed::default());
                    }
                    '[' if region.kind == RegionKind::List && !region.in_list => {
                        region.in_list = true;
                        continue;
                    }
                    ',' if region.in_list => continue,
                    '<' if region.kind == RegionKind::Block => {
                        // The XML form: read by its own reader from here on.
                        self.calls.push(Followed::default());
                        region.xml = Some(xml::Reader::default());
                        return self.xml(&pending[i..], out);
                    }
                    ']' if region.in_list => {
                        region.over = true;
                        continue;
                    }
                    c if c.is_whitespace() => continue,
                    _ => {
                        // Not a call object: the rest is read at the end.
                        if region.kind == RegionKind::Block {
                            region.over = true;
                            continue;
                        }
                        self.mode = Mode::Held;
                        return false;
                    }
                }
            }
            let step = region.scan.step(c);
            let Mode::Call(region) = &mut self.mode else {
                unreachable!()
            };
            if region.scan.depth == 0 && region.kind != RegionKind::List {
                region.over = true;
            }
            self.on_step(step, c, out);
        }
        false
    }

    /// Applies what one scanned character meant to the call being followed.
    fn on_step(&mut self, step: Step, c: char, out: &mut Vec<Piece>) {
        let Some(f) = self.calls.last_mut() else {
            return;
        };
        match step {
            Step::Nothing => {}
            Step::Args => f.args.push(c),
            // A second `name` key changes nothing already sent.
            Step::Name(_) if f.name.is_some() => {}
            Step::Name(name) => self.named(name, out),
            Step::ArgsString(text) => f.args = text,
            Step::ObjectEnd => {
                if f.args.is_empty() {
                    f.args.push_str("{}");
                }
            }
        }
        self.send_args(out);
    }

    /// The call being followed has its name: it starts on the stream unless it is
    /// dropped.
    fn named(&mut self, name: String, out: &mut Vec<Piece>) {
        let parallel = self.set.parallel;
        let Some(f) = self.calls.last_mut() else {
            return;
        };
        let offered = self.set.get(&name).is_some();
        f.dropped = !offered || (!parallel && self.started > 0);
        if !f.dropped {
            f.index = Some(self.started);
            f.id = call_id();
            out.push(Piece::CallStart {
                index: self.started,
                id: f.id.clone(),
                name: name.clone(),
            });
            self.started += 1;
        }
        f.name = Some(name);
    }

    /// Sends the arguments text the call being followed has gained.
    fn send_args(&mut self, out: &mut Vec<Piece>) {
        let Some(f) = self.calls.last_mut() else {
            return;
        };
        if let (Some(index), false) = (f.index, f.dropped) {
            if f.args.len() > f.sent {
                out.push(Piece::CallArgs {
                    index,
                    delta: f.args[f.sent..].to_string(),
                });
                f.sent = f.args.len();
            }
        }
    }

    /// Feeds `text` to a Gemma 4 block; at its close tag the call inside goes out
    /// whole (its name, then its arguments) and true is returned.
    fn gemma(&mut self, text: &str, out: &mut Vec<Piece>) -> bool {
        let Mode::Call(region) = &mut self.mode else {
            unreachable!("gemma() runs in Mode::Call")
        };
        region.after.push_str(text);
        let Some(end) = region.after.find(gemma::CLOSE) else {
            return false;
        };
        let inner = region.after[..end].to_string();
        self.pending = region.after[end + gemma::CLOSE.len()..].to_string();
        self.mode = Mode::Text;
        if let Ok(call) = gemma::read_call(&inner, &self.set) {
            self.calls.push(Followed::default());
            self.named(call.name, out);
            if let Some(f) = self.calls.last_mut() {
                f.args = call.arguments.to_string();
            }
            self.send_args(out);
        }
        true
    }

    /// Feeds `text` to the XML call being read; true when `</function>` came (what
    /// followed it is pending again).
    fn xml(&mut self, text: &str, out: &mut Vec<Piece>) -> bool {
        let Mode::Call(region) = &mut self.mode else {
            unreachable!("xml() runs in Mode::Call")
        };
        let reader = region.xml.as_mut().expect("an XML region has its reader");
        let Ok(events) = reader.push(text) else {
            // Not the form after all: the whole text is read at the end.
            self.mode = Mode::Held;
            return false;
        };
        let done = reader.is_done().then(|| reader.take_rest());
        for e in events {
            match e {
                xml::Event::Name(name) => self.named(name, out),
                xml::Event::Param(key, raw) => {
                    let set = self.set.clone();
                    let Some(f) = self.calls.last_mut() else {
                        continue;
                    };
                    let Some(tool) = f.name.as_deref().and_then(|n| set.get(n)) else {
                        continue;
                    };
                    let member = xml::member_text(&key, &xml::typed(tool, &key, &raw));
                    f.args.push_str(if f.args.is_empty() { "{" } else { ", " });
                    f.args.push_str(&member);
                }
                xml::Event::End => {
                    if let Some(f) = self.calls.last_mut() {
                        f.args.push_str(if f.args.is_empty() { "{}" } else { "}" });
                    }
                }
            }
            self.send_args(out);
        }
        let Some(rest) = done else {
            return false;
        };
        if let Mode::Call(region) = &mut self.mode {
            region.over = true;
        }
        self.pending = rest;
        true
    }
}

/// What a character meant for the call object.
enum Step {
    Nothing,
    /// The character belongs to the arguments object.
    Args,
    /// The name is whole.
    Name(String),
    /// Arguments written as a string, decoded.
    ArgsString(String),
    /// The call object closed.
    ObjectEnd,
}

impl Region {
    fn new(kind: RegionKind) -> Region {
        Region {
            kind,
            scan: Scan::default(),
            over: false,
            in_list: false,
            after: String::new(),
            xml: None,
        }
    }
}

impl Scan {
    fn step(&mut self, c: char) -> Step {
        let capturing_args = self.capture == Capture::Args;
        if self.in_str {
            if matches!(
                self.capture,
                Capture::Key | Capture::Name | Capture::ArgsString
            ) {
                self.raw.push(c);
            }
            if self.esc {
                self.esc = false;
            } else if c == '\\' {
                self.esc = true;
            } else if c == '"' {
                self.in_str = false;
                return self.string_end(capturing_args);
            }
            return if capturing_args {
                Step::Args
            } else {
                Step::Nothing
            };
        }
        match c {
            '"' => {
                self.in_str = true;
                if self.depth == 1 {
                    match self.expect {
                        Expect::Key => {
                            self.capture = Capture::Key;
                            self.raw = "\"".into();
                        }
                        Expect::Value => {
                            self.expect = Expect::InValue;
                            self.capture = match self.key.as_str() {
                                "name" => Capture::Name,
                                "arguments" | "parameters" => Capture::ArgsString,
                                _ => Capture::None,
                            };
                            self.raw = "\"".into();
                        }
                        _ => {}
                    }
                }
            }
            '{' | '[' => {
                if self.depth == 1 && self.expect == Expect::Value {
                    self.expect = Expect::InValue;
                    if c == '{' && matches!(self.key.as_str(), "arguments" | "parameters") {
                        self.capture = Capture::Args;
                    }
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect = Expect::Key;
                }
            }
            '}' | ']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 1 && capturing_args {
                    self.capture = Capture::None;
                    return Step::Args;
                }
                if self.depth == 0 {
                    return Step::ObjectEnd;
                }
            }
            ':' if self.depth == 1 && self.expect == Expect::Colon => self.expect = Expect::Value,
            ',' if self.depth == 1 => {
                self.expect = Expect::Key;
                self.capture = Capture::None;
            }
            c if self.depth == 1 && self.expect == Expect::Value && !c.is_whitespace() => {
                // A number or a literal: nothing to follow.
                self.expect = Expect::InValue;
            }
            _ => {}
        }
        // The arguments object's own `{` starts the capture.
        if capturing_args || self.capture == Capture::Args {
            Step::Args
        } else {
            Step::Nothing
        }
    }

    fn string_end(&mut self, capturing_args: bool) -> Step {
        if capturing_args {
            return Step::Args;
        }
        let decoded = || serde_json::from_str::<String>(&self.raw).unwrap_or_default();
        match std::mem::take(&mut self.capture) {
            Capture::Key => {
                self.key = decoded();
                self.expect = Expect::Colon;
                Step::Nothing
            }
            Capture::Name => Step::Name(decoded()),
            Capture::ArgsString => Step::ArgsString(decoded()),
            Capture::None | Capture::Args => Step::Nothing,
        }
    }
}

/// Joins neighbouring pieces of one kind, so a token is one event.
fn coalesce(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        match (out.last_mut(), p) {
            (Some(Piece::Text(a)), Piece::Text(b)) => a.push_str(&b),
            (
                Some(Piece::CallArgs { index: i, delta: a }),
                Piece::CallArgs { index: j, delta: b },
            ) if *i == j => a.push_str(&b),
            (_, p) => out.push(p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ToolChoice, ToolDef};
    use super::*;

    fn set(choice: ToolChoice, parallel: bool) -> Arc<ToolSet> {
        let t = ToolDef::new("get_weather", None, None).unwrap();
        ToolSet::new(vec![t], choice, parallel).unwrap().unwrap()
    }

    /// Feeds `text` in pieces of `step` characters; returns every piece sent and the
    /// final calls.
    fn run(set: &Arc<ToolSet>, text: &str, step: usize) -> (Vec<Piece>, Vec<ToolCall>) {
        let mut s = CallStream::new(set.clone());
        let chars: Vec<char> = text.chars().collect();
        let mut out = Vec::new();
        for chunk in chars.chunks(step) {
            out.extend(s.push(&chunk.iter().collect::<String>()));
        }
        let (rest, calls) = s.finish();
        out.extend(rest);
        (out, calls)
    }

    fn content(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn args_of(pieces: &[Piece], index: usize) -> Vec<String> {
        pieces
            .iter()
            .filter_map(|p| match p {
                Piece::CallArgs { index: i, delta } if *i == index => Some(delta.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_xml_call_streams_its_name_then_each_parameter() {
        let params = json!({"type": "object", "properties": {"city": {"type": "string"},
            "days": {"type": "integer"}}, "required": ["city", "days"]});
        let t = ToolDef::new("get_weather", None, Some(params)).unwrap();
        let s = ToolSet::new(vec![t], ToolChoice::Auto, true)
            .unwrap()
            .unwrap();
        let one = "<tool_call>\n<function=get_weather>\n<parameter=city>\na < b\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        let text = format!("Checking.\n\n{one}\n{}", one.replace("\n3\n", "\n4\n"));
        let want = [
            "{\"city\": \"a < b\", \"days\": 3}",
            "{\"city\": \"a < b\", \"days\": 4}",
        ];
        for step in [1, 2, 7, text.len()] {
            let (pieces, calls) = run(&s, &text, step);
            assert_eq!(content(&pieces), "Checking.", "{step}");
            assert_eq!(calls.len(), 2);
            for (i, c) in calls.iter().enumerate() {
                assert_eq!(args_of(&pieces, i).concat(), want[i], "{step}");
                assert_eq!(c.written.as_deref(), Some(want[i]));
                assert_eq!(c.arguments["days"], json!(3 + i));
                // The call's start came before any of its arguments, its id kept.
                let start = pieces.iter().position(|p| {
                    matches!(p, Piece::CallStart { index, id, .. } if *index == i && *id == c.id)
                });
                let first_args = pieces
                    .iter()
                    .position(|p| matches!(p, Piece::CallArgs { index, .. } if *index == i));
                assert!(start.unwrap() < first_args.unwrap(), "{pieces:?}");
            }
            if step == 1 {
                // Piece by piece: the first parameter went out before the second was read.
                assert!(args_of(&pieces, 0).len() >= 3, "{pieces:?}");
            }
        }
    }

    #[test]
    fn a_gemma_call_streams_when_its_block_closes() {
        let s = set(ToolChoice::Auto, true);
        let text = "Sure.<|tool_call>call:get_weather{city:<|\"|>a, b<|\"|>,days:3}<tool_call|><|tool_call>call:rm_rf{}<tool_call|> Done.";
        for step in [1, 4, text.len()] {
            let (pieces, calls) = run(&s, text, step);
            assert_eq!(content(&pieces), "Sure. Done.", "{step}: {pieces:?}");
            assert_eq!(calls.len(), 1);
            let want = "{\"city\":\"a, b\",\"days\":3}";
            assert_eq!(args_of(&pieces, 0).concat(), want);
            assert_eq!(calls[0].written.as_deref(), Some(want));
            // The call went out before the text after it.
            let start = pieces
                .iter()
                .position(|p| matches!(p, Piece::CallStart { .. }));
            let done = pieces
                .iter()
                .position(|p| matches!(p, Piece::Text(t) if t.contains('D')));
            assert!(start.unwrap() < done.unwrap(), "{pieces:?}");
        }
    }

    #[test]
    fn text_streams_and_a_call_streams_name_first_then_its_arguments() {
        let s = set(ToolChoice::Auto, true);
        let text = "Let me check the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>";
        let (pieces, calls) = run(&s, text, 3);
        // The text went out in several pieces, before the call, without the tag.
        let texts = pieces
            .iter()
            .take_while(|p| matches!(p, Piece::Text(_)))
            .count();
        assert!(texts >= 5, "{pieces:?}");
        assert_eq!(content(&pieces), "Let me check the weather.");
        let start = pieces
            .iter()
            .position(|p| matches!(p, Piece::CallStart { .. }))
            .unwrap();
        let Piece::CallStart { index, id, name } = &pieces[start] else {
            unreachable!()
        };
        assert_eq!((*index, name.as_str()), (0, "get_weather"));
        let deltas = args_of(&pieces, 0);
        assert!(deltas.len() >= 5, "{deltas:?}");
        let whole: String = deltas.concat();
        assert_eq!(whole, "{\"city\": \"Paris\", \"days\": [1, 2]}");
        assert_eq!(calls.len(), 1);
        assert_eq!(&calls[0].id, id);
        assert_eq!(calls[0].arguments, json!({"city": "Paris", "days": [1, 2]}));
        assert_eq!(calls[0].arguments_text(), whole);
        // Every prefix of the deltas is a prefix of the final text.
        let mut acc = String::new();
        for d in deltas {
            acc.push_str(&d);
            assert!(whole.starts_with(&acc));
        }
    }

    #[test]
    fn each_split_of_the_text_gives_the_same_stream() {
        let s = set(ToolChoice::Auto, true);
        let text = "Two calls: <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"q\": \"a \\\"}\\\" b\"}}</tool_call> and <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call> done";
        let (whole, calls) = run(&s, text, text.len());
        for step in 1..12 {
            let (pieces, c) = run(&s, text, step);
            assert_eq!(content(&pieces), content(&whole), "step {step}");
            for i in 0..2 {
                assert_eq!(args_of(&pieces, i).concat(), args_of(&whole, i).concat());
            }
            assert_eq!(c.len(), 2);
        }
        assert_eq!(content(&whole), "Two calls: and done");
        assert_eq!(calls[0].arguments, json!({"q": "a \"}\" b"}));
        assert_eq!(calls[1].arguments_text(), "{}");
    }

    #[test]
    fn a_bare_call_and_a_marked_list_stream_too() {
        let s = set(ToolChoice::Auto, true);
        let (pieces, calls) = run(
            &s,
            "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
            2,
        );
        assert_eq!(content(&pieces), "");
        assert_eq!(args_of(&pieces, 0).concat(), "{\"city\": \"Oslo\"}");
        assert_eq!(calls.len(), 1);
        let (pieces, calls) = run(
            &s,
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}}, {\"name\": \"get_weather\", \"arguments\": {\"b\": 2}}]",
            4,
        );
        assert_eq!(content(&pieces), "");
        assert_eq!(args_of(&pieces, 1).concat(), "{\"b\": 2}");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments_text(), "{\"b\": 2}");
    }

    #[test]
    fn unknown_tools_extra_calls_and_forced_text_are_never_sent() {
        let s = set(ToolChoice::Auto, false);
        let call =
            |n: &str| format!("<tool_call>{{\"name\": \"{n}\", \"arguments\": {{}}}}</tool_call>");
        let text = format!(
            "{} {} {}",
            call("rm_rf"),
            call("get_weather"),
            call("get_weather")
        );
        let (pieces, calls) = run(&s, &text, 5);
        let starts = pieces
            .iter()
            .filter(|p| matches!(p, Piece::CallStart { .. }))
            .count();
        assert_eq!((starts, calls.len()), (1, 1));
        assert_eq!(calls[0].name, "get_weather");
        let forced = set(ToolChoice::Required, true);
        let (pieces, _) = run(&forced, &format!("ok {}", call("get_weather")), 3);
        assert_eq!(content(&pieces), "");
    }

    #[test]
    fn what_cannot_be_told_early_is_decided_at_the_end() {
        let s = set(ToolChoice::Auto, true);
        // A fenced call: held, then sent whole.
        let (pieces, calls) = run(
            &s,
            "```json\n{\"name\": \"get_weather\", \"arguments\": {\"x\": 1}}\n```",
            3,
        );
        assert_eq!(content(&pieces), "");
        assert_eq!(calls.len(), 1);
        assert_eq!(args_of(&pieces, 0), vec!["{\"x\":1}".to_string()]);
        // JSON that is no call is content, sent at the end.
        let (pieces, calls) = run(&s, "{\"answer\": 42}", 3);
        assert_eq!(content(&pieces), "{\"answer\": 42}");
        assert!(calls.is_empty());
        // A tag's start held at the end was a cut-off call: dropped, as a whole
        // answer drops it; text that only looked like one went out.
        let (pieces, _) = run(&s, "a < b and <tool", 2);
        assert_eq!(content(&pieces), "a < b and");
        // A plain answer keeps its own trailing whitespace.
        for step in [1, 4] {
            let (pieces, calls) = run(&s, " Hello world \n", step);
            assert_eq!(content(&pieces), " Hello world \n");
            assert!(calls.is_empty());
        }
    }
}
