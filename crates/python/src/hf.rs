//! Hugging Face `tokenizer.json`, both ways: its tokens as bytes (for
//! `Tokenizer.from_hf`), and one rebuilt from a GGUF's byte-level BPE vocabulary and
//! merges (so transformers can run with exactly the tokens a GGUF model has).

use llamay_engine::{GgufFile, TokenType, Tokenizer, TokenizerKind};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Map, Value};

/// Token bytes by id, and the ids of added tokens marked special.
pub struct HfVocab {
    pub tokens: Vec<Vec<u8>>,
    pub special: Vec<u32>,
}

/// GPT-2's reversible byte <-> printable character table (bytes that print as
/// themselves keep their code point; the rest are moved to 256 and up).
fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        out[b as usize] = if printable {
            b as char
        } else {
            let c = char::from_u32(next).unwrap();
            next += 1;
            c
        };
    }
    out
}

fn contains_type(v: &Value, ty: &str) -> bool {
    match v {
        Value::Object(o) => {
            o.get("type").and_then(Value::as_str) == Some(ty)
                || o.values().any(|x| contains_type(x, ty))
        }
        Value::Array(a) => a.iter().any(|x| contains_type(x, ty)),
        _ => false,
    }
}

/// `<0xAB>` -> 0xAB.
fn byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// The tokens of a `tokenizer.json` as the bytes each one decodes to.
pub fn vocab_from_tokenizer_json(text: &str) -> Result<HfVocab, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let model = root.get("model").ok_or("no \"model\"")?;
    let byte_level = contains_type(root.get("decoder").unwrap_or(&Value::Null), "ByteLevel")
        || contains_type(
            root.get("pre_tokenizer").unwrap_or(&Value::Null),
            "ByteLevel",
        );
    let mut pieces: Vec<(u32, String)> = Vec::new();
    match model.get("vocab") {
        Some(Value::Object(map)) => {
            for (piece, id) in map {
                let id = id.as_u64().ok_or("a vocab id is not a number")?;
                pieces.push((id as u32, piece.clone()));
            }
        }
        Some(Value::Array(list)) => {
            // Unigram: [[piece, score], ...] by id.
            for (id, entry) in list.iter().enumerate() {
                let piece = entry
                    .get(0)
                    .and_then(Value::as_str)
                    .ok_or("bad vocab entry")?;
                pieces.push((id as u32, piece.to_string()));
            }
        }
        _ => return Err("\"model.vocab\" is neither a map nor a list".into()),
    }
    let decode_char: std::collections::HashMap<char, u8> = byte_chars()
        .iter()
        .enumerate()
        .map(|(b, &c)| (c, b as u8))
        .collect();
    let to_bytes = |piece: &str| -> Vec<u8> {
        if byte_level {
            // A character outside the table (never in a well-formed byte-level vocab)
            // is kept as its UTF-8.
            let mut out = Vec::with_capacity(piece.len());
            for c in piece.chars() {
                match decode_char.get(&c) {
                    Some(&b) => out.push(b),
                    None => out.extend(c.to_string().as_bytes()),
                }
            }
            out
        } else if let Some(b) = byte_token(piece) {
            vec![b]
        } else {
            piece.replace('\u{2581}', " ").into_bytes()
        }
    };
    let mut special = Vec::new();
    let added: Vec<(u32, String, bool)> = root
        .get("added_tokens")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| {
                    Some((
                        t.get("id")?.as_u64()? as u32,
                        t.get("content")?.as_str()?.to_string(),
                        t.get("special").and_then(Value::as_bool).unwrap_or(false),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let n = pieces
        .iter()
        .map(|p| p.0)
        .chain(added.iter().map(|a| a.0))
        .max()
        .map_or(0, |m| m as usize + 1);
    let mut tokens = vec![Vec::new(); n];
    for (id, piece) in &pieces {
        tokens[*id as usize] = to_bytes(piece);
    }
    for (id, content, is_special) in added {
        // Added tokens are matched in the text as written, not byte-encoded.
        tokens[id as usize] = content.into_bytes();
        if is_special {
            special.push(id);
        }
    }
    Ok(HfVocab { tokens, special })
}

/// A `tokenizer.json` for a GGUF model's byte-level BPE tokenizer: the same tokens
/// (GGUF stores them byte-encoded, as `tokenizer.json` does), the same merges, its
/// control tokens as special added tokens.
pub fn tokenizer_json_from_gguf(f: &GgufFile) -> Result<String, String> {
    let t = Tokenizer::from_gguf(f).map_err(|e| e.to_string())?;
    let pre = match t.kind() {
        TokenizerKind::Bpe { .. } => f
            .opt_str("tokenizer.ggml.pre")
            .ok()
            .flatten()
            .unwrap_or("default")
            .to_string(),
        _ => {
            return Err(
                "only byte-level BPE tokenizers (tokenizer.ggml.model = gpt2) can be \
                 rebuilt as tokenizer.json"
                    .into(),
            )
        }
    };
    let mut vocab = Map::new();
    let mut added = Vec::new();
    for id in 0..t.n_vocab() as u32 {
        let text = String::from_utf8_lossy(t.token_text(id)).into_owned();
        if matches!(
            t.token_type(id),
            Some(TokenType::Control | TokenType::UserDefined)
        ) {
            added.push(json!({
                "id": id, "content": text, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false,
                "special": t.token_type(id) == Some(TokenType::Control),
            }));
        }
        vocab.insert(text, json!(id));
    }
    let merges: Vec<Value> = f
        .array_strings("tokenizer.ggml.merges")
        .map_err(|e| e.to_string())?
        .map(|m| Value::String(String::from_utf8_lossy(m).into_owned()))
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
        "trim_offsets": true, "use_regex": true});
    // SmolLM's pre-tokenizer splits digits one by one before the byte-level split.
    let pre_tokenizer = if pre == "smollm" {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level]})
    } else {
        byte_level.clone()
    };
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges,
        },
    });
    serde_json::to_string(&doc).map_err(|e| e.to_string())
}

