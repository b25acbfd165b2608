//! The benchmark's token ids: the same xorshift64 sequence as
//! `../shared/bench/llamacpp/bench.py::fixed_tokens`, so that llamay and llama.cpp are
//! fed identical ids (and their first greedy continuations can be compared).

/// The seed bench.py starts from (the 64-bit golden ratio).
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// `n` pseudo-random ids in `lo..n_vocab`, where `lo = min(1000, n_vocab / 2)` keeps
/// them away from the special tokens at the start of most vocabularies. Empty when
/// the vocabulary is empty.
pub fn fixed_tokens(n: usize, n_vocab: usize) -> Vec<u32> {
    let lo = 1000.min(n_vocab / 2);
    let span = (n_vocab - lo) as u64;
    if span == 0 {
        return Vec::new();
    }
    let mut s = SEED;
    (0..n)
        .map(|_| {
            // Python masks `s << k` to 64 bits; a Rust u64 shift drops the same bits.
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (lo as u64 + s % span) as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values: bench.py's `fixed_tokens` run in python3 (extracted from the
    // file with `ast`, since importing it needs llama_cpp).
    #[test]
    fn matches_bench_py_for_the_test_models_vocabularies() {
        // SmolLM2: 49152 tokens.
        assert_eq!(
            fixed_tokens(6, 49152),
            [27661, 13750, 38294, 47668, 28156, 42113]
        );
        // Gemma 3: 262144 tokens.
        assert_eq!(
            fixed_tokens(6, 262144),
            [52933, 213742, 207502, 184324, 232620, 214753]
        );
    }

    #[test]
    fn small_vocabularies_use_half_as_the_floor() {
        // lo = min(1000, 1500 / 2) = 750.
        assert_eq!(fixed_tokens(4, 1500), [1239, 1074, 780, 1260]);
        // lo = 5: ids in 5..10.
        assert_eq!(fixed_tokens(3, 10), [9, 9, 5]);
    }

    #[test]
    fn prefixes_agree_and_empty_vocab_gives_nothing() {
        let long = fixed_tokens(512, 49152);
        assert_eq!(&long[..16], &fixed_tokens(16, 49152)[..]);
        assert!(long.iter().all(|&t| (1000..49152).contains(&t)));
        assert!(fixed_tokens(8, 0).is_empty());
        assert_eq!(fixed_tokens(3, 1), [0, 0, 0]);
    }
}
