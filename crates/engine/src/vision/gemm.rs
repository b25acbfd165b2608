//! The encoder's f16 matrices as panels for AVX-512: `PANEL` rows side by side per
//! column (`[panel][col][32]` f16), so a tile of 14 tokens x 32 rows is 28 vector FMAs
//! per column with one 64-byte load of weights and no horizontal sums (the prompt
//! kernels take one row at a time against 8 tokens and sum each dot product across
//! lanes). A picture is thousands of tokens through the same matrices, which is the
//! case this layout is for. Without AVX-512 (or for other weight types) the encoder
//! keeps the model's prompt kernels.

use crate::pool::{SyncPtr, ThreadPool};

/// Rows per panel: two vectors of 16.
const PANEL: usize = 32;
/// Tokens per register tile: 2 x 14 accumulators, two weight vectors and the broadcast
/// input fill AVX-512's 32 registers.
const TILE: usize = 14;
/// Tokens per task: their inputs over [`KC`] columns stay in L2.
const TOKEN_BLOCK: usize = 16 * TILE;
/// Panels per task.
const TASK_PANELS: usize = 8;
/// Columns per pass: a panel's slice (32 x 256 f16, 16 KB) stays in L1 while the
/// token tiles pass.
const KC: usize = 256;

/// A `rows x cols` matrix of f16 values in panels; the last panel's missing rows zero.
pub(super) struct Panels {
    pub rows: usize,
    pub cols: usize,
    data: Vec<u16>,
}

impl Panels {
    /// Whether this CPU runs the panel kernel.
    pub(super) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        return std::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// From `rows` rows of `cols` values, `value(r, c)` giving each as f16 bits.
    pub(super) fn pack(rows: usize, cols: usize, value: impl Fn(usize, usize) -> u16) -> Panels {
        let n_panels = rows.div_ceil(PANEL);
        let mut data = vec![0u16; n_panels * cols * PANEL];
        for (p, panel) in data.chunks_exact_mut(cols * PANEL).enumerate() {
            for r in p * PANEL..((p + 1) * PANEL).min(rows) {
                for c in 0..cols {
                    panel[c * PANEL + r % PANEL] = value(r, c);
                }
            }
        }
        Panels { rows, cols, data }
    }

    /// `out = x·selfᵀ` (or `out += x·selfᵀ` with `adding`) for the `n` rows of `x`, then
    /// `then(values, r0)` on each token's part of each task's rows (`r0` its first).
    pub(super) fn matmul(
        &self,
        pool: &ThreadPool,
        x: &[f32],
        out: &mut [f32],
        adding: bool,
        then: &(dyn Fn(&mut [f32], usize) + Sync),
    ) {
        let (rows, cols) = (self.rows, self.cols);
        let n = x.len() / cols;
        assert!(x.len() == n * cols && out.len() == n * rows && Panels::available());
        let n_panels = rows.div_ceil(PANEL);
        let chunks = n_panels.div_ceil(TASK_PANELS);
        let ptr = SyncPtr::new(out);
        pool.run(n.div_ceil(TOKEN_BLOCK) * chunks, &|task| {
            let (t0, p0) = ((task / chunks) * TOKEN_BLOCK, (task % chunks) * TASK_PANELS);
            let (t1, p1) = ((t0 + TOKEN_BLOCK).min(n), (p0 + TASK_PANELS).min(n_panels));
            let (r0, r1) = (p0 * PANEL, (p1 * PANEL).min(rows));
            for k0 in (0..cols).step_by(KC) {
                let len = KC.min(cols - k0);
                for p in p0..p1 {
                    let w = &self.data[(p * cols + k0) * PANEL..][..len * PANEL];
                    let valid = PANEL.min(rows - p * PANEL);
                    let mut t = t0;
                    while t < t1 {
                        let step = if t1 - t >= TILE { TILE } else { 1 };
                        let a = &x[t * cols + k0..];
                        let at = t * rows + p * PANEL;
                        assert!(at + (step - 1) * rows + valid <= n * rows);
                        let load = adding || k0 > 0;
                        // SAFETY: the cells (t.., rows p·32..p·32 + valid) lie inside
                        // `out` (asserted) and belong to this task alone.
                        unsafe {
                            tile(step, (a, cols), w, len, (ptr.0.add(at), rows), valid, load)
                        };
                        t += step;
                    }
                }
            }
            for t in t0..t1 {
                // SAFETY: as above: this task's rows of token t.
                then(unsafe { ptr.slice(t * rows + r0, r1 - r0) }, r0);
            }
        });
    }
}