/// The text of the GGUF's BOS and EOS tokens, as transformers' `bos_token` and
/// `eos_token` take them.
fn special_texts(f: &GgufFile) -> Result<(Option<String>, Option<String>), String> {
    let t = Tokenizer::from_gguf(f).map_err(|e| e.to_string())?;
    let text = |id: Option<u32>| id.map(|i| String::from_utf8_lossy(t.token_text(i)).into_owned());
    Ok((text(t.bos()), text(t.eos())))
}

/// `tokenizer.json` text rebuilt from a GGUF model's byte-level BPE tokenizer, with
/// `{"bos_token": ..., "eos_token": ...}` for transformers.
#[pyfunction]
pub fn gguf_to_tokenizer_json(
    py: Python<'_>,
    path: std::path::PathBuf,
) -> PyResult<(
    String,
    std::collections::BTreeMap<&'static str, Option<String>>,
)> {
    py.detach(|| {
        let f = GgufFile::open(&path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
        let err = |e: String| PyValueError::new_err(format!("{}: {e}", path.display()));
        let json = tokenizer_json_from_gguf(&f).map_err(err)?;
        let (bos, eos) = special_texts(&f).map_err(err)?;
        Ok((json, [("bos_token", bos), ("eos_token", eos)].into()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_round_trips() {
        let t = byte_chars();
        assert_eq!(t[b'a' as usize], 'a');
        assert_eq!(t[b' ' as usize], '\u{120}');
        let mut seen: Vec<char> = t.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 256);
    }

    #[test]
    fn spm_pieces_decode_spaces_and_bytes() {
        let j = r#"{"model":{"type":"BPE","vocab":{"<0x0A>":0,"▁the":1,"a":2}},
            "decoder":{"type":"Sequence","decoders":[{"type":"ByteFallback"}]},
            "added_tokens":[{"id":3,"content":"</s>","special":true}]}"#;
        let v = vocab_from_tokenizer_json(j).unwrap();
        assert_eq!(
            v.tokens,
            vec![
                b"\n".to_vec(),
                b" the".to_vec(),
                b"a".to_vec(),
                b"</s>".to_vec()
            ]
        );
        assert_eq!(v.special, vec![3]);
    }
}
