//! `LLAMAY_KERNELS=portable` selects the portable kernels (own process: the choice is
//! made once per process).

use llamay_engine::{Backend, KernelSet};

#[test]
fn env_var_forces_portable_kernels() {
    std::env::set_var("LLAMAY_KERNELS", "portable");
    assert_eq!(Backend::active().set(), KernelSet::Portable);
}