/// `step` (14 or 1) tokens x `valid` rows of one panel over `len` columns: `c[t·ldc +
/// r] (+)= Σ_k a[t·lda + k] · w[k·32 + r]`, adding to what `c` holds when `load`.
/// Only those cells are read and written: the rows between belong to other tasks.
///
/// # Safety
/// `c[t·ldc + r]` for `t < step`, `r < valid` lies in one allocation, and no other
/// thread touches those cells meanwhile.
unsafe fn tile(
    step: usize,
    (a, lda): (&[f32], usize),
    w: &[u16],
    len: usize,
    (c, ldc): (*mut f32, usize),
    valid: usize,
    load: bool,
) {
    assert!(w.len() >= len * PANEL && valid <= PANEL && len <= lda);
    assert!(a.len() >= (step - 1) * lda + len);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `Panels::matmul` checked AVX-512F; the lengths are checked above, and
        // the caller vouches for the cells of `c`.
        unsafe {
            if step == TILE {
                x86::tile::<TILE>(a, lda, w, len, c, ldc, valid, load);
            } else {
                x86::tile::<1>(a, lda, w, len, c, ldc, valid, load);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("panels run on x86-64 only ({step} {lda} {len} {c:?} {ldc} {valid} {load})");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::PANEL;

    /// [`super::tile`] for `T` tokens: 2·T accumulators of 16 rows.
    ///
    /// # Safety
    /// AVX-512F; the lengths [`super::tile`] checks, and its contract on `c`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile<const T: usize>(
        a: &[f32],
        lda: usize,
        w: &[u16],
        len: usize,
        cp: *mut f32,
        ldc: usize,
        valid: usize,
        load: bool,
    ) {
        // The rows past `valid` (the last panel's padding) are neither read nor written.
        let bits = if valid == PANEL {
            u32::MAX
        } else {
            (1u32 << valid) - 1
        };
        let m = [bits as u16, (bits >> 16) as u16];
        let (ap, wp) = (a.as_ptr(), w.as_ptr());
        let mut acc = [[_mm512_setzero_ps(); 2]; T];
        if load {
            for (t, at) in acc.iter_mut().enumerate() {
                for (h, x) in at.iter_mut().enumerate() {
                    // SAFETY: only the `valid` rows' lanes are read (the caller's cells).
                    *x = unsafe { _mm512_maskz_loadu_ps(m[h], cp.wrapping_add(t * ldc + 16 * h)) };
                }
            }
        }
        for k in 0..len {
            // SAFETY: k·32 + 32 <= w.len(); t·lda + k < a.len() for t < T.
            unsafe {
                let w0 = _mm512_cvtph_ps(_mm256_loadu_si256(wp.add(k * PANEL) as *const __m256i));
                let w1 =
                    _mm512_cvtph_ps(_mm256_loadu_si256(wp.add(k * PANEL + 16) as *const __m256i));
                for (t, at) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*ap.add(t * lda + k));
                    at[0] = _mm512_fmadd_ps(x, w0, at[0]);
                    at[1] = _mm512_fmadd_ps(x, w1, at[1]);
                }
            }
        }
        for (t, at) in acc.iter().enumerate() {
            for (h, x) in at.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm512_mask_storeu_ps(cp.wrapping_add(t * ldc + 16 * h), m[h], *x) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_give_the_product_written_out() {
        if !Panels::available() {
            return;
        }
        // Rows past a whole panel, tokens past whole tiles and blocks, columns past KC.
        let (rows, cols, n) = (70, 300, 2 * TOKEN_BLOCK + 13);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 13 % 97) as f32 - 48.0) / 32.0)
            .collect();
        let p = Panels::pack(rows, cols, |r, c| {
            half::f16::from_f32(w[r * cols + c]).to_bits()
        });
        let pool = ThreadPool::new(2);
        let mut out = vec![1f32; n * rows];
        p.matmul(&pool, &x, &mut out, true, &|v, r0| {
            v.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v += (r0 + i) as f32)
        });
        for t in 0..n {
            for r in 0..rows {
                let dot: f32 = (0..cols).map(|c| x[t * cols + c] * w[r * cols + c]).sum();
                let want = 1.0 + dot + r as f32;
                let got = out[t * rows + r];
                assert!(
                    (got - want).abs() <= 1e-3 * (1.0 + want.abs()),
                    "{t} {r}: {got} vs {want}"
                );
            }
        }
    }
}
