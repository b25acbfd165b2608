//! Just enough GGUF to read a tokenizer's vocabulary as byte strings (bench-only: the
//! engine crate owns real GGUF loading; constrain must not depend on it).

use std::io::{self, Read};

pub struct GgufVocab {
    pub tokens: Vec<Vec<u8>>,
    pub special: Vec<u32>,
    pub eog: Vec<u32>,
    #[allow(dead_code)]
    pub model: String,
}

enum V {
    U(u64),
    S(String),
    Arr(Vec<V>),
    Other,
}

fn rd<const N: usize>(r: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn string(r: &mut impl Read) -> io::Result<String> {
    let n = u64::from_le_bytes(rd(r)?) as usize;
    let mut b = vec![0u8; n];
    r.read_exact(&mut b)?;
    Ok(String::from_utf8_lossy(&b).into_owned())
}

fn value(r: &mut impl Read, ty: u32) -> io::Result<V> {
    Ok(match ty {
        0 | 1 | 7 => V::U(u64::from(rd::<1>(r)?[0])),
        2 | 3 => V::U(u64::from(u16::from_le_bytes(rd(r)?))),
        4 | 5 => V::U(u64::from(u32::from_le_bytes(rd(r)?))),
        6 => {
            rd::<4>(r)?;
            V::Other
        }
        8 => V::S(string(r)?),
        9 => {
            let ity = u32::from_le_bytes(rd(r)?);
            let n = u64::from_le_bytes(rd(r)?);
            let mut v = Vec::with_capacity(n.min(1 << 20) as usize);
            for _ in 0..n {
                v.push(value(r, ity)?);
            }
            V::Arr(v)
        }
        10 | 11 => V::U(u64::from_le_bytes(rd(r)?)),
        12 => {
            rd::<8>(r)?;
            V::Other
        }
        _ => return Err(io::Error::other(format!("unknown GGUF type {ty}"))),
    })
}

/// GPT-2's byte-to-unicode table, reversed.
fn gpt2_decoder() -> std::collections::HashMap<char, u8> {
    let mut printable: Vec<u32> = (0x21..=0x7E)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars: Vec<u32> = printable.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    printable
        .iter()
        .zip(&chars)
        .map(|(&b, &c)| (char::from_u32(c).unwrap(), b as u8))
        .collect()
}

pub fn load(path: &std::path::Path) -> io::Result<GgufVocab> {
    let mut r = io::BufReader::new(std::fs::File::open(path)?);
    if &rd::<4>(&mut r)? != b"GGUF" {
        return Err(io::Error::other("not GGUF"));
    }
    rd::<4>(&mut r)?;
    rd::<8>(&mut r)?;
    let n_kv = u64::from_le_bytes(rd(&mut r)?);
    let (mut toks, mut types, mut model, mut eos, mut eot) =
        (Vec::new(), Vec::new(), String::new(), None, None);
    for _ in 0..n_kv {
        let key = string(&mut r)?;
        let ty = u32::from_le_bytes(rd(&mut r)?);
        let v = value(&mut r, ty)?;
        match (key.as_str(), v) {
            ("tokenizer.ggml.tokens", V::Arr(a)) => {
                toks = a
                    .into_iter()
                    .map(|v| if let V::S(s) = v { s } else { String::new() })
                    .collect()
            }
            ("tokenizer.ggml.token_type", V::Arr(a)) => {
                types = a
                    .into_iter()
                    .map(|v| if let V::U(u) = v { u } else { 1 })
                    .collect()
            }
            ("tokenizer.ggml.model", V::S(s)) => model = s,
            ("tokenizer.ggml.eos_token_id", V::U(u)) => eos = Some(u as u32),
            ("tokenizer.ggml.eot_token_id", V::U(u)) => eot = Some(u as u32),
            _ => {}
        }
    }
    let dec = gpt2_decoder();
    let tokens: Vec<Vec<u8>> = toks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ty = types.get(i).copied().unwrap_or(1);
            if model == "gpt2" {
                s.chars()
                    .map(|c| dec.get(&c).copied().unwrap_or(b'?'))
                    .collect()
            } else if ty == 6 && s.len() == 6 && s.starts_with("<0x") {
                vec![u8::from_str_radix(&s[3..5], 16).unwrap_or(0)]
            } else {
                s.replace('\u{2581}', " ").into_bytes()
            }
        })
        .collect();
    let special = types
        .iter()
        .enumerate()
        .filter(|(_, &t)| matches!(t, 2 | 3 | 5))
        .map(|(i, _)| i as u32)
        .collect();
    Ok(GgufVocab {
        tokens,
        special,
        eog: eos.into_iter().chain(eot).collect(),
        model,
    })
}
