//! `Matcher`: one sequence's walk through a grammar, in the shape serving engines call
//! (llguidance's `LLMatcher` verbs): fill the next token bitmask, consume, validate a
//! draft, roll back, copy.

use crate::bitmask::{Buffer, Row};
use crate::grammar::PyGrammar;
use crate::tokenizer::PyTokenizer;
use llamay_constrain::{Matcher, TokenMask, Vocabulary};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use std::sync::{Arc, Mutex, MutexGuard};

/// A matcher with the tokens it consumed (a copy replays them: the crate's matcher is
/// not `Clone`, and a copy is mostly taken near the start of a sequence).
struct State {
    m: Matcher,
    tokens: Vec<u32>,
}

impl State {
    /// Writes the next-token mask into `row`. With `remaining` (the tokens left in the
    /// caller's budget, this one and the end-of-generation token included) only tokens
    /// after which the output can still be completed in time are allowed: closing `d`
    /// bytes takes at most `d` tokens plus the end token. Once that takes the whole
    /// budget only tokens on a shortest completion are left, so the output closes within
    /// `max_new_tokens` instead of being cut off.
    fn fill(&mut self, row: Row, remaining: Option<usize>) {
        // SAFETY: the caller holds the buffer object for the whole call and gives each
        // row to one matcher only.
        let out = unsafe { row.slice() };
        let Some(remaining) = remaining else {
            self.m.write_mask_words(out);
            return;
        };
        let n = self.m.constraint().vocab().len();
        let mut mask = TokenMask::new(n);
        match self.m.min_bytes_to_accept() {
            Some(d) if d + 1 >= remaining => self.m.closing_mask(&mut mask),
            None => self.m.mask(&mut mask),
            Some(_) => {
                self.m.mask(&mut mask);
                let vocab = self.m.constraint().vocab().clone();
                let allowed: Vec<u32> = mask.allowed().collect();
                for t in allowed {
                    // After `t`: its distance in tokens, plus the end token, must fit
                    // in the `remaining - 1` tokens left.
                    let fits = vocab.is_eog(t)
                        || self
                            .m
                            .min_bytes_after(t)
                            .is_some_and(|d| d + 2 <= remaining);
                    if !fits {
                        mask.disallow(t);
                    }
                }
                // Every closing token shortens the distance, which fits the budget.
                if mask.count() == 0 {
                    self.m.closing_mask(&mut mask);
                }
            }
        }
        mask.write_u32_words(out);
    }

    fn consume(&mut self, token: u32) -> bool {
        if self.m.commit(token).is_err() {
            return false;
        }
        self.tokens.push(token);
        true
    }

    fn rollback(&mut self, n: usize) -> Result<(), String> {
        self.m.rollback(n).map_err(|e| e.to_string())?;
        self.tokens.truncate(self.tokens.len() - n);
        Ok(())
    }

    /// All of `tokens`, or none (the state is left as it was).
    fn consume_all(&mut self, tokens: &[u32]) -> bool {
        for (i, &t) in tokens.iter().enumerate() {
            if !self.consume(t) {
                let _ = self.rollback(i);
                return false;
            }
        }
        true
    }

    /// How many of `tokens`, from the first, would be accepted (nothing is kept).
    fn validate(&mut self, tokens: &[u32]) -> usize {
        let mut n = 0;
        for &t in tokens {
            if !self.consume(t) {
                break;
            }
            n += 1;
        }
        let _ = self.rollback(n);
        n
    }
}

/// The constraint's state for one sequence. Methods that take a while run without the
/// GIL; one matcher is for one sequence (it is locked while in use).
#[pyclass(name = "Matcher", module = "llamay", frozen)]
pub struct PyMatcher {
    state: Mutex<State>,
    grammar: Py<PyGrammar>,
    vocab: Arc<Vocabulary>,
}

impl PyMatcher {
    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this matcher is in use by another thread (one per sequence)")
        })
    }

    fn words(&self) -> usize {
        self.vocab.len().div_ceil(32)
    }
}

