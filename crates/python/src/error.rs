//! `ConstraintError`: a refused schema or grammar, carrying what the server's 400 says.

use llamay_constrain::SchemaError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pyo3::create_exception!(
    llamay,
    ConstraintError,
    PyValueError,
    "A schema, grammar or pattern the constraint refuses (the server's 400): `message` \
     is the whole sentence, `keyword` the refused keyword (schemas), `location` the dotted \
     path of the schema object holding it, `line`/`column` the position in grammar text."
);

/// Where a refusal points: a schema location, or a (line, column) in grammar text.
#[derive(Default)]
pub struct At {
    pub keyword: Option<String>,
    pub location: Option<String>,
    pub line_col: Option<(u32, u32)>,
}

/// Builds a `ConstraintError` with its attributes set.
pub fn constraint_error(message: String, at: At) -> PyErr {
    Python::attach(|py| {
        let err = ConstraintError::new_err(message.clone());
        let v = err.value(py);
        let (line, column) = at.line_col.unzip();
        let set = || -> PyResult<()> {
            v.setattr("message", &message)?;
            v.setattr("keyword", at.keyword)?;
            v.setattr("location", at.location)?;
            v.setattr("line", line)?;
            v.setattr("column", column)?;
            Ok(())
        };
        match set() {
            Ok(()) => err,
            Err(e) => e,
        }
    })
}

pub fn from_schema(e: SchemaError) -> PyErr {
    let at = At {
        keyword: Some(e.keyword.clone()).filter(|k| !k.is_empty()),
        location: Some(e.location.clone()),
        line_col: None,
    };
    constraint_error(e.to_string(), at)
}

pub fn from_constrain(e: llamay_constrain::Error) -> PyErr {
    let line_col = match &e {
        llamay_constrain::Error::Grammar { at, .. } => *at,
        _ => None,
    };
    constraint_error(
        e.to_string(),
        At {
            line_col,
            ..At::default()
        },
    )
}
