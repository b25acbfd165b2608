//! What the API shapes share about reasoning models: llamay's
//! `llamay_thinking_budget` beside each shape's own toggle.

use llamay_runtime::Error;
use llamay_runtime::ThinkingAsk;

/// Adds `llamay_thinking_budget` (which also turns thinking on) to a shape's ask.
pub(crate) fn with_budget(ask: ThinkingAsk, budget: Option<i64>) -> Result<ThinkingAsk, Error> {
    let Some(b) = budget else {
        return Ok(ask);
    };
    if b < 1 {
        return Err(Error::bad_request(format!(
            "llamay_thinking_budget must be at least 1, not {b}"
        )));
    }
    if ask.enabled == Some(false) {
        return Err(Error::bad_request(format!(
            "llamay_thinking_budget was given with {} turning thinking off",
            ask.field
        )));
    }
    Ok(ThinkingAsk {
        enabled: Some(true),
        budget: Some(b as usize),
        field: if ask.field.is_empty() {
            "llamay_thinking_budget"
        } else {
            ask.field
        },
        effort: ask.effort,
    })
}