#[pymethods]
impl PyMatcher {
    /// A matcher at the start of `grammar`, compiled for `tokenizer` (once per pair:
    /// later matchers share the compiled constraint).
    #[new]
    fn new(
        py: Python<'_>,
        tokenizer: &PyTokenizer,
        grammar: Bound<'_, PyGrammar>,
    ) -> PyResult<Self> {
        let vocab = tokenizer.vocab.clone();
        let g = grammar.get();
        let c = py.detach(|| g.constraint_for(&vocab))?;
        Ok(PyMatcher {
            state: Mutex::new(State {
                m: c.matcher(),
                tokens: Vec::new(),
            }),
            grammar: grammar.unbind(),
            vocab,
        })
    }

    /// Writes the allowed next tokens into row `index` of `bitmask` (an int32 numpy
    /// array or CPU torch tensor of shape `(batch, ceil(vocab_size / 32))`). With
    /// `remaining` (tokens left in the budget, this one included), only tokens that
    /// leave the output completable in time.
    #[pyo3(signature = (bitmask, index = 0, remaining = None))]
    fn fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: isize,
        remaining: Option<usize>,
    ) -> PyResult<()> {
        let row = Buffer::of(bitmask, self.words())?.row(index)?;
        let mut st = self.lock()?;
        let st = &mut *st;
        py.detach(|| st.fill(row, remaining));
        Ok(())
    }

    /// Consumes one token; False (state unchanged) if the grammar does not allow it.
    fn consume_token(&self, token: u32) -> PyResult<bool> {
        Ok(self.lock()?.consume(token))
    }

    /// Consumes all the tokens, or none of them (False, state unchanged).
    fn consume_tokens(&self, py: Python<'_>, tokens: Vec<u32>) -> PyResult<bool> {
        let mut st = self.lock()?;
        let st = &mut *st;
        Ok(py.detach(|| st.consume_all(&tokens)))
    }

    /// How many of `tokens`, from the first, the grammar accepts (the state is kept).
    fn validate_tokens(&self, py: Python<'_>, tokens: Vec<u32>) -> PyResult<usize> {
        let mut st = self.lock()?;
        let st = &mut *st;
        Ok(py.detach(|| st.validate(&tokens)))
    }

    /// Undoes the last `n` consumed tokens (at most `MAX_ROLLBACK`).
    fn rollback(&self, n: usize) -> PyResult<()> {
        self.lock()?.rollback(n).map_err(PyValueError::new_err)
    }

    /// Whether an end-of-generation token was consumed (XGrammar's meaning, which
    /// SGLang's and vLLM's schedulers expect: a terminated row is left unmasked).
    fn is_terminated(&self) -> PyResult<bool> {
        let m = &mut self.lock()?.m;
        Ok(m.is_finished() && !m.is_accepting())
    }

    /// Whether nothing but an end-of-generation token can follow (or one was
    /// consumed): llguidance's `is_stopped`.
    fn is_stopped(&self) -> PyResult<bool> {
        Ok(self.lock()?.m.is_finished())
    }

    /// Whether the output may end here (an end-of-generation token is allowed).
    fn is_accepting(&self) -> PyResult<bool> {
        Ok(self.lock()?.m.is_accepting())
    }

    /// The fewest bytes that complete the output from here (0 when it may end now),
    /// or None where nothing can.
    fn min_bytes_to_accept(&self) -> PyResult<Option<usize>> {
        Ok(self.lock()?.m.min_bytes_to_accept())
    }

    /// Back to the start of the grammar.
    fn reset(&self) -> PyResult<()> {
        let mut st = self.lock()?;
        st.m = st.m.constraint().matcher();
        st.tokens.clear();
        Ok(())
    }

    /// An independent matcher in the same state (same compiled grammar).
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        let st = self.lock()?;
        let (c, tokens) = (st.m.constraint().clone(), st.tokens.clone());
        drop(st);
        let state = py.detach(|| {
            let mut fresh = State {
                m: c.matcher(),
                tokens: Vec::with_capacity(tokens.len()),
            };
            let ok = fresh.consume_all(&tokens);
            ok.then_some(fresh)
        });
        let state = state.ok_or_else(|| PyRuntimeError::new_err("replaying the copy failed"))?;
        Ok(PyMatcher {
            state: Mutex::new(state),
            grammar: self.grammar.clone_ref(py),
            vocab: self.vocab.clone(),
        })
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Self> {
        self.copy(py)
    }

    /// The allowed next tokens as a list of ids (for tests and small vocabularies).
    fn allowed_tokens(&self) -> PyResult<Vec<u32>> {
        Ok(self.lock()?.m.mask_ref().allowed().collect())
    }

    /// The bytes every continuation must start with (empty when there is a choice).
    fn forced_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let bytes = self.lock()?.m.forced_bytes();
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }

    /// The tokens consumed so far.
    #[getter]
    fn tokens(&self) -> PyResult<Vec<u32>> {
        Ok(self.lock()?.tokens.clone())
    }

    /// The grammar this matcher walks.
    #[getter]
    fn grammar(&self, py: Python<'_>) -> Py<PyGrammar> {
        self.grammar.clone_ref(py)
    }

    /// The grammar's enforcement report (what is not enforced, and where).
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.grammar.bind(py).getattr("report")
    }

    /// Mask statistics so far: steps, time, cache use.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.lock()?.m.stats();
        let d = PyDict::new(py);
        d.set_item("steps", s.steps)?;
        d.set_item("mean_mask_us", s.mean_mask_us())?;
        d.set_item("mask_cache_hit_rate", s.hit_rate())?;
        d.set_item("states_used", s.states_used)?;
        d.set_item("table_clears", s.table_clears)?;
        Ok(d)
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
}

