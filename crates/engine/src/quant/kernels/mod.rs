//! Dot-product kernels and their run-time dispatch.
//!
//! Each weight type has a kernel computing dot products of one weight row against
//! `N` activation rows at once (`N` = 1, 2, 4 or 8), so that a decoded weight block is
//! reused across several tokens while it is in registers. Kernels are gathered in a
//! [`KernelTable`]; a [`Backend`] is a reference to one table, chosen once, so calling
//! through it costs one indirect call per weight row and nothing per block.

use std::sync::OnceLock;

use super::acts::{Q16Block, Q8Block, Q8KBlock};

#[cfg(target_arch = "x86_64")]
mod avx2;
mod portable;

/// A dot-product kernel: one weight row (whole blocks) against `N` activation rows,
/// each holding exactly the matching number of activation units.
pub(crate) type DotFn<A, const N: usize> = fn(&[u8], [&[A]; N]) -> [f32; N];

/// One weight type's kernel instantiated for 1, 2, 4 and 8 tokens: a batch of `n`
/// tokens is covered by the widest tiles first, so each weight block is decoded about
/// `n / 8` times rather than `n` times (batched decode is bound by that decoding).
pub(crate) struct Tiles<A: 'static> {
    pub one: DotFn<A, 1>,
    pub two: DotFn<A, 2>,
    pub four: DotFn<A, 4>,
    pub eight: DotFn<A, 8>,
}

/// A [`Tiles`] of one generic kernel `f::<N>`.
macro_rules! tiles {
    ($f:ident) => {
        $crate::quant::kernels::Tiles {
            one: $f::<1>,
            two: $f::<2>,
            four: $f::<4>,
            eight: $f::<8>,
        }
    };
}
pub(crate) use tiles;

/// Every weight type's kernels, for one instruction set.
pub(crate) struct KernelTable {
    pub set: KernelSet,
    pub f32: Tiles<f32>,
    pub f16: Tiles<f32>,
    pub bf16: Tiles<f32>,
    pub q4_0: Tiles<Q8Block>,
    pub q4_1: Tiles<Q16Block>,
    pub q5_0: Tiles<Q8Block>,
    pub q5_1: Tiles<Q16Block>,
    pub q8_0: Tiles<Q8Block>,
    pub q4_k: Tiles<Q8KBlock>,
    pub q5_k: Tiles<Q8KBlock>,
    pub q6_k: Tiles<Q8KBlock>,
}

/// An instruction set the kernels are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelSet {
    /// Plain Rust, any target: the reference.
    Portable,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
}

/// A chosen set of kernels. Copy it freely: it is one pointer.
#[derive(Clone, Copy)]
pub struct Backend {
    pub(crate) table: &'static KernelTable,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Backend").field(&self.table.set).finish()
    }
}

impl Backend {
    /// The portable kernels.
    pub fn portable() -> Backend {
        Backend {
            table: &portable::TABLE,
        }
    }

    /// The AVX2 kernels, if this CPU has AVX2, FMA and F16C.
    pub fn avx2() -> Option<Backend> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
            {
                return Some(Backend {
                    table: &avx2::TABLE,
                });
            }
        }
        None
    }

    /// The backend for `set`, if this CPU can run it.
    pub fn for_set(set: KernelSet) -> Option<Backend> {
        match set {
            KernelSet::Portable => Some(Backend::portable()),
            KernelSet::Avx2 => Backend::avx2(),
        }
    }

    /// Every backend this CPU can run, portable first.
    pub fn available() -> Vec<Backend> {
        std::iter::once(Backend::portable())
            .chain(Backend::avx2())
            .collect()
    }

    /// The fastest backend this CPU runs, unless the environment variable
    /// `LLAMAY_KERNELS=portable` asks for the portable one. Chosen once per process.
    pub fn active() -> Backend {
        static ACTIVE: OnceLock<Backend> = OnceLock::new();
        *ACTIVE.get_or_init(|| {
            let forced = std::env::var("LLAMAY_KERNELS").ok();
            if forced.as_deref() == Some("portable") {
                return Backend::portable();
            }
            Backend::avx2().unwrap_or_else(Backend::portable)
        })
    }

    /// Which instruction set this backend uses.
    pub fn set(&self) -> KernelSet {
        self.table.set
    }
}
