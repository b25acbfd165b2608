//! Compiles the AVX2 kernels a second time for CPUs with AVX-512 VNNI: the same source
//! with a wider `target_feature` set (32 vector registers, `vpdpbusd`/`vpdpwssd` dot
//! products) and `VNNI` switched on. Generating the copy keeps one source of truth.

use std::{env, fs, path::PathBuf};

const SOURCE: &str = "src/quant/kernels/avx2.rs";
const AVX2: &str = "\"avx2,fma,f16c\"";
const AVX512_VNNI: &str = "\"avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni\"";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    let src = fs::read_to_string(SOURCE).expect("kernel source readable");
    let n_features = src.matches(AVX2).count();
    assert!(
        n_features > 0,
        "{SOURCE} no longer names its target features as {AVX2}"
    );
    let out: String = src
        .lines()
        // Inner doc comments cannot appear in an `include!`d file.
        .filter(|l| !l.starts_with("//!"))
        .map(|l| {
            l.replace(AVX2, AVX512_VNNI)
                .replace("const VNNI: bool = false;", "const VNNI: bool = true;")
                .replace("KernelSet::Avx2", "KernelSet::Avx512Vnni")
                + "\n"
        })
        .collect();
    assert!(
        out.contains("const VNNI: bool = true;"),
        "{SOURCE} lost its VNNI switch"
    );
    let dst =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("avx512_vnni.rs");
    fs::write(dst, out).expect("OUT_DIR writable");
}
