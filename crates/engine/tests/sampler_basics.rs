//! Sampler semantics on small hand-made distributions.

use std::collections::{HashMap, HashSet};

use llamay_engine::{mask_allows, Sampler, SamplerConfig, StopConditions, StopReason};

fn cfg(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplerConfig {
    SamplerConfig {
        temperature,
        top_k,
        top_p,
        min_p,
        ..SamplerConfig::default()
    }
}

/// Draws `n` samples and counts them.
fn histogram(s: &mut Sampler, logits: &[f32], n: usize) -> HashMap<u32, usize> {
    let mut h = HashMap::new();
    for _ in 0..n {
        *h.entry(s.sample(logits, &[], None).unwrap()).or_insert(0) += 1;
    }
    h
}

fn mask(vocab: usize, allowed: &[u32]) -> Vec<u64> {
    let mut m = vec![0u64; vocab.div_ceil(64)];
    for &t in allowed {
        m[t as usize / 64] |= 1 << (t % 64);
    }
    m
}

#[test]
fn greedy_takes_the_argmax_with_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplerConfig::greedy());
    assert_eq!(s.sample(&[0.1, 3.0, -1.0, 2.9], &[], None), Some(1));
    assert_eq!(s.sample(&[1.0, 5.0, 5.0, 2.0], &[], None), Some(1));
}

/// Greedy without a mask takes a shortcut past the candidate list; with a mask that
/// allows everything it does not. Both must pick the same token, NaNs, infinities and
/// ties included.
#[test]
fn greedy_shortcut_agrees_with_the_candidate_path() {
    let cases: [&[f32]; 6] = [
        &[0.5, f32::NAN, 2.0, 2.0, -1.0],
        &[f32::NAN, f32::NAN],
        &[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NAN],
        &[f32::NAN, f32::INFINITY, 1e30, f32::INFINITY],
        &[-0.0, 0.0, -3.0],
        &[7.0],
    ];
    let mut s = Sampler::new(SamplerConfig::greedy());
    for logits in cases {
        let all = mask(logits.len(), &(0..logits.len() as u32).collect::<Vec<_>>());
        let slow = s.sample(logits, &[], Some(&all));
        assert_eq!(s.sample(logits, &[], None), slow, "{logits:?}");
    }
    // Pseudo-random logits with many ties.
    let logits: Vec<f32> = (0..5000u32).map(|i| ((i * 7919) % 97) as f32).collect();
    let all = mask(logits.len(), &(0..5000).collect::<Vec<_>>());
    assert_eq!(
        s.sample(&logits, &[], None),
        s.sample(&logits, &[], Some(&all))
    );
}

