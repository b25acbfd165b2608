//! The lexicons a process serves (`serve -lexicon NAME=FILE`, `run -lexicon FILE`):
//! loaded once at start, then named by requests (`llamay_lexicon: "NAME"`) and by
//! schemas (`x-llamay-lexicon`). Process-wide, like the binary's one server: the
//! request surfaces resolve names without a handle on the `Runtime`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use llamay_constrain::Lexicon;

use crate::error::Error;

static SERVED: RwLock<BTreeMap<String, Arc<Lexicon>>> = RwLock::new(BTreeMap::new());

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

/// Makes `lexicon` one of the served lexicons (replacing one of the same name).
pub fn serve_lexicon(lexicon: Arc<Lexicon>) {
    let mut served = SERVED.write().unwrap_or_else(|e| e.into_inner());
    served.insert(lexicon.name().to_string(), lexicon);
}

/// The served lexicons by name.
pub fn served_lexicons() -> BTreeMap<String, Arc<Lexicon>> {
    SERVED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Terms over every served lexicon (the banner's `lexicon=N`).
pub fn served_terms() -> usize {
    let served = SERVED.read().unwrap_or_else(|e| e.into_inner());
    served.values().map(|l| l.len()).sum()
}

/// One served lexicon, or a 400 naming those there are.
pub(crate) fn named(field: &str, name: &str) -> Result<Arc<Lexicon>, Error> {
    let served = SERVED.read().unwrap_or_else(|e| e.into_inner());
    served.get(name).cloned().ok_or_else(|| {
        let have: Vec<&str> = served.keys().map(String::as_str).collect();
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
