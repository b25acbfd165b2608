//! The AVX2 kernel table (and, compiled a second time by the build script, the
//! AVX-512 VNNI one): the one file that names the kernels of every AVX2 file, so that
//! none of those needs another's kernels.

use super::avx2::{
    bf16_rows, f16_rows, f32_rows, iq4_nl, iq4_xs, mxfp4, q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1,
    q5_k, q6_k, q8_0,
};
use super::avx2_wide::{q4_0_tiles, q4_1_tiles, q5_0_tiles, q5_1_tiles, q8_0_tiles};
use super::{tiles, KernelSet, KernelTable};

/// One-token and two-token tiles from the per-token kernel, wider tiles from the
/// kernel that applies scales to the whole tile at once.
macro_rules! narrow_and_wide {
    ($narrow:ident, $wide:ident) => {
        super::Tiles {
            one: $narrow::<1>,
            two: $narrow::<2>,
            four: $wide::<4>,
            eight: $wide::<8>,
        }
    };
}

pub(crate) static TABLE: KernelTable = KernelTable {
    set: KernelSet::Avx2,
    quantize: &super::avx2_acts::QUANTIZERS,
    groups: Some(&super::avx2_groups::GROUP_KERNELS),
    f32: tiles!(f32_rows),
    f16: tiles!(f16_rows),
    bf16: tiles!(bf16_rows),
    q4_0: narrow_and_wide!(q4_0, q4_0_tiles),
    q4_1: narrow_and_wide!(q4_1, q4_1_tiles),
    q5_0: narrow_and_wide!(q5_0, q5_0_tiles),
    q5_1: narrow_and_wide!(q5_1, q5_1_tiles),
    q8_0: narrow_and_wide!(q8_0, q8_0_tiles),
    q4_k: tiles!(q4_k),
    q5_k: tiles!(q5_k),
    q6_k: tiles!(q6_k),
    iq4_nl: tiles!(iq4_nl),
    iq4_xs: tiles!(iq4_xs),
    q3_k: tiles!(q3_k),
    q2_k: tiles!(q2_k),
    mxfp4: tiles!(mxfp4),
};
