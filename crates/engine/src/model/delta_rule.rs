//! The gated delta rule over one value head of one sequence, in chunks of up to
//! [`CHUNK`] tokens (the chunked form llama.cpp's `build_delta_net_chunking` uses for
//! prompts; one token is a chunk of one). Token by token the rule is
//!
//! ```text
//! S̃ = e^{g_t} S;  u_t = β_t (v_t − S̃ k_t);  S = S̃ + u_t k_tᵀ;  o_t = S q_t / √d
//! ```
//!
//! With `G_t` the decays summed over the chunk up to t, the state before the chunk `S0`
//! and `L[t][j] = β_t e^{G_t − G_j} (k_t·k_j)` for j < t, the corrections solve a
//! triangular system, and outputs and the state after the chunk follow from them:
//!
//! ```text
//! u_t = β_t (v_t − e^{G_t} S0 k_t) − Σ_{j<t} L[t][j] u_j
//! o_t = (e^{G_t} S0 q_t + Σ_{j≤t} e^{G_t − G_j} (k_j·q_t) u_j) / √d
//! S   = e^{G_n} S0 + Σ_j e^{G_n − G_j} u_j k_jᵀ
//! ```
//!
//! so the state is read twice and written once per chunk instead of four times per
//! token, and every exponent is ≤ 0 (no overflow whatever the decays). The chunk's
//! arithmetic is f64 (see `Scratch`); the state stays f32 between steps.

/// Tokens per chunk (llama.cpp's).
pub(super) const CHUNK: usize = 64;

/// One value head's inputs over a run of tokens, row after row (`d` values each).
pub(super) struct HeadRun<'a> {
    /// L2-normed queries and keys (the query not yet scaled by 1/√d).
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// β = sigmoid(beta) per token.
    pub beta: &'a [f32],
    /// The log decay g = softplus(alpha + dt_bias)·a per token.
    pub g: &'a [f32],
}

/// Runs the tokens of `x` through state `s` (`d × d`, row j = value j over the keys),
/// writing each token's output (`d` values) to `out`.
pub(super) fn run(s: &mut [f32], d: usize, x: &HeadRun<'_>, out: &mut [f32]) {
    let n = x.beta.len();
    let mut t0 = 0;
    let mut scratch = Scratch::default();
    while t0 < n {
        let c = (n - t0).min(CHUNK);
        let rows = t0 * d..(t0 + c) * d;
        let chunk = HeadRun {
            q: &x.q[rows.clone()],
            k: &x.k[rows.clone()],
            v: &x.v[rows.clone()],
            beta: &x.beta[t0..t0 + c],
            g: &x.g[t0..t0 + c],
        };
        run_chunk(s, d, &chunk, &mut out[rows], &mut scratch);
        t0 += c;
    }
}

/// A chunk's working values, in f64: the triangular solve in f32 leaves rounding that
/// moves a Q8_0 file's logits by 2.5e-3 between two runs whose inputs differ in the
/// last bit (a batch against each sequence alone); in f64, by 2e-7 as token by token.
#[derive(Default)]
struct Scratch {
    /// Cumulative decays G_t.
    cum: Vec<f64>,
    /// The chunk's queries, keys and values.
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    /// The state as the chunk found it, then as it leaves it.
    s: Vec<f64>,
    /// S0 k_t and S0 q_t, then the corrections u_t, row after row.
    sk: Vec<f64>,
    sq: Vec<f64>,
    u: Vec<f64>,
}

/// Row `t` of `m` (rows of `d`).
fn row(m: &[f64], d: usize, t: usize) -> &[f64] {
    &m[t * d..(t + 1) * d]
}

fn widen(dst: &mut Vec<f64>, src: &[f32]) {
    dst.clear();
    dst.extend(src.iter().map(|&x| x as f64));
}

