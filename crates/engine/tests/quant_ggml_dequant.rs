//! Bit-exactness of `dequantize_row` with llama.cpp's ggml on pseudo-random blocks of
//! the types no tiny model file holds (quant_ggml_reference.rs covers the others):
//! IQ4_NL, IQ4_XS, Q2_K, Q3_K and MXFP4. The blocks are rebuilt here exactly as
//! scripts/ggml-dequant-reference builds them; the expected SHA-256 of the f32 output,
//! and a few values to show what differs, are what ggml's own `to_float` gave for them
//! (tests/data/ggml_dequant.json, written by that script).

use std::path::Path;

use llamay_engine::internals::dequantize_row;
use llamay_engine::GgmlType;
use sha2::{Digest, Sha256};

/// The types the reference holds, each with its f16 scale offsets and MXFP4's E8M0
/// exponent offset (as the script has them).
const TYPES: [(GgmlType, &[usize], Option<usize>); 5] = [
    (GgmlType::IQ4_NL, &[0], None),
    (GgmlType::IQ4_XS, &[0], None),
    (GgmlType::Q2_K, &[80, 82], None),
    (GgmlType::Q3_K, &[108], None),
    (GgmlType::MXFP4, &[], Some(0)),
];

/// Marsaglia's xorshift64 (13, 7, 17), as the script runs it.
fn xorshift64(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `n` blocks of `ty`: random bytes (each draw 8 bytes, little-endian, straight through
/// the blocks), with each f16 scale's exponent field taken modulo 25 and the E8M0 byte
/// modulo 253, so that every value is finite.
fn random_blocks(
    ty: GgmlType,
    n: usize,
    seed: u64,
    f16s: &[usize],
    e8m0: Option<usize>,
) -> Vec<u8> {
    let size = ty.block_bytes() as usize;
    let mut state = seed.wrapping_add(ty.id() as u64);
    let mut data: Vec<u8> = (0..(n * size).div_ceil(8))
        .flat_map(|_| xorshift64(&mut state).to_le_bytes())
        .take(n * size)
        .collect();
    for b in data.chunks_exact_mut(size) {
        for &at in f16s {
            let bits = u16::from_le_bytes([b[at], b[at + 1]]);
            let exp = ((bits >> 10) & 31) % 25;
            b[at..at + 2].copy_from_slice(&((bits & !0x7C00) | (exp << 10)).to_le_bytes());
        }
        if let Some(at) = e8m0 {
            b[at] %= 253;
        }
    }
    data
}

#[test]
fn dequantization_is_bit_identical_to_ggml_on_random_blocks() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ggml_dequant.json");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let n_blocks = reference["blocks"].as_u64().unwrap() as usize;
    let seed = reference["seed"].as_u64().unwrap();
    assert!(n_blocks >= 10_000);
    let recorded = reference["types"].as_object().unwrap();
    assert_eq!(
        recorded.len(),
        TYPES.len(),
        "every reference type is checked"
    );
    for (ty, f16s, e8m0) in TYPES {
        let want = &recorded[ty.name()];
        assert_eq!(want["id"].as_u64(), Some(ty.id() as u64), "{ty}");
        let data = random_blocks(ty, n_blocks, seed, f16s, e8m0);
        let mut got = vec![0f32; n_blocks * ty.block_elems() as usize];
        dequantize_row(ty, &data, &mut got).unwrap();
        // A few values first: when the hash differs, they show how.
        let at = want["sample_at"].as_u64().unwrap() as usize;
        let sample: Vec<f32> = want["sample"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got[at..at + sample.len()]),
            bits(&sample),
            "{ty} from element {at}: ours {:?}, ggml's {sample:?}",
            &got[at..at + sample.len()]
        );
        let bytes: Vec<u8> = got.iter().flat_map(|v| v.to_le_bytes()).collect();
        let hash: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hash,
            want["sha256"].as_str().unwrap(),
            "{ty}: values differ from ggml's"
        );
    }
}