#[test]
fn same_seed_reproduces_and_other_seed_differs() {
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
    let c = SamplerConfig {
        seed: 42,
        ..cfg(1.0, 0, 1.0, 0.0)
    };
    let run = |c: &SamplerConfig| {
        let mut s = Sampler::new(c.clone());
        (0..50)
            .map(|_| s.sample(&logits, &[], None).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(&c), run(&c));
    assert_ne!(
        run(&c),
        run(&SamplerConfig {
            seed: 43,
            ..c.clone()
        })
    );
}

#[test]
fn masked_tokens_are_never_sampled_even_with_the_top_logit() {
    let logits = [10.0, 0.0, 0.5, -1.0, 9.0, 0.2, 0.1, 0.0];
    let m = mask(logits.len(), &[1, 2, 3]);
    assert!(mask_allows(&m, 2) && !mask_allows(&m, 0) && !mask_allows(&m, 500));
    let mut g = Sampler::new(SamplerConfig::greedy());
    assert_eq!(g.sample(&logits, &[], Some(&m)), Some(2));
    let mut s = Sampler::new(SamplerConfig {
        seed: 1,
        ..cfg(2.0, 0, 1.0, 0.0)
    });
    let mut seen = HashSet::new();
    for _ in 0..2000 {
        let t = s.sample(&logits, &[], Some(&m)).unwrap();
        assert!([1, 2, 3].contains(&t), "sampled masked token {t}");
        seen.insert(t);
    }
    assert_eq!(seen.len(), 3, "every allowed token is reachable");
    // A mask allowing nothing gives no token.
    assert_eq!(s.sample(&logits, &[], Some(&mask(8, &[]))), None);
}

#[test]
fn top_k_keeps_exactly_the_k_most_likely() {
    let logits = [1.0, 4.0, 3.0, 2.0, 0.0];
    let mut s = Sampler::new(cfg(5.0, 2, 1.0, 0.0));
    let h = histogram(&mut s, &logits, 3000);
    let keys: HashSet<u32> = h.keys().copied().collect();
    assert_eq!(keys, HashSet::from([1, 2]));
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    // Probabilities 0.5, 0.3, 0.15, 0.05 (logits are their logs).
    let probs = [0.5f32, 0.3, 0.15, 0.05];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    let mut s = Sampler::new(cfg(1.0, 0, 0.75, 0.0));
    let h = histogram(&mut s, &logits, 4000);
    let keys: HashSet<u32> = h.keys().copied().collect();
    assert_eq!(keys, HashSet::from([0, 1]), "0.5 + 0.3 reaches 0.75");
    // Renormalised over the kept two: 0.625 / 0.375.
    let f0 = h[&0] as f64 / 4000.0;
    assert!((f0 - 0.625).abs() < 0.03, "frequency of token 0: {f0}");
    let mut s = Sampler::new(cfg(1.0, 0, 0.81, 0.0));
    let keys: HashSet<u32> = histogram(&mut s, &logits, 4000).keys().copied().collect();
    assert_eq!(keys, HashSet::from([0, 1, 2]));
}

#[test]
fn min_p_drops_tokens_below_the_fraction_of_the_top() {
    let probs = [0.5f32, 0.3, 0.15, 0.05];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    // 0.25 · 0.5 = 0.125: tokens 0, 1, 2 stay, token 3 (0.05) goes.
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 0.25));
    let keys: HashSet<u32> = histogram(&mut s, &logits, 4000).keys().copied().collect();
    assert_eq!(keys, HashSet::from([0, 1, 2]));
}

#[test]
fn temperature_sharpens_and_flattens() {
    let logits = [1.0, 0.0];
    let freq0 = |t: f32| {
        let mut s = Sampler::new(cfg(t, 0, 1.0, 0.0));
        histogram(&mut s, &logits, 4000)
            .get(&0)
            .copied()
            .unwrap_or(0) as f64
            / 4000.0
    };
    // p0 = 1 / (1 + e^(-1/t)): t=1 → 0.731, t=0.25 → 0.982, t=4 → 0.562.
    assert!((freq0(1.0) - 0.731).abs() < 0.03);
    assert!((freq0(0.25) - 0.982).abs() < 0.015);
    assert!((freq0(4.0) - 0.562).abs() < 0.03);
}

#[test]
fn penalties_follow_llama_cpp_semantics() {
    // Token 0 leads by a little; it appeared in the history.
    let logits = [2.0, 1.9, -1.0, 0.0];
    let mut g = Sampler::new(SamplerConfig {
        repeat_penalty: 1.1,
        ..SamplerConfig::greedy()
    });
    // 2.0 / 1.1 = 1.82 < 1.9.
    assert_eq!(g.sample(&logits, &[0, 3], None), Some(1));
    // Without it in the (last-n) history, no penalty.
    let mut g = Sampler::new(SamplerConfig {
        repeat_penalty: 1.1,
        penalty_last_n: 1,
        ..SamplerConfig::greedy()
    });
    assert_eq!(g.sample(&logits, &[0, 3], None), Some(0));
    // Frequency and presence: 3 occurrences × 0.5 + 0.2 = 1.7 off token 1.
    let mut g = Sampler::new(SamplerConfig {
        frequency_penalty: 0.5,
        presence_penalty: 0.2,
        ..SamplerConfig::greedy()
    });
    assert_eq!(g.sample(&[1.0, 2.0, 0.5, 0.0], &[1, 1, 1], None), Some(0));
    assert_eq!(g.sample(&[1.0, 2.8, 0.5, 0.0], &[1, 1, 1], None), Some(1));
    let mut g = Sampler::new(SamplerConfig {
        repeat_penalty: 10.0,
        ..SamplerConfig::greedy()
    });
    // Token 2: -1.0 · 10 = -10 loses to token 3's -0.5 only if penalised the right way.
    assert_eq!(g.sample(&[-3.0, -3.0, -0.1, -0.5], &[2], None), Some(3));
}

