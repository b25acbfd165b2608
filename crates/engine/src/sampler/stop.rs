//! Stopping generation: end-of-generation token ids and stop strings that may span
//! several tokens.
//!
//! Text is handled as bytes, so a stop string can match across a token boundary that
//! splits a UTF-8 character. Bytes that might be the start of a stop string are held
//! back until the next piece shows whether they are.

use std::collections::HashSet;

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token (not part of the output).
    Eog(u32),
    /// The stop string with this index matched (it is not part of the output).
    String(usize),
}

/// The outcome of feeding one token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopStep {
    /// Bytes that are now certain to be output.
    pub emit: Vec<u8>,
    /// Set when generation must end.
    pub stop: Option<StopReason>,
}

/// Watches generated tokens for EOG ids and stop strings.
#[derive(Clone, Debug, Default)]
pub struct StopConditions {
    eog: HashSet<u32>,
    stops: Vec<Vec<u8>>,
    /// Output not yet released: a suffix that is a prefix of some stop string.
    held: Vec<u8>,
}

impl StopConditions {
    /// Empty stop strings are ignored (they would match before any output).
    pub fn new<S: AsRef<[u8]>>(eog: HashSet<u32>, stops: impl IntoIterator<Item = S>) -> Self {
        StopConditions {
            eog,
            stops: stops
                .into_iter()
                .map(|s| s.as_ref().to_vec())
                .filter(|s| !s.is_empty())
                .collect(),
            held: Vec::new(),
        }
    }

    pub fn is_eog(&self, token: u32) -> bool {
        self.eog.contains(&token)
    }

    /// Feeds a generated token and its text bytes.
    pub fn push(&mut self, token: u32, piece: &[u8]) -> StopStep {
        if self.is_eog(token) {
            return StopStep {
                emit: std::mem::take(&mut self.held),
                stop: Some(StopReason::Eog(token)),
            };
        }
        self.held.extend_from_slice(piece);
        // The earliest match wins; among matches at the same place, the first listed.
        let found = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| find(&self.held, s).map(|at| (at, i)))
            .min();
        if let Some((at, i)) = found {
            let emit = self.held[..at].to_vec();
            self.held.clear();
            return StopStep {
                emit,
                stop: Some(StopReason::String(i)),
            };
        }
        let keep = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.held, s))
            .max()
            .unwrap_or(0);
        let emit = self.held.drain(..self.held.len() - keep).collect();
        StopStep { emit, stop: None }
    }

    /// Releases held-back bytes when generation ends for another reason (length).
    pub fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest proper prefix of `stop` that `text` ends with.
fn longest_suffix_prefix(text: &[u8], stop: &[u8]) -> usize {
    (1..stop.len().min(text.len() + 1))
        .rev()
        .find(|&n| text.ends_with(&stop[..n]))
        .unwrap_or(0)
}
