//! The feed-forward block's bias and activation on a slice of the up product. GELU, the
//! encoders' usual one, is llama.cpp's f16 table: with AVX-512 sixteen lookups at a time
//! (the input rounded to f16 by the hardware, the table gathered), since one lookup at
//! a time was a visible share of a picture's encoding.

use super::params::VitActivation;
use crate::model::ops::{gelu_ggml, gelu_quick_ggml, silu};

/// `v[i] = act(v[i] + bias[i])`.
pub(super) fn bias_act(act: VitActivation, v: &mut [f32], bias: &[f32]) {
    assert_eq!(v.len(), bias.len());
    let f: fn(f32) -> f32 = match act {
        VitActivation::Gelu => {
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F; the lengths are equal.
                return unsafe { x86::bias_gelu(v, bias) };
            }
            gelu_ggml
        }
        VitActivation::GeluQuick => gelu_quick_ggml,
        VitActivation::Silu => silu,
    };
    for (x, &b) in v.iter_mut().zip(bias) {
        *x = f(*x + b);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::model::ops::{gelu_ggml, gelu_ggml_table};

    /// [`super::bias_act`] with GELU: [`gelu_ggml`] sixteen values at a time.
    ///
    /// # Safety
    /// AVX-512F; `v` and `bias` of one length.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn bias_gelu(v: &mut [f32], bias: &[f32]) {
        let table = gelu_ggml_table();
        assert!(table.len() == 1 << 16 && bias.len() == v.len());
        let (lo, hi) = (_mm512_set1_ps(-10.0), _mm512_set1_ps(10.0));
        let n = v.len() / 16 * 16;
        let mut chunks = v.chunks_exact_mut(16);
        for (c, b) in (&mut chunks).zip(bias.chunks_exact(16)) {
            // SAFETY: c and b hold 16 values; every f16's bits index the 65,536 entries.
            unsafe {
                let x = _mm512_add_ps(_mm512_loadu_ps(c.as_ptr()), _mm512_loadu_ps(b.as_ptr()));
                // Rounded to nearest even, as `half::f16::from_f32`.
                let bits = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
                let g = _mm512_i32gather_ps::<4>(_mm512_cvtepu16_epi32(bits), table.as_ptr());
                // gelu_ggml's saturation: 0 at or below -10, x at or above 10.
                let g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, hi), x);
                let g = _mm512_maskz_mov_ps(!_mm512_cmp_ps_mask::<_CMP_LE_OQ>(x, lo), g);
                _mm512_storeu_ps(c.as_mut_ptr(), g);
            }
        }
        for (x, &b) in chunks.into_remainder().iter_mut().zip(&bias[n..]) {
            *x = gelu_ggml(*x + b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_on_slices_is_the_table_one_value_at_a_time() {
        // Both saturation bounds, values between f16 steps, and a tail past 16.
        let v: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.0237).collect();
        let bias: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 * 0.001).collect();
        let mut got = v.clone();
        bias_act(VitActivation::Gelu, &mut got, &bias);
        for ((g, x), b) in got.iter().zip(&v).zip(&bias) {
            assert_eq!(g.to_bits(), gelu_ggml(x + b).to_bits(), "{x} + {b}");
        }
    }
}
