//! What one runtime's constraints may use and take: the lexicons it serves
//! (`serve -lexicon NAME=FILE`, `run -lexicon FILE`), named by requests
//! (`llamay_lexicon: "NAME"`) and by schemas (`x-llamay-lexicon`), and the budget a
//! schema's compile runs under (`serve -compile-budget-ms`, `-compile-budget-nodes`).
//! Runtime state, set once at start and read by [`Surfaces::resolve`]: process statics
//! would let two runtimes in one process (tests, an embedding program) see each
//! other's lexicons.
//!
//! [`Surfaces::resolve`]: crate::Surfaces::resolve

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use llamay_constrain::{CompileBudget, Lexicon};

use crate::error::Error;

/// Reads and compiles the lexicon file at `path` under `name` (one term per line).
pub fn load_lexicon(name: &str, path: &Path) -> Result<Arc<Lexicon>, Error> {
    if name.is_empty() {
        return Err(Error::bad_request(
            "a lexicon needs a name: -lexicon NAME=FILE",
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        Error::bad_request(format!(
            "cannot read lexicon {name} from {}: {e}",
            path.display()
        ))
    })?;
    Lexicon::parse(name, &bytes)
        .map(Arc::new)
        .map_err(|e| Error::bad_request(format!("{} ({})", e, path.display())))
}

/// The lexicons a runtime serves and the budget its schema compiles run under.
#[derive(Clone, Debug, Default)]
pub struct ConstraintSettings {
    lexicons: BTreeMap<String, Arc<Lexicon>>,
    /// What one schema's compile may take (time, grammar nodes); past it the request
    /// gets a 400 and the others are served meanwhile.
    pub budget: CompileBudget,
}

impl ConstraintSettings {
    /// Makes `lexicon` one of the served lexicons (replacing one of the same name).
    pub fn serve_lexicon(&mut self, lexicon: Arc<Lexicon>) {
        self.lexicons.insert(lexicon.name().to_string(), lexicon);
    }

    /// The served lexicons by name.
    pub fn lexicons(&self) -> &BTreeMap<String, Arc<Lexicon>> {
        &self.lexicons
    }

    /// Terms over every served lexicon (the banner's `lexicon=N`).
    pub fn lexicon_terms(&self) -> usize {
        self.lexicons.values().map(|l| l.len()).sum()
    }

    /// One served lexicon, or a 400 naming those there are.
    pub(crate) fn named(&self, field: &str, name: &str) -> Result<Arc<Lexicon>, Error> {
        self.lexicons.get(name).cloned().ok_or_else(|| {
            let have: Vec<&str> = self.lexicons.keys().map(String::as_str).collect();
            Error::bad_request(format!(
                "{field} names the lexicon {name:?}, which is not loaded (loaded: {}); start the \
                 server with -lexicon {name}=FILE",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ))
        })
    }
}