#[test]
fn stop_strings_match_across_token_boundaries_and_hold_back_prefixes() {
    let mut s = StopConditions::new(HashSet::from([7]), ["</end>", "STOP"]);
    let a = s.push(1, b"Hello </");
    assert_eq!(a.emit, b"Hello ");
    assert_eq!(a.stop, None);
    let b = s.push(2, b"en");
    assert_eq!(b.emit, b"");
    let c = s.push(3, b"d> tail");
    assert_eq!(c.emit, b"");
    assert_eq!(c.stop, Some(StopReason::String(0)));

    let mut s = StopConditions::new(HashSet::from([7]), ["</end>"]);
    assert_eq!(s.push(1, b"a </e").emit, b"a ");
    // Not a stop after all: the held bytes are released.
    assert_eq!(s.push(2, b"x").emit, b"</ex");
    assert_eq!(s.push(3, b"<").emit, b"");
    let e = s.push(7, b"");
    assert_eq!(e.stop, Some(StopReason::Eog(7)));
    assert_eq!(e.emit, b"<", "held bytes are output before an EOG stop");

    let mut s = StopConditions::new(HashSet::new(), ["ab"]);
    assert_eq!(s.push(1, b"xa").emit, b"x");
    assert_eq!(s.flush(), b"a");
}

/// The sampler sorts only the prefix its cuts can reach; it must draw exactly what
/// sorting the whole vocabulary and cutting (llama.cpp's order) would draw.
#[test]
fn partial_sorting_draws_what_a_full_sort_would() {
    let mut rng = llamay_engine::Rng::new(11);
    for case in 0..300 {
        let vocab = [50, 1_000, 20_000][case % 3];
        let spread = [0.5f64, 3.0, 12.0][(case / 3) % 3];
        let logits: Vec<f32> = (0..vocab)
            .map(|_| ((rng.next_f64() * 2.0 - 1.0) * spread) as f32)
            .collect();
        let (top_k, top_p, min_p) = [
            (0, 0.95, 0.0),
            (0, 0.5, 0.05),
            (40, 0.95, 0.05),
            (0, 1.0, 0.2),
            (200, 0.99, 0.0),
            (0, 0.999, 0.0),
        ][case % 6];
        let c = cfg(0.8, top_k, top_p, min_p);
        let seed = case as u64;
        let mut fast = Sampler::new(SamplerConfig { seed, ..c.clone() });
        let got: Vec<u32> = (0..5)
            .map(|_| fast.sample(&logits, &[], None).unwrap())
            .collect();
        let mut draw = llamay_engine::Rng::new(seed);
        let want: Vec<u32> = (0..5)
            .map(|_| full_sort_reference(&logits, &c, draw.next_f64()))
            .collect();
        assert_eq!(
            got, want,
            "case {case}: vocab {vocab} spread {spread} {top_k}/{top_p}/{min_p}"
        );
    }
}

/// Sort everything, cut top-k, top-p, min-p, draw at `temperature`.
fn full_sort_reference(logits: &[f32], c: &SamplerConfig, mut r: f64) -> u32 {
    let mut cand: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, l))
        .collect();
    cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if c.top_k > 0 {
        cand.truncate(c.top_k);
    }
    let probs = |cand: &[(u32, f32)], t: f64| -> Vec<f64> {
        let m = cand[0].1 as f64;
        let e: Vec<f64> = cand.iter().map(|x| ((x.1 as f64 - m) / t).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    };
    if c.top_p < 1.0 {
        let p = probs(&cand, 1.0);
        let mut cum = 0.0;
        let keep = p
            .iter()
            .position(|x| {
                cum += x;
                cum >= c.top_p as f64
            })
            .map_or(cand.len(), |i| i + 1);
        cand.truncate(keep);
    }
    if c.min_p > 0.0 {
        let floor = cand[0].1 + c.min_p.ln();
        let keep = cand.iter().take_while(|x| x.1 >= floor).count().max(1);
        cand.truncate(keep);
    }
    let p = probs(&cand, c.temperature as f64);
    for (x, p) in cand.iter().zip(&p) {
        if r < *p {
            return x.0;
        }
        r -= p;
    }
    cand.last().unwrap().0
}