fn run_chunk(s: &mut [f32], d: usize, x: &HeadRun<'_>, out: &mut [f32], w: &mut Scratch) {
    let c = x.beta.len();
    let scale = 1.0 / (d as f64).sqrt();
    w.cum.clear();
    let mut acc = 0f64;
    for &g in x.g {
        acc += g as f64;
        w.cum.push(acc);
    }
    widen(&mut w.q, x.q);
    widen(&mut w.k, x.k);
    widen(&mut w.v, x.v);
    widen(&mut w.s, s);
    let (q, k, v) = (&w.q, &w.k, &w.v);
    // S0 k_t and S0 q_t: the state as the chunk found it.
    w.sk.resize(c * d, 0.0);
    w.sq.resize(c * d, 0.0);
    for t in 0..c {
        let (kt, qt) = (row(k, d, t), row(q, d, t));
        for (j, srow) in w.s.chunks_exact(d).enumerate() {
            w.sk[t * d + j] = dot(srow, kt);
            w.sq[t * d + j] = dot(srow, qt);
        }
    }
    // The corrections, by forward substitution of the triangular system.
    w.u.resize(c * d, 0.0);
    for t in 0..c {
        let (bt, et) = (x.beta[t] as f64, w.cum[t].exp());
        let (done, rest) = w.u.split_at_mut(t * d);
        let ut = &mut rest[..d];
        let sk = &w.sk[t * d..(t + 1) * d];
        for ((u, &v), &sk) in ut.iter_mut().zip(row(v, d, t)).zip(sk) {
            *u = bt * (v - et * sk);
        }
        let kt = row(k, d, t);
        for j in 0..t {
            let l = bt * (w.cum[t] - w.cum[j]).exp() * dot(kt, row(k, d, j));
            axpy(ut, -l, row(done, d, j));
        }
    }
    // Outputs: the old state's part and the chunk's own.
    let mut o = vec![0f64; d];
    for t in 0..c {
        let et = w.cum[t].exp();
        o.iter_mut()
            .zip(row(&w.sq, d, t))
            .for_each(|(o, &sq)| *o = et * sq);
        let qt = row(q, d, t);
        for j in 0..=t {
            let a = (w.cum[t] - w.cum[j]).exp() * dot(row(k, d, j), qt);
            axpy(&mut o, a, row(&w.u, d, j));
        }
        for (dst, &o) in out[t * d..(t + 1) * d].iter_mut().zip(&o) {
            *dst = (o * scale) as f32;
        }
    }
    // The state after the chunk.
    let last = w.cum[c - 1];
    let el = last.exp();
    for (r, srow) in w.s.chunks_exact_mut(d).enumerate() {
        srow.iter_mut().for_each(|x| *x *= el);
        for j in 0..c {
            let a = (last - w.cum[j]).exp() * w.u[j * d + r];
            axpy(srow, a, row(k, d, j));
        }
    }
    for (dst, &x) in s.iter_mut().zip(&w.s) {
        *dst = x as f32;
    }
}

/// `y += a·x`.
fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    y.iter_mut().zip(x).for_each(|(y, &x)| *y += a * x);
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..4 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot32(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// The rule token by token, as llama.cpp's one-token kernel runs it.
    fn by_tokens(s: &mut [f32], d: usize, x: &HeadRun<'_>, out: &mut [f32]) {
        for t in 0..x.beta.len() {
            let r = t * d..(t + 1) * d;
            let (q, k, v) = (&x.q[r.clone()], &x.k[r.clone()], &x.v[r.clone()]);
            let decay = x.g[t].exp();
            s.iter_mut().for_each(|x| *x *= decay);
            for (j, row) in s.chunks_exact_mut(d).enumerate() {
                let u = (v[j] - dot32(row, k)) * x.beta[t];
                row.iter_mut().zip(k).for_each(|(r, &k)| *r += u * k);
                out[t * d + j] = dot32(row, q) / (d as f32).sqrt();
            }
        }
    }

    fn draws(n: usize, seed: &mut u64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                (*seed % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn unit_rows(mut v: Vec<f32>, d: usize) -> Vec<f32> {
        for r in v.chunks_exact_mut(d) {
            let n = dot32(r, r).sqrt();
            r.iter_mut().for_each(|x| *x /= n);
        }
        v
    }

    /// Chunks (several, the last one partial) give the token-by-token outputs and state,
    /// from a state that is not zero.
    #[test]
    fn chunks_equal_tokens() {
        let (d, n) = (8, 2 * CHUNK + 9);
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let q = unit_rows(draws(n * d, &mut seed), d);
        let k = unit_rows(draws(n * d, &mut seed), d);
        let v = draws(n * d, &mut seed);
        let beta: Vec<f32> = draws(n, &mut seed).iter().map(|b| 0.5 + 0.5 * b).collect();
        let g: Vec<f32> = draws(n, &mut seed)
            .iter()
            .map(|g| -1.5 * (g + 1.0))
            .collect();
        let x = HeadRun {
            q: &q,
            k: &k,
            v: &v,
            beta: &beta,
            g: &g,
        };
        let s0 = draws(d * d, &mut seed);
        let (mut a, mut b) = (s0.clone(), s0);
        let (mut oa, mut ob) = (vec![0f32; n * d], vec![0f32; n * d]);
        run(&mut a, d, &x, &mut oa);
        by_tokens(&mut b, d, &x, &mut ob);
        let worst = |x: &[f32], y: &[f32]| {
            x.iter()
                .zip(y)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        };
        assert!(
            worst(&oa, &ob) < 1e-4,
            "outputs differ by {}",
            worst(&oa, &ob)
        );
        assert!(worst(&a, &b) < 1e-4, "states differ by {}", worst(&a, &b));
    }
}
