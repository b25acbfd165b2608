//! Inputs to token ids, checked against the encoder: empty and over-long inputs are
//! refused naming their index (or cut, where the request asks for it).

use super::encoders::LoadedEncoder;
use super::EmbedInput;
use crate::error::Error;

/// The token ids of input `i`.
pub(super) fn prepare_input(
    e: &LoadedEncoder,
    i: usize,
    input: &EmbedInput,
    truncate: bool,
) -> Result<Vec<u32>, Error> {
    let n_ctx = e.n_ctx();
    let mut ids = match input {
        EmbedInput::Text(t) if t.is_empty() => {
            return Err(Error::bad_request(format!("input[{i}] is empty")).at("input"))
        }
        EmbedInput::Text(t) => e.tokenizer.encode(t.as_bytes(), true, false),
        EmbedInput::Tokens(t) if t.is_empty() => {
            return Err(Error::bad_request(format!("input[{i}] has no tokens")).at("input"))
        }
        EmbedInput::Tokens(t) => {
            let n_vocab = e.n_vocab();
            if let Some(bad) = t.iter().find(|&&id| id as usize >= n_vocab) {
                return Err(Error::bad_request(format!(
                    "input[{i}] holds token {bad}, outside the vocabulary of {n_vocab}"
                ))
                .at("input"));
            }
            t.clone()
        }
    };
    if ids.len() > n_ctx {
        if !truncate {
            return Err(Error::bad_request(format!(
                "input[{i}] has {} tokens, more than the context of {} ({n_ctx} tokens)",
                ids.len(),
                e.name
            ))
            .at("input"));
        }
        // Cut inside the frame: the closing token (SEP) stays last.
        let last = ids[ids.len() - 1];
        ids.truncate(n_ctx - 1);
        ids.push(last);
    }
    Ok(ids)
}

/// A (query, document) pair as llama.cpp's server frames it for rank pooling: BOS if
/// the vocabulary adds one, the query, EOS if it adds one, SEP if it joins pairs with
/// one, the document, EOS again.
pub(crate) fn frame_pair(
    e: &LoadedEncoder,
    query: &[u32],
    i: usize,
    doc: &str,
) -> Result<Vec<u32>, Error> {
    let tok = &e.tokenizer;
    let sp = tok.special_ids();
    let eos = sp.eos.or(sp.sep);
    let doc = tok.encode(doc.as_bytes(), false, false);
    let mut ids = Vec::with_capacity(query.len() + doc.len() + 4);
    if tok.add_bos() {
        ids.extend(sp.bos);
    }
    ids.extend_from_slice(query);
    if tok.add_eos() {
        ids.extend(eos);
    }
    if tok.add_sep() {
        ids.extend(sp.sep);
    }
    ids.extend_from_slice(&doc);
    if tok.add_eos() {
        ids.extend(eos);
    }
    let n_ctx = e.n_ctx();
    if ids.len() > n_ctx {
        return Err(Error::bad_request(format!(
            "documents[{i}] with the query is {} tokens, more than the context of {} ({n_ctx} tokens)",
            ids.len(),
            e.name
        ))
        .at("documents"));
    }
    Ok(ids)
}
