//! Reading one XML call from text that may still be arriving.

use super::{XmlCallError, FUNCTION_CLOSE, FUNCTION_OPEN, PARAM_CLOSE, PARAM_OPEN};

/// What a stretch of a call meant.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// `<function=NAME>` is whole.
    Name(String),
    /// A parameter is whole: its key and its value as written (without the newline
    /// the form puts on each side).
    Param(String, String),
    /// `</function>`: the call is over.
    End,
}

/// A call read piece by piece: [`push`](Reader::push) text as it comes.
#[derive(Default)]
pub(crate) struct Reader {
    /// Text not yet read into an event.
    buf: String,
    phase: Phase,
    /// Where in `buf` the search for the open value's `</parameter>` goes on (a long
    /// value is not searched again from its start on every piece).
    searched: usize,
}

#[derive(Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Head,
    Params,
    Done,
}

impl Reader {
    /// Takes more text and returns the events it completes; an error when the text
    /// cannot be the XML form. Text after `</function>` is kept (see
    /// [`take_rest`](Reader::take_rest)).
    pub(crate) fn push(&mut self, text: &str) -> Result<Vec<Event>, XmlCallError> {
        self.buf.push_str(text);
        let mut events = Vec::new();
        while let Some(e) = self.next()? {
            events.push(e);
        }
        Ok(events)
    }

    /// Whether `</function>` was read.
    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// What followed `</function>`.
    pub(crate) fn take_rest(&mut self) -> String {
        std::mem::take(&mut self.buf)
    }

    fn next(&mut self) -> Result<Option<Event>, XmlCallError> {
        let lead = self.buf.len() - self.buf.trim_start().len();
        let t = &self.buf[lead..];
        let malformed = |what: &str| {
            let seen: String = t.chars().take(40).collect();
            Err(XmlCallError::Malformed(format!(
                "expected {what}, not {seen:?}"
            )))
        };
        match self.phase {
            Phase::Done => Ok(None),
            Phase::Head => {
                if let Some(after) = t.strip_prefix(FUNCTION_OPEN) {
                    let Some(name) = tag_value(after)? else {
                        return Ok(None);
                    };
                    let name = name.to_string();
                    self.buf
                        .drain(..lead + FUNCTION_OPEN.len() + name.len() + 1);
                    self.phase = Phase::Params;
                    Ok(Some(Event::Name(name)))
                } else if FUNCTION_OPEN.starts_with(t) {
                    Ok(None)
                } else {
                    malformed(FUNCTION_OPEN)
                }
            }
            Phase::Params => {
                if t.starts_with(FUNCTION_CLOSE) {
                    self.buf.drain(..lead + FUNCTION_CLOSE.len());
                    self.phase = Phase::Done;
                    return Ok(Some(Event::End));
                }
                let Some(after) = t.strip_prefix(PARAM_OPEN) else {
                    return match FUNCTION_CLOSE.starts_with(t) || PARAM_OPEN.starts_with(t) {
                        true => Ok(None),
                        false => malformed("<parameter= or </function>"),
                    };
                };
                let Some(key) = tag_value(after)? else {
                    return Ok(None);
                };
                let value_at = lead + PARAM_OPEN.len() + key.len() + 1;
                let mut from = self.searched.max(value_at);
                while !self.buf.is_char_boundary(from) {
                    from -= 1;
                }
                let Some(end) = self.buf[from..].find(PARAM_CLOSE).map(|i| from + i) else {
                    self.searched = self.buf.len().saturating_sub(PARAM_CLOSE.len());
                    return Ok(None);
                };
                let key = key.to_string();
                let raw = &self.buf[value_at..end];
                let raw = raw.strip_prefix('\n').unwrap_or(raw);
                let raw = raw.strip_suffix('\n').unwrap_or(raw).to_string();
                self.buf.drain(..end + PARAM_CLOSE.len());
                self.searched = 0;
                Ok(Some(Event::Param(key, raw)))
            }
        }
    }
}

/// The name in `NAME>…` once its `>` has come; a name that runs into a line break or
/// another tag is not one.
fn tag_value(after: &str) -> Result<Option<&str>, XmlCallError> {
    let stop = after.find(['>', '\n', '<']);
    match stop.map(|i| (i, after.as_bytes()[i])) {
        Some((0, _)) => Err(XmlCallError::Malformed("an empty name".into())),
        Some((i, b'>')) => Ok(Some(&after[..i])),
        Some(_) => Err(XmlCallError::Malformed(format!(
            "a name that does not end in '>': {:?}",
            after.chars().take(40).collect::<String>()
        ))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &str = "<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=text>\nif a < b:\n    x = \"</param\"\n\n</parameter>\n</function>\n</tool_call>";

    fn events(pieces: &[&str]) -> (Vec<Event>, String) {
        let mut r = Reader::default();
        let mut all = Vec::new();
        for p in pieces {
            all.extend(r.push(p).unwrap());
        }
        assert!(r.is_done());
        (all, r.take_rest())
    }

    #[test]
    fn every_split_of_a_call_reads_the_same() {
        let want = vec![
            Event::Name("write_file".into()),
            Event::Param("path".into(), "a.txt".into()),
            Event::Param("text".into(), "if a < b:\n    x = \"</param\"\n".into()),
            Event::End,
        ];
        let (whole, rest) = events(&[CALL]);
        assert_eq!(whole, want);
        assert_eq!(rest, "\n</tool_call>");
        let chars: Vec<String> = CALL.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(events(&refs).0, want);
        for cut in 1..CALL.len() {
            if CALL.is_char_boundary(cut) {
                assert_eq!(events(&[&CALL[..cut], &CALL[cut..]]).0, want, "{cut}");
            }
        }
    }

    #[test]
    fn what_is_not_the_form_is_an_error() {
        for bad in [
            "{\"name\": \"f\"}",
            "<function=>",
            "<function=f\n>",
            "<function=f>\nhello",
            "<function=f>\n<parameter=a b\n",
        ] {
            let mut r = Reader::default();
            assert!(
                matches!(r.push(bad), Err(XmlCallError::Malformed(_))),
                "{bad}"
            );
        }
        // A cut-off call is not an error yet: more may come.
        let mut r = Reader::default();
        assert_eq!(
            r.push("<function=f>\n<parameter=a>\n12").unwrap(),
            vec![Event::Name("f".into())]
        );
        assert!(!r.is_done());
    }
}