/// Fills one bitmask row per matcher (`indices[i]` for `matchers[i]`, default row
/// `i`) on several threads, without the GIL. `remaining`: one budget for all, or
/// one per matcher (see `Matcher.fill_next_token_bitmask`).
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices = None, remaining = None))]
pub fn fill_next_token_bitmasks(
    py: Python<'_>,
    matchers: Vec<Bound<'_, PyMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<isize>>,
    remaining: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let remaining: Vec<Option<usize>> = match remaining {
        None => vec![None; matchers.len()],
        Some(r) if r.is_none() => vec![None; matchers.len()],
        Some(r) => match r.extract::<usize>() {
            Ok(one) => vec![Some(one); matchers.len()],
            Err(_) => {
                let each: Vec<usize> = r.extract()?;
                if each.len() != matchers.len() {
                    return Err(PyValueError::new_err("one remaining budget per matcher"));
                }
                each.into_iter().map(Some).collect()
            }
        },
    };
    let indices: Vec<isize> = match indices {
        Some(ix) if ix.len() != matchers.len() => {
            return Err(PyValueError::new_err(format!(
                "{} matchers but {} indices",
                matchers.len(),
                ix.len()
            )))
        }
        Some(ix) => ix,
        None => (0..matchers.len() as isize).collect(),
    };
    let Some(first) = matchers.first() else {
        return Ok(());
    };
    let buf = Buffer::of(bitmask, first.get().words())?;
    let mut rows = Vec::with_capacity(matchers.len());
    let mut seen = std::collections::HashSet::new();
    for (m, &i) in matchers.iter().zip(&indices) {
        let row = buf.row(i)?;
        let norm = if i < 0 { i + 1_000_000_000 } else { i };
        if !seen.insert(norm) {
            return Err(PyValueError::new_err(format!("row {i} is given twice")));
        }
        if m.get().words() > buf.words_per_row() {
            return Err(PyValueError::new_err(
                "a matcher's vocabulary is wider than the bitmask",
            ));
        }
        rows.push(row);
    }
    let mut guards = matchers
        .iter()
        .map(|m| m.get().lock())
        .collect::<PyResult<Vec<_>>>()?;
    let mut work: Vec<(&mut State, Row, Option<usize>)> = guards
        .iter_mut()
        .map(|g| &mut **g)
        .zip(rows)
        .zip(remaining)
        .map(|((st, row), r)| (st, row, r))
        .collect();
    py.detach(|| {
        work.par_iter_mut()
            .for_each(|(st, row, remaining)| st.fill(*row, *remaining));
    });
    Ok(())
}
